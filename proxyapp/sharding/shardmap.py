"""A config's shard map: each sharded or global table with its algorithm built for its group, and each group's shards
(hostgroup, physical schema). Built once per config (``ShardMap.build``); looked up per statement."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass

from proxyapp.config.document import Config
from proxyapp.config.sharding import Algorithm, build, parse_parameters


@dataclass(frozen=True)
class Shard:
    """One shard: its number in its group, the hostgroup that serves it, the schema its tables are in (None: the
    logical schema); ``renamed``: each logical schema of its group's tables (lowercase) that it keeps in another
    schema, with that physical schema (``proxyapp.sharding.physical``)."""

    number: int
    hostgroup_id: int
    physical_schema: str | None
    renamed: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class ShardedTable:
    """A sharded (or global) table: its logical name, its group's shards, its key column and its algorithm."""

    schema: str
    table: str
    group: str
    shards: tuple[Shard, ...]
    key: str | None  # lowercase; None for a global table
    algorithm: Algorithm
    rule: str  # the algorithm and its parameters, canonical: tables with one rule hold equal keys on one shard
    sequence: str | None = None  # the column the proxy numbers from the sequence (as configured); None: none

    @property
    def is_global(self) -> bool:
        """Whether the table is whole on every shard of its group."""
        return self.algorithm.name == "global"


class ShardMap:
    """The sharded tables of a config by (schema, table), both lowercase (as MariaDB's lower_case_table_names=1)."""

    def __init__(self, tables: dict[tuple[str, str], ShardedTable]) -> None:
        self.tables = tables
        self.sequenced = any(table.sequence for table in tables.values())  # an INSERT may need numbering
        self._schemas = frozenset(schema for schema, _ in tables)
        self._names = _any_of({table for _, table in tables})
        self._qualifiers = _any_of(self._schemas)
        #: The planner's analysis of each statement shape under this map, by (default schema, shape), least recently
        #: used first: ``proxyapp.sharding.plan``'s ``Template`` objects, which only it reads (kept here so that a
        #: config reload, which builds a new map, starts afresh).
        self.plans: dict[tuple[str | None, tuple[str, ...]], object] = {}

    def named_in(self, sql: str, schema: str | None) -> bool:
        """Whether ``sql``, run with default schema ``schema``, may name one of the tables: a table's name appears
        in it (in any case), and the default schema is one of theirs or one of their schemas' names appears too. A
        quick test that spares statements on other tables the planner's tokenizing."""
        if self._names is None or self._qualifiers is None:
            return False
        if (schema is None or schema.lower() not in self._schemas) and self._qualifiers.search(sql) is None:
            return False
        return self._names.search(sql) is not None

    @classmethod
    def build(cls, config: Config) -> ShardMap:
        """The shard map of a validated config (its sharding tables were checked by ``parse_config``)."""
        logical: dict[str, dict[str, str]] = {}  # each group's logical schemas: lowercase -> as spelled
        for row in config.mysql_sharded_tables:
            logical.setdefault(row.shard_group, {})[row.schemaname.lower()] = row.schemaname
        groups: dict[str, list[Shard]] = {}
        for shard in config.mysql_shards:
            physical = shard.physical_schema
            spelled = logical.get(shard.shard_group, {})
            renamed = tuple((name, physical) for name in sorted(spelled) if physical and physical != spelled[name])
            served = Shard(shard.shard, shard.hostgroup_id, physical, renamed)
            groups.setdefault(shard.shard_group, []).append(served)
        tables: dict[tuple[str, str], ShardedTable] = {}
        for row in config.mysql_sharded_tables:
            shards = tuple(sorted(groups[row.shard_group], key=lambda s: s.number))
            tables[(row.schemaname.lower(), row.tablename.lower())] = ShardedTable(
                row.schemaname,
                row.tablename,
                row.shard_group,
                shards,
                row.shard_key.lower() if row.shard_key else None,
                build(row.algorithm, row.parameters, len(shards)),
                f"{row.algorithm} {json.dumps(parse_parameters(row.algorithm, row.parameters), sort_keys=True)}",
                row.sequence_column,
            )
        return cls(tables)

    def __bool__(self) -> bool:
        return bool(self.tables)

    def find(self, schema: str | None, table: str) -> ShardedTable | None:
        """The sharded table ``schema.table`` (``schema`` None: no default schema), if it is one."""
        if schema is None:
            return None
        return self.tables.get((schema.lower(), table.lower()))


def _any_of(names: Iterable[str]) -> re.Pattern[str] | None:
    """A pattern finding any of ``names`` in any case (longest first), None for none."""
    ordered = sorted(names, key=len, reverse=True)
    return re.compile("|".join(re.escape(name) for name in ordered), re.IGNORECASE) if ordered else None
