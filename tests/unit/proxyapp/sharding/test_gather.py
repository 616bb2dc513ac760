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
    assert found.sql.split(" FROM ")[1] == "t GROUP BY k LIMIT 18446744073709551615"  # every group
    assert found.sql.startswith("SELECT k, COUNT(*) c, AVG(x), SUM(x), COUNT(x), WEIGHT_STRING(k), ")
    assert [a.function for a in found.aggregates] == ["COUNT", "AVG"]
    assert found.keys == (Column(0, -2, -1),)
    assert found.having == Compare(">", Column(1), Decimal(2))
    assert (found.limit, found.order[0].column, found.order[0].descending) == (3, Column(1), True)


def test_having_may_name_a_group_key_by_its_alias() -> None:
    found = of("SELECT k AS x, COUNT(*) AS n FROM t GROUP BY x HAVING x > 2")
    assert found.having == Compare(">", found.keys[0], Decimal(2))


def test_a_shards_limit_stops_at_the_largest_row_count() -> None:
    assert of("SELECT id FROM t ORDER BY id LIMIT 2, 18446744073709551615").sql.endswith(
        " ORDER BY id LIMIT 18446744073709551615"
    )
    assert of("SELECT id FROM t LIMIT 18446744073709551616").sql.endswith(" LIMIT 18446744073709551616")  # an error


def test_each_shard_sends_every_row_and_the_session_limit_caps_the_merged_ones() -> None:
    found = of("SELECT a FROM t FOR UPDATE")
    assert found.sql == "SELECT a FROM t LIMIT 18446744073709551615 FOR UPDATE" and found.limit is None
    columns = [column("a", FieldType.LONG)]
    shards = [TextResult(columns, [[b"1"], [b"2"]]), TextResult(columns, [[b"3"]])]
    assert merge(found, shards, 2).rows == [[b"1"], [b"2"]]
    assert merge(of("SELECT a FROM t LIMIT 3"), shards, 2).rows == [[b"1"], [b"2"], [b"3"]]  # its own LIMIT


def test_names_resolve_as_mariadb_resolves_them_beside_a_shadowing_alias() -> None:
    # GROUP BY and HAVING take the column qty (an aggregate is not grouped by), ORDER BY the count's alias.
    found = of("SELECT qty, COUNT(*) AS qty FROM t GROUP BY qty HAVING qty > 2 ORDER BY qty DESC")
    assert found.keys[0].value == 0 and found.having == Compare(">", found.keys[0], Decimal(2))
    assert found.order[0].column == Column(1) and not found.shadowed
    # Another expression's alias is grouped by unless the table has such a column: the shards' warning tells.
    assert of("SELECT qty + 1 AS n, COUNT(*) FROM t GROUP BY n").shadowed == "n"
    assert not of("SELECT t.qty AS qty, COUNT(*) FROM t GROUP BY qty").shadowed
    # An item that is not a plain column wins over a plain column of the same name.
    assert of("SELECT id AS x, COUNT(*) AS x FROM t GROUP BY id ORDER BY x").order[0].column == Column(1)


def test_a_group_alias_a_column_may_shadow_is_refused_when_the_shards_warn() -> None:
    found = of("SELECT qty + 1 AS n, COUNT(*) FROM t GROUP BY n")
    columns = [column("n", FieldType.LONGLONG), column("COUNT(*)", FieldType.LONGLONG)]
    columns += [column("w", FieldType.VAR_STRING, 63), column("p", FieldType.VAR_STRING, 63)]
    shard = TextResult(columns, [[b"2", b"1", b"2", None]])
    assert merge(found, [shard, shard]).rows == [[b"2", b"2"]]
    with pytest.raises(Refused, match="GROUP BY n, a select alias"):
        merge(found, [shard, TextResult(columns, shard.rows, warnings=1)])


def test_each_shards_distinct_folds_trailing_spaces_as_the_merge() -> None:
    found = of("SELECT DISTINCT s FROM t ORDER BY s LIMIT 2")
    pad = "IF(CONCAT(LEFT(s, 0), 'a') = CONCAT(LEFT(s, 0), 'a '), WEIGHT_STRING(CONCAT(LEFT(s, 0), ' ')), NULL)"
    folded = f"IFNULL(TRIM(TRAILING {pad} FROM WEIGHT_STRING(s)), WEIGHT_STRING(s))"
    assert found.sql == f"SELECT DISTINCT s, {folded}, {pad} FROM t ORDER BY s LIMIT 2"
    assert "TRIM" not in of("SELECT s FROM t ORDER BY s LIMIT 2").sql  # no DISTINCT: the weight as it is


def test_groups_come_in_group_by_order_without_order_by() -> None:
    found = of("SELECT made, COUNT(*) FROM t GROUP BY made")
    assert [o.column for o in found.order] == list(found.keys) and not found.order[0].descending
    assert of("SELECT made, COUNT(*) FROM t GROUP BY made ORDER BY NULL").order == ()


@pytest.mark.parametrize(
    ("sql", "construct"),
    [
        ("SELECT GROUP_CONCAT(name) FROM t", "GROUP_CONCAT without ORDER BY"),
        ("SELECT GROUP_CONCAT(DISTINCT name ORDER BY name) FROM t", "GROUP_CONCAT(DISTINCT ...)"),
        ("SELECT k, GROUP_CONCAT(a ORDER BY a) g FROM t GROUP BY k ORDER BY g", "ORDER BY a GROUP_CONCAT"),
        ("SELECT GROUP_CONCAT(a ORDER BY 1) FROM t", "ORDER BY a position"),
        ("SELECT GROUP_CONCAT(a ORDER BY a SEPARATOR '·') FROM t", "SEPARATOR beyond ASCII"),
        ("SELECT STD(a) FROM t", "STD over several shards"),
        ("SELECT MAX(a) + 1 FROM t", "an expression over aggregates"),
        ("SELECT SUM(a) / COUNT(*) FROM t", "an expression over aggregates"),
        ("SELECT MAX(MIN(a)) FROM t", "an expression over aggregates"),
        ("SELECT SUM(DISTINCT a) FROM t", "SUM(DISTINCT ...)"),
        ("SELECT k, COUNT(DISTINCT a) FROM t", "a column beside COUNT(DISTINCT ...) without GROUP BY"),
        ("SELECT a, RANK() OVER (ORDER BY a) FROM t", "window functions"),
        ("SELECT a FROM t GROUP BY a WITH ROLLUP", "WITH ROLLUP"),
        ("SELECT SQL_CALC_FOUND_ROWS a FROM t", "SQL_CALC_FOUND_ROWS"),
        ("SELECT a INTO @x FROM t", "SELECT ... INTO"),
        ("SELECT DISTINCT * FROM t", "name the columns"),
        ("SELECT DISTINCT a FROM t ORDER BY b", "which it does not select"),
        ("SELECT a, COUNT(*) FROM t GROUP BY a HAVING a LIKE 'x%'", "HAVING"),
        ("SELECT a FROM t LIMIT ?", "this LIMIT"),
        ("SELECT a FROM t ORDER BY 3", "position 3"),
        ("SELECT k, AVG(p / 3) FROM t GROUP BY k", "SUM or AVG of a division with GROUP BY"),
        ("SELECT k FROM t GROUP BY k ORDER BY SUM(p / 3)", "SUM or AVG of a division with GROUP BY"),
    ],
)
def test_what_cannot_be_merged_exactly_is_refused(sql: str, construct: str) -> None:
    with pytest.raises(Refused) as refused:
        of(sql)
    assert construct in str(refused.value)


def test_count_distinct_groups_each_shard_by_its_arguments_and_counts_them_merged() -> None:
    found = of("SELECT k, COUNT(DISTINCT a, b), SUM(x) FROM t GROUP BY k HAVING COUNT(DISTINCT c) > 1")
    head, tail = found.sql.rsplit(" FROM ", 1)
    assert tail == "t GROUP BY k, a, b, c LIMIT 18446744073709551615"
    assert head.startswith("SELECT k, COUNT(DISTINCT a, b), SUM(x), a, ")
    assert [a.function for a in found.aggregates] == ["COUNT(DISTINCT)", "SUM", "COUNT(DISTINCT)"]
    assert len(found.aggregates[0].distinct) == 2 and not found.single
    assert of("SELECT COUNT(DISTINCT a) FROM t").sql.endswith(" FROM t GROUP BY a LIMIT 18446744073709551615")


def test_count_distinct_counts_each_value_once_over_the_shards() -> None:
    found = of("SELECT COUNT(DISTINCT a), COUNT(*) FROM t")
    columns = [column("COUNT(DISTINCT a)", FieldType.LONGLONG, 63), column("COUNT(*)", FieldType.LONGLONG, 63)]
    columns += [column("a", FieldType.LONG, 63), column("w", FieldType.STRING, 63), column("p", FieldType.NULL, 63)]
    one = TextResult(columns, [[b"0", b"2", None, None, None], [b"1", b"1", b"5", None, None]])  # NULL: not counted
    two = TextResult(columns, [[b"1", b"3", b"5", None, None], [b"1", b"1", b"7", None, None]])
    assert merge(found, [one, two]).rows == [[b"2", b"7"]]
    assert merge(found, [TextResult(columns, []), TextResult(columns, [])]).rows == [[b"0", b"0"]]  # no rows


def test_group_concat_asks_each_element_with_its_count_and_keys_and_joins_them_in_order() -> None:
    found = of("SELECT k, GROUP_CONCAT(a, '-', b ORDER BY o DESC SEPARATOR '; ' LIMIT 1, 3) FROM t GROUP BY k")
    head, tail = found.sql.rsplit(" FROM ", 1)
    assert tail == "t GROUP BY k, o, HEX(CONCAT(a, '-', b)) LIMIT 18446744073709551615"
    assert ", MIN(CONCAT(a, '-', b)), COUNT(*), WEIGHT_STRING(k), " in head
    concat = found.aggregates[0].concat
    assert concat is not None and (concat.separator, concat.offset, concat.limit) == (b"; ", 1, 3)
    columns = [column("k", FieldType.LONG, 63), column("g", FieldType.VAR_STRING, 45)]
    columns[1].length = 4 * 1024
    columns += [column("o", FieldType.LONG, 63), column("w", FieldType.STRING, 63), column("p", FieldType.NULL, 63)]
    columns += [column("e", FieldType.VAR_STRING, 45), column("n", FieldType.LONGLONG, 63)]
    columns += [column("w", FieldType.STRING, 63), column("p", FieldType.NULL, 63)]
    rows = [(b"3", b"c", b"2"), (b"1", b"a", b"1"), (b"2", b"b", b"1"), (b"9", None, b"4")]
    one, two = (TextResult(columns, [[b"1", b"x", o, None, None, e, n, None, None] for o, e, n in part])
                for part in (rows[:2], rows[2:]))  # fmt: skip
    assert merge(found, [one, two]).rows == [[b"1", b"c; b; a"]]  # c c b a: from the 2nd, 3 of them; NULL skipped
    columns[1].length = 4 * 6
    with pytest.raises(Refused, match="longer than group_concat_max_len"):
        merge(found, [one, two])


def test_group_concat_sorts_null_as_its_types_zero_as_mariadb_does_there() -> None:
    found = of("SELECT GROUP_CONCAT(id ORDER BY n, id) FROM t")
    columns = [column("g", FieldType.BLOB, 45), column("n", FieldType.LONG, 63), column("w", FieldType.STRING, 63)]
    columns += [column("p", FieldType.NULL, 63), column("id", FieldType.LONG, 63), column("w", FieldType.STRING, 63)]
    columns += [column("p", FieldType.NULL, 63), column("e", FieldType.VAR_STRING, 45)]
    columns += [column("c", FieldType.LONGLONG, 63)]
    columns[0].length = 4096
    rows = [(n, i) for n, i in ((None, b"1"), (b"0", b"2"), (b"-1", b"3"), (None, b"4"), (b"1", b"5"))]
    shard = TextResult(columns, [[b"x", n, None, None, i, None, None, i, b"1"] for n, i in rows])
    assert merge(found, [shard]).rows == [[b"3,1,2,4,5"]]


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


def test_a_sum_of_a_division_adds_the_digits_each_shard_does_not_show() -> None:
    found = of("SELECT SUM(p / 3), AVG(p / 3) FROM t")
    assert found.sql == (
        "SELECT SUM(p / 3), AVG(p / 3), SUM(p / 3) + 0.000000000000000000000000000000, "
        "SUM(p / 3) + 0.000000000000000000000000000000, COUNT(p / 3) FROM t LIMIT 18446744073709551615"
    )
    columns = [
        column("SUM(p / 3)", FieldType.NEWDECIMAL, 63, 6),
        column("AVG(p / 3)", FieldType.NEWDECIMAL, 63, 10),
        column("s", FieldType.NEWDECIMAL, 63, 30),
        column("s", FieldType.NEWDECIMAL, 63, 30),
        column("c", FieldType.LONGLONG, 63),
    ]
    digits = b"0.000000400000000000000000000000"  # 0.0000004 shows as 0.000000
    shard = TextResult(columns, [[b"0.000000", b"0.0000001000", digits, digits, b"4"]])
    assert merge(found, [shard, shard]).rows == [[b"0.000001", b"0.0000001000"]]


def test_a_sum_of_a_division_too_near_a_rounding_boundary_is_refused() -> None:
    found = of("SELECT SUM(p / 3) FROM t")
    columns = [column("SUM(p / 3)", FieldType.NEWDECIMAL, 63, 6), column("s", FieldType.NEWDECIMAL, 63, 30)]
    near = TextResult(columns, [[b"0.000000", b"0.000000250000000000000000000000"]])  # 2 x: on the boundary
    with pytest.raises(Refused, match="too few digits"):
        merge(found, [near, near])


def test_min_and_max_of_an_enum_are_refused() -> None:
    found = of("SELECT MIN(e) FROM t")
    enum = ColumnInfo(b"", "MIN(e)", FieldType.STRING, 45, 256, 0)
    weights = [column("w", FieldType.VAR_STRING, 63), column("p", FieldType.VAR_STRING, 63)]
    with pytest.raises(Refused, match="ENUM or SET"):
        merge(found, [TextResult([enum, *weights], [[b"x", b"x", None]])] * 2)
