"""A TCP relay on loopback that can hold the server's replies back: a server that goes silent, or one whose replies
come when the test says (so that a test can make them late on the proxy's clock, ``ProxyProcess.advance_clock``).

Holding is an event: no real time needs to pass. ``hold()`` stops the replies, ``held`` counts those waiting,
``let_through(n)`` lets the next ``n`` go, ``release()`` lets all flow again; ``close()`` ends it. The requests of
new connections can wait too (a server slow to act on a new connection's first message, such as a CancelRequest):
``hold_new()``, ``new_held`` and ``release_new()``.
"""

from __future__ import annotations

import contextlib
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
        self._hold_new = False  # the requests of connections accepted now wait until ``release_new``
        self.new_held = 0  # connections whose requests wait now
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
            held = self._hold_new
            threading.Thread(target=self._pipe, args=(client, server, False, held), daemon=True).start()
            threading.Thread(target=self._pipe, args=(server, client, True), daemon=True).start()

    def _pipe(self, source: socket.socket, target: socket.socket, replies: bool, held: bool = False) -> None:
        try:
            if held:
                self._wait_new()
            while data := source.recv(65536):
                if replies:
                    self._wait_turn()
                target.sendall(data)
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):  # a close alone sends nothing while another thread reads it
                target.shutdown(socket.SHUT_RDWR)
            target.close()

    def _wait_turn(self) -> None:
        """Wait until this reply may pass: not holding, an allowance left, or closed."""
        with self._turn:
            self.held += 1
            self._turn.wait_for(lambda: self._closed or self._allowance is None or self._allowance > 0)
            self.held -= 1
            if self._allowance:
                self._allowance -= 1

    def _wait_new(self) -> None:
        """Wait until the requests of a connection accepted while holding new ones may pass."""
        with self._turn:
            self.new_held += 1
            self._turn.notify_all()
            self._turn.wait_for(lambda: self._closed or not self._hold_new)
            self.new_held -= 1

    def hold_new(self) -> None:
        """The requests of connections accepted from now on wait (until ``release_new`` or ``close``)."""
        with self._turn:
            self._hold_new = True

    def release_new(self) -> None:
        """Let the held new connections' requests pass, and new connections' from now on."""
        with self._turn:
            self._hold_new = False
            self._turn.notify_all()

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
