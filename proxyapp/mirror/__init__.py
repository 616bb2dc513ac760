"""Mirroring (docs/mirroring.md): ProxySQL's mode and the ordered mode's lanes, and the ordered mode's durable queue on
disk."""

from proxyapp.native import prefer_compiled

prefer_compiled(__name__, __path__)
