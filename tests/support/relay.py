"""A TCP relay on loopback that can hold the server's replies back: a server that goes silent, or one whose replies
come when the test says (so that a test can make them late on the proxy's clock, ``ProxyProcess.advance_clock``).

Holding is an event: no real time needs to pass. ``hold()`` stops the replies, ``held`` counts those waiting,
``let_through(n)`` lets the next ``n`` go, ``release()`` lets all flow again; ``close()`` ends it.
"""

from __future__ import annotations

import socket
import threading


class SlowRelay:
    """A TCP relay on loopback to ``port`` whose replies (server to client) the test can hold."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.held = 0  # replies waiting now
        self._allowance: int | None = None  # replies that may pass while holding; None: not holding
        self._turn = threading.Condition()
        self._closed = False
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
                    self._wait_turn()
                target.sendall(data)
        except OSError:
            pass
        finally:
            target.close()

    def _wait_turn(self) -> None:
        """Wait until this reply may pass: not holding, an allowance left, or closed."""
        with self._turn:
            self.held += 1
            self._turn.wait_for(lambda: self._closed or self._allowance is None or self._allowance > 0)
            self.held -= 1
            if self._allowance:
                self._allowance -= 1

    def hold(self) -> None:
        """From now on the server's replies wait (until ``let_through``, ``release`` or ``close``)."""
        with self._turn:
            self._allowance = 0

    def let_through(self, replies: int = 1) -> None:
        """Let the next ``replies`` replies pass (those held first), and keep holding the ones after them."""
        with self._turn:
            self._allowance = (self._allowance or 0) + replies
            self._turn.notify_all()

    def release(self) -> None:
        """Let every reply flow again."""
        with self._turn:
            self._allowance = None
            self._turn.notify_all()

    def close(self) -> None:
        """Stop relaying: the listener and every connection closed."""
        self.listener.close()
        with self._turn:
            self._closed = True
            self._turn.notify_all()
        for sock in self.sockets:
            sock.close()
