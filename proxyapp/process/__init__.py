"""The proxy as a process: the listener and reloads, the supervisor of worker processes, the loopback admin endpoint."""

from proxyapp.native import prefer_compiled

prefer_compiled(__name__, __path__)
