"""A proxy of a fleet: the node's files and start-up, and the agent that applies the control plane's versions and
reports stats."""

from proxyapp.native import prefer_compiled

prefer_compiled(__name__, __path__)
