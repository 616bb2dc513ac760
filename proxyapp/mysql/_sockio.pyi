"""A wire's socket reads and writes, made directly (``_sockio.c``)."""

def send_now(fd: int, data: bytes, /) -> int:
    """Send ``data`` on socket ``fd`` without blocking; how many bytes the kernel took (0 when it would block or the
    send failed or ``data`` is not bytes)."""

def send_span(fd: int, buffer: bytearray, start: int, end: int, /) -> int:
    """Send ``buffer[start:end]`` on socket ``fd`` without blocking and without copying it out first; how many bytes
    the kernel took (0 when it would block or the send failed). ValueError for a span not within the buffer."""

def send_framed(fd: int, payload: bytes, seq: int, /) -> int:
    """Send ``payload`` (under 16 MiB) as one packet with sequence id ``seq`` (its low byte) on socket ``fd`` without
    blocking: the header and the payload in one system call, with no framed copy made; how many of the
    ``4 + len(payload)`` bytes the kernel took (0 when it would block or the send failed). ValueError for a payload
    of 16 MiB or more."""

def recv_append(fd: int, buffer: bytearray, /) -> int:
    """Read what socket ``fd`` holds (up to 256 KiB more than the room left in ``buffer``'s allocation, which is read
    into directly when there is enough of it) without blocking and append it to ``buffer``; the bytes read, 0 at the
    end of the stream, -1 when there is nothing to read. OSError when the read fails."""
