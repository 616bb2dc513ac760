"""The plan of a statement on sharded tables: which shards of its group it must run on, or why it cannot run.

``plan(sql, schema, shard_map)`` reads the statement's tokens (``proxyapp.sql.lex``): the tables it names, and for
the one sharded table that decides, the values its shard key is compared with. A key compared by ``=`` or ``IN`` in
the WHERE clause's top-level AND chain, or given in each row of an INSERT's VALUES, narrows the statement to the
shards that can hold those rows; anything else leaves it on every shard (a scatter), which is always correct. A
statement the proxy cannot yet carry out exactly is refused with the reason (ER_NOT_SUPPORTED_YET, 1235): never a
wrong answer. A pure function: no IO, the same answer on every node.

What does not depend on the literals' values is analyzed once per statement shape and kept on the shard map
(``Template``, ``ShardMap.plans``): each statement of a known shape only reads its key values, and builds its gather
or splits its rows when it reaches several shards.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import cast

from proxyapp.config.sharding import Key, ShardKeyError
from proxyapp.sharding.gather import Gather, Refused, gather
from proxyapp.sharding.shardmap import ShardedTable, ShardMap
from proxyapp.sql.constant import NotConstant, constant
from proxyapp.sql.lex import (
    MYSQL,
    Dialect,
    TokenKind,
    Tokens,
    find_top,
    opened,
    statement_ranges,
    tokenize,
    top_level,
    unquote,
    unwrap,
)
from proxyapp.sql.where import WHERE_ENDS, ColumnAt, Where, comparisons, literal, parts, values

_T = TokenKind
#: Statements that change rows; a write to a global table goes to every shard.
_WRITES = frozenset({"INSERT", "REPLACE", "UPDATE", "DELETE"})
#: Statements that change tables: they run on every shard of the group.
_DDL = frozenset({"CREATE", "ALTER", "DROP", "TRUNCATE", "RENAME", "OPTIMIZE", "ANALYZE"})
#: Words after which table names follow (UPDATE and STRAIGHT_JOIN where they lead tables, ``_leads``).
_TABLE_LEADS = frozenset({"FROM", "JOIN", "INTO", "TABLE", "TABLES"})
#: Words that may stand between a verb and its table: ``INSERT LOW_PRIORITY IGNORE INTO t``, ``UPDATE IGNORE t``.
_MODIFIERS = frozenset({"LOW_PRIORITY", "DELAYED", "HIGH_PRIORITY", "IGNORE", "QUICK", "INTO"})
#: Words after which STRAIGHT_JOIN is a SELECT option, not a join.
_SELECT_OPTIONS = frozenset({"SELECT", "ALL", "DISTINCT", "DISTINCTROW", "HIGH_PRIORITY"})
#: Words that end a table reference list (or an alias cannot be).
_CLAUSE_WORDS = frozenset(
    {
        "WHERE", "SET", "VALUES", "VALUE", "SELECT", "FROM", "ON", "USING", "GROUP", "ORDER", "LIMIT", "HAVING", "FOR",
        "LOCK", "UNION", "JOIN", "INNER", "LEFT", "RIGHT", "CROSS", "NATURAL", "STRAIGHT_JOIN", "PARTITION",
        "WINDOW", "INTO", "RETURNING", "ADD", "DROP", "MODIFY", "CHANGE", "RENAME", "ENGINE", "AS", "LIKE",
        "IGNORE", "USE", "FORCE", "DEFAULT", "CHARACTER", "COLLATE", "COMMENT", "TO", "IF", "EXISTS", "NOT",
    }
)  # fmt: skip


@dataclass(frozen=True)
class Plan:
    """Where a statement on sharded tables runs: ``shards`` of ``table``'s group (``every``: all of them, nothing
    narrowed it), ``writes`` whether it changes rows or tables (``ddl``: tables); ``refused`` the reason it cannot
    run ("" if it can); ``gather`` how a SELECT over several shards is merged; ``statements`` what each shard
    runs of an INSERT whose rows go to several."""

    table: ShardedTable
    shards: frozenset[int]
    every: bool
    writes: bool
    refused: str = ""
    ddl: bool = False
    gather: Gather | None = None
    statements: tuple[tuple[int, str], ...] = ()  # an INSERT over several shards: each shard's rows
    first_row_shard: int = 0  # the shard of an INSERT's first row (its LAST_INSERT_ID is the statement's)


@dataclass(frozen=True)
class _Ref:
    """A table named in the statement: where (token index, parenthesis depth), its name, its alias."""

    index: int
    depth: int
    table: ShardedTable
    alias: str


#: How many statement shapes a shard map keeps the analysis of (``ShardMap.plans``; the least recently used goes).
PLAN_CACHE_SIZE = 2048
#: Statements longer than this are analyzed each time: their shapes seldom repeat (a many-row INSERT).
CACHEABLE_LENGTH = 2048


def plan(sql: str, schema: str | None, shard_map: ShardMap, dialect: Dialect = MYSQL) -> Plan | None:
    """The plan of ``sql`` run with default schema ``schema``, read by the lexical rules of the session's SQL modes
    (``dialect``: ``proxyapp.sql.modes.lexical_dialect``); None when it names no sharded or global table.

    A statement's shape (its tokens, each literal a mark: ``_shape``) is analyzed once per shard map: the
    ``Template`` it gives is kept in ``shard_map.plans`` and finished with the literals of each statement of that
    shape (text statements and rendered prepared executes alike)."""
    if not shard_map.named_in(sql, schema):
        return None
    tokens = tokenize(sql, dialect)
    if tokens.executable is not None:
        return _executable(tokens, schema, shard_map)
    if len(sql) > CACHEABLE_LENGTH:
        return _analyze(tokens, schema, shard_map).finish(tokens)
    plans = shard_map.plans
    key = (schema, _shape(tokens))
    cached = plans.pop(key, None)  # put back last: the most recently used
    if cached is None:
        template = _analyze(tokens, schema, shard_map)
        if len(plans) >= PLAN_CACHE_SIZE:
            del plans[next(iter(plans))]
    else:
        template = cast(Template, cached)
    plans[key] = template
    return template.finish(tokens)


def _executable(tokens: Tokens, schema: str | None, shard_map: ShardMap) -> Plan | None:
    """The plan of a statement with executable comments, whose content is SQL on MariaDB (not cached: rare): each
    shard's statement is built from its text with the comments opened (``lex.opened``). ``/*!NNNNN`` (MySQL 5's
    versions) always applies on MariaDB 10 and later; a MariaDB version (``/*M!NNNNNN``), which only the server
    compares with its own, is refused."""
    found = _analyze(tokens, schema, shard_map).finish(opened(tokens))
    versioned = any(tokens.sql[start:end][-6:].isdigit() for start, end in tokens.executable or ())
    if versioned and found is not None and not found.refused:
        return _refuse(found.table, "an executable comment for a MariaDB version (/*M!NNNNNN ... */)")
    return found


def _shape(tokens: Tokens) -> tuple[str, ...]:
    """The tokens' texts with each literal whose value the analysis only reads (``_literal``) as a mark of its
    kind: a string as ``'``, an integer as ``0``, a hex string as ``X''`` (read after a character set introducer).
    Other numbers (``1.5``, ``0x1F``) stay as written: the analysis treats them apart. Statements of one shape differ
    only in values that ``Template.finish`` reads."""
    shape = list(tokens.texts)
    for i, kind in enumerate(tokens.kinds):
        if kind is _T.STRING:
            shape[i] = "'"
        elif kind is _T.NUMBER:
            text = shape[i]
            if text.isdigit():
                shape[i] = "0"
            elif text[:2] in ("X'", "x'") and len(text) % 2 == 1:
                shape[i] = "X''"
    return tuple(shape)


class Template:
    """What the analysis of a statement's shape (``_shape``) found that its literals' values do not change."""

    def finish(self, tokens: Tokens) -> Plan | None:
        """The plan of the statement ``tokens``, of this template's shape."""
        raise NotImplementedError


class _Answer(Template):
    """A plan no value changes (None: the statement names no sharded or global table)."""

    def __init__(self, answer: Plan | None) -> None:
        self.answer = answer

    def finish(self, tokens: Tokens) -> Plan | None:
        return self.answer


class _Insert(Template):
    """An INSERT or REPLACE into the sharded table ``ref``: each row's key places it (``_insert``)."""

    def __init__(self, ref: _Ref, lo: int, hi: int) -> None:
        self.ref = ref
        self.lo = lo
        self.hi = hi

    def finish(self, tokens: Tokens) -> Plan | None:
        return _insert(tokens, self.lo, self.hi, self.ref)


class _Keyed(Template):
    """A statement on the sharded ``table`` in ``[lo, hi)``: on the shards of the key values at ``where`` (every
    shard when None), a SELECT over several gathered (``gather``, from each statement's own text) unless an outer
    join keeps a global table's rows (``kept``: why, ``_kept_global``), a write over several refused when it joins
    (``joins``) or orders (``ordered``)."""

    def __init__(
        self, table: ShardedTable, lo: int, hi: int, select: bool, writes: bool, where: Where | None, joins: bool,
        ordered: bool, kept: str = "",
    ) -> None:  # fmt: skip
        self.table = table
        self.lo = lo
        self.hi = hi
        self.select = select
        self.writes = writes
        self.where = where
        self.joins = joins
        self.ordered = ordered
        self.kept = kept

    def finish(self, tokens: Tokens) -> Plan | None:
        table = self.table
        shards, narrowed = frozenset(range(len(table.shards))), False
        if self.where is not None:
            keys = values(tokens, self.where)
            # A value no shard holds may still equal a stored key as MySQL compares: then ask them all.
            with contextlib.suppress(ShardKeyError):
                shards, narrowed = frozenset(table.algorithm.shard_of(key) for key in keys), True
        if self.select and len(shards) > 1:
            if self.kept:
                return _refuse(table, self.kept)
            try:
                return Plan(table, shards, not narrowed, False, gather=gather(tokens, self.lo, self.hi))
            except Refused as refused:
                return _refuse(table, str(refused))
        if self.writes and len(shards) > 1:
            if self.joins:
                return _refuse(table, f"a write joining several tables over several shards of {_name(table)}")
            if self.ordered:
                return _refuse(table, f"ORDER BY or LIMIT in a write over several shards of {_name(table)}")
        return Plan(table, shards, not narrowed, self.writes)


def _analyze(tokens: Tokens, schema: str | None, shard_map: ShardMap) -> Template:
    """The template of the statement ``tokens`` run with default schema ``schema``."""
    ranges = [unwrap(tokens, lo, hi) for lo, hi in statement_ranges(tokens)]  # (SELECT ...) is SELECT ...
    found = [ref for lo, hi in ranges for ref in _refs(tokens, lo, hi, schema, shard_map)]
    if not found:
        return _Answer(None)
    first = found[0].table
    if len(ranges) > 1:
        return _refused(first, "several statements in one query on sharded tables")
    lo, hi = ranges[0]
    verb = tokens.word(lo)
    groups = sorted({ref.table.group for ref in found})
    if len(groups) > 1:
        return _refused(first, f"a statement on tables of several shard groups ({', '.join(groups)})")
    sharded = [r for r in found if not r.table.is_global]
    if sharded and _words_at_depth(tokens, lo, hi, frozenset({"UNION"})):
        return _refused(sharded[0].table, f"UNION over {_name(sharded[0].table)}")
    nested = next((r for r in sharded if r.depth > 0), None)  # a subquery reading global tables runs on each shard
    if nested is not None:
        return _refused(first, f"a subquery on {_name(nested.table)}")
    if len(sharded) > 1:
        apart = _apart(tokens, lo, hi, sharded)
        if apart:
            return _refused(first, apart)
    writes = verb in _WRITES or verb in _DDL
    every = frozenset(range(len(first.shards)))
    if verb in _DDL:
        return _Answer(Plan(first, every, True, True, ddl=True))
    if not sharded:  # only global tables: read from one shard, write to all
        if writes:
            unsteady = _nondeterministic(tokens, lo, hi)
            if unsteady:
                return _refused(first, f"{unsteady} in a write to the global table {_name(first)} (each shard would "
                                "store its own value)")  # fmt: skip
        return _Answer(Plan(first, every if writes else frozenset({0}), writes, writes))
    ref = sharded[0]
    table = ref.table
    if writes and len(sharded) < len(found):
        written = next(r.table for r in found if r.table.is_global)
        return _refused(table, f"a write naming both the global table {_name(written)} and the sharded table "
                        f"{_name(table)} (the global table's copies could differ)")  # fmt: skip
    if verb in ("INSERT", "REPLACE"):
        return _Insert(ref, lo, hi)
    moved = next((r.table for r in sharded if verb == "UPDATE" and _sets_key(tokens, lo, hi, r)), None)
    if moved is not None:
        return _refused(moved, f"changing the shard key {moved.key} of {_name(moved)} (the row would change shard)")
    where = next((k for k in (comparisons(tokens, lo, hi, _key_of(r)) for r in sharded) if k is not None), None)
    ordered = _words_at_depth(tokens, lo, hi, frozenset({"ORDER", "LIMIT"}))
    kept = _kept_global(tokens, lo, hi, found) if len(found) > len(sharded) else ""
    return _Keyed(table, lo, hi, verb == "SELECT", writes, where, len(found) > 1, ordered, kept)


def _kept_global(tokens: Tokens, lo: int, hi: int, refs: list[_Ref]) -> str:
    """Why the statement in ``[lo, hi)`` cannot run shard by shard when it reads several (each shard would return
    the same rows of a global table), or "": a LEFT JOIN whose left side names only global tables, a RIGHT JOIN
    whose right side starts with one, and a sharded table on the other side (its unmatched rows, NULL-extended,
    would come once per shard)."""
    for i in top_level(tokens, lo, hi):
        side = tokens.word(i)
        if side not in ("LEFT", "RIGHT") or tokens.word(i + (2 if tokens.word(i + 1) == "OUTER" else 1)) != "JOIN":
            continue
        before = [r for r in refs if r.index <= i]
        after = [r for r in refs if r.index > i]
        if side == "LEFT":
            preserved, other = before, after
        else:
            preserved, other = after[:1], before
        if preserved and all(r.table.is_global for r in preserved) and any(not r.table.is_global for r in other):
            kept = preserved[0].table
            return (f"a {side} JOIN keeping the global table {_name(kept)}'s rows over several shards (each shard "
                    "would return them)")  # fmt: skip
    return ""


#: Functions whose value differs from one server (or one moment) to the next; those of _BARE also without ().
_UNSTEADY = frozenset(
    {"RAND", "UUID", "UUID_SHORT", "SYS_GUID", "NOW", "SYSDATE", "CURRENT_TIMESTAMP", "CURRENT_TIME", "CURRENT_DATE",
     "CURTIME", "CURDATE", "UNIX_TIMESTAMP", "UTC_TIMESTAMP", "UTC_TIME", "UTC_DATE", "LOCALTIME", "LOCALTIMESTAMP",
     "CONNECTION_ID", "LAST_INSERT_ID", "ROW_COUNT", "FOUND_ROWS", "NEXTVAL", "USER", "CURRENT_USER"}
)  # fmt: skip
_BARE = frozenset(
    {"CURRENT_TIMESTAMP", "CURRENT_TIME", "CURRENT_DATE", "LOCALTIME", "LOCALTIMESTAMP", "CURRENT_USER"}
)  # fmt: skip


def _nondeterministic(tokens: Tokens, lo: int, hi: int) -> str:
    """The first function in ``[lo, hi)`` whose value differs between servers or moments (``NOW()``), or ""."""
    for i in range(lo, hi):
        if tokens.kinds[i] is not _T.WORD:
            continue
        word = tokens.word(i)
        if word in _UNSTEADY and (tokens.text(i + 1) == "(" or word in _BARE):
            return f"{word}()"
        if word == "NEXT" and tokens.word(i + 1) == "VALUE":
            return "NEXT VALUE FOR"
    return ""


#: Words that end a join's ON condition at its depth.
_ON_ENDS = frozenset(
    {"JOIN", "INNER", "LEFT", "RIGHT", "CROSS", "NATURAL", "STRAIGHT_JOIN", "FULL", "WHERE", "GROUP", "ORDER",
     "LIMIT", "HAVING", "WINDOW", "FOR", "LOCK", "UNION", "SET"}
)  # fmt: skip


def _apart(tokens: Tokens, lo: int, hi: int, refs: list[_Ref]) -> str:
    """Why a statement joining several sharded tables (or one table twice) cannot run shard by shard ("" if it
    can): they must be sharded by one rule and joined on their shard keys (``a.key = b.key`` in an ON condition,
    or in the WHERE clause of an inner join), so that rows that join live on one shard."""
    names = ", ".join(sorted({_name(r.table) for r in refs}))
    rules = {r.table.rule for r in refs}
    if len(rules) > 1:
        return f"a join of tables sharded by different rules ({names}); joins across shards"
    outer = _words_at_depth(tokens, lo, hi, frozenset({"LEFT", "RIGHT", "FULL", "NATURAL"}))
    conditions = [(i + 1, _end_at_top(tokens, i + 1, hi, _ON_ENDS)) for i in top_level(tokens, lo, hi)
                  if tokens.word(i) == "ON"]  # fmt: skip
    where = find_top(tokens, lo, hi, frozenset({"WHERE"}))
    if where >= 0 and not outer:
        conditions.append((where + 1, _end_at_top(tokens, where + 1, hi, WHERE_ENDS)))
    joined = list(range(len(refs)))  # union-find over the references

    def root(n: int) -> int:
        while joined[n] != n:
            n = joined[n]
        return n

    for c_lo, c_hi in conditions:
        for part_lo, part_hi in parts(tokens, c_lo, c_hi) or []:
            equals = next((i for i in top_level(tokens, part_lo, part_hi) if tokens.texts[i] == "="), -1)
            left = _key_ref(tokens, part_lo, equals, refs) if equals > 0 else -1
            right = _key_ref(tokens, equals + 1, part_hi, refs) if equals > 0 else -1
            if left >= 0 and right >= 0:
                joined[root(left)] = root(right)
    if len({root(n) for n in range(len(refs))}) > 1:
        keys = " = ".join(f"{r.alias}.{r.table.key}" for r in refs)
        return f"a join of {names} that is not on their shard keys ({keys}); joins across shards"
    return ""


def _end_at_top(tokens: Tokens, lo: int, hi: int, words: frozenset[str]) -> int:
    """Where a clause starting at ``lo`` ends: the first of ``words`` (or a comma) outside parentheses, or ``hi``."""
    return next((i for i in top_level(tokens, lo, hi) if tokens.word(i) in words or tokens.texts[i] == ","), hi)


def _key_ref(tokens: Tokens, lo: int, hi: int, refs: list[_Ref]) -> int:
    """The index of the reference whose shard key ``[lo, hi)`` names as ``alias.key``, or -1."""
    if hi - lo != 3 or tokens.text(lo + 1) != ".":
        return -1
    qualifier, column = _ident(tokens, lo), _ident(tokens, lo + 2)
    if qualifier is None or column is None:
        return -1
    return next((n for n, r in enumerate(refs) if r.alias == qualifier.lower() and r.table.key == column.lower()), -1)


def _refuse(table: ShardedTable, what: str) -> Plan:
    return Plan(table, frozenset(), False, False, f"ProxyFleet sharding does not support {what} yet")


def _refused(table: ShardedTable, what: str) -> Template:
    return _Answer(_refuse(table, what))


def _name(table: ShardedTable) -> str:
    return f"{table.schema}.{table.table}"


# --- the tables a statement names -----------------------------------------------------------------------------


@dataclass(frozen=True)
class TableName:
    """A table name where MariaDB's grammar puts one: its first token's index ``at``, the index ``end`` after it and
    its alias, its parenthesis ``depth``, its ``schema`` (the default one when unqualified), ``table`` and
    ``alias`` (lowercase; the table's name when none)."""

    at: int
    end: int
    depth: int
    schema: str | None
    table: str
    alias: str


def table_names(tokens: Tokens, lo: int, hi: int, schema: str | None) -> Iterator[TableName]:
    """The table names in ``[lo, hi)``: after FROM, JOIN, INTO, UPDATE, TABLE, in lists."""
    depth = 0
    i = lo
    while i < hi:
        text = tokens.texts[i]
        if text == "(":
            depth += 1
        elif text == ")":
            depth -= 1
        elif _leads(tokens, i, lo):
            i += 1
            while tokens.word(i) in _MODIFIERS:
                i += 1
            if tokens.word(i) == "IF":  # CREATE TABLE IF NOT EXISTS t, DROP TABLE IF EXISTS t
                i += 3 if tokens.word(i + 1) == "NOT" else 2
            while i < hi:
                at = i
                name, i = _table_name(tokens, i, hi, schema)
                if name is None:
                    break
                i, alias = _alias(tokens, i, hi, name[1])
                yield TableName(at, i, depth, name[0], name[1], alias)
                if tokens.text(i) != ",":
                    break
                i += 1
            continue
        i += 1


def _refs(tokens: Tokens, lo: int, hi: int, schema: str | None, shard_map: ShardMap) -> Iterable[_Ref]:
    """The sharded and global tables named in ``[lo, hi)``."""
    for name in table_names(tokens, lo, hi, schema):
        table = shard_map.find(name.schema, name.table)
        if table is not None:
            yield _Ref(name.end, name.depth, table, name.alias)


def _leads(tokens: Tokens, i: int, lo: int) -> bool:
    """Whether table names follow the word at ``i`` of the statement starting at ``lo``."""
    word = tokens.word(i)
    if word in _TABLE_LEADS:
        return True
    before = tokens.word(i - 1) if i > lo else ""
    if word == "UPDATE":  # not ON DUPLICATE KEY UPDATE, nor FOR UPDATE
        return before not in ("KEY", "FOR")
    if word == "STRAIGHT_JOIN":  # a join, not SELECT STRAIGHT_JOIN
        return before not in _SELECT_OPTIONS and not before.startswith("SQL_")
    if word in ("INSERT", "REPLACE"):
        return i == lo
    if word == "DELETE":
        return tokens.word(i + 1) != "FROM"
    return word == "ON" and tokens.word(lo) in ("CREATE", "DROP")  # CREATE/DROP INDEX i ON t


def _ident(tokens: Tokens, i: int) -> str | None:
    kind = tokens.kinds[i]
    if kind is _T.QUOTED_IDENT:
        return unquote(tokens.texts[i], backslash_escapes=False)
    if kind is _T.WORD and tokens.word(i) not in _CLAUSE_WORDS:
        return tokens.texts[i]
    return None


def _table_name(tokens: Tokens, i: int, hi: int, schema: str | None) -> tuple[tuple[str | None, str] | None, int]:
    """``name`` or ``schema.name`` at ``i`` (schema defaulting to ``schema``), and the index after it."""
    if i >= hi:
        return None, i
    first = _ident(tokens, i)
    if first is None:
        return None, i
    if tokens.text(i + 1) == "." and i + 2 < hi:
        second = _ident(tokens, i + 2)
        if second is not None:
            return (first, second), i + 3
    return (schema, first), i + 1


def _alias(tokens: Tokens, i: int, hi: int, table: str) -> tuple[int, str]:
    """The alias after a table name (``AS a`` or ``a``; the name itself when none) and the index after it."""
    j = i + 1 if tokens.word(i) == "AS" else i
    if j < hi:
        alias = _ident(tokens, j)
        if alias is not None:
            return j + 1, alias.lower()
    return i, table.lower()


def _words_at_depth(tokens: Tokens, lo: int, hi: int, words: frozenset[str]) -> bool:
    """Whether one of ``words`` stands in ``[lo, hi)`` outside any parentheses."""
    return find_top(tokens, lo, hi, words) >= 0


# --- the key values -------------------------------------------------------------------------------------------


def _column_at(tokens: Tokens, i: int, hi: int, ref: _Ref) -> int:
    """The index after ``key``, ``qualifier.key`` or ``schema.table.key`` at ``i`` when it names ``ref``'s shard
    key (in any case, quoted or not), else -1."""
    table = ref.table
    name = _ident(tokens, i) if i < hi else None
    if name is None:
        return -1
    if tokens.text(i + 3) == "." and i + 4 < hi and tokens.text(i + 1) == ".":
        middle, column = _ident(tokens, i + 2), _ident(tokens, i + 4)
        if (
            middle is not None and column is not None and column.lower() == table.key
            and name.lower() == table.schema.lower() and middle.lower() == table.table.lower()
        ):  # fmt: skip
            return i + 5
        return -1
    if tokens.text(i + 1) == "." and i + 2 < hi:
        column = _ident(tokens, i + 2)
        if column is not None and column.lower() == table.key and name.lower() in (ref.alias, table.table.lower()):
            return i + 3
        return -1
    return i + 1 if name.lower() == table.key else -1


def _key_of(ref: _Ref) -> ColumnAt:
    """Where ``ref``'s shard key is named (``_column_at`` for that reference)."""
    return lambda tokens, i, hi: _column_at(tokens, i, hi, ref)


def _sets_key(tokens: Tokens, lo: int, hi: int, ref: _Ref) -> bool:
    """Whether the assignments of an UPDATE's SET (or of ON DUPLICATE KEY UPDATE) in ``[lo, hi)`` set the key."""
    assigning = False
    for i in top_level(tokens, lo, hi):
        word = tokens.word(i)
        if word == "SET" or (word == "UPDATE" and tokens.word(i - 1) == "KEY"):
            assigning = True
        elif word in ("WHERE", "ORDER", "LIMIT"):
            assigning = False
        elif assigning and (tokens.text(i - 1) == "," or tokens.word(i - 1) in ("SET", "UPDATE")):
            after = _column_at(tokens, i, hi, ref)
            if after >= 0 and tokens.text(after) in ("=", ":="):
                return True
    return False


def _insert(tokens: Tokens, lo: int, hi: int, ref: _Ref) -> Plan:
    """An INSERT or REPLACE: the shards of the key in each VALUES row."""
    table = ref.table
    if _words_at_depth(tokens, lo, hi, frozenset({"SELECT", "TABLE"})):
        return _refuse(table, f"INSERT ... SELECT into {_name(table)}")
    if _words_at_depth(tokens, lo, hi, frozenset({"SET"})) and not _words_at_depth(
        tokens, lo, hi, frozenset({"VALUES", "VALUE"})
    ):
        return _refuse(table, f"INSERT ... SET into {_name(table)}; name the columns and use VALUES")
    i = ref.index
    if tokens.text(i) != "(":
        return _refuse(table, f"an INSERT into {_name(table)} without a column list (the shard key's place)")
    columns: list[str] = []
    i += 1
    while i < hi and tokens.text(i) != ")":
        name = _ident(tokens, i)
        if name is not None:
            columns.append(name.lower())
        i += 1
    if table.key not in columns:
        return _refuse(table, f"an INSERT into {_name(table)} without its shard key {table.key}")
    position = columns.index(table.key)
    i += 1
    if tokens.word(i) not in ("VALUES", "VALUE"):
        return _refuse(table, f"this form of INSERT into {_name(table)}")
    keys: list[Key] = []
    rows: list[tuple[int, int]] = []  # each row's tokens, its parentheses included
    i += 1
    head_end = i
    while i < hi and tokens.text(i) == "(":
        start = i
        row, i = _row(tokens, i + 1, hi)
        rows.append((start, i))
        if row is None or len(row) != len(columns):
            return _refuse(table, f"an INSERT into {_name(table)} whose rows do not match its column list")
        key = row[position]
        if isinstance(key, _Expression):
            try:
                key = constant(tokens, key.lo, key.hi, table.algorithm.strings)
            except NotConstant as unfolded:  # a name of its own: compiled, one name holds one exception type
                return _refuse(table, f"an INSERT into {_name(table)} whose shard key {table.key} is not a constant "
                               f"the proxy can compute ({unfolded})")  # fmt: skip
        keys.append(key)
        if tokens.text(i) != ",":
            break
        i += 1
    if tokens.word(i) == "ON" and _sets_key(tokens, i, hi, ref):
        return _refuse(table, f"ON DUPLICATE KEY UPDATE of the shard key {table.key} of {_name(table)}")
    try:
        placed = [table.algorithm.shard_of_stored(key) for key in keys]
    except ShardKeyError as exc:
        return Plan(table, frozenset(), False, True, f"ProxyFleet sharding: {_name(table)}: {exc}")
    shards = frozenset(placed)
    if len(shards) == 1:
        return Plan(table, shards, False, True)
    head, tail = tokens.source(lo, head_end), tokens.source(i, hi)
    split = tuple(
        (shard, " ".join(part for part in (head, ", ".join(
            tokens.source(*row) for row, at in zip(rows, placed, strict=True) if at == shard
        ), tail) if part))
        for shard in sorted(shards)
    )  # fmt: skip
    return Plan(table, shards, False, True, statements=split, first_row_shard=placed[0])


def written_table(
    tokens: Tokens, lo: int, hi: int, schema: str | None, shard_map: ShardMap
) -> tuple[ShardedTable, int] | None:
    """The sharded or global table the INSERT or REPLACE in ``[lo, hi)`` writes, found as ``plan`` finds it, and the
    index of the token after its name (its column list's ``(``); None when it writes none."""
    ref = next(iter(_refs(tokens, lo, hi, schema, shard_map)), None)
    return (ref.table, ref.index) if ref is not None and ref.depth == 0 else None


@dataclass(frozen=True)
class _Expression:
    """A VALUES item that is not a literal (an expression, a function call, a placeholder): its tokens."""

    lo: int
    hi: int


def _row(tokens: Tokens, i: int, hi: int) -> tuple[list[Key | _Expression] | None, int]:
    """The values of one VALUES row starting after its ``(`` (an ``_Expression`` for one that is not a literal;
    NULL is None), and the index after its ``)``; None for a row that does not parse."""
    row: list[Key | _Expression] = []
    while i < hi:
        value = literal(tokens, i, hi)
        if value is not None and tokens.text(value[1]) in (",", ")"):
            row.append(value[0])
            i = value[1]
        elif tokens.word(i) == "NULL" and tokens.text(i + 1) in (",", ")"):
            row.append(None)
            i += 1
        else:  # an expression: skip it to the next comma at this depth
            start, depth = i, 0
            while i < hi and not (depth == 0 and tokens.text(i) in (",", ")")):
                depth += (tokens.texts[i] == "(") - (tokens.texts[i] == ")")
                i += 1
            row.append(_Expression(start, i))
        if tokens.text(i) == ")":
            return row, i + 1
        if tokens.text(i) != ",":
            return None, i
        i += 1
    return None, i
