"""A read buffer's two byte moves in C (``_buffer.c``)."""

def cut(buf: bytearray, start: int, end: int, /) -> bytes:
    """A copy of ``buf[start:end]`` as bytes; ValueError unless 0 <= ``start`` <= ``end`` <= ``len(buf)``."""

def compact(buf: bytearray, count: int, /) -> None:
    """Drop the first ``count`` bytes of ``buf`` (ValueError unless 0 <= ``count`` <= ``len(buf)``), keeping its
    allocation up to 64 KiB."""
