"""The merge of a scatter's results into the one result an unsharded server would return (``gather.Gather`` says
how). A pure function of the shards' text results.

Values compare as the server compares them: numbers as numbers (decimals exactly), dates and times as times,
strings by their collation weights (``WEIGHT_STRING``) padded with the weight of a space where the collation pads
(so 'a' = 'A ' under a case-insensitive PAD SPACE collation, and 'a\\t' sorts before 'a'), binary strings by
their bytes; NULL first in ascending order and last in descending order. ENUM and SET columns sort by their
definition order, which a result does not tell: ordering by one, or taking its MIN or MAX, is refused.

Results are merged in memory: each shard's rows are already sorted, and the sort that merges them finds those runs
(a k-way merge in effect).
"""

from __future__ import annotations

import decimal
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from functools import total_ordering

from proxyapp.mysql.constants import FieldType
from proxyapp.mysql.resultset import ColumnInfo, TextResult
from proxyapp.sharding.gather import (
    COUNT_DISTINCT,
    Aggregate,
    Column,
    Compare,
    Concat,
    Condition,
    Gather,
    IsNull,
    Logic,
    Order,
    Refused,
)

Row = list[bytes | None]
_INTEGERS = frozenset({FieldType.TINY, FieldType.SHORT, FieldType.LONG, FieldType.LONGLONG, FieldType.INT24,
                       FieldType.YEAR})  # fmt: skip
_DECIMALS = frozenset({FieldType.DECIMAL, FieldType.NEWDECIMAL})
_FLOATS = frozenset({FieldType.FLOAT, FieldType.DOUBLE})
_BINARY_CHARSET = 63
_ENUM_FLAG = 256
_SET_FLAG = 2048
#: Enough digits for any sum of DECIMAL(65, 30) values.
_EXACT = decimal.Context(prec=200, rounding=decimal.ROUND_HALF_UP)


@dataclass(frozen=True)
class Merged:
    """The merged result: the visible columns' definitions (the first shard's), the rows, the warnings."""

    columns: list[ColumnInfo]
    rows: list[Row]
    warnings: int


@total_ordering
class Weight:
    """A string's collation weight, compared as the collation compares: padded with a space's weight where it pads."""

    __slots__ = ("pad", "stripped", "weight")

    def __init__(self, weight: bytes, pad: bytes | None) -> None:
        self.weight = weight
        self.pad = pad
        stripped = weight
        if pad and len(weight) % len(pad) == 0:
            while stripped.endswith(pad):
                stripped = stripped[: -len(pad)]
        self.stripped = stripped

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Weight) and self.stripped == other.stripped

    def __hash__(self) -> int:
        return hash(self.stripped)

    def __lt__(self, other: Weight) -> bool:
        a, b = self.stripped, other.stripped
        pad = self.pad or other.pad
        if pad:  # the shorter one continues with spaces
            if len(a) < len(b):
                a += pad * -(-(len(b) - len(a)) // len(pad))
            else:
                b += pad * -(-(len(a) - len(b)) // len(pad))
        return a < b


@total_ordering
class _Descending:
    """A sort key in reverse order."""

    __slots__ = ("key",)

    def __init__(self, key: tuple[object, ...]) -> None:
        self.key = key

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Descending) and self.key == other.key

    def __hash__(self) -> int:
        return hash(self.key)

    def __lt__(self, other: _Descending) -> bool:
        return other.key < self.key  # type: ignore[operator]  # tuples of comparable values


def merge(plan: Gather, results: Sequence[TextResult], select_limit: int | None = None) -> Merged:
    """Merge the shards' results (each a result set, in shard order) as ``plan`` says, at most ``select_limit`` rows
    (the session's sql_select_limit; None: no cap) when the SELECT has no LIMIT of its own; raises ``Refused`` for
    a comparison the merge cannot make exactly."""
    if plan.shadowed and any(result.warnings for result in results):  # maybe 1052: a column shadows the alias
        raise Refused(f"GROUP BY {plan.shadowed}, a select alias that may also be a column's name (warnings were "
                      "raised), over several shards")  # fmt: skip
    columns = results[0].columns
    rows = [row for result in results for row in result.rows]
    warnings = sum(result.warnings for result in results)
    value_of = _Values(columns)
    if plan.grouped:
        rows = _groups(plan, rows, value_of)
    elif plan.distinct:
        seen: set[tuple[object, ...]] = set()
        unique = []
        for row in rows:
            key = tuple(value_of(row, column) for column in plan.keys)
            if key not in seen:
                seen.add(key)
                unique.append(row)
        rows = unique
    if plan.order:
        for order in plan.order:
            value_of.check_orderable(order.column)
        rows.sort(key=_sort_key(plan.order, value_of))
    end = select_limit if plan.limit is None else plan.offset + plan.limit
    rows = rows[plan.offset : end]
    visible = len(columns) - plan.hidden
    if plan.hidden:
        rows = [row[:visible] for row in rows]
    return Merged(columns[:visible], rows, warnings)


class _Values:
    """Reads a row's values as the server compares them, by the columns' types."""

    def __init__(self, columns: list[ColumnInfo]) -> None:
        self.columns = columns

    def info(self, index: int) -> ColumnInfo:
        return self.columns[index]

    def check_orderable(self, column: Column) -> None:
        info = self.columns[column.value]
        if info.flags & (_ENUM_FLAG | _SET_FLAG):
            raise Refused(f"ordering or MIN/MAX over several shards by the ENUM or SET column {info.name}")

    def zero(self, column: Column) -> object:
        """The zero value of ``column``'s type, as compared: 0, the empty string, the zero date or time."""
        info = self.columns[column.value]
        kind = info.type
        if kind in _INTEGERS or kind == FieldType.TIME:
            return 0
        if kind in _DECIMALS:
            return Decimal(0)
        if kind in _FLOATS:
            return 0.0
        if kind == FieldType.DATE:
            return b"0000-00-00"
        if kind in _TEMPORAL:
            return b"0000-00-00 00:00:00" + (b"." + b"0" * info.decimals if 0 < info.decimals <= 6 else b"")
        if column.weight is not None and info.charset != _BINARY_CHARSET:
            return Weight(b"", None)
        return b""

    def __call__(self, row: Row, column: Column) -> object:
        """The comparable value of ``column`` in ``row`` (None for NULL)."""
        raw = row[column.value]
        if raw is None:
            return None
        info = self.columns[column.value]
        kind = info.type
        if kind in _INTEGERS:
            return int(raw)
        if kind in _DECIMALS:
            return Decimal(raw.decode())
        if kind in _FLOATS:
            return float(raw)
        if kind == FieldType.TIME:
            return _time_us(raw)
        if column.weight is not None and info.charset != _BINARY_CHARSET and kind not in _TEMPORAL:
            weight = row[column.weight]
            if weight is not None:
                pad = row[column.pad] if column.pad is not None else None
                return Weight(weight, pad)
        return raw


_TEMPORAL = frozenset({FieldType.DATE, FieldType.DATETIME, FieldType.TIMESTAMP, 0x0E})


def _time_us(raw: bytes) -> int:
    """A TIME value ('-838:59:59.000000') in microseconds."""
    text = raw.decode()
    negative = text.startswith("-")
    clock, _, fraction = text.lstrip("-").partition(".")
    hours, minutes, seconds = (int(part) for part in clock.split(":"))
    micros = ((hours * 60 + minutes) * 60 + seconds) * 1_000_000 + int((fraction + "000000")[:6])
    return -micros if negative else micros


def _sort_key(
    orders: tuple[Order, ...], value_of: _Values, null_is_zero: bool = False
) -> Callable[[Row], tuple[object, ...]]:
    """The sort key of a row for the ORDER BY ``orders``: NULL first ascending, last descending; or, in a
    GROUP_CONCAT's ORDER BY (``null_is_zero``), NULL as its type's zero value (0, '', the zero date), as MariaDB
    sorts it there."""

    def key(row: Row) -> tuple[object, ...]:
        parts: list[object] = []
        for order in orders:
            value = value_of(row, order.column)
            if value is None and null_is_zero:
                value = value_of.zero(order.column)
            part = (0,) if value is None else (1, value)
            parts.append(_Descending(part) if order.descending else part)
        return tuple(parts)

    return key


# --- groups ----------------------------------------------------------------------------------------------------


class _Group:
    """One group being merged: its first row (carrying the group keys and the other values) and the aggregates'
    running values, with how far a sum of a division's partial sums may be from the exact one (each partial is
    off by less than one unit of its last digit shown), the distinct arguments a COUNT(DISTINCT) has seen, and a
    GROUP_CONCAT's elements (each with its shard row, for its sort key, and its count of rows)."""

    __slots__ = ("counts", "errors", "parts", "row", "seen", "sums")

    def __init__(self, row: Row, size: int) -> None:
        self.row = list(row)
        self.sums: list[Decimal | float | None] = [None] * size
        self.counts = [0] * size
        self.errors = [Decimal(0)] * size
        self.seen: list[set[tuple[object, ...]]] = [set() for _ in range(size)]
        self.parts: list[list[tuple[Row, bytes, int]]] = [[] for _ in range(size)]


def _groups(plan: Gather, rows: list[Row], value_of: _Values) -> list[Row]:
    """The merged groups, HAVING applied."""
    groups: dict[tuple[object, ...], _Group] = {}
    aggregates = plan.aggregates
    for aggregate in aggregates:
        if aggregate.function in ("MIN", "MAX"):
            value_of.check_orderable(aggregate.column)
        for order in aggregate.concat.order if aggregate.concat is not None else ():
            value_of.check_orderable(order.column)
    for row in rows:
        key = tuple(value_of(row, column) for column in plan.keys)
        group = groups.get(key)
        if group is None:
            group = groups[key] = _Group(row, len(aggregates))
            first = True
        else:
            first = False
        for n, aggregate in enumerate(aggregates):
            _accumulate(group, n, aggregate, row, value_of, first)
    if plan.single and not groups:  # aggregates over no rows at all: one row, as the server answers
        groups[()] = _Group([None] * len(value_of.columns), len(aggregates))
    merged = []
    for group in groups.values():
        for n, aggregate in enumerate(aggregates):
            _finish(group, n, aggregate, value_of)
        if plan.having is None or _holds(plan.having, group.row, value_of) is True:
            merged.append(group.row)
    return merged


def _accumulate(group: _Group, n: int, aggregate: Aggregate, row: Row, value_of: _Values, first: bool) -> None:
    """Add one shard's partial result of aggregate ``n`` to its group."""
    function = aggregate.function
    at = aggregate.column.value
    if function == "COUNT":
        group.counts[n] += int(row[at] or 0)
    elif function == COUNT_DISTINCT:  # one row per distinct argument values: counted when none is NULL
        if int(row[at] or 0):
            group.seen[n].add(tuple(value_of(row, column) for column in aggregate.distinct))
    elif aggregate.concat is not None:  # one row per element and sort key: kept with its count of rows
        concat = aggregate.concat
        element = row[concat.element]
        if element is not None:
            group.parts[n].append((row, element, int(row[concat.rows] or 0)))
    elif function in ("SUM", "AVG"):
        part = at if aggregate.sum is None else aggregate.sum  # an AVG's SUM, or a sum with its hidden digits
        raw = row[part]
        _add(group, n, raw, value_of.info(part).type)
        if aggregate.digits and raw is not None and isinstance(group.sums[n], Decimal):
            group.errors[n] += Decimal(1).scaleb(Decimal(raw.decode()).as_tuple().exponent)  # type: ignore[arg-type]
        if aggregate.count is not None:
            group.counts[n] += int(row[aggregate.count] or 0)
    elif not first:  # MIN, MAX: keep the partial that wins, with its weights
        column = aggregate.column
        mine = value_of(group.row, column)
        theirs = value_of(row, column)
        if theirs is None:
            return
        if mine is None or (theirs < mine if function == "MIN" else mine < theirs):  # type: ignore[operator]
            for index in (column.value, column.weight, column.pad):
                if index is not None:
                    group.row[index] = row[index]


def _add(group: _Group, n: int, raw: bytes | None, kind: int) -> None:
    if raw is None:
        return
    value: Decimal | float = float(raw) if kind in _FLOATS else Decimal(raw.decode())
    total = group.sums[n]
    if total is None:
        group.sums[n] = value
    elif isinstance(total, float) or isinstance(value, float):
        group.sums[n] = float(total) + float(value)
    else:
        group.sums[n] = _EXACT.add(total, value)


def _finish(group: _Group, n: int, aggregate: Aggregate, value_of: _Values) -> None:
    """Write aggregate ``n``'s merged value into its group's row."""
    function = aggregate.function
    at = aggregate.column.value
    info = value_of.info(at)
    if function == "COUNT":
        group.row[at] = str(group.counts[n]).encode()
    elif function == COUNT_DISTINCT:
        group.row[at] = str(len(group.seen[n])).encode()
    elif aggregate.concat is not None:
        group.row[at] = _concatenated(group.parts[n], aggregate.concat, info, value_of)
    elif function == "SUM":
        total = group.sums[n]
        if isinstance(total, Decimal) and aggregate.digits:
            _check_digits(total, group.errors[n], info)
        group.row[at] = None if total is None else _render(total, info)
    elif function == "AVG":
        total, count = group.sums[n], group.counts[n]
        if total is None or count == 0:
            group.row[at] = None
        elif isinstance(total, float) or info.type in _FLOATS:
            group.row[at] = _render(float(total) / count, info)
        else:
            average = _EXACT.divide(total, Decimal(count))
            if aggregate.digits:
                _check_digits(average, group.errors[n] / count, info)
            group.row[at] = _render(average, info)


def _concatenated(
    parts: list[tuple[Row, bytes, int]], concat: Concat, info: ColumnInfo, value_of: _Values
) -> bytes | None:
    """A GROUP_CONCAT's value from its elements (NULL when it has none); ``Refused`` when it would be longer than
    ``group_concat_max_len`` (the server cuts it with a warning the merge cannot place): the column's length is that
    many bytes for a binary string, four times as many in utf8mb4 (taken for any other character set: shorter)."""
    order = _sort_key(concat.order, value_of, null_is_zero=True)
    parts.sort(key=lambda part: order(part[0]))
    elements = [element for _, element, count in parts for _ in range(count)]
    end = None if concat.limit is None else concat.offset + concat.limit
    elements = elements[concat.offset : end]
    if not elements:
        return None
    value = concat.separator.join(elements)
    longest = info.length if info.charset == _BINARY_CHARSET else info.length // 4
    if len(value) > longest:
        raise Refused(f"{info.name} over several shards: longer than group_concat_max_len")
    return value


def _check_digits(value: Decimal, error: Decimal, info: ColumnInfo) -> None:
    """Refuse ``value``, known within ``error``, unless every value that near shows as it does in ``info``."""
    if _render(value - error, info) != _render(value + error, info):
        raise Refused(f"{info.name} over several shards: its partial sums show too few digits to round it exactly")


def _render(value: Decimal | float, info: ColumnInfo) -> bytes:
    """A number as the server writes it in a column like ``info``."""
    if isinstance(value, float) or info.type in _FLOATS:
        number = float(value)
        if number.is_integer() and abs(number) < 1e15:
            return str(int(number)).encode()
        return repr(number).replace("e+", "e").encode()
    if info.type in _INTEGERS or info.decimals == 0:
        return str(value.quantize(Decimal(1), context=_EXACT)).encode()
    quantum = Decimal(1).scaleb(-info.decimals)
    return format(value.quantize(quantum, context=_EXACT), "f").encode()


# --- HAVING ----------------------------------------------------------------------------------------------------


def _holds(condition: Condition, row: Row, value_of: _Values) -> bool | None:
    """The truth of a HAVING condition for a merged group (None: unknown, as SQL's NULL)."""
    if isinstance(condition, Logic):
        values = [_holds(part, row, value_of) for part in condition.parts]
        if condition.op == "NOT":
            return None if values[0] is None else not values[0]
        if condition.op == "AND":
            return False if False in values else None if None in values else True
        return True if True in values else None if None in values else False
    if isinstance(condition, IsNull):
        is_null = row[condition.operand.value] is None
        return not is_null if condition.negated else is_null
    return _compare(condition, row, value_of)


def _compare(condition: Compare, row: Row, value_of: _Values) -> bool | None:
    left = _operand(condition.left, row, value_of)
    right = _operand(condition.right, row, value_of)
    if condition.op == "<=>":
        return left == right
    if left is None or right is None:
        return None
    op = condition.op
    if op == "=":
        return left == right
    if op in ("<>", "!="):
        return left != right
    if op == "<":
        return left < right  # type: ignore[operator]  # numbers or weights of one column
    if op == "<=":
        return left <= right  # type: ignore[operator]
    if op == ">":
        return left > right  # type: ignore[operator]
    return left >= right  # type: ignore[operator]


def _operand(operand: Column | Decimal, row: Row, value_of: _Values) -> object:
    if isinstance(operand, Decimal):
        return operand
    value = value_of(row, operand)
    if isinstance(value, (bytes, Weight)) and value_of.info(operand.value).type not in _TEMPORAL:
        raw = row[operand.value]
        try:
            return Decimal(raw.decode()) if raw is not None else None  # a string compared with a number
        except decimal.InvalidOperation:
            return Decimal(0)
    return value
