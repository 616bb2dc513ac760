"""The wire's constants, and when it is quiet."""

from __future__ import annotations

import asyncio

from proxyapp.mysql import backend, wire
from proxyapp.mysql.constants import Status
from tests.support.transport import MemoryTransport


def test_the_hot_paths_status_constants_are_the_servers_flags() -> None:
    """The relay and the backend read status bits as plain Final ints (compiled to constants); they must be the
    protocol's flags."""
    assert wire._MORE_RESULTS == Status.MORE_RESULTS_EXISTS
    assert wire._CURSOR_EXISTS == Status.CURSOR_EXISTS
    assert backend._IN_TRANS == Status.IN_TRANS


def test_a_wire_is_quiet_only_with_nothing_to_read_nothing_to_resume_and_little_read_data_held() -> None:
    """A session whose command ended looks at its client's wire again only when it is not quiet
    (``Session._command_done``): a quiet wire must hold no byte to serve, no end to notice, no paused reading to
    resume and no large read data to drop."""

    async def main() -> None:
        w = wire.Wire(MemoryTransport())  # type: ignore[arg-type]
        assert w.quiet()
        w.buf += b"\x01\x00\x00\x00\x0e"  # a COM_PING, read
        w.pos = w.mark = len(w.buf)
        assert w.quiet()
        w.buf += b"\x01"  # the start of the next command
        assert not w.quiet()
        w.pos = w.mark = len(w.buf)
        w.closed = "connection closed by peer"
        assert not w.quiet()
        w.closed = None
        w.reading_paused = True
        assert not w.quiet()
        w.reading_paused = False
        w.buf += bytes(wire.KEPT_READ)
        w.pos = w.mark = len(w.buf)  # a large command read: its bytes are dropped now, not kept until the next
        assert not w.quiet()
        w.want_more()
        assert w.quiet() and len(w.buf) == 0

    asyncio.run(main())
