"""How a SELECT over several shards is gathered (proxyapp.sharding.gather): the statement each shard runs, and what
the merge is told; and what is refused because it cannot be merged exactly. The merge itself meets real servers in
tests/live/proxyapp/sharding/test_scatter.py; its comparisons are checked here (proxyapp.sharding.merge)."""

from __future__ import annotations

from decimal import Decimal

import pytest

from proxyapp.mysql.constants import FieldType
from proxyapp.mysql.resultset import ColumnInfo, TextResult
from proxyapp.sharding.gather import Column, Compare, Gather, Refused, gather
from proxyapp.sharding.merge import Weight, merge
from proxyapp.sql.lex import tokenize


def of(sql: str) -> Gather:
    tokens = tokenize(sql)
    return gather(tokens, 0, len(tokens))


def test_plain_rows_keep_order_by_and_ask_offset_plus_limit() -> None:
    found = of("SELECT id, name FROM t WHERE a = 1 ORDER BY name DESC LIMIT 5, 10")
    assert found.sql.startswith("SELECT id, name, WEIGHT_STRING(name), IF(CONCAT(LEFT(name, 0), 'a') = ")
    assert found.sql.endswith(" FROM t WHERE a = 1 ORDER BY name DESC LIMIT 15")
    assert (found.offset, found.limit, found.hidden, found.grouped) == (5, 10, 2, False)
    assert found.order[0].descending and found.order[0].column == Column(1, -2, -1)  # the visible name, its weights


def test_aggregates_keep_group_by_and_leave_having_order_and_limit_to_the_merge() -> None:
    found = of("SELECT k, COUNT(*) c, AVG(x) FROM t GROUP BY k HAVING c > 2 ORDER BY c DESC LIMIT 3")
    assert found.sql.split(" FROM ")[1] == "t GROUP BY k"
    assert found.sql.startswith("SELECT k, COUNT(*) c, AVG(x), SUM(x), COUNT(x), WEIGHT_STRING(k), ")
    assert [a.function for a in found.aggregates] == ["COUNT", "AVG"]
    assert found.keys == (Column(0, -2, -1),)
    assert found.having == Compare(">", Column(1), Decimal(2))
    assert (found.limit, found.order[0].column, found.order[0].descending) == (3, Column(1), True)


def test_having_may_name_a_group_key_by_its_alias() -> None:
    found = of("SELECT k AS x, COUNT(*) AS n FROM t GROUP BY x HAVING x > 2")
    assert found.having == Compare(">", found.keys[0], Decimal(2))


def test_groups_come_in_group_by_order_without_order_by() -> None:
    found = of("SELECT made, COUNT(*) FROM t GROUP BY made")
    assert [o.column for o in found.order] == list(found.keys) and not found.order[0].descending
    assert of("SELECT made, COUNT(*) FROM t GROUP BY made ORDER BY NULL").order == ()


@pytest.mark.parametrize(
    ("sql", "construct"),
    [
        ("SELECT GROUP_CONCAT(name) FROM t", "GROUP_CONCAT"),
        ("SELECT MAX(a) + 1 FROM t", "an expression over aggregates"),
        ("SELECT SUM(a) / COUNT(*) FROM t", "an expression over aggregates"),
        ("SELECT MAX(MIN(a)) FROM t", "an expression over aggregates"),
        ("SELECT COUNT(DISTINCT a) FROM t", "COUNT(DISTINCT ...)"),
        ("SELECT a, RANK() OVER (ORDER BY a) FROM t", "window functions"),
        ("SELECT a FROM t GROUP BY a WITH ROLLUP", "WITH ROLLUP"),
        ("SELECT SQL_CALC_FOUND_ROWS a FROM t", "SQL_CALC_FOUND_ROWS"),
        ("SELECT a INTO @x FROM t", "SELECT ... INTO"),
        ("SELECT DISTINCT * FROM t", "name the columns"),
        ("SELECT DISTINCT a FROM t ORDER BY b", "which it does not select"),
        ("SELECT a, COUNT(*) FROM t GROUP BY a HAVING a LIKE 'x%'", "HAVING"),
        ("SELECT a FROM t LIMIT ?", "this LIMIT"),
        ("SELECT a FROM t ORDER BY 3", "position 3"),
    ],
)
def test_what_cannot_be_merged_exactly_is_refused(sql: str, construct: str) -> None:
    with pytest.raises(Refused) as refused:
        of(sql)
    assert construct in str(refused.value)


def test_weights_compare_as_a_pad_space_collation() -> None:
    space = b"\x00\x20"
    a, a_space, a_tab = Weight(b"\x00A", space), Weight(b"\x00A\x00\x20", space), Weight(b"\x00A\x00\x09", space)
    assert a == a_space and hash(a) == hash(a_space)  # 'a' = 'a '
    assert a_tab < a and not a < a_tab  # 'a\t' < 'a': the shorter one goes on with spaces
    assert Weight(b"\x00A", None) < Weight(b"\x00A\x00\x09", None)  # NO PAD: a prefix is smaller


def column(name: str, kind: int, charset: int = 45, decimals: int = 0) -> ColumnInfo:
    return ColumnInfo(b"", name, kind, charset, 0, decimals)


def test_sums_and_averages_are_exact_decimals_at_the_columns_scale() -> None:
    found = of("SELECT SUM(p), AVG(p) FROM t")
    columns = [
        column("SUM(p)", FieldType.NEWDECIMAL, 63, 2),
        column("AVG(p)", FieldType.NEWDECIMAL, 63, 6),
        column("SUM(p)", FieldType.NEWDECIMAL, 63, 2),
        column("COUNT(p)", FieldType.LONGLONG, 63),
    ]
    shards = [
        TextResult(columns, [[b"1.10", b"0.550000", b"1.10", b"2"]]),
        TextResult(columns, [[b"0.01", b"0.010000", b"0.01", b"1"]]),
        TextResult(columns, [[None, None, None, b"0"]]),
    ]
    assert merge(found, shards).rows == [[b"1.11", b"0.370000"]]


def test_min_and_max_of_an_enum_are_refused() -> None:
    found = of("SELECT MIN(e) FROM t")
    enum = ColumnInfo(b"", "MIN(e)", FieldType.STRING, 45, 256, 0)
    weights = [column("w", FieldType.VAR_STRING, 63), column("p", FieldType.VAR_STRING, 63)]
    with pytest.raises(Refused, match="ENUM or SET"):
        merge(found, [TextResult([enum, *weights], [[b"x", b"x", None]])] * 2)
