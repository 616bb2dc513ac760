"""A TCP relay on loopback that can hold the server's replies back: a slow server, or one that goes silent.

``hold()`` makes the server silent until ``close()``: an event, no time passes by design. ``delay``
makes every reply late by that many seconds: only for the monitor's latency check, which measures real time in the
proxy's own process (its decisions on a held clock are tested in tests/unit/proxyapp/backends).
"""

from __future__ import annotations

import socket
import threading
import time


class SlowRelay:
    """A TCP relay on loopback to ``port`` that holds each reply for ``delay`` seconds (0: none), set at any time."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.delay = 0.0
        self.flowing = threading.Event()  # cleared by hold(): replies wait for it
        self.flowing.set()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
                server = socket.create_connection(("127.0.0.1", self.port))
            except OSError:  # closed: the test is over
                return
            self.sockets += [client, server]
            threading.Thread(target=self._pipe, args=(client, server, False), daemon=True).start()
            threading.Thread(target=self._pipe, args=(server, client, True), daemon=True).start()

    def _pipe(self, source: socket.socket, target: socket.socket, replies: bool) -> None:
        try:
            while data := source.recv(65536):
                if replies:
                    self.flowing.wait()
                    if self.delay:
                        time.sleep(self.delay)  # a slow server, for the monitor's real-time latency check
                target.sendall(data)
        except OSError:
            pass
        finally:
            target.close()

    def hold(self) -> None:
        """From now on the server's replies do not arrive (until ``close()``)."""
        self.flowing.clear()

    def close(self) -> None:
        self.listener.close()
        self.flowing.set()
        for sock in self.sockets:
            sock.close()
