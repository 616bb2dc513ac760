"""The PostgreSQL frontend/backend protocol (version 3): messages, the requests a connection may open with, and the
error answers the proxy gives of its own."""

from proxyapp.native import prefer_compiled

prefer_compiled(__name__, __path__)
