"""The C relay of forwarded connections (``_splice.c``)."""

def add(client_fd: int, server_fd: int, pending_to_server: bytes, /) -> int:
    """Take both sockets over (closed by the relay from now on, even when this raises), write ``pending_to_server``
    to the server first and splice them; the pair's id."""

def close(pair_id: int, /) -> bool:
    """End a pair now (``ended`` reports it); False if it is not live."""

def snapshot() -> list[tuple[int, int, int]]:
    """The live pairs: (id, bytes read from the client, bytes read from the server)."""

def ended() -> list[tuple[int, int, int]]:
    """The pairs that ended since the last call, with their final counts."""

def notify_fd() -> int:
    """A descriptor readable while ``ended`` has something to report (starts the relay's thread)."""
