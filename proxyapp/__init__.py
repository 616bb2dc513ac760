"""ProxyFleet's data plane: an asyncio MySQL and PostgreSQL proxy, configured as ProxySQL is (never imports Django)."""

from proxyapp.native import prefer_compiled

prefer_compiled(__name__, __path__)
