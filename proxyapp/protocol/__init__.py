"""The MySQL client/server wire protocol: packets, handshake, authentication, result sets."""

from proxyapp.native import prefer_compiled

prefer_compiled(__name__, __path__)
