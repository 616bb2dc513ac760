"""The wire's byte work in C (``_bytes.c``)."""

def cut(buf: bytearray, start: int, end: int, /) -> bytes:
    """A copy of ``buf[start:end]`` as bytes; ValueError unless 0 <= ``start`` <= ``end`` <= ``len(buf)``."""

def compact(buf: bytearray, count: int, /) -> None:
    """Drop the first ``count`` bytes of ``buf`` (ValueError unless 0 <= ``count`` <= ``len(buf)``), keeping its
    allocation up to 64 KiB."""

def header(buf: bytearray, pos: int, /) -> int:
    """The packet header at ``pos`` as one little-endian int (the payload length, the sequence id in the top byte), or
    -1 when its four bytes are not all in the buffer."""

def frame(payload: bytes | bytearray, seq: int, /) -> bytes:
    """``payload`` framed as one packet with sequence id ``seq`` (its low byte); ValueError for a payload of
    16 MiB - 1 bytes or more."""

def stamp(data: bytes, at: int, stmt_id: int, flag_at: int, types: bytes, /) -> bytes:
    """``data`` with the 4-byte little-endian statement id at ``at`` set to ``stmt_id`` (OverflowError past 4
    bytes); with ``types``, the byte at ``flag_at`` (an execute's new-params-bound flag) set to 1 and ``types`` put
    after it. ValueError when either position is out of the data."""

def text(data: bytes, start: int, /) -> str:
    """``data[start:]`` decoded as UTF-8, each byte that is not part of a character as a lone surrogate
    (surrogateescape); ValueError unless 0 <= ``start`` <= ``len(data)``."""
