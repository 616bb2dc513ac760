"""A wire's write straight to its socket (``_sendnow.c``)."""

def send_now(fd: int, data: bytes, /) -> int:
    """Send ``data`` on socket ``fd`` without blocking; how many bytes the kernel took (0 when it would block or the
    send failed or ``data`` is not bytes)."""
