"""The servers behind the proxy: hostgroups and their pools, the runtime view of mysql_servers, the health monitor."""

from proxyapp.native import prefer_compiled

prefer_compiled(__name__, __path__)
