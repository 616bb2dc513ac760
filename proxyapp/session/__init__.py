"""A client session: its lifecycle and commands, its state and how it is replayed, prepared statements, KILL, the
services it may use and the events it tells its listener."""

from proxyapp.native import prefer_compiled

prefer_compiled(__name__, __path__)
