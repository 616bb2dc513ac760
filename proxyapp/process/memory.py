"""A worker's memory: what it holds (``/stats``'s ``memory``), and giving back to the system what it no longer
uses. Buffers a burst of large packets or results needed are freed when their sessions end, but the C allocator
keeps the freed pages for reuse, so a worker's resident size stays at its high-water mark; ``give_back`` asks glibc
to return them (``malloc_trim``), which the housekeeping does every ``TRIM_EVERY_S`` seconds of the proxy's clock."""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import resource
from collections.abc import Callable

#: How often the housekeeping gives memory back.
TRIM_EVERY_S = 10
_PAGE = os.sysconf("SC_PAGE_SIZE")


def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim``, or None on a C library without it."""
    name = ctypes.util.find_library("c")
    try:
        trim = ctypes.CDLL(name).malloc_trim if name else None
    except (OSError, AttributeError):
        return None
    if trim is not None:
        trim.argtypes = [ctypes.c_size_t]
        trim.restype = ctypes.c_int
    return trim


_TRIM = _malloc_trim()


def resident() -> int:
    """This process's resident memory in bytes (0 where /proc is not there)."""
    try:
        with open("/proc/self/statm", "rb") as statm:
            return int(statm.read().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return 0


class Memory:
    """One worker's memory figures: its resident size, its peak, what giving back returned."""

    def __init__(self) -> None:
        self.returned_bytes = 0
        self.trims = 0
        self.trimmed_at = 0.0  # the proxy clock's time of the last ``give_back``

    def give_back(self) -> int:
        """Return the allocator's free pages to the system; the bytes the resident size fell by."""
        if _TRIM is None:
            return 0
        before = resident()
        _TRIM(0)
        self.trims += 1
        returned = max(0, before - resident())
        self.returned_bytes += returned
        return returned

    def row(self) -> dict[str, int]:
        """This worker's figures, for ``/stats``."""
        peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return {
            "pid": os.getpid(),
            "rss_bytes": resident(),
            "peak_rss_bytes": peak_kb * 1024,
            "returned_bytes": self.returned_bytes,
            "trims": self.trims,
        }
