"""Sequences for sharded tables' AUTO_INCREMENT columns (MyCat's global sequence): values unique across the shards
of a group, which each proxy worker hands out from blocks it reserves in a table on the group's shard 0.

- ``numbering(sql, schema, shard_map, zero_is_value)`` (a pure function): the rows of an INSERT or REPLACE into a
  table with a ``sequence_column`` that need a value: the column left out of the column list, or given as NULL,
  DEFAULT or 0 (0 is a value under ``NO_AUTO_VALUE_ON_ZERO``). ``Numbering.fill`` writes the values in before the
  statement is planned, so a sequenced shard key places each row by its new value; the first value is written
  ``LAST_INSERT_ID(v)``, which the planner reads as ``v`` and the server takes as the statement's insert id: its OK
  and the session's ``LAST_INSERT_ID()`` then tell the first generated value, as MySQL's own AUTO_INCREMENT does.
- ``Sequence``: one table's values in one worker, the rest of its current block handed out in increasing order;
  one reservation in flight at a time, the others wait for it. ``Sequences``: the worker's, kept across reloads.
- The statements that reserve a block (``proxyapp.session.sharded.numbering`` runs them): ``proxyfleet.sequences`` holds
  one row per table, its next free value. ``UPDATE ... next_value = LAST_INSERT_ID(next_value + size)`` reserves
  ``size`` values atomically in one round trip (the OK's insert id is the new next value); a table's first
  reservation starts above the highest value its shards hold.

Values are unique across every worker and node that shares the shard servers, and increase within a worker; two
workers' values interleave. Values a worker reserved and did not hand out before it stopped are never used.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from proxyapp.sharding.nodeblocks import NodeBlocks, sequence_key
from proxyapp.sharding.plan import written_table
from proxyapp.sharding.shardmap import ShardedTable, ShardMap
from proxyapp.sql.lex import MYSQL, Dialect, TokenKind, Tokens, closing, split_top, statement_ranges, tokenize, unquote

#: The schema and table on each group's shard 0 that hold the sequences.
SEQUENCES_TABLE = "proxyfleet.sequences"
#: What makes that table where it is missing.
CREATE_STATEMENTS = (
    "CREATE DATABASE IF NOT EXISTS proxyfleet",
    f"CREATE TABLE IF NOT EXISTS {SEQUENCES_TABLE} (name VARCHAR(191) NOT NULL PRIMARY KEY, "
    "next_value BIGINT UNSIGNED NOT NULL) ENGINE=InnoDB",
)
#: A string MariaDB reads as an integer (spaces around, a sign, digits).
_INTEGER_TEXT = re.compile(r"\s*[+-]?[0-9]+\s*")


@dataclass(frozen=True)
class Numbering:
    """An INSERT or REPLACE into ``table`` whose rows need ``count`` values of its sequence (``refused``: why it
    cannot be numbered)."""

    table: ShardedTable
    sql: str
    #: (start, end, text, numbered): ``sql[start:end]`` becomes ``text``, then the next value when ``numbered``.
    edits: tuple[tuple[int, int, str, bool], ...] = ()
    refused: str = ""

    @property
    def count(self) -> int:
        """How many values the statement needs."""
        return sum(numbered for *_, numbered in self.edits)

    def fill(self, values: list[int]) -> str:
        """The statement with ``values`` (``count`` of them, in row order) written in, the first as
        ``LAST_INSERT_ID(v)``."""
        out: list[str] = []
        done = 0
        taken = 0
        for start, end, text, numbered in self.edits:
            out += (self.sql[done:start], text)
            if numbered:
                value = values[taken]
                out.append(f"LAST_INSERT_ID({value})" if taken == 0 else str(value))
                taken += 1
            done = end
        out.append(self.sql[done:])
        return "".join(out)


def numbering(
    sql: str, schema: str | None, shard_map: ShardMap, zero_is_value: bool = False, dialect: Dialect = MYSQL
) -> Numbering | None:
    """The numbering ``sql`` needs (run with default schema ``schema``; ``zero_is_value``: the session's sql_mode
    has NO_AUTO_VALUE_ON_ZERO; ``dialect``: the lexical rules its SQL modes make); None when it needs none, or is
    a statement the planner refuses anyway (several statements, no column list, INSERT ... SELECT or SET, rows that
    do not match the column list)."""
    if not shard_map.named_in(sql, schema):
        return None
    tokens = tokenize(sql, dialect)
    ranges = statement_ranges(tokens)
    if len(ranges) != 1 or tokens.word(ranges[0][0]) not in ("INSERT", "REPLACE"):
        return None
    lo, hi = ranges[0]
    target = written_table(tokens, lo, hi, schema, shard_map)
    if target is None or tokens.text(target[1]) != "(":
        return None
    table, opening = target
    column = table.sequence
    if column is None:
        return None
    listed = closing(tokens, opening, hi)
    if listed < 0 or tokens.word(listed + 1) not in ("VALUES", "VALUE"):
        return None
    columns = [_column(tokens, part) for part in _items(tokens, opening, listed)]
    if None in columns:
        return None
    lowered = [name.lower() for name in columns if name is not None]
    position = lowered.index(column.lower()) if column.lower() in lowered else -1
    edits: list[tuple[int, int, str, bool]] = []
    if position < 0:
        at = tokens.starts[listed]
        edits.append((at, at, (", " if columns else "") + _quoted(column), False))
    i = listed + 2
    while tokens.text(i) == "(":
        end = closing(tokens, i, hi)
        items = _items(tokens, i, end)
        if end < 0 or len(items) != len(columns):
            return None
        if position < 0:
            at = tokens.starts[end]
            edits.append((at, at, ", " if items else "", True))
        else:
            item_lo, item_hi = items[position]
            generated = _generated(tokens, item_lo, item_hi, zero_is_value)
            if generated is None:
                return Numbering(
                    table,
                    sql,
                    refused=f"ProxyFleet sharding does not support an INSERT into {table.schema}.{table.table} whose "
                    f"sequence column {column} is not a literal integer yet (give an integer, NULL or 0, or leave "
                    "the column out)",
                )
            if generated:
                edits.append((tokens.starts[item_lo], tokens.ends[item_hi - 1], "", True))
        i = end + 1
        if tokens.text(i) != ",":
            break
        i += 1
    if not any(numbered for *_, numbered in edits):
        return None
    return Numbering(table, sql, tuple(edits))


def _items(tokens: Tokens, opening: int, closed: int) -> list[tuple[int, int]]:
    """The comma-separated items between a ``(`` and its ``)``; none for ``()``."""
    return split_top(tokens, opening + 1, closed) if closed > opening + 1 else []


def _column(tokens: Tokens, part: tuple[int, int]) -> str | None:
    """The column a column list's item names (``c``, `` `c` `` or ``t.c``), or None."""
    lo, hi = part
    if hi - lo == 3 and tokens.text(lo + 1) == ".":
        lo += 2
    if hi - lo == 1 and tokens.kinds[lo] in (TokenKind.WORD, TokenKind.QUOTED_IDENT):
        return unquote(tokens.texts[lo])
    return None


def _generated(tokens: Tokens, lo: int, hi: int, zero_is_value: bool) -> bool | None:
    """Whether the sequence column's value ``[lo, hi)`` asks for a generated value (NULL, DEFAULT, or 0 unless 0
    is a value), False for another integer, None for anything else (an expression might be NULL or 0)."""
    if hi - lo == 1 and tokens.word(lo) in ("NULL", "DEFAULT"):
        return True
    if hi - lo == 4 and tokens.word(lo) == "LAST_INSERT_ID" and tokens.text(lo + 1) == "(":
        lo, hi = lo + 2, hi - 1  # LAST_INSERT_ID(n) is n
    negative = hi - lo == 2 and tokens.text(lo) == "-"
    if hi - lo != 1 and not negative:
        return None
    kind, text = tokens.kinds[hi - 1], tokens.texts[hi - 1]
    if kind is TokenKind.STRING and not negative and text[:1] in "'\"":
        text = unquote(text, tokens.backslash_escapes)
    elif kind is not TokenKind.NUMBER:
        return None
    if _INTEGER_TEXT.fullmatch(text) is None:
        return None
    return int(text) == 0 and not zero_is_value


def _quoted(name: str) -> str:
    """A name as a quoted identifier."""
    return "`" + name.replace("`", "``") + "`"


# --- the values a worker holds --------------------------------------------------------------------------------


class Sequence:
    """The values of one table's sequence this worker holds: the rest of its last block, handed out in order; with
    ``node``, the node's workers share the block (``proxyapp.sharding.nodeblocks``; ``key``: its slot's key)."""

    def __init__(self, node: NodeBlocks | None = None, key: int = 0) -> None:
        self.next = 0  # the next value to hand out
        self.end = 0  # the end of the block (excluded): none left when next == end
        self._reserving = asyncio.Lock()
        self.node = node
        self.key = key

    async def take(self, count: int, block: int, reserve: Callable[[int], Awaitable[int]]) -> list[int]:
        """``count`` values, increasing: the rest of the block, then values of a new block of ``block`` values (or
        the multiple of ``block`` that holds the rest of ``count``), which ``reserve(size)`` reserves and whose
        first value it returns. Callers wait for one another's reservation; one that fails leaves the held values
        as they were."""
        async with self._reserving:
            if self.node is not None:
                shared = await self._take_shared(self.node, count, block, reserve)
                if shared is not None:
                    return shared
                self.node = None  # no slot left on the node: this worker's own blocks
            left = self.end - self.next
            if left >= count:
                self.next += count
                return list(range(self.next - count, self.next))
            size = -(-(count - left) // block) * block
            first = await reserve(size)
            values = [*range(self.next, self.end), *range(first, first + count - left)]
            self.next, self.end = first + count - left, first + size
            return values

    async def _take_shared(
        self, node: NodeBlocks, count: int, block: int, reserve: Callable[[int], Awaitable[int]]
    ) -> list[int] | None:
        """``take`` from the node's block: what is left of it, then blocks this worker reserves, or (when another
        worker installed a later one meanwhile) that one's values; None when the node has no slot for it."""
        values = node.take(self.key, count)
        if values is None:
            return None
        while len(values) < count:
            need = count - len(values)
            size = -(-need // block) * block
            first = await reserve(size)
            more = node.install(self.key, first, size, need)
            values += more if more is not None else node.take(self.key, need) or []
        return values


class Sequences:
    """A worker's sequences, by group and table, kept across config reloads (a table moved to another group
    starts a sequence there)."""

    def __init__(self, node: NodeBlocks | None = None) -> None:
        self._held: dict[tuple[str, str, str], Sequence] = {}
        self.node = node  # the node's shared blocks, with several workers

    def of(self, table: ShardedTable) -> Sequence:
        """The sequence of ``table``."""
        key = (table.group, table.schema.lower(), table.table.lower())
        held = self._held.get(key)
        if held is None:
            held = self._held[key] = Sequence(self.node, sequence_key("/".join(key)))
        return held


# --- the statements that reserve a block ----------------------------------------------------------------------


def sequence_name(table: ShardedTable) -> str:
    """The row of ``proxyfleet.sequences`` that holds ``table``'s sequence."""
    return f"{table.schema}.{table.table}".lower()


def _text(value: str) -> str:
    """A string literal, read alike whatever the connection's sql_mode (backslashes, quotes)."""
    return f"CONVERT(X'{value.encode('utf-8', 'surrogatepass').hex()}' USING utf8mb4)"


def advance_sql(table: ShardedTable, size: int) -> str:
    """Reserve ``size`` values of a sequence that has its row: the OK's insert id is the new next value (one
    affected row), or there is no row yet (none)."""
    return (
        f"UPDATE {SEQUENCES_TABLE} SET next_value = LAST_INSERT_ID(next_value + {size}) "
        f"WHERE name = {_text(sequence_name(table))}"
    )


def start_sql(table: ShardedTable, start: int, size: int) -> str:
    """Make a sequence's row, its first ``size`` values from ``start``, or (made meanwhile by another proxy)
    reserve them as ``advance_sql`` does: the OK's insert id is the new next value either way."""
    return (
        f"INSERT INTO {SEQUENCES_TABLE} (name, next_value) VALUES ({_text(sequence_name(table))}, "
        f"LAST_INSERT_ID({start + size})) ON DUPLICATE KEY UPDATE next_value = LAST_INSERT_ID(next_value + {size})"
    )


def highest_sql(table: ShardedTable) -> str:
    """The highest value of the sequence column a shard holds (NULL: no rows)."""
    assert table.sequence is not None
    return f"SELECT MAX({_quoted(table.sequence)}) FROM {_quoted(table.schema)}.{_quoted(table.table)}"
