"""The node's client sessions, counted across its worker processes: ``mysql-max_connections`` is the node's limit.

A session takes a seat once it has logged in (a handshake in progress holds none) and gives it back when it ends.
With several workers the seats live in a small shared memory block the supervisor creates (one 8-byte count per
worker, so that a restarted worker's count can be cleared); taking a seat reads the sum and adds one under an
exclusive ``flock`` on the block, so that workers admitting at the same moment never overshoot the limit.
"""

from __future__ import annotations

import fcntl
import mmap
import os
import struct

_SLOT = struct.Struct("<q")


class Seats:
    """Seats of one worker (``index``) among ``workers``; ``fd``: the shared block, None for a single process."""

    def __init__(self, fd: int | None = None, index: int = 0, workers: int = 1) -> None:
        self.fd = fd
        self.index = index
        self.workers = workers
        self.local = 0  # this worker's sessions holding a seat
        self.block = mmap.mmap(fd, _SLOT.size * workers) if fd is not None else None

    @staticmethod
    def create(workers: int) -> int:
        """A new shared block for ``workers`` workers (the supervisor's; pass the fd to every worker)."""
        fd = os.memfd_create("proxyfleet-seats", 0)
        os.ftruncate(fd, _SLOT.size * workers)
        return fd

    def take(self, limit: int) -> bool:
        """Take a seat if fewer than ``limit`` are taken on the node."""
        block = self.block
        if block is None or self.fd is None:
            if self.local >= limit:
                return False
            self.local += 1
            return True
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        try:
            taken = sum(_SLOT.unpack_from(block, i * _SLOT.size)[0] for i in range(self.workers))
            if taken >= limit:
                return False
            self.local += 1
            _SLOT.pack_into(block, self.index * _SLOT.size, self.local)
            return True
        finally:
            fcntl.flock(self.fd, fcntl.LOCK_UN)

    def give_back(self) -> None:
        """A session that held a seat ended (only this worker writes its own count: no lock needed)."""
        self.local -= 1
        if self.block is not None:
            _SLOT.pack_into(self.block, self.index * _SLOT.size, self.local)

    def clear(self, index: int) -> None:
        """Forget worker ``index``'s seats (the supervisor's, before it restarts a worker that died)."""
        if self.block is None or self.fd is None:
            return
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        try:
            _SLOT.pack_into(self.block, index * _SLOT.size, 0)
        finally:
            fcntl.flock(self.fd, fcntl.LOCK_UN)
