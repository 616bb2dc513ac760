"""The PostgreSQL pooling proxy: clients log in to the proxy (``pgsql_users``), their transactions (or sessions) borrow
server connections from pools per server, user and database (``pool``)."""

from proxyapp.native import prefer_compiled

prefer_compiled(__name__, __path__)
