"""What the mirror counts, in both modes: statements handed over (``mirrored``), ``completed``, ``failed`` by error
code, ``dropped`` by reason, units ``retried``, and the last error met; each also kept in ``GlobalCounters``
(``Mirror_*``), ProxySQL's names. ``mirrored = completed + failed + dropped`` holds once the queues are empty."""

from __future__ import annotations

from proxyapp.report.stats import GlobalCounters


class MirrorCounts:
    """A worker's mirror counts."""

    def __init__(self, counters: GlobalCounters) -> None:
        self.counters = counters
        self.mirrored = 0
        self.completed = 0
        self.retried = 0
        self.failed: dict[int, int] = {}
        self.dropped: dict[str, int] = {}
        self.last_error = ""

    def handed(self, count: int) -> None:
        """``count`` statements were handed to the mirror."""
        self.mirrored += count
        self.counters.Mirror_queries_mirrored += count

    def drop(self, reason: str, count: int, *, handed: bool) -> None:
        """Count ``count`` statements dropped for ``reason``; ``handed``: they were not counted as mirrored yet."""
        self.dropped[reason] = self.dropped.get(reason, 0) + count
        self.counters.Mirror_queries_dropped += count
        if handed:
            self.handed(count)

    def fail(self, code: int, count: int = 1) -> None:
        """Count ``count`` statements that failed on the mirror with error ``code``."""
        self.failed[code] = self.failed.get(code, 0) + count
        self.counters.Mirror_queries_failed += count

    def complete(self, count: int) -> None:
        """Count ``count`` statements the mirror ran."""
        self.completed += count
        self.counters.Mirror_queries_completed += count
