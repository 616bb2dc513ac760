"""The MySQL client/server protocol: packets, handshake, authentication, result sets, the compressed protocol, the
buffered wire and the backend client connection."""

from proxyapp.native import prefer_compiled

prefer_compiled(__name__, __path__)
