"""Where a planned statement runs for a session: one shard's hostgroup, or the reason it cannot run yet.

What runs today is a statement that reaches one shard (its key narrows it there, or it reads a global table), outside
a transaction or inside one that stays on that shard. Statements over several shards wait for the scatter-gather
merger and cross-shard transactions for XA (issue 14): they are refused, saying so, never run on a wrong shard.
"""

from __future__ import annotations

from proxyapp.sharding.plan import Plan

_NOT_YET = "ProxyFleet sharding does not support"


def placement(found: Plan, kept: int | None) -> tuple[int, str]:
    """``(hostgroup, "")`` where ``found`` runs for a session that keeps a connection to hostgroup ``kept`` (None:
    it keeps none), or ``(-1, reason)``."""
    if found.refused:
        return -1, found.refused
    table = found.table
    name = f"{table.schema}.{table.table}"
    if table.is_global and not found.writes and kept is not None:
        for shard in table.shards:  # a global table is whole on every shard: read it where the session is
            if shard.hostgroup_id == kept:
                return kept, ""
    if len(found.shards) != 1:
        return -1, (
            f"{_NOT_YET} statements over several shards of {name} yet ({len(found.shards)} of {len(table.shards)}): "
            f"compare its shard key {table.key or '(global)'} with = or IN"
        )
    shard = table.shards[next(iter(found.shards))]
    if shard.physical_schema is not None and shard.physical_schema != table.schema:
        return -1, f"{_NOT_YET} a physical schema other than the logical one ({shard.physical_schema}) yet"
    if kept is not None and kept != shard.hostgroup_id:
        return -1, (
            f"{_NOT_YET} a transaction or pinned session across shards yet: it is on hostgroup {kept}, "
            f"{name} shard {shard.number} is hostgroup {shard.hostgroup_id}"
        )
    return shard.hostgroup_id, ""
