"""The order of a server's answers, so that the proxy can add messages of its own to a client's stream and leave
their answers out, and answer some of the client's messages itself, without the client seeing anything but the
answers it asked for, in order.

Every message sent to the server that the server answers is registered with the message type that ends its answer
(``TERMINALS``): ParseComplete for a Parse, ReadyForQuery for a Sync or a simple Query, and so on. An answer the
proxy gives itself (a ParseComplete for a statement the connection already holds) is registered as ``SYNTHETIC`` and
written as soon as every answer before it has been. An ErrorResponse ends the answer of the extended-protocol
message it answers, and the server skips every later message up to the next Sync: their entries go too, and so do
the messages sent after the error came and before the next Sync (``skipping``: the session sends them nowhere, as the
server would drop them unanswered).
"""

from __future__ import annotations

from collections import deque

from proxyapp.pgproxy.statements import Statement

#: How an entry's answer reaches the client.
FORWARD, SWALLOW, SYNTHETIC = 0, 1, 2

#: Per frontend message type, the server message types that end its answer.
TERMINALS: dict[int, bytes] = {
    ord("P"): b"1",
    ord("B"): b"2",
    ord("C"): b"3",
    ord("D"): b"Tn",
    ord("E"): b"CIs",
    ord("S"): b"Z",
    ord("Q"): b"Z",
    ord("F"): b"Z",
}
#: Frontend messages after which an error skips to the next Sync (the extended protocol's).
_EXTENDED = frozenset(ord(c) for c in "PBCDE")
_SYNC = ord("S")


class Entry:
    """One message's expected answer; a statement's (a Query, an Execute) with its text and when it was sent."""

    __slots__ = ("kind", "mode", "named", "payload", "query", "started")

    def __init__(
        self,
        kind: int,
        mode: int,
        payload: bytes | str = b"",
        query: str = "",
        started: float = 0.0,
        named: tuple[str, Statement] | None = None,
    ) -> None:
        self.kind = kind  # the frontend message type (its first byte)
        self.mode = mode
        self.payload = payload  # SYNTHETIC: the answer to give; a Parse's server-side statement name
        self.query = query
        self.started = started
        self.named = named  # a client's Parse or Close: the name and statement it creates or drops


class ResponseOrder:
    """The answers still owed on one server connection, oldest first."""

    __slots__ = ("_grouped", "entries", "failed_parse", "parsed", "skipping", "synced_parse", "syncs", "undone")

    def __init__(self) -> None:
        self.entries: deque[Entry] = deque()
        #: An extended-protocol message failed and no Sync was sent since: the server drops all but a Sync.
        self.skipping = False
        #: The client's Parses and Closes of named statements the server refused or dropped since the last look.
        self.undone: list[Entry] = []
        #: Syncs sent and not yet answered.
        self.syncs = 0
        #: A client's named Parse before one of those Syncs may still fail or be skipped: until they are answered,
        #: what names a statement cannot tell whether it exists (``PgSession._settle``).
        self.synced_parse = False
        self._grouped = False  # a client's named Parse since the last Sync
        #: Server-side statement names whose Parse failed since the last look (they are not prepared after all).
        self.failed_parse: list[str] = []
        #: Server-side statement names a server prepared since the last look.
        self.parsed: list[str] = []

    def __len__(self) -> int:
        return len(self.entries)

    def sent(
        self,
        kind: int,
        mode: int = FORWARD,
        payload: bytes | str = b"",
        query: str = "",
        started: float = 0.0,
        named: tuple[str, Statement] | None = None,
    ) -> None:
        """A message of type ``kind`` went to the server (``payload``: a Parse's server-side statement name; ``query``
        and ``started``: a statement's text and the time it was sent, for the digest statistics; ``named``: the
        client's statement name and statement a Parse creates)."""
        if kind == _SYNC:
            self.skipping = False
            self.syncs += 1
            self.synced_parse = self.synced_parse or self._grouped
            self._grouped = False
        elif named is not None and kind == 80:
            self._grouped = True
        self.entries.append(Entry(kind, mode, payload, query, started, named))

    def answer_myself(self, answer: bytes, kind: int = 0, named: tuple[str, Statement] | None = None) -> bytes:
        """An answer the proxy gives itself, in its turn: returned at once (to write now) when nothing is owed
        before it, else written by ``received`` when its turn comes (``kind`` and ``named``: the client's Parse or
        Close it answers and the statement it creates or drops, undone if an error before it makes the server skip
        it)."""
        if not self.entries:
            return answer
        self._grouped = self._grouped or kind == 80
        self.entries.append(Entry(kind, SYNTHETIC, answer, named=named))
        return b""

    def received(self, message: bytes) -> tuple[bytes, Entry | None]:
        """A message from the server: what to write to the client (the message, or nothing, and answers of the
        proxy's whose turn came) and the client's entry it ended (None when it ended none)."""
        kind = message[0]
        entries = self.entries
        if not entries:
            return message, None  # asynchronous: a notice, a notification, a parameter status
        head = entries[0]
        out = b"" if head.mode == SWALLOW else message
        ended: Entry | None = None
        if kind == 69 and head.kind in _EXTENDED:  # ErrorResponse ("E"): skip to the next Sync
            out = message  # an error is the client's to see, whoever's message caused it
            while entries and entries[0].kind != _SYNC:
                gone = entries.popleft()
                if gone.kind == 80 and isinstance(gone.payload, str) and gone.payload:  # a Parse
                    self.failed_parse.append(gone.payload)
                if gone.named is not None:
                    self.undone.append(gone)
            self.skipping = not entries
            ended = head
        elif kind == 69 and head.mode == SWALLOW:
            out = message
        elif kind in TERMINALS.get(head.kind, b""):
            entries.popleft()
            if head.kind == _SYNC:
                self.syncs -= 1
                self.synced_parse = self.synced_parse and self.syncs > 0
            if kind == 49 and isinstance(head.payload, str) and head.payload:  # ParseComplete ("1")
                self.parsed.append(head.payload)
            ended = head if head.mode != SWALLOW else None
        if ended is not None or not out:
            out += self._due()
        return out, ended

    def _due(self) -> bytes:
        """The proxy's own answers now at the head of the line."""
        out = b""
        entries = self.entries
        while entries and entries[0].mode == SYNTHETIC:
            payload = entries.popleft().payload
            assert isinstance(payload, bytes)
            out += payload
        return out

    def clear(self) -> None:
        """Forget every entry (the connection is gone)."""
        self.entries.clear()
        self.syncs = 0
        self.synced_parse = self._grouped = False
