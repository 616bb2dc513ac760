"""The sequences' blocks of one proxy node, shared by its worker processes, so that the ids a node hands out
increase across all of its workers (issue 14: "monotonic per proxy node at least").

The supervisor makes a small shared memory block (``NodeBlocks.create``) and passes it to every worker, as it does
the session seats (``proxyapp.clients.seats``). The block holds ``SLOTS`` slots, each a sequence's key (a hash of its
group and table) and the node's current block of it: the next value and the end. A worker takes values under an
exclusive ``flock`` on the block; when the node's block is used up, the worker reserves the next one on shard 0
(outside the lock, a round trip) and installs it only if no other worker installed a later one meanwhile (else it
takes from that one, and its own reservation is a gap): values only ever come from higher blocks, in order.
"""

from __future__ import annotations

import fcntl
import hashlib
import mmap
import os
import struct
from collections.abc import Iterator
from contextlib import contextmanager

#: Sequences a node can hold at once (those past it keep their blocks per worker: unique, increasing per worker).
SLOTS = 256
_SLOT = struct.Struct("<QQQ")  # key, next value, end of the block (excluded)


def sequence_key(name: str) -> int:
    """The slot key of the sequence called ``name`` (never 0, which marks a free slot)."""
    return int.from_bytes(hashlib.blake2b(name.encode(), digest_size=8).digest(), "little") or 1


class NodeBlocks:
    """A worker's view of the node's shared sequence blocks (``fd``: the shared block)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.block = mmap.mmap(fd, _SLOT.size * SLOTS)

    @staticmethod
    def create() -> int:
        """A new shared block for a node (the supervisor's; pass the fd to every worker)."""
        fd = os.memfd_create("proxyfleet-sequences", 0)
        os.ftruncate(fd, _SLOT.size * SLOTS)
        return fd

    def take(self, key: int, count: int) -> list[int] | None:
        """Up to ``count`` values of the node's current block of sequence ``key``, in order (fewer: it ran out);
        None when every slot is another sequence's."""
        with self._locked():
            slot = self._slot(key)
            if slot is None:
                return None
            at, start, end = slot
            taken = min(count, end - start)
            _SLOT.pack_into(self.block, at, key, start + taken, end)
            return list(range(start, start + taken))

    def install(self, key: int, first: int, size: int, count: int) -> list[int] | None:
        """Make ``[first, first + size)``, a block this worker reserved, the node's block of ``key`` and take
        ``count`` values of it; None when another worker installed a later block meanwhile (take from that one)."""
        with self._locked():
            slot = self._slot(key)
            if slot is None or slot[2] > first:  # a later block than this one: never go back to a lower one
                return None
            at = slot[0]
            taken = min(count, size)
            _SLOT.pack_into(self.block, at, key, first + taken, first + size)
            return list(range(first, first + taken))

    def _slot(self, key: int) -> tuple[int, int, int] | None:
        """The offset, next value and end of ``key``'s slot (a free one claimed when it has none; None when every
        slot is another's): under the lock."""
        home = key % SLOTS
        for probe in range(SLOTS):
            at = ((home + probe) % SLOTS) * _SLOT.size
            held, start, end = _SLOT.unpack_from(self.block, at)
            if held == key:
                return at, start, end
            if held == 0:
                _SLOT.pack_into(self.block, at, key, 0, 0)
                return at, 0, 0
        return None

    @contextmanager
    def _locked(self) -> Iterator[None]:
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(self.fd, fcntl.LOCK_UN)
