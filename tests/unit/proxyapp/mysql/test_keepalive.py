"""TCP keepalive on the proxy's connections, both sides (a vanished peer is noticed in minutes, not hours)."""

from __future__ import annotations

import socket

from proxyapp.mysql.stream import KEEPALIVE, keep_alive


def test_keep_alive_sets_every_option() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE) == 0
        keep_alive(sock)
        assert [sock.getsockopt(level, option) for level, option, _ in KEEPALIVE] == [v for _, _, v in KEEPALIVE]
    idle, interval, probes = (value for _, _, value in KEEPALIVE[1:])
    assert idle + interval * probes <= 180  # a dead peer is given up within three minutes
