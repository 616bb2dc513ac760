"""A transport in memory, for a ``Wire`` that no socket backs: it keeps what is written to it."""

from __future__ import annotations


class MemoryTransport:
    """Just enough of an asyncio transport for a wire: writes are kept in ``written``, reading never pauses."""

    def __init__(self) -> None:
        self.written = bytearray()
        self.closed = False

    def is_closing(self) -> bool:
        return self.closed

    def write(self, data: bytes) -> None:
        self.written += data

    def resume_reading(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True
