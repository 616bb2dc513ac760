"""The walk over a whole command response in a read buffer (``_walk.c``)."""

def walk(
    buf: bytearray | bytes, pos: int, binary: bool, limit: int, /
) -> tuple[int, int, int, int, int, int, int, int, int, int, int] | None:
    """Where the response at ``pos`` ends and what it said, when it is all within ``limit`` bytes and the Python
    reader needs no say: (end, the last packet's sequence id, status flags or -1 after an error, cursor (0 or 1),
    affected rows, last insert id, rows, warnings, result sets, the ERR payload's start and length (-1: none));
    else None."""
