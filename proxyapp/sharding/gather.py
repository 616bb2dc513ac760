"""How a SELECT that reaches several shards is gathered: the statement every shard runs, and how their results merge
into the one result an unsharded server would return (``proxyapp.sharding.merge`` carries it out).

Each shard runs the client's SELECT with its own select list first (the columns the client sees) and hidden columns
after them: the values the merge compares that the list does not show, and for each compared value its
``WEIGHT_STRING`` (its sort key in its own collation, so that case-insensitive and accent-insensitive collations
order and group as on the server) and the weight of a space in that collation when it pads with spaces (NULL for a
NO PAD collation or a binary string). What it changes per shard:

- plain rows: ORDER BY stays (each shard's rows come sorted, the merge merges them), LIMIT ``o, n`` becomes
  ``LIMIT o + n`` (the first ``o + n`` of the whole are among the first ``o + n`` of each shard; at most
  ``MAX_ROWS``) and OFFSET applies after the merge; DISTINCT stays and the merge drops duplicates across shards;
- aggregates: GROUP BY stays, HAVING, ORDER BY and LIMIT go (they apply to whole groups after the merge); COUNT
  adds up, SUM adds up, MIN and MAX compare, AVG also asks SUM and COUNT of its argument and divides (a SUM of a
  division is asked with the digits it does not show: ``DIGITS``; with GROUP BY it is refused, as MariaDB adds
  those digits when it groups along an index and the rounded values when it groups in a temporary table); without
  ORDER BY the groups come in GROUP BY order, as MariaDB returns them;
- COUNT(DISTINCT a, ...) groups each shard's rows finer, also by its arguments (the other aggregates' partials
  combine over finer groups as well), and the merge counts the distinct arguments of each group by their weights;
  GROUP_CONCAT(a, ... ORDER BY o ...) groups them finer by its element's exact bytes and its ORDER BY keys and asks
  each element with its count of rows: the merge orders all of a group's elements by their keys' weights and joins
  them (a result longer than group_concat_max_len is refused);
- a shard's statement always has a LIMIT (``MAX_ROWS`` when the client's has none), so that the session's
  ``sql_select_limit`` does not cap a shard's part: it caps the merged result (``merge``).

What cannot be merged exactly is refused with the reason (nested or unknown aggregates, SUM(DISTINCT), AVG(DISTINCT),
GROUP_CONCAT without ORDER BY or with DISTINCT, ordering or HAVING by a GROUP_CONCAT, window functions, WITH ROLLUP,
SQL_CALC_FOUND_ROWS, SELECT ... INTO, HAVING beyond comparisons of aggregates and group keys with numbers). A pure
function of the statement's tokens.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import NoReturn

from proxyapp.sql.lex import TokenKind, Tokens, closing, find_top, split_top, tokenize, top_level, unquote

_T = TokenKind
#: The aggregates the merge combines.
AGGREGATES = frozenset({"COUNT", "SUM", "MIN", "MAX", "AVG", "GROUP_CONCAT"})
#: ``COUNT(DISTINCT ...)``'s name as an ``Aggregate.function``.
COUNT_DISTINCT = "COUNT(DISTINCT)"
#: Aggregates whose partial results cannot be combined into the exact whole.
_UNMERGEABLE = frozenset(
    {
        "STD", "STDDEV", "STDDEV_POP", "STDDEV_SAMP", "VARIANCE", "VAR_POP", "VAR_SAMP", "BIT_AND",
        "BIT_OR", "BIT_XOR", "JSON_ARRAYAGG", "JSON_OBJECTAGG", "PERCENTILE_CONT", "PERCENTILE_DISC", "MEDIAN",
    }
)  # fmt: skip
#: SELECT options that change nothing the merge depends on.
_HARMLESS_OPTIONS = frozenset(
    {"ALL", "HIGH_PRIORITY", "STRAIGHT_JOIN", "SQL_SMALL_RESULT", "SQL_BIG_RESULT", "SQL_BUFFER_RESULT", "SQL_CACHE",
     "SQL_NO_CACHE"}
)  # fmt: skip
#: Where a SELECT's clauses begin, at its top level.
_CLAUSES = frozenset(
    {"FROM", "WHERE", "GROUP", "HAVING", "WINDOW", "ORDER", "LIMIT", "FOR", "LOCK", "INTO", "PROCEDURE"}
)
_COMPARISONS = frozenset({"=", "<>", "!=", "<", "<=", ">", ">=", "<=>"})
#: The largest row count a LIMIT takes: MySQL's "all the rows".
MAX_ROWS = 18446744073709551615
#: Added to a shard's SUM of a division, to show its value with 30 decimals (or as many as DECIMAL(65) leaves) where
#: the column shows the division's scale: a DECIMAL plus a DECIMAL takes the larger scale; a DOUBLE stays one.
DIGITS = "0." + "0" * 30


@dataclass(frozen=True)
class Column:
    """Where a compared value sits in a shard's row (negative: a hidden column, counted from the row's end), and
    where its collation weight and the weight of a space in its collation are (None: not asked)."""

    value: int
    weight: int | None = None
    pad: int | None = None


@dataclass(frozen=True)
class Order:
    """One ORDER BY key."""

    column: Column
    descending: bool


@dataclass(frozen=True)
class Concat:
    """How a GROUP_CONCAT merges: where each shard row's ``element`` (its arguments concatenated; NULL: it has none)
    and its count of ``rows`` are, the ``order`` of the elements, the ``separator``, its own LIMIT (``offset``,
    ``limit``)."""

    element: int
    rows: int
    order: tuple[Order, ...]
    separator: bytes
    offset: int = 0
    limit: int | None = None


@dataclass(frozen=True)
class Aggregate:
    """An aggregate column the merge combines: ``function`` (COUNT, SUM, MIN, MAX, AVG, ``COUNT_DISTINCT``) of
    ``column``; an AVG also has its argument's SUM and COUNT columns. ``digits``: the argument divides, and its value
    has more digits than it shows (without GROUP BY, MariaDB adds them and rounds only the total to show it), so
    ``sum`` is a SUM (of a SUM too) that shows them (``DIGITS``). ``distinct``: a COUNT(DISTINCT)'s arguments, each
    row's values (the shard's ``column`` says whether none is NULL). ``concat``: a GROUP_CONCAT's parts."""

    function: str
    column: Column
    sum: int | None = None
    count: int | None = None
    digits: bool = False
    distinct: tuple[Column, ...] = ()
    concat: Concat | None = None


@dataclass(frozen=True)
class Compare:
    """``left op right`` of a HAVING condition; an operand is a column (``Column``) or a number."""

    op: str
    left: Column | Decimal
    right: Column | Decimal


@dataclass(frozen=True)
class Logic:
    """``AND``, ``OR`` or ``NOT`` over HAVING conditions."""

    op: str
    parts: tuple[Condition, ...]


@dataclass(frozen=True)
class IsNull:
    """``operand IS [NOT] NULL`` in a HAVING condition."""

    operand: Column
    negated: bool


Condition = Compare | Logic | IsNull


@dataclass(frozen=True)
class Gather:
    """The scatter of one SELECT: what each shard runs and how the results merge."""

    sql: str
    hidden: int  # the trailing columns the client does not see
    grouped: bool  # aggregates: the rows are groups to combine
    distinct: bool
    keys: tuple[Column, ...]  # the group keys (grouped), or every visible column (distinct)
    aggregates: tuple[Aggregate, ...]
    order: tuple[Order, ...]
    having: Condition | None
    offset: int
    limit: int | None
    shadowed: str = ""  # a GROUP BY name taken as a select alias that a column of the table would shadow
    single: bool = False  # aggregates without GROUP BY that the shards group finer: one row even when none came


class Refused(Exception):
    """A SELECT the merge cannot return exactly: the construct, for the client's error."""


@dataclass
class _Item:
    """One select-list item: its expression's token range, its alias (lowercase, '' if none), what it is."""

    lo: int
    hi: int
    alias: str
    star: bool
    aggregate: str  # COUNT, SUM, MIN, MAX, AVG when the whole item is one such call, else ''
    argument: tuple[int, int]  # the aggregate's argument range


class _Builder:
    """Collects the hidden columns a gather needs, one of each expression."""

    def __init__(self, tokens: Tokens) -> None:
        self.tokens = tokens
        self.hidden: list[str] = []
        self.finer: list[str] = []  # COUNT(DISTINCT)'s arguments: each shard also groups by them

    def add(self, expression: str) -> int:
        """A hidden column computing ``expression``: ``-k`` for the k-th hidden one (``_fix`` turns it into an
        index from the row's end once all are known)."""
        self.hidden.append(expression)
        return -len(self.hidden)

    def compared(self, expression: str, value: int | None = None, folded: bool = False) -> Column:
        """A compared value: ``expression`` hidden (unless it is visible at ``value``), with its weights;
        ``folded``: its weight without the trailing spaces' weights, so that a DISTINCT on each shard folds what the
        merge folds ('a' and 'a ' under a PAD SPACE collation), and a shard's LIMIT counts the rows the merge
        keeps."""
        at = value if value is not None else self.add(expression)
        pad = _pad_weight(expression)
        weight = f"WEIGHT_STRING({expression})"
        if folded:
            weight = f"IFNULL(TRIM(TRAILING {pad} FROM {weight}), {weight})"
        return Column(at, self.add(weight), self.add(pad))


def _pad_weight(expression: str) -> str:
    """The weight of a space in ``expression``'s collation when it pads with spaces, else NULL (the ``LEFT(e, 0)``
    gives the literals ``expression``'s collation)."""
    empty = f"LEFT({expression}, 0)"
    return f"IF(CONCAT({empty}, 'a') = CONCAT({empty}, 'a '), WEIGHT_STRING(CONCAT({empty}, ' ')), NULL)"


def gather(tokens: Tokens, lo: int, hi: int) -> Gather:
    """The gather of the SELECT in ``[lo, hi)``; raises ``Refused`` for what cannot be merged exactly."""
    clauses = _clauses(tokens, lo, hi)
    start = lo + 1
    distinct = False
    while True:
        word = tokens.word(start)
        if word in ("DISTINCT", "DISTINCTROW"):
            distinct = True
        elif word == "SQL_CALC_FOUND_ROWS":
            raise Refused("SQL_CALC_FOUND_ROWS over several shards")
        elif word not in _HARMLESS_OPTIONS:
            break
        start += 1
    if "INTO" in clauses or "PROCEDURE" in clauses:
        raise Refused("SELECT ... INTO over several shards")
    if "WINDOW" in clauses or any(tokens.word(i) == "OVER" for i in range(lo, hi)):
        raise Refused("window functions over several shards")
    end_of_items = min((clause.keyword for clause in clauses.values()), default=hi)
    items = [_item(tokens, a, b) for a, b in split_top(tokens, start, end_of_items)]
    group = clauses.get("GROUP")
    order_by = clauses.get("ORDER")
    limit_clause = clauses.get("LIMIT")
    offset, limit = _limit(tokens, limit_clause.lo, limit_clause.hi) if limit_clause else (0, None)
    grouped = group is not None or any(item.aggregate for item in items)
    if group is not None and find_top(tokens, group.lo, group.hi, frozenset({"WITH"})) >= 0:
        raise Refused("GROUP BY ... WITH ROLLUP over several shards")
    for item in items:
        _refuse_nested(tokens, item)
    builder = _Builder(tokens)
    source = tokens.source
    aggregates: list[Aggregate] = []
    keys: list[Column] = []
    group_texts: list[str] = []
    group_names: list[str] = []  # each GROUP BY item's column name when it is a (qualified) name, else ''
    shadowed = ""
    if grouped:
        if distinct:
            raise Refused("DISTINCT with aggregates over several shards")
        if any(item.star for item in items):
            raise Refused("* beside aggregates over several shards")
        for position, item in enumerate(items):
            if item.aggregate == "GROUP_CONCAT":
                aggregates.append(_group_concat(builder, tokens, *item.argument, position))
            elif item.aggregate:
                aggregates.append(_aggregate(builder, item.aggregate, source(*item.argument), position))
        if group is not None:
            for a, b in split_top(tokens, group.lo, group.hi):
                if tokens.word(b - 1) in ("ASC", "DESC"):
                    raise Refused("GROUP BY ... ASC/DESC over several shards")
                expression, shadowable = _group_key(tokens, a, b, items)
                if shadowable:
                    shadowed = shadowed or tokens.source(a, b)
                group_texts.append(_normal(expression))
                group_names.append(_column_name(tokens, a, b))
                keys.append(builder.compared(expression, _visible(tokens, items, expression)))
    elif distinct:
        if any(item.star for item in items):
            raise Refused("SELECT DISTINCT * over several shards: name the columns")
        keys = [builder.compared(source(item.lo, item.hi), position, True) for position, item in enumerate(items)]
    order: list[Order] = []
    if order_by is not None and not (order_by.hi == order_by.lo + 1 and tokens.word(order_by.lo) == "NULL"):
        for a, b in split_top(tokens, order_by.lo, order_by.hi):
            descending = tokens.word(b - 1) == "DESC"
            if tokens.word(b - 1) in ("ASC", "DESC"):
                b -= 1
            column = _order_column(tokens, a, b, items, builder, grouped, distinct, keys, group_texts, aggregates)
            order.append(Order(column, descending))
    elif grouped and keys and order_by is None:  # MariaDB returns groups in GROUP BY order
        order = [Order(key, False) for key in keys]
    having = None
    having_clause = clauses.get("HAVING")
    if having_clause is not None:
        if not grouped:
            raise Refused("HAVING without aggregates over several shards")
        having = _Having(tokens, items, builder, keys, group_texts, group_names, aggregates).parse(
            having_clause.lo, having_clause.hi
        )
    finer = builder.finer
    if (group is not None or finer) and any(aggregate.digits for aggregate in aggregates):
        raise Refused("SUM or AVG of a division with GROUP BY over several shards (whether MariaDB adds the digits "
                      "the division does not show depends on the plan it chooses)")  # fmt: skip
    if group is None and finer and not all(item.aggregate for item in items):
        raise Refused("a column beside COUNT(DISTINCT ...) without GROUP BY over several shards")
    hidden = len(builder.hidden)
    items_sql = source(start, end_of_items)
    if builder.hidden:
        items_sql += ", " + ", ".join(builder.hidden)
    head = source(lo, start)
    body_end = min((clauses[name].keyword for name in _TAIL if name in clauses), default=hi)
    parts = [head, items_sql, source(end_of_items, body_end)]
    if grouped:
        if group is not None:
            parts.append(source(group.keyword, group.hi) + "".join(f", {text}" for text in finer))
        elif finer:
            parts.append("GROUP BY " + ", ".join(finer))
        parts.append(f"LIMIT {MAX_ROWS}")  # every group: the session's sql_select_limit caps the merged ones
    else:
        if order_by is not None:
            parts.append(source(order_by.keyword, order_by.hi))
        if limit_clause is not None and max(offset, limit or 0) > MAX_ROWS:  # each shard refuses it as one server
            parts.append(source(limit_clause.keyword, limit_clause.hi))
        else:
            parts.append(f"LIMIT {MAX_ROWS if limit is None else min(offset + limit, MAX_ROWS)}")
    locking = min((clauses[name].keyword for name in ("FOR", "LOCK") if name in clauses), default=-1)
    if locking >= 0:
        parts.append(source(locking, hi))
    return Gather(
        " ".join(part for part in parts if part),
        hidden,
        grouped,
        distinct,
        tuple(_fix(key, hidden) for key in keys),
        tuple(
            Aggregate(
                a.function,
                _fix(a.column, hidden),
                None if a.sum is None else _index(a.sum, hidden),
                None if a.count is None else _index(a.count, hidden),
                a.digits,
                tuple(_fix(column, hidden) for column in a.distinct),
                None if a.concat is None else _fix_concat(a.concat, hidden),
            )
            for a in aggregates
        ),
        tuple(Order(_fix(o.column, hidden), o.descending) for o in order),
        _fix_condition(having, hidden) if having is not None else None,
        offset,
        limit,
        shadowed,
        group is None and bool(finer),
    )


#: The clauses after the FROM ... WHERE body that the shard statement rebuilds.
_TAIL = ("GROUP", "HAVING", "WINDOW", "ORDER", "LIMIT", "FOR", "LOCK")


@dataclass(frozen=True)
class _Clause:
    """A top-level clause of a SELECT: its keyword's index, where its content begins and ends."""

    keyword: int
    lo: int
    hi: int


def _clauses(tokens: Tokens, lo: int, hi: int) -> dict[str, _Clause]:
    """The SELECT's top-level clauses by keyword (GROUP and ORDER with their BY), each the first of its name."""
    starts: list[tuple[str, int, int]] = []
    for i in top_level(tokens, lo + 1, hi):
        word = tokens.word(i)
        if word not in _CLAUSES or any(name == word for name, _, _ in starts):
            continue
        if word in ("GROUP", "ORDER"):
            if tokens.word(i + 1) == "BY":
                starts.append((word, i, i + 2))
        else:
            starts.append((word, i, i if word in ("FOR", "LOCK") else i + 1))
    return {
        name: _Clause(keyword, content, next((k for _, k, _ in starts if k > keyword), hi))
        for name, keyword, content in starts
    }


def _limit(tokens: Tokens, lo: int, hi: int) -> tuple[int, int]:
    """``LIMIT n``, ``LIMIT o, n`` or ``LIMIT n OFFSET o`` with literal numbers: (offset, count)."""
    numbers = [
        int(tokens.texts[i]) for i in range(lo, hi) if tokens.kinds[i] is _T.NUMBER and tokens.texts[i].isdigit()
    ]
    shape = ["n" if tokens.kinds[i] is _T.NUMBER else tokens.text(i).upper() for i in range(lo, hi)]
    if shape.count("n") == len(numbers):
        if shape == ["n"]:
            return 0, numbers[0]
        if shape == ["n", ",", "n"]:
            return numbers[0], numbers[1]
        if shape == ["n", "OFFSET", "n"]:
            return numbers[1], numbers[0]
    raise Refused("this LIMIT over several shards (only LIMIT n, LIMIT o, n and LIMIT n OFFSET o with numbers)")


def _item(tokens: Tokens, lo: int, hi: int) -> _Item:
    """A select-list item: its expression, alias and kind."""
    if hi - lo == 1 and tokens.texts[lo] == "*":
        return _Item(lo, hi, "", True, "", (lo, lo))
    if hi - lo >= 3 and tokens.texts[hi - 1] == "*" and tokens.texts[hi - 2] == ".":
        return _Item(lo, hi, "", True, "", (lo, lo))
    alias = ""
    end = hi
    if hi - lo >= 2 and tokens.kinds[hi - 1] in (_T.WORD, _T.QUOTED_IDENT, _T.STRING):
        if tokens.word(hi - 2) == "AS":
            alias, end = _name_text(tokens, hi - 1), hi - 2
        elif _may_alias(tokens, hi - 1):
            alias, end = _name_text(tokens, hi - 1), hi - 1
    aggregate = ""
    argument = (lo, lo)
    word = tokens.word(lo)
    if word in AGGREGATES and tokens.text(lo + 1) == "(" and closing(tokens, lo + 1, end) == end - 1:
        aggregate = word
        argument = (lo + 2, end - 1)
        if tokens.word(lo + 2) == "DISTINCT":
            argument = (lo + 3, end - 1)
            if word == "COUNT":
                aggregate = COUNT_DISTINCT
            elif word not in ("MIN", "MAX"):
                raise Refused(f"{word}(DISTINCT ...) over several shards")
        if tokens.word(lo + 2) == "ALL":
            argument = (lo + 3, end - 1)
    return _Item(lo, end, alias, False, aggregate, argument)


#: Words that end an expression and so cannot be an alias after it.
_NOT_ALIASES = frozenset(
    {"NULL", "TRUE", "FALSE", "END", "ASC", "DESC", "UNKNOWN", "DAY", "HOUR", "MINUTE", "SECOND", "MONTH", "YEAR",
     "WEEK", "QUARTER", "MICROSECOND", "BINARY", "UNSIGNED", "SIGNED", "CHAR", "DATE", "DATETIME", "TIME", "DECIMAL",
     "INTEGER", "INT"}
)  # fmt: skip


#: Words that join or end an expression: the word after one is not an alias.
_OPERATOR_WORDS = frozenset(
    {"DIV", "MOD", "AND", "OR", "XOR", "NOT", "LIKE", "IS", "IN", "BETWEEN", "REGEXP", "RLIKE", "SOUNDS", "BINARY",
     "INTERVAL", "ESCAPE", "CASE", "WHEN", "THEN", "ELSE", "DISTINCT", "COLLATE", "SELECT", "ALL", "NEW"}
)  # fmt: skip


def _may_alias(tokens: Tokens, i: int) -> bool:
    """Whether the name at ``i`` (the last token of an item) is an alias: it follows the end of an expression (a
    name, a number, a string or a closing parenthesis), not an operator."""
    if tokens.word(i) in _NOT_ALIASES:
        return False
    before = i - 1
    if tokens.word(before) in _OPERATOR_WORDS:
        return False
    return tokens.kinds[before] in (_T.WORD, _T.QUOTED_IDENT, _T.NUMBER, _T.STRING) or tokens.texts[before] == ")"


def _name_text(tokens: Tokens, i: int) -> str:
    """The name at ``i`` as compared with aliases: unquoted, lowercase."""
    return unquote(tokens.texts[i]).lower()


def _calls(tokens: Tokens, lo: int, hi: int, names: frozenset[str]) -> list[int]:
    """The indexes of calls of ``names`` (a name followed by ``(``) in ``[lo, hi)``, outside subqueries (theirs are
    computed whole on each shard)."""
    found = []
    i = lo
    while i < hi:
        if tokens.texts[i] == "(" and tokens.word(i + 1) in ("SELECT", "WITH"):
            end = closing(tokens, i, hi)
            i = end + 1 if end > 0 else hi
            continue
        if tokens.word(i) in names and tokens.text(i + 1) == "(":
            found.append(i)
        i += 1
    return found


def _refuse_nested(tokens: Tokens, item: _Item) -> None:
    """Refuse an item that holds an aggregate the merge cannot combine, or an expression over aggregates."""
    unmergeable = _calls(tokens, item.lo, item.hi, _UNMERGEABLE)
    if unmergeable:
        raise Refused(f"{tokens.word(unmergeable[0])} over several shards")
    calls = _calls(tokens, item.lo, item.hi, AGGREGATES)
    inner = _calls(tokens, *item.argument, AGGREGATES) if item.aggregate else []
    if inner or (calls and not item.aggregate):
        raise Refused(f"an expression over aggregates ({tokens.source(item.lo, item.hi)}) over several shards")


def _normal(text: str) -> str:
    """An expression's text for comparing two spellings of it: case and spaces ignored."""
    return "".join(text.split()).lower()


def _resolve(tokens: Tokens, lo: int, hi: int, items: list[_Item]) -> str:
    """The expression a GROUP BY or ORDER BY item names: a select item by position or name (``_named``), else its
    own text."""
    if hi - lo == 1 and tokens.kinds[lo] is _T.NUMBER and tokens.texts[lo].isdigit():
        position = int(tokens.texts[lo])
        if not 1 <= position <= len(items) or any(item.star for item in items[:position]):
            raise Refused(f"ORDER BY or GROUP BY position {position} over several shards")
        item = items[position - 1]
        return tokens.source(item.lo, item.hi)
    if hi - lo == 1 and tokens.kinds[lo] in (_T.WORD, _T.QUOTED_IDENT):
        named = _named(tokens, items, _name_text(tokens, lo))
        if named is not None:
            return tokens.source(items[named].lo, items[named].hi)
    return tokens.source(lo, hi)


def _named(tokens: Tokens, items: list[_Item], name: str) -> int | None:
    """The position of the select item an unqualified ``name`` stands for, as MariaDB looks it up in the select
    list: the first item that is not a plain column and has that alias, else the first plain column so named (by
    its alias, or its own name without one); None if none."""
    found = None
    for position, item in enumerate(items):
        column = _column_name(tokens, item.lo, item.hi)
        if not column and item.alias == name:
            return position
        if column and (item.alias or column) == name and found is None:
            found = position
    return found


def _column_name(tokens: Tokens, lo: int, hi: int) -> str:
    """The column's name (lowercase) when ``[lo, hi)`` is a plain column, maybe qualified (``t.a``), else ''."""
    names = range(lo, hi, 2)
    if (hi - lo) % 2 == 0 or any(tokens.kinds[i] not in (_T.WORD, _T.QUOTED_IDENT) for i in names):
        return ""
    if any(tokens.texts[i] != "." for i in range(lo + 1, hi, 2)):
        return ""
    return _name_text(tokens, hi - 1)


def _group_key(tokens: Tokens, lo: int, hi: int, items: list[_Item]) -> tuple[str, bool]:
    """The expression a GROUP BY item groups by, and whether a column of the table would stand for it instead.

    MariaDB takes a GROUP BY name for a column of the FROM tables before a select alias of something else (with
    warning 1052): an aggregate's alias is never grouped by, so the name is the column; another expression's alias
    is, unless the table has such a column, which only the shards can tell (``Gather.shadowed``)."""
    if hi - lo == 1 and tokens.kinds[lo] in (_T.WORD, _T.QUOTED_IDENT):
        name = _name_text(tokens, lo)
        named = _named(tokens, items, name)
        if named is not None and _column_name(tokens, items[named].lo, items[named].hi) != name:
            item = items[named]
            if item.aggregate:
                return tokens.source(lo, hi), False
            return tokens.source(item.lo, item.hi), True
    return _resolve(tokens, lo, hi, items), False


def _visible(tokens: Tokens, items: list[_Item], expression: str) -> int | None:
    """The position of the select item computing ``expression`` (not an aggregate; no ``*`` before it: its place in
    the row is known), or None."""
    wanted = _normal(expression)
    for position, item in enumerate(items):
        if item.star:
            return None
        if not item.aggregate and _normal(tokens.source(item.lo, item.hi)) == wanted:
            return position
    return None


def _aggregate(builder: _Builder, function: str, argument: str, position: int | None) -> Aggregate:
    """An aggregate of ``argument``, visible at ``position`` or hidden (None), with what its merge needs."""
    if function == COUNT_DISTINCT:
        sub = tokenize(argument)
        arguments = [sub.source(a, b) for a, b in split_top(sub, 0, len(sub))]
        builder.finer.extend(arguments)
        at = Column(position if position is not None else builder.add(f"COUNT(DISTINCT {argument})"))
        return Aggregate(function, at, distinct=tuple(builder.compared(text, None, True) for text in arguments))
    call = f"{function}({argument})"
    if function in ("MIN", "MAX"):
        return Aggregate(function, builder.compared(call, position))
    at = Column(position if position is not None else builder.add(call))
    if function in ("SUM", "AVG") and "/" in tokenize(argument).texts:
        total = builder.add(f"SUM({argument}) + {DIGITS}")
        return Aggregate(function, at, total, builder.add(f"COUNT({argument})") if function == "AVG" else None, True)
    if function == "AVG":
        return Aggregate(function, at, builder.add(f"SUM({argument})"), builder.add(f"COUNT({argument})"))
    return Aggregate(function, at)


def _group_concat(builder: _Builder, tokens: Tokens, lo: int, hi: int, position: int) -> Aggregate:
    """The GROUP_CONCAT at ``position`` whose arguments are ``[lo, hi)``: each shard groups its rows finer, by the
    element's exact bytes (``HEX``) and the ORDER BY keys, and sends each element (``MIN`` of one value) with its
    count of rows and its keys' values and weights."""
    if tokens.word(lo) in ("DISTINCT", "DISTINCTROW"):
        raise Refused("GROUP_CONCAT(DISTINCT ...) over several shards")
    order_at = next((i for i in top_level(tokens, lo, hi) if tokens.word(i) == "ORDER" and tokens.word(i + 1) == "BY"),
                    -1)  # fmt: skip
    if order_at < 0:
        raise Refused("GROUP_CONCAT without ORDER BY over several shards (its order would be each server's own)")
    tail = find_top(tokens, order_at, hi, frozenset({"SEPARATOR", "LIMIT"}))
    order_end = tail if tail >= 0 else hi
    separator = ","
    offset, limit = 0, None
    for i in top_level(tokens, order_at, hi):
        word = tokens.word(i)
        if word == "SEPARATOR":
            if tokens.kinds[i + 1] is not _T.STRING or tokens.texts[i + 1][:1] not in ("'", '"'):
                raise Refused("this GROUP_CONCAT SEPARATOR over several shards")
            separator = unquote(tokens.texts[i + 1], tokens.backslash_escapes)
        elif word == "LIMIT":
            end = find_top(tokens, i, hi, frozenset({"SEPARATOR"}))
            offset, limit = _limit(tokens, i + 1, end if end >= 0 else hi)
    if not separator.isascii():
        raise Refused("a GROUP_CONCAT SEPARATOR beyond ASCII over several shards")
    elements = tokens.source(lo, order_at)
    order: list[Order] = []
    for a, b in split_top(tokens, order_at + 2, order_end):
        descending = tokens.word(b - 1) == "DESC"
        if tokens.word(b - 1) in ("ASC", "DESC"):
            b -= 1
        if b - a == 1 and tokens.kinds[a] is _T.NUMBER:
            raise Refused("GROUP_CONCAT ... ORDER BY a position over several shards")
        expression = tokens.source(a, b)
        builder.finer.append(expression)
        order.append(Order(builder.compared(expression), descending))
    builder.finer.append(f"HEX(CONCAT({elements}))")
    element = builder.add(f"MIN(CONCAT({elements}))")
    rows = builder.add("COUNT(*)")
    return Aggregate(
        "GROUP_CONCAT", Column(position), concat=Concat(element, rows, tuple(order), separator.encode(), offset, limit)
    )


def _order_column(
    tokens: Tokens,
    lo: int,
    hi: int,
    items: list[_Item],
    builder: _Builder,
    grouped: bool,
    distinct: bool,
    keys: list[Column],
    group_texts: list[str],
    aggregates: list[Aggregate],
) -> Column:
    """The column an ORDER BY item sorts on, hidden columns added as needed."""
    expression = _resolve(tokens, lo, hi, items)
    wanted = _normal(expression)
    visible = [i for i, item in enumerate(items) if _normal(tokens.source(item.lo, item.hi)) == wanted]
    if distinct:
        if not visible:
            raise Refused(f"SELECT DISTINCT ordered by {expression}, which it does not select, over several shards")
        return keys[visible[0]]
    if not grouped:
        return builder.compared(expression, _visible(tokens, items, expression))
    if wanted in group_texts:
        return keys[group_texts.index(wanted)]
    for aggregate in aggregates:
        at = aggregate.column.value
        if at >= 0 and at in visible:
            if aggregate.concat is not None:
                raise Refused(f"ORDER BY a GROUP_CONCAT ({expression}) over several shards")
            return aggregate.column
    sub = tokenize(expression)
    added = _hidden_aggregate(builder, sub, aggregates, "ORDER BY")
    if added is not None:
        return added
    if _calls(sub, 0, len(sub), AGGREGATES | _UNMERGEABLE):
        raise Refused(f"ORDER BY an expression over aggregates ({expression}) over several shards")
    return builder.compared(expression)


def _hidden_aggregate(builder: _Builder, sub: Tokens, aggregates: list[Aggregate], clause: str) -> Column | None:
    """The column of the aggregate call ``sub`` (an ORDER BY or HAVING operand the select list does not show),
    added hidden; None when ``sub`` is not one aggregate call; ``Refused`` for one the merge cannot combine."""
    head = sub.word(0)
    if head not in AGGREGATES or sub.text(1) != "(" or closing(sub, 1, len(sub)) != len(sub) - 1:
        return None
    distinct = sub.word(2) == "DISTINCT"
    unmerged = _calls(sub, 2, len(sub) - 1, AGGREGATES | _UNMERGEABLE) or (distinct and head != "COUNT")
    if unmerged or head == "GROUP_CONCAT":
        raise Refused(f"{clause} {sub.sql} over several shards")
    if distinct:
        added = _aggregate(builder, COUNT_DISTINCT, sub.source(3, len(sub) - 1), None)
    else:
        added = _aggregate(builder, head, sub.source(2, len(sub) - 1), None)
    aggregates.append(added)
    return added.column


class _Having:
    """The HAVING condition as the merge evaluates it: comparisons of aggregates, group keys and select aliases
    with numbers or each other, IS [NOT] NULL, AND, OR, NOT and parentheses. A name is a GROUP BY column's before
    a select item's, as MariaDB reads it."""

    def __init__(
        self,
        tokens: Tokens,
        items: list[_Item],
        builder: _Builder,
        keys: list[Column],
        group_texts: list[str],
        group_names: list[str],
        aggregates: list[Aggregate],
    ) -> None:
        self.tokens = tokens
        self.items = items
        self.builder = builder
        self.keys = keys
        self.group_texts = group_texts
        self.group_names = group_names
        self.aggregates = aggregates
        self.i = 0
        self.hi = 0

    def parse(self, lo: int, hi: int) -> Condition:
        self.i, self.hi = lo, hi
        condition = self._or()
        if self.i != hi:
            self._refuse()
        return condition

    def _refuse(self) -> NoReturn:
        raise Refused(f"HAVING {self.tokens.source(self.i, self.hi)} over several shards (only comparisons of "
                      "aggregates and group keys with numbers)")  # fmt: skip

    def _or(self) -> Condition:
        parts = [self._and()]
        while self.tokens.word(self.i) == "OR" or self.tokens.text(self.i) == "||":
            self.i += 1
            parts.append(self._and())
        return parts[0] if len(parts) == 1 else Logic("OR", tuple(parts))

    def _and(self) -> Condition:
        parts = [self._not()]
        while self.tokens.word(self.i) == "AND" or self.tokens.text(self.i) == "&&":
            self.i += 1
            parts.append(self._not())
        return parts[0] if len(parts) == 1 else Logic("AND", tuple(parts))

    def _not(self) -> Condition:
        if self.tokens.word(self.i) == "NOT" or self.tokens.text(self.i) == "!":
            self.i += 1
            return Logic("NOT", (self._not(),))
        if self.tokens.text(self.i) == "(":
            end = closing(self.tokens, self.i, self.hi)
            inner = self.tokens.word(self.i + 1)
            if end > 0 and inner not in AGGREGATES:  # a parenthesized condition, not an operand
                self.i += 1
                condition = self._or()
                if self.i != end:
                    self._refuse()
                self.i = end + 1
                return condition
        left = self._operand()
        tokens = self.tokens
        if tokens.word(self.i) == "IS":
            negated = tokens.word(self.i + 1) == "NOT"
            self.i += 2 if negated else 1
            if tokens.word(self.i) != "NULL" or not isinstance(left, Column):
                self._refuse()
            self.i += 1
            return IsNull(left, negated)
        op = tokens.text(self.i)
        if op not in _COMPARISONS:
            self._refuse()
        self.i += 1
        return Compare(op, left, self._operand())

    def _operand(self) -> Column | Decimal:
        tokens = self.tokens
        i = self.i
        negative = tokens.text(i) == "-"
        j = i + 1 if negative else i
        if j < self.hi and tokens.kinds[j] is _T.NUMBER and not tokens.texts[j].lower().startswith(("0x", "0b")):
            self.i = j + 1
            number = Decimal(tokens.texts[j])
            return -number if negative else number
        end = self._operand_end(i)
        if end == i:
            self._refuse()
        self.i = end
        return self._column(tokens.source(i, end))

    def _operand_end(self, i: int) -> int:
        """The end of an operand starting at ``i``: a name (maybe qualified) or a call."""
        tokens = self.tokens
        if tokens.kinds[i] not in (_T.WORD, _T.QUOTED_IDENT) if i < self.hi else True:
            return i
        j = i + 1
        while tokens.text(j) == "." and j + 1 < self.hi:
            j += 2
        if tokens.text(j) == "(":
            end = closing(tokens, j, self.hi)
            return end + 1 if end > 0 else i
        return j

    def _column(self, expression: str) -> Column:
        """The column a HAVING operand reads: an alias, a group key, a selected or hidden aggregate."""
        sub = tokenize(expression)
        wanted = _normal(expression)
        if len(sub) == 1:
            name = _name_text(sub, 0)
            for key, group_name in zip(self.keys, self.group_names, strict=True):
                if group_name == name:
                    return key
            named = _named(self.tokens, self.items, name)
            if named is not None:
                return self._item_column(named)
        for key, text in zip(self.keys, self.group_texts, strict=True):
            if text == wanted:
                return key
        for position, item in enumerate(self.items):
            if _normal(self.tokens.source(item.lo, item.hi)) == wanted:
                return self._item_column(position)
        try:
            added = _hidden_aggregate(self.builder, sub, self.aggregates, "HAVING")
        except Refused:
            added = None
        if added is None:
            self._refuse()
        return added

    def _item_column(self, position: int) -> Column:
        """The select item at ``position`` as the merge reads it: an aggregate or a group key."""
        for aggregate in self.aggregates:
            if aggregate.column.value == position and aggregate.concat is None:
                return aggregate.column
        for key in self.keys:
            if key.value == position:
                return key
        self._refuse()


def _index(at: int, hidden: int) -> int:
    """A column's index in a shard's row: a visible one as it is, the k-th hidden one (``-k``) from the row's end."""
    return at if at >= 0 else -(hidden + at + 1)


def _fix(column: Column, hidden: int) -> Column:
    """``column`` with its hidden indexes counted from the row's end."""
    return Column(
        _index(column.value, hidden),
        None if column.weight is None else _index(column.weight, hidden),
        None if column.pad is None else _index(column.pad, hidden),
    )


def _fix_concat(concat: Concat, hidden: int) -> Concat:
    """``concat`` with its hidden indexes counted from the row's end."""
    return Concat(
        _index(concat.element, hidden),
        _index(concat.rows, hidden),
        tuple(Order(_fix(o.column, hidden), o.descending) for o in concat.order),
        concat.separator,
        concat.offset,
        concat.limit,
    )


def _fix_condition(condition: Condition, hidden: int) -> Condition:
    if isinstance(condition, Compare):
        left = _fix(condition.left, hidden) if isinstance(condition.left, Column) else condition.left
        right = _fix(condition.right, hidden) if isinstance(condition.right, Column) else condition.right
        return Compare(condition.op, left, right)
    if isinstance(condition, IsNull):
        return IsNull(_fix(condition.operand, hidden), condition.negated)
    return Logic(condition.op, tuple(_fix_condition(part, hidden) for part in condition.parts))
