"""Where a planned statement runs for a session: one shard's hostgroup, a scatter over several shards, or the reason
it cannot run.

One shard: a statement its key narrows there, or a read of a global table (where the session already is, else shard
0), outside a transaction or inside one that stays on that shard. Several shards, outside a transaction: a SELECT
the gather merges, DDL that runs on every shard, or a write that commits on all of them or none with XA (refused,
saying so, under ``mysql-sharding_cross_shard_writes=false``). In a spanning transaction (one XA transaction over
the shards it reaches, ``proxyapp.session.sharded.transactions``): any shard, or several. Never on a wrong shard.
"""

from __future__ import annotations

from dataclasses import dataclass

from proxyapp.sharding.plan import Plan
from proxyapp.sharding.shardmap import Shard

_NOT_YET = "ProxyFleet sharding does not support"


@dataclass(frozen=True)
class Placement:
    """One shard's ``hostgroup``, or the ``shards`` a scatter runs on, or the reason it cannot run; ``spanning``: in
    a spanning transaction, on its branches."""

    hostgroup: int = -1
    shards: tuple[Shard, ...] = ()
    refused: str = ""
    spanning: bool = False


def placement(
    found: Plan, kept: int | None, autocommit: bool, cross_shard_writes: bool = True, spanning: bool = False
) -> Placement:
    """Where ``found`` runs for a session that keeps a connection to hostgroup ``kept`` (None: it keeps none) with
    ``autocommit`` on or off (off: or in a transaction not opened yet), writes over several shards allowed or not
    (``mysql-sharding_cross_shard_writes``); ``spanning``: inside a transaction that may reach any shard
    (``proxyapp.session.sharded.transactions``), or one this statement opens."""
    if found.refused:
        return Placement(refused=found.refused)
    table = found.table
    name = f"{table.schema}.{table.table}"
    if table.is_global and not found.writes and kept is not None:
        for shard in table.shards:  # a global table is whole on every shard: read it where the session is
            if shard.hostgroup_id == kept:
                return Placement(kept)
    shards = tuple(table.shards[number] for number in sorted(found.shards))
    if spanning:
        if len(shards) == 1:
            return Placement(shards[0].hostgroup_id, spanning=True)
        return Placement(shards=shards, spanning=True)
    if len(shards) == 1:
        shard = shards[0]
        if kept is not None and kept != shard.hostgroup_id:
            return Placement(
                refused=f"{_NOT_YET} a transaction or pinned session across shards yet: it is on hostgroup {kept}, "
                f"{name} shard {shard.number} is hostgroup {shard.hostgroup_id}"
            )
        return Placement(shard.hostgroup_id)
    if kept is not None or not autocommit:
        return Placement(
            refused=f"{_NOT_YET} statements over several shards of {name} inside a transaction or a pinned session "
            f"yet ({len(shards)} of {len(table.shards)})"
        )
    if found.gather is not None or found.ddl or cross_shard_writes:
        return Placement(shards=shards)
    return Placement(
        refused=f"ProxyFleet sharding: a write over several shards of {name} ({len(shards)} of {len(table.shards)}) "
        "is not allowed here (mysql-sharding_cross_shard_writes=false): "
        + (f"compare its shard key {table.key} with = or IN" if table.key else "it is a global table")
    )
