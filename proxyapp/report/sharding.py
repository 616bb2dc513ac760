"""Per-digest sharding statistics: how often each statement on sharded tables reached one shard, several (a scatter)
or was refused, the shards it reached, and what its merges cost. A DBA reads the scatter ratio to find the queries
that miss the shard key. Reported in ``/stats`` as ``sharding_digest`` and merged across workers and nodes by
(schemaname, digest); a node's agent sends the control plane only the ``most_scattered`` rows. Statements on
unsharded tables are not counted here (they pay nothing for it).
"""

from __future__ import annotations

import heapq
from typing import Any

from proxyapp.shown import shown

#: The summed columns of a ``sharding_digest`` row.
SUMMED = ("single_shard", "scatter", "refused", "shards_reached", "merge_rows", "merge_us")


class _Entry:
    __slots__ = ("digest_text", "merge_rows", "merge_us", "refused", "scatter", "shards_reached", "single_shard")

    def __init__(self, digest_text: str) -> None:
        self.digest_text = digest_text
        self.single_shard = 0
        self.scatter = 0
        self.refused = 0
        self.shards_reached = 0
        self.merge_rows = 0
        self.merge_us = 0


class ShardingStats:
    """The per-digest sharding table of one process, bounded like the digest table (new keys past ``max_entries``
    are counted in ``overflow``)."""

    def __init__(self, max_entries: int = 10000) -> None:
        self.max_entries = max_entries
        self.overflow = 0
        self._entries: dict[tuple[str, str], _Entry] = {}

    def record(
        self, schemaname: str, digest: str, digest_text: str, shards: int, merge_rows: int = 0, merge_us: int = 0
    ) -> None:
        """Count one statement on sharded tables that reached ``shards`` shards (0: refused) and merged
        ``merge_rows`` rows in ``merge_us`` µs."""
        entry = self._entries.get((schemaname, digest))
        if entry is None:
            if len(self._entries) >= self.max_entries:
                self.overflow += 1
                return
            entry = self._entries[(schemaname, digest)] = _Entry(digest_text)
        if shards == 0:
            entry.refused += 1
        elif shards == 1:
            entry.single_shard += 1
        else:
            entry.scatter += 1
        entry.shards_reached += shards
        entry.merge_rows += merge_rows
        entry.merge_us += merge_us

    def rows(self) -> list[dict[str, Any]]:
        """The table's rows, each with its scatter ratio (scatters over statements that ran)."""
        return [
            with_ratio(
                {
                    "schemaname": shown(schemaname),
                    "digest": digest,
                    "digest_text": shown(entry.digest_text),
                    **{name: getattr(entry, name) for name in SUMMED},
                }
            )
            for (schemaname, digest), entry in self._entries.items()
        ]

    def reset(self) -> None:
        """Empty the table."""
        self._entries.clear()
        self.overflow = 0


def with_ratio(row: dict[str, Any]) -> dict[str, Any]:
    """``row`` with its ``scatter_ratio``: the share of its statements that ran that reached several shards."""
    ran = row["single_shard"] + row["scatter"]
    row["scatter_ratio"] = round(row["scatter"] / ran, 4) if ran else 0.0
    return row


def merge_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows of several workers (or nodes) with the same (schemaname, digest) combined."""
    merged: dict[tuple[str, str], dict[str, Any]] = {}
    for row in rows:
        key = (row["schemaname"], row["digest"])
        into = merged.get(key)
        if into is None:
            merged[key] = dict(row)
        else:
            for name in SUMMED:
                into[name] += row[name]
    return [with_ratio(row) for row in merged.values()]


def most_scattered(rows: list[dict[str, Any]], limit: int) -> list[dict[str, Any]]:
    """The ``limit`` rows that scattered most (then were refused most, then ran most), most first."""
    return heapq.nlargest(limit, rows, key=lambda row: (row["scatter"], row["refused"], row["single_shard"]))
