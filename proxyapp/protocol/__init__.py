"""The MySQL client/server wire protocol: packets, handshake, authentication, result sets."""
