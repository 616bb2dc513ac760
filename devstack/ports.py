"""Loopback ports for the servers, proxies and nodes that tests, benchmarks and the demo start.

A port the kernel hands out for ``bind(0)`` comes from the ephemeral range, the same range it draws from for every
outgoing connection's local port; between picking such a port and a child process listening on it, any connection
(a proxy's to its server, a test client's) may take it. Ports are therefore picked below the ephemeral range, where
only a listener that asks for one by number can hold it.
"""

from __future__ import annotations

import random
import socket
from pathlib import Path

HOST = "127.0.0.1"
LOWEST = 10_000
EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")


def _below_ephemeral() -> int:
    """The first port of the kernel's ephemeral range (32768 where it cannot be read)."""
    try:
        return int(EPHEMERAL_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32_768


def port_free(port: int) -> bool:
    """Whether a loopback TCP port can be listened on (no process, not even a dying one, holds it)."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((HOST, port))
        except OSError:
            return False
        return True


def free_port() -> int:
    """A loopback TCP port nobody listens on right now, outside the ephemeral range where it can be had."""
    ceiling = _below_ephemeral()
    if ceiling - LOWEST >= 1_000:
        for _ in range(100):
            port = random.randrange(LOWEST, ceiling)
            if port_free(port):
                return port
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]
