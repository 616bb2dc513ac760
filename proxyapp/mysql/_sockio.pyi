"""A wire's socket reads and writes, made directly (``_sockio.c``)."""

def send_now(fd: int, data: bytes, /) -> int:
    """Send ``data`` on socket ``fd`` without blocking; how many bytes the kernel took (0 when it would block or the
    send failed or ``data`` is not bytes)."""

def recv_append(fd: int, buffer: bytearray, /) -> int:
    """Read what socket ``fd`` holds (up to 256 KiB) without blocking and append it to ``buffer``; the bytes read, 0
    at the end of the stream, -1 when there is nothing to read. OSError when the read fails."""
