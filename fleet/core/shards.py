"""The shard map of a config as a DBA reads it, and the "which shard holds key K of table T" tester.

Both read a proxy ``Config`` (the draft's or a published version's, ``fleet.core.ruletest.config_of``); the tester
asks the proxy's own ``ShardMap`` and algorithms, so its answer is the one every node would give.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from proxyapp.config.document import Config
from proxyapp.config.sharding import DEFAULT_BUCKETS, Key, ShardKeyError, parse_parameters
from proxyapp.config.tables import MysqlServer, MysqlShard, MysqlShardedTable
from proxyapp.sharding.shardmap import Shard, ShardedTable, ShardMap

#: A key typed as an integer (as the planner reads an unquoted number, maybe negative); any other text is a string.
_INTEGER = re.compile(r"-?[0-9]+")


class LocateError(ValueError):
    """A question the tester cannot ask: no such sharded table, no key."""


@dataclass(frozen=True)
class ShardView:
    """One shard of a group: its number, the hostgroup that serves it and that hostgroup's servers."""

    number: int
    hostgroup_id: int
    physical_schema: str | None
    servers: tuple[MysqlServer, ...]


@dataclass(frozen=True)
class TableView:
    """A sharded or global table: its name, key column, algorithm, the algorithm's rule in words, and the column
    its sequence numbers."""

    name: str
    shard_key: str | None
    algorithm: str
    rule: str
    comment: str
    sequence_column: str | None = None


@dataclass(frozen=True)
class GroupView:
    """A shard group: its shards in order and the tables spread over them."""

    name: str
    shards: tuple[ShardView, ...]
    tables: tuple[TableView, ...]


@dataclass(frozen=True)
class Location:
    """The tester's answer for one key: the shard that holds it (with its hostgroup's servers), or why none does."""

    table: ShardedTable
    key: Key
    shard: Shard | None
    servers: tuple[MysqlServer, ...]
    refusal: str | None

    @property
    def name(self) -> str:
        """The table as ``schema.table``."""
        return f"{self.table.schema}.{self.table.table}"

    @property
    def key_text(self) -> str:
        """The key as the tester read it: an integer, or a quoted string."""
        return str(self.key) if isinstance(self.key, int) else json.dumps(self.key, ensure_ascii=False)

    @property
    def answer(self) -> str:
        """The answer in one sentence."""
        if self.shard is None:
            return f"{self.name} key {self.key_text} is refused by its {self.table.algorithm.name} rule: {self.refusal}"
        return (
            f"{self.name} key {self.key_text} is on shard {self.shard.number} of {self.table.group} "
            f"(hostgroup {self.shard.hostgroup_id})"
        )


def servers_of(config: Config, hostgroup_id: int) -> tuple[MysqlServer, ...]:
    """The servers of ``hostgroup_id`` in ``config``, in the config's order."""
    return tuple(server for server in config.mysql_servers if server.hostgroup_id == hostgroup_id)


def shard_groups(config: Config) -> list[GroupView]:
    """Every shard group of ``config`` by name, each with its shards (numbered) and its tables."""
    shards: dict[str, list[MysqlShard]] = {}
    for shard in config.mysql_shards:
        shards.setdefault(shard.shard_group, []).append(shard)
    tables: dict[str, list[MysqlShardedTable]] = {}
    for table in config.mysql_sharded_tables:
        tables.setdefault(table.shard_group, []).append(table)
    groups = []
    for name in sorted(shards):
        members = sorted(shards[name], key=lambda s: s.shard)
        views = tuple(
            ShardView(s.shard, s.hostgroup_id, s.physical_schema, servers_of(config, s.hostgroup_id)) for s in members
        )
        spread = sorted(tables.get(name, ()), key=lambda t: (t.schemaname, t.tablename))
        groups.append(GroupView(name, views, tuple(_table_view(t, len(members)) for t in spread)))
    return groups


def _table_view(table: MysqlShardedTable, shards: int) -> TableView:
    return TableView(
        f"{table.schemaname}.{table.tablename}",
        table.shard_key,
        table.algorithm,
        describe_rule(table.algorithm, table.parameters, table.shard_key or "", shards),
        table.comment,
        table.sequence_column,
    )


def describe_rule(algorithm: str, parameters: str, key: str, shards: int) -> str:
    """The algorithm's rule in words, with its parameters (``parameters`` as the config holds them)."""
    try:
        params = parse_parameters(algorithm, parameters)
    except ValueError as error:  # a published config was validated: only a hand-made one gets here
        return f"{algorithm} {parameters} ({error})"
    return _RULES[algorithm](params, key, shards)


def _show(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _otherwise(params: dict[str, Any]) -> str:
    default = params.get("default")
    return "any other key: refused" if default is None else f"any other key: shard {default}"


def _mod_rule(params: dict[str, Any], key: str, shards: int) -> str:
    return f"{key} mod {shards} (never negative)"


def _hashed_key(params: dict[str, Any], key: str) -> str:
    if params.get("key_type") == "string":
        return f"{key}'s text (without case, accents or trailing spaces)"
    return f"the integer {key}"


def _hash_rule(params: dict[str, Any], key: str, shards: int) -> str:
    return f"BLAKE2b of {_hashed_key(params, key)}, mod {shards}"


def _bucket_rule(params: dict[str, Any], key: str, shards: int) -> str:
    buckets = params.get("buckets", DEFAULT_BUCKETS)
    spread = f"hash of {_hashed_key(params, key)} into {buckets} buckets"
    assignment = params.get("assignment")
    if not assignment:
        return f"{spread}, split evenly over the {shards} shards"
    owners = "; ".join(f"buckets {first}-{last} → shard {shard}" for first, last, shard in sorted(assignment))
    return f"{spread}: {owners}"


def _range_rule(params: dict[str, Any], key: str, shards: int) -> str:
    spans = sorted(params["ranges"], key=lambda r: float("-inf") if r[0] is None else r[0])
    parts = [
        f"{'-∞' if lo is None else lo} ≤ {key} < {'∞' if hi is None else hi} → shard {shard}" for lo, hi, shard in spans
    ]
    return "; ".join([*parts, _otherwise(params)])


def _list_rule(params: dict[str, Any], key: str, shards: int) -> str:
    parts = [
        f"{key} in ({', '.join(_show(v) for v in values)}) → shard {shard}"
        for shard, values in sorted(params["lists"].items(), key=lambda item: int(item[0]))
    ]
    return "; ".join([*parts, _otherwise(params)])


def _date_rule(params: dict[str, Any], key: str, shards: int) -> str:
    unit, per_shard = params["unit"], params.get("per_shard", 1)
    span = f"{per_shard} {unit}s" if per_shard > 1 else f"one {unit}"
    start = params["start"]
    return f"by {unit} of {key} from {start}: {span} per shard, round the {shards} shards; earlier dates refused"


def _global_rule(params: dict[str, Any], key: str, shards: int) -> str:
    return f"whole on each of the {shards} shards: written to all, read from one"


_RULES = {
    "mod": _mod_rule,
    "hash": _hash_rule,
    "consistent_hash": _bucket_rule,
    "range": _range_rule,
    "list": _list_rule,
    "date": _date_rule,
    "global": _global_rule,
}


def key_of(text: str) -> Key:
    """A key typed in a form for a table whose key is not a string: an integer when it is digits (maybe after a
    minus sign), as the planner reads an unquoted number; any other text as a string."""
    return int(text) if _INTEGER.fullmatch(text) else text


def locate(config: Config, table: str, key: str) -> Location:
    """Which shard of ``config`` holds key ``key`` (typed text, ``key_of``) of ``table`` (``schema.table``),
    answered by the proxy's own shard map; LocateError for a table that is not sharded there, or an empty key."""
    schema, dot, name = table.strip().partition(".")
    if not dot or not schema.strip("` ") or not name.strip("` "):
        raise LocateError(f"name the table as schema.table, not {table!r}")
    shard_map = ShardMap.build(config)
    found = shard_map.find(schema.strip("` "), name.strip("` "))
    if found is None:
        known = ", ".join(sorted(f"{t.schema}.{t.table}" for t in shard_map.tables.values())) or "none"
        raise LocateError(f"{table.strip()} is not a sharded or global table in this config (its tables: {known})")
    if key == "":
        raise LocateError("give a key to locate")
    value = key if found.algorithm.strings else key_of(key)
    try:
        number = found.algorithm.shard_of(value)
    except ShardKeyError as error:
        return Location(found, value, None, (), str(error))
    shard = found.shards[number]
    return Location(found, value, shard, servers_of(config, shard.hostgroup_id), None)
