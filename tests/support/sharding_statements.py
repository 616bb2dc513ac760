"""The statement classes of the sharding differential test's workloads (``tests.support.sharding_workload`` draws
them): each a function of the generator that makes one ``Statement`` of its class (or a transaction's sequence of
them; None when the workload's schema has no place for it), registered in ``CLASSES`` by name. The names are what
``tests.support.sharding_diff`` lists as expected refusals and open defects.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeAlias

if TYPE_CHECKING:
    from tests.support.sharding_workload import Generator


@dataclass(frozen=True)
class Statement:
    """One statement of a workload: its class, its text, whether its result compares in order (a total ORDER BY),
    and the result columns compared by collation (any spelling the server holds equal). ``SCHEMA`` in its text
    stands for the schema each side runs it in (the proxy's and the reference's differ)."""

    cls: str
    sql: str
    ordered: bool = False
    fold: tuple[int, ...] = ()

    def text(self, schema: str) -> str:
        """The statement as run in ``schema``."""
        return self.sql.replace(SCHEMA, schema)


#: What a statement's text writes for the schema it runs in (``Statement.text`` puts the schema's name there).
SCHEMA = "<schema>"


#: A class's maker: a statement, or a sequence of them (a transaction), or None when the schema has no place for it.
Maker: TypeAlias = "Callable[[Generator], Statement | list[Statement] | None]"
CLASSES: dict[str, Maker] = {}
#: Relative weights of the classes after the load (2 unless named).
WEIGHTS = {
    "insert_one": 5,
    "insert_one_variant": 3,
    "point_eq": 4,
    "point_eq_variant": 3,
    "order_limit": 3,
    "group_by": 3,
    "aggregates": 3,
    "update_by_key": 3,
    "delete_by_key": 2,
}


def _class(name: str) -> Callable[[Maker], Maker]:
    def register(maker: Maker) -> Maker:
        CLASSES[name] = maker
        return maker

    return register


def _all(g: Generator) -> str:
    return ", ".join(name for name, _ in g.t.columns)


@_class("insert_one")
def _insert_one(g: Generator) -> Statement:
    key = g.keys.fresh() if g.rng.random() < 0.7 else g.existing()
    return Statement("insert_one", g.insert(g.t, [key], [g.keys.literal(key)]))


@_class("insert_one_variant")
def _insert_one_variant(g: Generator) -> Statement:
    key = g.existing()
    spelled = g.keys.spelling(key)
    literal = g.keys.variant(key) if spelled == key else g.keys.literal(spelled)
    return Statement("insert_one_variant", g.insert(g.t, [spelled], [literal]))


@_class("insert_multi_same_key")
def _insert_multi_same_key(g: Generator) -> Statement:
    key = g.existing()
    count = g.rng.randint(2, 4)
    return Statement("insert_multi_same_key", g.insert(g.t, [key] * count, [g.keys.literal(key)] * count))


@_class("insert_multi")
def _insert_multi(g: Generator) -> Statement:
    keys = [g.keys.fresh() for _ in range(g.rng.randint(2, 4))]
    return Statement("insert_multi", g.insert(g.t, keys, [g.keys.literal(key) for key in keys]))


@_class("insert_dup")
def _insert_dup(g: Generator) -> Statement | None:
    """A row whose id exists, with its key: 1062 from the server that holds it."""
    return _same_row(g, "insert_dup", "INSERT INTO")


@_class("insert_folded_key")
def _insert_folded_key(g: Generator) -> Statement:
    """One row whose key is written as a constant expression the server folds: ``(37)``, ``+43``, ``0x2B``,
    ``40 + 3``, ``X'616263'``, ``DATE'2024-03-05'``."""
    key = g.keys.fresh() if g.rng.random() < 0.5 else g.existing()
    return Statement("insert_folded_key", g.insert(g.t, [key], [g.keys.folded(key)]))


@_class("insert_unplaceable")
def _insert_unplaceable(g: Generator) -> Statement:
    names = ", ".join(name for name, _ in g.t.columns)
    key = g.keys.unplaceable()
    values = [str(g.new_id()) if kind == "id" else key if kind == "key" else g.value(kind) for _, kind in g.t.columns]
    return Statement("insert_unplaceable", f"INSERT INTO {g.t.name} ({names}) VALUES ({', '.join(values)})")


@_class("insert_second")
def _insert_second(g: Generator) -> Statement | None:
    if g.u is None:
        return None
    key = g.existing() if g.rng.random() < 0.7 else g.keys.fresh()
    spelled = g.keys.spelling(key) if g.rng.random() < 0.3 else key
    return Statement("insert_second", g.insert(g.u, [spelled], [g.keys.literal(spelled)]))


@_class("update_by_key")
def _update_by_key(g: Generator) -> Statement:
    t = g.t
    sets = f"{t.column('int')} = {g.value('int')}, {t.column('str')} = {g.value('str')}"
    return Statement("update_by_key", f"UPDATE {t.name} SET {sets} WHERE {g.where_key()}")


@_class("update_by_key_variant")
def _update_by_key_variant(g: Generator) -> Statement:
    t = g.t
    literal = g.keys.variant(g.existing())
    return Statement(
        "update_by_key_variant", f"UPDATE {t.name} SET {t.column('dec')} = {g.value('dec')} WHERE {t.key} = {literal}"
    )


@_class("update_by_key_in")
def _update_by_key_in(g: Generator) -> Statement:
    t = g.t
    keys = ", ".join(g.key_literal() for _ in range(g.rng.randint(2, 3)))
    return Statement(
        "update_by_key_in", f"UPDATE {t.name} SET {t.column('int')} = {t.column('int')} + 1 WHERE {t.key} IN ({keys})"
    )


@_class("update_scatter")
def _update_scatter(g: Generator) -> Statement:
    t = g.t
    return Statement(
        "update_scatter", f"UPDATE {t.name} SET {t.column('int')} = 0 WHERE {t.column('int')} > {g.rng.randint(5, 15)}"
    )


@_class("update_key")
def _update_key(g: Generator) -> Statement:
    t = g.t
    return Statement("update_key", f"UPDATE {t.name} SET {t.key} = {g.key_literal()} WHERE {g.where_key()}")


@_class("delete_by_key")
def _delete_by_key(g: Generator) -> Statement:
    t = g.t
    extra = g.rng.choice(
        ("", f" AND {t.column('int')} > {g.rng.randint(0, 10)}", f" AND id % 3 = {g.rng.randint(0, 2)}")
    )
    return Statement("delete_by_key", f"DELETE FROM {t.name} WHERE {g.where_key()}{extra}")


@_class("delete_by_key_variant")
def _delete_by_key_variant(g: Generator) -> Statement:
    t = g.t
    literal = g.keys.variant(g.existing())
    return Statement(
        "delete_by_key_variant",
        f"DELETE FROM {t.name} WHERE {t.key} = {literal} AND {t.column('int')} > {g.rng.randint(3, 10)}",
    )


@_class("delete_scatter")
def _delete_scatter(g: Generator) -> Statement:
    t = g.t
    return Statement("delete_scatter", f"DELETE FROM {t.name} WHERE {t.column('int')} = {g.rng.randint(8, 12)}")


@_class("global_write")
def _global_write(g: Generator) -> Statement | None:
    """A write to the global table (on every shard)."""
    if g.g is None:
        return None
    name, n = g.g.name, g.rng.randint(1, 12)
    sql = g.rng.choice((
        f"UPDATE {name} SET pop = pop + 1 WHERE id = {n}",
        f"UPDATE {name} SET label = {g.value('str')} WHERE pop > {g.rng.randint(0, 10)}",
        f"DELETE FROM {name} WHERE id = {n}",
        f"INSERT INTO {name} (id, gk, label, pop) VALUES ({g.new_id() + 100}, {g.key_literal()}, {g.value('str')}, "
        f"{g.value('int')})",
    ))  # fmt: skip
    return Statement("global_write", sql)


@_class("point_eq")
def _point_eq(g: Generator) -> Statement:
    t = g.t
    alias = g.rng.choice(("", "x"))
    source = f"{t.name} x" if alias else t.name
    return Statement("point_eq", f"SELECT * FROM {source} WHERE {g.where_key(alias)} ORDER BY id", ordered=True)


@_class("point_eq_variant")
def _point_eq_variant(g: Generator) -> Statement:
    t = g.t
    literal = g.keys.variant(g.existing())
    return Statement(
        "point_eq_variant", f"SELECT {_all(g)} FROM {t.name} WHERE {t.key} = {literal} ORDER BY id", ordered=True
    )


@_class("point_eq_unplaceable")
def _point_eq_unplaceable(g: Generator) -> Statement:
    """A key the planner cannot place (it runs on every shard) that MariaDB compares equal to a stored one."""
    t = g.t
    literal = g.keys.unplaceable_read(g.existing())
    return Statement("point_eq_unplaceable", f"SELECT id, {t.key} FROM {t.name} WHERE {t.key} = {literal} ORDER BY id",
                     ordered=True)  # fmt: skip


@_class("point_in")
def _point_in(g: Generator) -> Statement:
    t = g.t
    literals = [g.key_literal() if g.rng.random() < 0.8 else g.keys.variant(g.existing()) for _ in range(3)]
    return Statement(
        "point_in",
        f"SELECT id, {t.key} FROM {t.name} WHERE {t.key} IN ({', '.join(literals)}) ORDER BY id",
        ordered=True,
    )


@_class("point_and_filter")
def _point_and_filter(g: Generator) -> Statement:
    t = g.t
    return Statement(
        "point_and_filter",
        f"SELECT id, {t.column('int')}, {t.column('str')} FROM {t.name} WHERE "
        f"({g.where_key()}) AND {t.column('int')} >= {g.rng.randint(-3, 6)} ORDER BY id",
        ordered=True,
    )


@_class("point_or")
def _point_or(g: Generator) -> Statement:
    t = g.t
    return Statement(
        "point_or",
        f"SELECT id FROM {t.name} WHERE {t.key} = {g.key_literal()} OR {t.key} = {g.key_literal()} ORDER BY id",
        ordered=True,
    )


@_class("point_key_as_number")
def _point_key_as_number(g: Generator) -> Statement | None:
    """A string key compared with a number: MariaDB compares them as numbers ('07' = 7, 'abc' = 0)."""
    t = g.t
    if g.kind != "string":
        return None
    return Statement(
        "point_key_as_number",
        f"SELECT id, {t.key} FROM {t.name} WHERE {t.key} = {g.rng.choice((0, 7))} ORDER BY id",
        ordered=True,
    )


@_class("range_between")
def _range_between(g: Generator) -> Statement:
    t = g.t
    low, high = sorted((g.existing(), g.existing()))  # type: ignore[type-var]  # one type in a workload
    return Statement(
        "range_between",
        f"SELECT id, {t.key} FROM {t.name} WHERE {t.key} BETWEEN "
        f"{g.keys.literal(low)} AND {g.keys.literal(high)} ORDER BY id",
        ordered=True,
    )


@_class("range_compare")
def _range_compare(g: Generator) -> Statement:
    t = g.t
    op = g.rng.choice(("<", "<=", ">", ">="))
    return Statement(
        "range_compare",
        f"SELECT id, {t.column('dec')} FROM {t.name} WHERE {t.key} {op} "
        f"{g.key_literal()} ORDER BY {t.column('dec')} DESC, id",
        ordered=True,
    )


@_class("scan_all")
def _scan_all(g: Generator) -> Statement:
    return Statement("scan_all", f"SELECT * FROM {g.t.name}{g.filter()}")


@_class("order_limit")
def _order_limit(g: Generator) -> Statement:
    t = g.t
    column = g.rng.choice((t.column("int"), t.column("dec"), t.column("date"), t.key))
    direction = g.rng.choice(("", " DESC", " ASC"))
    tail = g.limit() if g.rng.random() < 0.8 else ""
    return Statement(
        "order_limit",
        f"SELECT id, {column} FROM {t.name}{g.filter()} ORDER BY {column}{direction}, "
        f"id{g.rng.choice(('', ' DESC'))}{tail}",
        ordered=True,
    )


@_class("order_str")
def _order_str(g: Generator) -> Statement:
    t = g.t
    column = g.rng.choice(t.kinds("str"))
    direction = g.rng.choice(("", " DESC"))
    tail = g.limit() if g.rng.random() < 0.5 else ""
    return Statement(
        "order_str", f"SELECT {column}, id FROM {t.name} ORDER BY {column}{direction}, id{tail}", ordered=True
    )


@_class("order_expr")
def _order_expr(g: Generator) -> Statement:
    t = g.t
    return Statement(
        "order_expr",
        f"SELECT id AS ident, {t.column('dec')} * 2 AS doubled FROM {t.name} ORDER BY doubled DESC, ident{g.limit()}",
        ordered=True,
    )


@_class("order_partial")
def _order_partial(g: Generator) -> Statement:
    """An ORDER BY that leaves ties (and no LIMIT): the rows compare as a multiset."""
    t = g.t
    return Statement("order_partial", f"SELECT id, {t.column('str')} FROM {t.name} ORDER BY {t.column('str')}")


@_class("distinct")
def _distinct(g: Generator) -> Statement:
    t = g.t
    columns = g.rng.choice(([t.column("str")], [t.column("int")], [t.column("int"), t.column("str")], [t.key]))
    names = ", ".join(columns)
    fold = tuple(
        n for n, name in enumerate(columns) if name in t.kinds("str") or (name == t.key and g.kind == "string")
    )
    if g.rng.random() < 0.6:
        return Statement("distinct", f"SELECT DISTINCT {names} FROM {t.name} ORDER BY {names}", ordered=True, fold=fold)
    return Statement("distinct", f"SELECT DISTINCT {names} FROM {t.name}", fold=fold)


@_class("count_star")
def _count_star(g: Generator) -> Statement:
    return Statement("count_star", f"SELECT COUNT(*) FROM {g.t.name}{g.filter()}", ordered=True)


@_class("aggregates")
def _aggregates(g: Generator) -> Statement:
    t = g.t
    i, d, dt = t.column("int"), t.column("dec"), t.column("date")
    items = [
        "COUNT(*)",
        f"COUNT({i})",
        f"SUM({i})",
        f"SUM({d})",
        f"MIN({d})",
        f"MAX({i})",
        f"AVG({d})",
        f"AVG({i})",
        f"MIN({dt})",
        f"MAX({dt})",
        "MIN(id)",
    ]
    chosen = g.rng.sample(items, g.rng.randint(2, 6))
    return Statement("aggregates", f"SELECT {', '.join(chosen)} FROM {t.name}{g.filter()}", ordered=True)


@_class("minmax_str")
def _minmax_str(g: Generator) -> Statement:
    t = g.t
    column = g.rng.choice([*t.kinds("str"), *([t.key] if g.kind == "string" else [])])
    return Statement(
        "minmax_str", f"SELECT MIN({column}), MAX({column}), COUNT({column}) FROM {t.name}", ordered=True, fold=(0, 1)
    )


@_class("group_by")
def _group_by(g: Generator) -> Statement:
    t = g.t
    column = g.rng.choice((t.column("int"), t.column("date")))
    d = t.column("dec")
    return Statement(
        "group_by",
        f"SELECT {column}, COUNT(*), SUM({d}), AVG({d}), MIN(id), MAX({d}) FROM {t.name}{g.filter()} GROUP BY {column}",
        ordered=True,
    )


@_class("group_by_str")
def _group_by_str(g: Generator) -> Statement:
    t = g.t
    s = g.rng.choice(t.kinds("str"))
    return Statement(
        "group_by_str",
        f"SELECT {s}, COUNT(*), MIN(id), SUM({t.column('int')}) FROM {t.name} GROUP BY {s}",
        ordered=True,
        fold=(0,),
    )


@_class("group_by_key")
def _group_by_key(g: Generator) -> Statement:
    t = g.t
    fold = (0,) if g.kind == "string" else ()
    return Statement(
        "group_by_key", f"SELECT {t.key}, COUNT(*), MAX(id) FROM {t.name} GROUP BY {t.key}", ordered=True, fold=fold
    )


@_class("group_having")
def _group_having(g: Generator) -> Statement:
    t = g.t
    i, d = t.column("int"), t.column("dec")
    having = g.rng.choice((
        f"COUNT(*) > {g.rng.randint(1, 3)}",
        f"SUM({d}) > {g.rng.randint(0, 50)}",
        f"n >= 2 AND MAX({d}) < {g.rng.randint(10, 45)}",
        f"MIN({d}) IS NULL OR {i} > 5",
    ))  # fmt: skip
    return Statement(
        "group_having", f"SELECT {i}, COUNT(*) AS n, SUM({d}) FROM {t.name} GROUP BY {i} HAVING {having}", ordered=True
    )


@_class("alias_shadows_column")
def _alias_shadows_column(g: Generator) -> Statement:
    """A select alias that is also a column's name: GROUP BY and HAVING name the column (MariaDB looks in FROM
    first), ORDER BY the alias."""
    t = g.t
    i = t.column("int")
    tail = g.rng.choice(("", f" HAVING {i} > 2", f" ORDER BY {i} DESC, MIN(id)"))
    return Statement("alias_shadows_column", f"SELECT {i}, COUNT(*) AS {i}, MIN(id) FROM {t.name} GROUP BY {i}{tail}",
                     ordered=True)  # fmt: skip


@_class("group_order_limit")
def _group_order_limit(g: Generator) -> Statement:
    t = g.t
    i, d = t.column("int"), t.column("dec")
    order = g.rng.choice((f"total DESC, {i}", f"n, {i} DESC", f"AVG({d}), {i}"))
    return Statement(
        "group_order_limit",
        f"SELECT {i}, COUNT(*) AS n, SUM({d}) AS total FROM {t.name} GROUP BY {i} ORDER BY {order}{g.limit()}",
        ordered=True,
    )


def _join(g: Generator, kind: str) -> str:
    assert g.u is not None
    t, u = g.t, g.u
    on = f"a.{t.key} = b.{u.key}" if g.rng.random() < 0.5 else f"b.{u.key} = a.{t.key}"
    return f"{t.name} a {kind} {u.name} b ON {on}"


@_class("join_colocated")
def _join_colocated(g: Generator) -> Statement | None:
    if g.u is None:
        return None
    items = g.rng.choice(("a.id, b.id, b.hits", "*"))
    return Statement("join_colocated", f"SELECT {items} FROM {_join(g, 'JOIN')} ORDER BY a.id, b.id", ordered=True)


@_class("join_colocated_left")
def _join_colocated_left(g: Generator) -> Statement | None:
    if g.u is None:
        return None
    return Statement(
        "join_colocated_left",
        f"SELECT a.id, b.id, b.who FROM {_join(g, 'LEFT JOIN')} "
        f"ORDER BY a.id, b.id{g.limit() if g.rng.random() < 0.4 else ''}",
        ordered=True,
    )


@_class("join_colocated_agg")
def _join_colocated_agg(g: Generator) -> Statement | None:
    if g.u is None:
        return None
    i = g.t.column("int")
    return Statement(
        "join_colocated_agg",
        f"SELECT a.{i}, COUNT(*), SUM(b.spent), MAX(b.hits) FROM {_join(g, 'JOIN')} GROUP BY a.{i}",
        ordered=True,
    )


@_class("join_colocated_point")
def _join_colocated_point(g: Generator) -> Statement | None:
    if g.u is None:
        return None
    return Statement(
        "join_colocated_point",
        f"SELECT a.id, b.id FROM {_join(g, 'JOIN')} WHERE {g.where_key('a')} ORDER BY a.id, b.id",
        ordered=True,
    )


@_class("join_self_key")
def _join_self_key(g: Generator) -> Statement:
    t = g.t
    return Statement(
        "join_self_key",
        f"SELECT a.id, b.id FROM {t.name} a JOIN {t.name} b ON a.{t.key} = b.{t.key} "
        "WHERE a.id < b.id ORDER BY a.id, b.id",
        ordered=True,
    )


@_class("join_global")
def _join_global(g: Generator) -> Statement | None:
    if g.g is None:
        return None
    t = g.t
    on = g.rng.choice((f"c.id = a.{t.column('int')}", f"c.gk = a.{t.key}"))
    return Statement(
        "join_global",
        f"SELECT a.id, c.id, c.label FROM {t.name} a JOIN {g.g.name} c ON {on} ORDER BY a.id, c.id",
        ordered=True,
    )


@_class("global_read")
def _global_read(g: Generator) -> Statement | None:
    if g.g is None:
        return None
    return Statement("global_read", f"SELECT * FROM {g.g.name} WHERE pop IS NOT NULL ORDER BY id", ordered=True)


@_class("unmergeable_point")
def _unmergeable_point(g: Generator) -> Statement:
    """What cannot be merged, on one shard: it runs there."""
    t = g.t
    if g.rng.random() < 0.5:
        return Statement(
            "unmergeable_point",
            f"SELECT GROUP_CONCAT(id ORDER BY id) FROM {t.name} WHERE {g.where_key()}",
            ordered=True,
        )
    return Statement(
        "unmergeable_point",
        f"SELECT id, ROW_NUMBER() OVER (ORDER BY id DESC) FROM {t.name} WHERE {g.where_key()} ORDER BY id",
        ordered=True,
    )


@_class("refuse_group_concat")
def _refuse_group_concat(g: Generator) -> Statement:
    """GROUP_CONCAT with no order of its own, or with DISTINCT, over several shards."""
    t = g.t
    s = t.column("str")
    sql = g.rng.choice((f"SELECT GROUP_CONCAT({s}) FROM {t.name}", f"SELECT GROUP_CONCAT(DISTINCT {s} ORDER BY {s}) "
                        f"FROM {t.name}"))  # fmt: skip
    return Statement("refuse_group_concat", sql, ordered=True)


@_class("group_concat")
def _group_concat(g: Generator) -> Statement:
    """GROUP_CONCAT ordered by a key that leaves no ties, over every shard: of strings spelled as each row holds
    them, numbers, several arguments, per group, with SEPARATOR and LIMIT, over no rows."""
    t, rng = g.t, g.rng
    i, s, d, day = t.column("int"), rng.choice(t.kinds("str")), t.column("dec"), t.column("date")
    sql = rng.choice((
        f"SELECT GROUP_CONCAT({s} ORDER BY id) FROM {t.name}{g.filter()}",
        f"SELECT GROUP_CONCAT({t.key}, ':', {d} ORDER BY {d} DESC, id SEPARATOR '; ') FROM {t.name}",
        f"SELECT {day}, GROUP_CONCAT({i} ORDER BY id DESC), COUNT(*) FROM {t.name} GROUP BY {day}",
        f"SELECT {i}, GROUP_CONCAT(id ORDER BY {s}, id SEPARATOR '') AS ids, SUM({d}) FROM {t.name} GROUP BY {i}",
        f"SELECT GROUP_CONCAT({s} ORDER BY id LIMIT {rng.randint(0, 3)}, {rng.randint(1, 4)}) FROM {t.name}",
        f"SELECT GROUP_CONCAT(id ORDER BY id) FROM {t.name} WHERE id < 0",
        f"SELECT {i}, COUNT(DISTINCT {s}), GROUP_CONCAT(DATE_FORMAT({day}, '%m%d') ORDER BY id) FROM {t.name} "
        f"GROUP BY {i} HAVING COUNT(*) > 1",
    ))  # fmt: skip
    return Statement("group_concat", sql, ordered=True)


@_class("refuse_window")
def _refuse_window(g: Generator) -> Statement:
    t = g.t
    return Statement(
        "refuse_window", f"SELECT id, RANK() OVER (ORDER BY {t.column('int')}) FROM {t.name} ORDER BY id", ordered=True
    )


@_class("refuse_nested_aggregate")
def _refuse_nested_aggregate(g: Generator) -> Statement:
    t = g.t
    return Statement(
        "refuse_nested_aggregate", f"SELECT MAX({t.column('int')}) - MIN({t.column('int')}) FROM {t.name}", ordered=True
    )


@_class("count_distinct")
def _count_distinct(g: Generator) -> Statement:
    """COUNT(DISTINCT ...) over every shard: of numbers, of strings a collation holds equal, of the shard key, of
    several columns, per group, in HAVING, over no rows."""
    t, rng = g.t, g.rng
    i, s, d, day = t.column("int"), rng.choice(t.kinds("str")), t.column("dec"), t.column("date")
    sql = rng.choice((
        f"SELECT COUNT(DISTINCT {i}) FROM {t.name}{g.filter()}",
        f"SELECT COUNT(DISTINCT {s}), COUNT(*) FROM {t.name}{g.filter()}",
        f"SELECT COUNT(DISTINCT {t.key}), MAX(id) FROM {t.name}",
        f"SELECT COUNT(DISTINCT {i}, {s}), SUM({d}) FROM {t.name}",
        f"SELECT {day}, COUNT(DISTINCT {s}), COUNT(*), SUM({i}), MIN({d}) FROM {t.name} GROUP BY {day}",
        f"SELECT {i}, COUNT(DISTINCT {t.key}) AS n FROM {t.name} GROUP BY {i} HAVING COUNT(DISTINCT {s}) > 1",
        f"SELECT {i}, COUNT(DISTINCT {d}) FROM {t.name} GROUP BY {i} ORDER BY COUNT(DISTINCT {d}) DESC, {i}",
        f"SELECT COUNT(DISTINCT {s}) FROM {t.name} WHERE id < 0",
    ))  # fmt: skip
    return Statement("count_distinct", sql, ordered=True)


@_class("refuse_noncolocated_join")
def _refuse_noncolocated_join(g: Generator) -> Statement:
    t = g.t
    if g.u is not None and g.rng.random() < 0.6:
        return Statement(
            "refuse_noncolocated_join",
            f"SELECT COUNT(*) FROM {t.name} a JOIN {g.u.name} b ON a.{t.column('int')} = b.hits",
            ordered=True,
        )
    return Statement(
        "refuse_noncolocated_join",
        f"SELECT COUNT(*) FROM {t.name} a JOIN {t.name} b ON a.id = b.{t.column('int')}",
        ordered=True,
    )


@_class("refuse_subquery")
def _refuse_subquery(g: Generator) -> Statement:
    t = g.t
    return Statement(
        "refuse_subquery",
        f"SELECT id FROM {t.name} WHERE {t.column('int')} > (SELECT AVG({t.column('int')}) FROM {t.name}) ORDER BY id",
        ordered=True,
    )


@_class("global_subquery")
def _global_subquery(g: Generator) -> Statement | None:
    """A read over every shard with subqueries on the global table only: each shard reads its own copy."""
    if g.g is None:
        return None
    t, rng = g.t, g.rng
    i, k, n = t.column("int"), t.key, rng.randint(-2, 10)
    sql, fold = rng.choice((
        (f"SELECT id FROM {t.name} WHERE {i} IN (SELECT pop FROM cities WHERE pop > {n}) ORDER BY id", ()),
        (f"SELECT a.id, (SELECT MIN(c.id) FROM cities c WHERE c.gk = a.{k}) AS m FROM {t.name} a ORDER BY a.id",
         ()),
        (f"SELECT COUNT(*) FROM {t.name} a WHERE EXISTS (SELECT 1 FROM cities c WHERE c.gk = a.{k})", ()),
        (f"SELECT a.id, d.id, d.label FROM (SELECT id, gk, label FROM cities WHERE pop > {n}) d JOIN {t.name} a "
         f"ON a.{k} = d.gk ORDER BY a.id, d.id", (2,)),
        (f"SELECT {i}, COUNT(*) FROM {t.name} WHERE {k} NOT IN (SELECT gk FROM cities WHERE pop < {n}) GROUP BY {i}",
         ()),
    ))  # fmt: skip
    return Statement("global_subquery", sql, ordered=True, fold=fold)


@_class("refuse_union")
def _refuse_union(g: Generator) -> Statement:
    t, i = g.t, g.t.column("int")
    return Statement(
        "refuse_union", f"SELECT id FROM {t.name} WHERE {i} > 5 UNION SELECT id FROM {t.name} WHERE {i} < 0"
    )


@_class("refuse_rollup")
def _refuse_rollup(g: Generator) -> Statement:
    t, i = g.t, g.t.column("int")
    return Statement("refuse_rollup", f"SELECT {i}, COUNT(*) FROM {t.name} GROUP BY {i} WITH ROLLUP", ordered=True)


@_class("refuse_calc_found_rows")
def _refuse_calc_found_rows(g: Generator) -> Statement:
    return Statement("refuse_calc_found_rows", f"SELECT SQL_CALC_FOUND_ROWS id FROM {g.t.name} ORDER BY id LIMIT 3",
                     ordered=True)  # fmt: skip


@_class("refuse_distinct_star")
def _refuse_distinct_star(g: Generator) -> Statement:
    return Statement("refuse_distinct_star", f"SELECT DISTINCT * FROM {g.t.name}")


@_class("having_other")
def _having_other(g: Generator) -> Statement:
    """HAVING beyond comparisons of aggregates and group keys with numbers (the proxy may refuse it)."""
    t, i, d = g.t, g.t.column("int"), g.t.column("dec")
    having = g.rng.choice(("COUNT(*) BETWEEN 2 AND 4", f"SUM({d}) > AVG({d}) * 2", f"MAX({t.column('str')}) LIKE 'a%'",
                           "COUNT(*) IN (1, 3)", f"{i} + 1 > 3"))  # fmt: skip
    return Statement("having_other", f"SELECT {i}, COUNT(*) FROM {t.name} GROUP BY {i} HAVING {having}", ordered=True)


@_class("order_hidden")
def _order_hidden(g: Generator) -> Statement:
    """ORDER BY what the select list does not show."""
    t = g.t
    column = g.rng.choice((t.column("int"), t.column("dec"), t.column("date"), t.column("str"), t.key,
                           f"{t.name}.{t.column('int')}"))  # fmt: skip
    direction = g.rng.choice(("", " DESC"))
    tail = g.limit() if g.rng.random() < 0.7 else ""
    return Statement("order_hidden", f"SELECT id FROM {t.name} ORDER BY {column}{direction}, id{tail}", ordered=True)


@_class("order_position")
def _order_position(g: Generator) -> Statement:
    t = g.t
    column = g.rng.choice((t.column("int"), t.column("str"), t.column("dec")))
    return Statement("order_position", f"SELECT {column}, id FROM {t.name} ORDER BY 1 DESC, 2{g.limit()}", ordered=True)


@_class("order_function")
def _order_function(g: Generator) -> Statement:
    t = g.t
    s, i = t.column("str"), t.column("int")
    expression = g.rng.choice((f"LOWER({s})", f"LENGTH({s}) DESC", f"{s} COLLATE utf8mb4_bin", f"CONCAT({s}, 'x')",
                               f"COALESCE({i}, -100) DESC", f"{s} IS NULL, {s}"))  # fmt: skip
    tail = g.limit() if g.rng.random() < 0.5 else ""
    return Statement("order_function", f"SELECT id, {s} FROM {t.name} ORDER BY {expression}, id{tail}", ordered=True)


@_class("limit_edge")
def _limit_edge(g: Generator) -> Statement:
    """LIMIT 0, and an offset past the rows."""
    tail = g.rng.choice(("LIMIT 0", "LIMIT 1000, 5", "LIMIT 0 OFFSET 3"))
    return Statement("limit_edge", f"SELECT id FROM {g.t.name} ORDER BY id {tail}", ordered=True)


@_class("limit_all_after_offset")
def _limit_all_after_offset(g: Generator) -> Statement:
    """MySQL's idiom for all the rows after an offset: the largest row count."""
    return Statement("limit_all_after_offset", f"SELECT id FROM {g.t.name} ORDER BY id DESC LIMIT "
                     f"{g.rng.randint(1, 9)}, 18446744073709551615", ordered=True)  # fmt: skip


@_class("group_multi")
def _group_multi(g: Generator) -> Statement:
    t = g.t
    i, dt, d = t.column("int"), t.column("date"), t.column("dec")
    order = g.rng.choice(("", f" ORDER BY {i} DESC, {dt}", f" ORDER BY {dt} DESC, {i} DESC"))
    return Statement("group_multi", f"SELECT {i}, {dt}, COUNT(*), SUM({d}) FROM {t.name} GROUP BY {i}, {dt}{order}",
                     ordered=True)  # fmt: skip


@_class("aggregate_expressions")
def _aggregate_expressions(g: Generator) -> Statement:
    t = g.t
    i, d, dt = t.column("int"), t.column("dec"), t.column("date")
    items = ", ".join(g.rng.sample((f"SUM({i} * 2)", f"MAX({d} - 1)", f"AVG({i} + {d})", "COUNT(1)", f"MIN(-{i})",
                                    f"SUM({d}) AS total", f"MAX({d} * 2)", f"COUNT({d} > 5)"), 3))  # fmt: skip
    if g.rng.random() < 0.5:
        return Statement("aggregate_expressions", f"SELECT {items} FROM {t.name}{g.filter()}", ordered=True)
    return Statement("aggregate_expressions", f"SELECT {dt}, {items} FROM {t.name} GROUP BY {dt}", ordered=True)


@_class("distinct_limit")
def _distinct_limit(g: Generator) -> Statement:
    """DISTINCT, ORDER BY and LIMIT over strings, some differing only by trailing spaces."""
    t = g.t
    column = g.rng.choice([*t.kinds("str"), *([t.key] if g.kind == "string" else [])])
    direction = g.rng.choice(("", " DESC"))
    return Statement("distinct_limit", f"SELECT DISTINCT {column} FROM {t.name} ORDER BY {column}{direction} "
                     f"LIMIT {g.rng.randint(2, 5)}", ordered=True, fold=(0,))  # fmt: skip


@_class("distinct_limit_plain")
def _distinct_limit_plain(g: Generator) -> Statement:
    """DISTINCT, ORDER BY and LIMIT over numbers and dates."""
    t = g.t
    column = g.rng.choice([t.column("int"), t.column("date"), *([t.key] if g.kind != "string" else [])])
    direction = g.rng.choice(("", " DESC"))
    return Statement("distinct_limit_plain", f"SELECT DISTINCT {column} FROM {t.name} ORDER BY {column}{direction}"
                     f"{g.limit()}", ordered=True)  # fmt: skip


@_class("point_in_aggregate")
def _point_in_aggregate(g: Generator) -> Statement:
    """Aggregates over the rows of a few keys (one shard or several)."""
    t = g.t
    keys = ", ".join(g.key_literal() for _ in range(g.rng.randint(1, 3)))
    if g.rng.random() < 0.5:
        return Statement("point_in_aggregate", f"SELECT COUNT(*), SUM({t.column('dec')}), MAX(id) FROM {t.name} "
                         f"WHERE {t.key} IN ({keys})", ordered=True)  # fmt: skip
    fold = (0,) if g.kind == "string" else ()
    return Statement("point_in_aggregate", f"SELECT {t.key}, COUNT(*), MIN(id) FROM {t.name} WHERE {t.key} IN "
                     f"({keys}) GROUP BY {t.key}", ordered=True, fold=fold)  # fmt: skip


@_class("key_predicates")
def _key_predicates(g: Generator) -> Statement:
    """Conditions on the key the planner must not narrow wrongly."""
    t, k = g.t, g.t.key
    a, b = g.key_literal(), g.key_literal()
    forms = [f"{k} <> {a}", f"NOT {k} = {a}", f"{k} IS NULL", f"{k} = {a} AND {k} = {b}", f"({k}) = {a}",
             f"{k} = {a} OR id = {g.rng.randint(1, 20)}", f"{k} IN ({a})", f"{k} = {a} AND {k} IN ({a}, {b})",
             f"{k} <=> {a}", f"{k} = ({a})", f"{a} IN ({k})", f"{k} = {a} XOR id > 5"]  # fmt: skip
    if g.kind == "string":
        forms += [f"{k} LIKE 'a%'", f"{k} = {a} COLLATE utf8mb4_bin", f"BINARY {k} = {a}"]
    if g.kind == "integer":
        forms += [f"{k} = {a} + 0", f"{k} = -{a}", f"{k} = {a}.0", f"{k} = 0x10"]
    return Statement("key_predicates", f"SELECT id FROM {t.name} WHERE {g.rng.choice(forms)} ORDER BY id",
                     ordered=True)  # fmt: skip


@_class("syntax_variants")
def _syntax_variants(g: Generator) -> Statement:
    """The same reads in other spellings: lowercase, comments, backquotes, a trailing semicolon, options, locks."""
    t, k, i = g.t, g.t.key, g.t.column("int")
    a = g.key_literal()
    forms = (
        f"select id, {k} from {t.name} where {k} = {a} order by id",
        f"SELECT /* c */ id FROM {t.name} /* x */ WHERE {k} = {a} -- tail\nORDER BY id",
        f"SELECT `id`, `{k}` FROM `{t.name}` WHERE `{k}` = {a} ORDER BY `id`",
        f"SELECT id FROM {t.name} WHERE {k} = {a} ORDER BY id;",
        f"SELECT ALL HIGH_PRIORITY SQL_NO_CACHE id FROM {t.name} ORDER BY id LIMIT 5",
        f"SELECT id, {i} FROM {t.name} WHERE {i} > 3 ORDER BY id FOR UPDATE",
        f"SELECT id FROM {t.name} WHERE {i} < 3 ORDER BY id LOCK IN SHARE MODE",
        f"SELECT t1.id FROM {t.name} AS t1 WHERE t1.{k} = {a} ORDER BY t1.id",
    )
    return Statement("syntax_variants", g.rng.choice(forms), ordered=True)


@_class("select_in_parentheses")
def _select_in_parentheses(g: Generator) -> Statement:
    t = g.t
    return Statement("select_in_parentheses", f"(SELECT id FROM {t.name} WHERE {g.where_key()} ORDER BY id)",
                     ordered=True)  # fmt: skip


@_class("join_comma")
def _join_comma(g: Generator) -> Statement | None:
    """A co-located inner join written with a comma and its condition in WHERE."""
    if g.u is None:
        return None
    t = g.t
    return Statement("join_comma", f"SELECT a.id, b.id FROM {t.name} a, {g.u.name} b WHERE a.{t.key} = b.{g.u.key} "
                     f"AND b.hits > {g.rng.randint(-2, 8)} ORDER BY a.id, b.id", ordered=True)  # fmt: skip


@_class("join_global_agg")
def _join_global_agg(g: Generator) -> Statement | None:
    if g.g is None:
        return None
    t = g.t
    return Statement("join_global_agg", f"SELECT c.label, COUNT(*), SUM(a.{t.column('dec')}) FROM {t.name} a "
                     f"LEFT JOIN {g.g.name} c ON c.id = a.{t.column('int')} GROUP BY c.label", ordered=True,
                     fold=(0,))  # fmt: skip


@_class("update_limit")
def _update_limit(g: Generator) -> Statement:
    t = g.t
    return Statement("update_limit", f"UPDATE {t.name} SET {t.column('int')} = {g.value('int')} WHERE "
                     f"{g.where_key()} ORDER BY id DESC LIMIT 1")  # fmt: skip


def _same_row(g: Generator, cls: str, verb: str, tail: str = "") -> Statement | None:
    """``verb`` of a row whose id exists, with its key (maybe spelled otherwise): the server holding it decides."""
    rows = g.rows[g.t.name]
    if not rows:
        return None
    row = g.rng.choice(rows)
    literal = g.keys.variant(row.key) if g.rng.random() < 0.5 else g.keys.literal(row.key)
    names = ", ".join(name for name, _ in g.t.columns)
    values = [str(row.id) if kind == "id" else literal if kind == "key" else g.value(kind) for _, kind in g.t.columns]
    return Statement(cls, f"{verb} {g.t.name} ({names}) VALUES ({', '.join(values)}){tail}")


@_class("insert_ignore_same_row")
def _insert_ignore_same_row(g: Generator) -> Statement | None:
    return _same_row(g, "insert_ignore_same_row", "INSERT IGNORE INTO")


@_class("upsert_same_row")
def _upsert_same_row(g: Generator) -> Statement | None:
    i = g.t.column("int")
    return _same_row(g, "upsert_same_row", "INSERT INTO", f" ON DUPLICATE KEY UPDATE {i} = COALESCE({i}, 0) + 1")


@_class("replace_same_row")
def _replace_same_row(g: Generator) -> Statement | None:
    return _same_row(g, "replace_same_row", "REPLACE INTO")


@_class("update_join_point")
def _update_join_point(g: Generator) -> Statement | None:
    if g.u is None:
        return None
    t = g.t
    return Statement("update_join_point", f"UPDATE {t.name} a JOIN {g.u.name} b ON a.{t.key} = b.{g.u.key} SET "
                     f"a.{t.column('int')} = {g.value('int')} WHERE {g.where_key('a')}")  # fmt: skip


@_class("delete_join_point")
def _delete_join_point(g: Generator) -> Statement | None:
    if g.u is None:
        return None
    t = g.t
    return Statement("delete_join_point", f"DELETE a FROM {t.name} a JOIN {g.u.name} b ON a.{t.key} = b.{g.u.key} "
                     f"WHERE {g.where_key('a')} AND b.hits > {g.rng.randint(3, 9)}")  # fmt: skip


@_class("aggregate_division")
def _aggregate_division(g: Generator) -> Statement:
    """Aggregates of a division, whose value has more digits than its column shows."""
    t, d = g.t, g.t.column("dec")
    items = g.rng.choice((f"AVG({d} / 3)", f"SUM({d} / 7)", f"AVG({t.column('int')} / 7), COUNT(*)"))
    if g.rng.random() < 0.5:
        return Statement("aggregate_division", f"SELECT {items} FROM {t.name}", ordered=True)
    i = t.column("int")
    return Statement("aggregate_division", f"SELECT {i}, {items} FROM {t.name} GROUP BY {i}", ordered=True)


@_class("join_straight")
def _join_straight(g: Generator) -> Statement | None:
    """A co-located STRAIGHT_JOIN."""
    if g.u is None:
        return None
    t = g.t
    return Statement("join_straight", f"SELECT a.id, b.id FROM {t.name} a STRAIGHT_JOIN {g.u.name} b ON "
                     f"a.{t.key} = b.{g.u.key} ORDER BY a.id, b.id", ordered=True)  # fmt: skip


@_class("refuse_straight_join")
def _refuse_straight_join(g: Generator) -> Statement:
    """A STRAIGHT_JOIN of sharded tables not on their keys: rows that join live on different shards."""
    t, i = g.t, g.t.column("int")
    other = f"{g.u.name} b ON a.{i} = b.hits" if g.u is not None else f"{t.name} b ON a.{i} = b.id"
    return Statement("refuse_straight_join", f"SELECT COUNT(*) FROM {t.name} a STRAIGHT_JOIN {other}", ordered=True)


@_class("join_on_parenthesized")
def _join_on_parenthesized(g: Generator) -> Statement | None:
    """A co-located join whose ON condition is in parentheses."""
    if g.u is None:
        return None
    t = g.t
    return Statement("join_on_parenthesized", f"SELECT a.id, b.id FROM {t.name} a JOIN {g.u.name} b ON "
                     f"(a.{t.key} = b.{g.u.key}) ORDER BY a.id, b.id", ordered=True)  # fmt: skip


@_class("insert_no_into")
def _insert_no_into(g: Generator) -> Statement:
    """INSERT (or REPLACE) without INTO, which MariaDB allows."""
    key = g.keys.fresh()
    verb = g.rng.choice(("INSERT", "REPLACE", "INSERT IGNORE"))
    sql = g.insert(g.t, [key], [g.keys.literal(key)]).replace("INSERT INTO", verb, 1)
    return Statement("insert_no_into", sql)


@_class("update_modifiers")
def _update_modifiers(g: Generator) -> Statement:
    t = g.t
    modifier = g.rng.choice(("LOW_PRIORITY", "IGNORE", "LOW_PRIORITY IGNORE"))
    return Statement("update_modifiers", f"UPDATE {modifier} {t.name} SET {t.column('int')} = {g.value('int')} "
                     f"WHERE {g.where_key()}")  # fmt: skip


@_class("delete_modifiers")
def _delete_modifiers(g: Generator) -> Statement:
    t = g.t
    modifier = g.rng.choice(("LOW_PRIORITY", "QUICK", "IGNORE", "LOW_PRIORITY QUICK IGNORE"))
    return Statement("delete_modifiers", f"DELETE {modifier} FROM {t.name} WHERE {g.where_key()} AND "
                     f"{t.column('int')} > {g.rng.randint(3, 10)}")  # fmt: skip


@_class("delete_alias")
def _delete_alias(g: Generator) -> Statement:
    """A single-table DELETE naming its table by an alias (the multi-table form)."""
    t = g.t
    alias = g.rng.choice(("x", "AS x"))
    return Statement("delete_alias", f"DELETE x FROM {t.name} {alias} WHERE {g.where_key('x')} AND "
                     f"x.{t.column('int')} > {g.rng.randint(3, 10)}")  # fmt: skip


@_class("group_by_expression")
def _group_by_expression(g: Generator) -> Statement:
    """Groups of an expression (by its alias or its text), or of a column the select list does not show."""
    t = g.t
    i, s, d = t.column("int"), t.column("str"), t.column("dec")
    sql = g.rng.choice((
        f"SELECT {i} % 3 AS m, COUNT(*), SUM({d}) FROM {t.name} GROUP BY m",
        f"SELECT {i} % 3, COUNT(*), MIN(id) FROM {t.name} GROUP BY {i} % 3",
        f"SELECT COUNT(*), SUM({d}), MAX(id) FROM {t.name} GROUP BY {i}",
        f"SELECT LENGTH({s}), COUNT(*) FROM {t.name} GROUP BY LENGTH({s}) ORDER BY COUNT(*) DESC, 1",
        f"SELECT COUNT(*) AS n, MIN(id) FROM {t.name} GROUP BY {t.column('date')} HAVING n > 1",
        f"SELECT {i}, COUNT(*) FROM {t.name} GROUP BY 1 ORDER BY 2 DESC, 1",
    ))  # fmt: skip
    return Statement("group_by_expression", sql, ordered=True)


@_class("transaction")
def _transaction(g: Generator) -> list[Statement]:
    """A transaction on one key's shard: a write, reads that see it, a read of another key (refused when it is on
    another shard) and of every shard (refused), then COMMIT or ROLLBACK."""
    t = g.t
    i, k = t.column("int"), t.key
    key = g.existing()
    literal, other = g.keys.literal(key), g.key_literal()
    steps = [
        Statement("txn_begin", g.rng.choice(("BEGIN", "START TRANSACTION"))),
        Statement("txn_write", f"UPDATE {t.name} SET {i} = {g.value('int')} WHERE {k} = {literal}"),
        Statement("txn_read", f"SELECT id, {i} FROM {t.name} WHERE {k} = {literal} ORDER BY id", ordered=True),
        Statement("txn_insert", g.insert(t, [key], [g.keys.variant(key)])),
        Statement("txn_read", f"SELECT COUNT(*), SUM({i}) FROM {t.name} WHERE {k} = {literal}", ordered=True),
        Statement("txn_other_key", f"SELECT id FROM {t.name} WHERE {k} = {other} ORDER BY id", ordered=True),
        Statement("txn_scatter", f"SELECT COUNT(*) FROM {t.name}", ordered=True),
        Statement("txn_read", f"SELECT id, {i} FROM {t.name} WHERE {k} = {literal} ORDER BY id", ordered=True),
        Statement("txn_end", g.rng.choice(("COMMIT", "ROLLBACK"))),
    ]
    return steps


@_class("select_limit")
def _select_limit(g: Generator) -> list[Statement]:
    """Reads under the session's sql_select_limit, which caps what the client gets, not each shard's part."""
    t = g.t
    i, d = t.column("int"), t.column("dec")
    return [
        Statement("select_limit_set", f"SET SESSION sql_select_limit = {g.rng.randint(1, 4)}"),
        Statement("select_limit_read", f"SELECT id, {d} FROM {t.name} ORDER BY {d} DESC, id", ordered=True),
        Statement("select_limit_read", f"SELECT {i}, COUNT(*) FROM {t.name} GROUP BY {i}", ordered=True),
        Statement("select_limit_read", f"SELECT DISTINCT {i} FROM {t.name} ORDER BY {i}", ordered=True),
        Statement("select_limit_read", f"SELECT id FROM {t.name} ORDER BY id LIMIT 2, 3", ordered=True),
        Statement("select_limit_reset", "SET SESSION sql_select_limit = DEFAULT"),
    ]


@_class("autocommit_off")
def _autocommit_off(g: Generator) -> list[Statement]:
    """Statements with autocommit off: a transaction on the first one's shard, ended by COMMIT or ROLLBACK."""
    t = g.t
    i, k = t.column("int"), t.key
    literal = g.key_literal()
    return [
        Statement("autocommit_set", "SET autocommit = 0"),
        Statement("autocommit_write", f"UPDATE {t.name} SET {i} = {g.value('int')} WHERE {k} = {literal}"),
        Statement("autocommit_read", f"SELECT id, {i} FROM {t.name} WHERE {k} = {literal} ORDER BY id", ordered=True),
        Statement("autocommit_scatter", f"SELECT MAX(id) FROM {t.name}", ordered=True),
        Statement("autocommit_end", g.rng.choice(("COMMIT", "ROLLBACK"))),
        Statement("autocommit_read", f"SELECT id, {i} FROM {t.name} WHERE {k} = {literal} ORDER BY id", ordered=True),
        Statement("autocommit_reset", "SET autocommit = 1"),
    ]


@_class("session_variables")
def _session_variables(g: Generator) -> list[Statement]:
    """Reads over several shards under a session setting that changes their answer: each shard's connection must
    carry it."""
    t = g.t
    i, s, d, dt = t.column("int"), t.column("str"), t.column("dec"), t.column("date")
    setting, reads = g.rng.choice((
        ("div_precision_increment = 8",
         [f"SELECT AVG({d}), AVG({i}) FROM {t.name}", f"SELECT {i}, AVG({d}) FROM {t.name} GROUP BY {i}"]),
        ("lc_time_names = 'de_DE'",
         [f"SELECT id, DATE_FORMAT({dt}, '%W %d %M') FROM {t.name} ORDER BY id",
          f"SELECT DATE_FORMAT({dt}, '%M') AS m, COUNT(*) FROM {t.name} GROUP BY m"]),
        ("sql_mode = 'STRICT_TRANS_TABLES,NO_ENGINE_SUBSTITUTION,PIPES_AS_CONCAT'",
         [f"SELECT id, {s} || '!' FROM {t.name} ORDER BY id", f"SELECT id FROM {t.name} WHERE {i} > 2 || {i} < 0 "
          "ORDER BY id"]),
    ))  # fmt: skip
    name = setting.split(" = ")[0]
    return [
        Statement("session_set", f"SET SESSION {setting}"),
        *(Statement("session_read", sql, ordered=True) for sql in reads),
        Statement("session_reset", f"SET SESSION {name} = DEFAULT"),
    ]


@_class("order_alias_shadows_column")
def _order_alias_shadows_column(g: Generator) -> Statement:
    """ORDER BY a select alias that is also a column's name: MariaDB orders by the alias."""
    t = g.t
    i, d = t.column("int"), t.column("dec")
    sql = g.rng.choice((
        f"SELECT id, -{i} AS {i} FROM {t.name} ORDER BY {i}, id",
        f"SELECT id, {d} AS {i} FROM {t.name} ORDER BY {i} DESC, id{g.limit()}",
    ))  # fmt: skip
    return Statement("order_alias_shadows_column", sql, ordered=True)


@_class("having_group_alias")
def _having_group_alias(g: Generator) -> Statement:
    """HAVING on a group key named by its select alias."""
    t, i = g.t, g.t.column("int")
    return Statement("having_group_alias", f"SELECT {i} AS x, COUNT(*) AS n FROM {t.name} GROUP BY x HAVING x > 2 "
                     "ORDER BY n, x", ordered=True)  # fmt: skip


@_class("insert_multi_dup")
def _insert_multi_dup(g: Generator) -> Statement | None:
    """A multi-row INSERT (its rows likely on several shards) one of whose rows has an id that exists with its key:
    1062, and no row written anywhere."""
    rows = g.rows[g.t.name]
    if not rows:
        return None
    row = g.rng.choice(rows)
    keys = [g.keys.fresh() for _ in range(g.rng.randint(1, 3))]
    fresh = g.insert(g.t, keys, [g.keys.literal(key) for key in keys])
    values = [str(row.id) if kind == "id" else g.keys.literal(row.key) if kind == "key" else g.value(kind)
              for _, kind in g.t.columns]  # fmt: skip
    return Statement("insert_multi_dup", f"{fresh}, ({', '.join(values)})")


@_class("refuse_write_order_limit")
def _refuse_write_order_limit(g: Generator) -> Statement:
    """ORDER BY and LIMIT in a write over several shards: which rows come first is a question for all of them."""
    t, i = g.t, g.t.column("int")
    verb = g.rng.choice((f"UPDATE {t.name} SET {i} = 0", f"DELETE FROM {t.name}"))
    return Statement("refuse_write_order_limit", f"{verb} WHERE {i} > {g.rng.randint(3, 9)} ORDER BY id LIMIT 2")


@_class("refuse_multi_table_write")
def _refuse_multi_table_write(g: Generator) -> Statement | None:
    """A write joining co-located tables, over several shards."""
    if g.u is None:
        return None
    t = g.t
    return Statement("refuse_multi_table_write", f"UPDATE {t.name} a JOIN {g.u.name} b ON a.{t.key} = b.{g.u.key} "
                     f"SET a.{t.column('int')} = 0 WHERE b.hits > {g.rng.randint(5, 10)}")  # fmt: skip


@_class("refuse_global_and_sharded_write")
def _refuse_global_and_sharded_write(g: Generator) -> Statement | None:
    """A write naming the global table and a sharded one (even on one shard: the global copies would differ)."""
    if g.g is None:
        return None
    t = g.t
    return Statement("refuse_global_and_sharded_write", f"UPDATE {t.name} a JOIN {g.g.name} c ON c.id = "
                     f"a.{t.column('int')} SET a.{t.column('dec')} = c.pop WHERE {g.where_key('a')}")  # fmt: skip


@_class("refuse_unsteady_global_write")
def _refuse_unsteady_global_write(g: Generator) -> Statement | None:
    """A global write whose value differs between servers or moments."""
    if g.g is None:
        return None
    value = g.rng.choice(("FLOOR(RAND() * 10)", "SECOND(NOW())", "LENGTH(UUID())"))
    return Statement("refuse_unsteady_global_write", f"UPDATE {g.g.name} SET pop = {value} WHERE id = 1")


# --- the shapes the planner reads since issue 40: sql_mode, escapes, key spellings in SET, outer joins with the
# global table, executable comments, multi-row inserts with duplicates ---------------------------------------------

#: String keys with backslashes, kept as MariaDB keeps them: ``'\_'`` and ``'\%'`` keep their backslash outside
#: LIKE, ``'\\'`` is one backslash (all printable ASCII: the proxy's fold places them).
BACKSLASH_KEYS = ("a\\b", "x\\_y", "50\\%", "c:\\dir", "q\\", "\\_", "o\\'k", "it's", "\\%\\_")
#: Letters MariaDB reads ``'\<letter>'`` as the letter alone (not \b \n \r \t \Z \0 \N, which mean other things).
_PLAIN_ESCAPES = "acdefghijklmopqsuvwxy"
#: The session sql_modes a workload switches to (then back to DEFAULT): literals read otherwise under them.
_DEFAULT_MODE = "STRICT_TRANS_TABLES,ERROR_FOR_DIVISION_BY_ZERO,NO_AUTO_CREATE_USER,NO_ENGINE_SUBSTITUTION"
SQL_MODES = (
    "NO_BACKSLASH_ESCAPES",
    f"{_DEFAULT_MODE},NO_BACKSLASH_ESCAPES",
    "ANSI_QUOTES",
    f"{_DEFAULT_MODE},ANSI_QUOTES",
    "NO_BACKSLASH_ESCAPES,ANSI_QUOTES",
    _DEFAULT_MODE,
)
#: Texts with backslashes for the other string columns (short enough for them).
_BACKSLASH_WORDS = ("c:\\", "a\\b", "\\_x", "5\\%", "\\\\", "it's\\")


def mode_literal(g: Generator, text: str, no_backslash_escapes: bool = False, mark: str = "'") -> str:
    r"""``text`` as a string literal quoted with ``mark`` the server reads back as ``text``: under
    NO_BACKSLASH_ESCAPES only the quote doubled; else each backslash doubled or, before ``_`` or ``%``, now and then
    left single (MariaDB keeps it), a quote doubled or escaped, and now and then a letter escaped (``\a`` is a)."""
    if no_backslash_escapes:
        return mark + text.replace(mark, mark * 2) + mark
    out = []
    for n, char in enumerate(text):
        if char == "\\":
            out.append("\\" if text[n + 1 : n + 2] in ("_", "%") and g.rng.random() < 0.5 else "\\\\")
        elif char == mark:
            out.append(g.rng.choice((mark * 2, "\\" + mark)))
        elif char in _PLAIN_ESCAPES and g.rng.random() < 0.15:
            out.append("\\" + char)
        else:
            out.append(char)
    return mark + "".join(out) + mark


def _key_text_literal(g: Generator, key: object, no_backslash_escapes: bool = False, mark: str = "'") -> str:
    """A key's literal under the session's mode (a string one spelled with escapes; others canonically)."""
    if isinstance(key, str):
        return mode_literal(g, key, no_backslash_escapes, mark)
    return g.keys.literal(key)  # type: ignore[arg-type]


@_class("insert_backslash_key")
def _insert_backslash_key(g: Generator) -> Statement | None:
    r"""A string key with a backslash, ``\_`` or ``\%`` (written with escapes the server reads back as it), in the
    default sql_mode."""
    if g.kind != "string":
        return None
    key = g.rng.choice(BACKSLASH_KEYS)
    mark = '"' if g.rng.random() < 0.3 else "'"
    return Statement("insert_backslash_key", g.insert(g.t, [key], [mode_literal(g, key, mark=mark)]))


@_class("point_eq_escaped")
def _point_eq_escaped(g: Generator) -> Statement | None:
    r"""A point read by a string key written with escapes (``'\a\bc'`` is not it, ``'\abc'`` is), or in double
    quotes."""
    if g.kind != "string":
        return None
    t = g.t
    literal = mode_literal(g, str(g.existing()), mark='"' if g.rng.random() < 0.3 else "'")
    return Statement("point_eq_escaped", f"SELECT id, {t.key} FROM {t.name} WHERE {t.key} = {literal} ORDER BY id",
                     ordered=True)  # fmt: skip


@_class("sql_mode")
def _sql_mode(g: Generator) -> list[Statement]:
    """Writes and reads under a session sql_mode that reads literals otherwise (NO_BACKSLASH_ESCAPES: a backslash is
    a character; ANSI_QUOTES: "x" names a column), then back to the default."""
    t, rng = g.t, g.rng
    i, s = t.column("int"), t.column("str")
    mode = rng.choice(SQL_MODES)
    raw, ansi = "NO_BACKSLASH_ESCAPES" in mode, "ANSI_QUOTES" in mode
    if g.kind == "string" and rng.random() < 0.6:
        key: object = rng.choice(BACKSLASH_KEYS)
    else:
        key = g.existing()

    def lit(value: object) -> str:
        return _key_text_literal(g, value, raw)

    def name(column: str) -> str:
        return f'"{column}"' if ansi and rng.random() < 0.5 else column

    word = rng.choice(_BACKSLASH_WORDS)
    other = g.existing()
    steps = [
        Statement("sql_mode_set", f"SET SESSION sql_mode = '{mode}'"),
        Statement("sql_mode_insert", g.insert(t, [key], [lit(key)])),  # type: ignore[list-item]
        Statement(
            "sql_mode_update",
            f"UPDATE {name(t.name)} SET {name(s)} = {mode_literal(g, word, raw)} WHERE {name(t.key)} = {lit(key)}",
        ),
        Statement(
            "sql_mode_read",
            f"SELECT {name('id')}, {name(t.key)}, {name(s)} FROM {name(t.name)} WHERE "
            f"{name(t.key)} = {lit(key)} ORDER BY {name('id')}",
            ordered=True,
        ),
        Statement(
            "sql_mode_read",
            f"SELECT id, {t.key} FROM {t.name} WHERE {t.key} IN ({lit(key)}, {lit(other)}) ORDER BY id",
            ordered=True,
        ),
        Statement(
            "sql_mode_scatter",
            f"SELECT id, {s} FROM {t.name} WHERE {s} = {mode_literal(g, word, raw)} OR "
            f"{i} > {rng.randint(3, 9)} ORDER BY id",
            ordered=True,
        ),
        Statement(
            "sql_mode_reset",
            rng.choice(("SET SESSION sql_mode = DEFAULT", f"SET SESSION sql_mode = '{_DEFAULT_MODE}'")),
        ),
    ]
    return steps


@_class("update_key_spelling")
def _update_key_spelling(g: Generator) -> Statement:
    """The shard key set under another spelling of its column: qualified by the table, its alias or the schema too,
    quoted, in upper case (the server takes each; the proxy refuses each)."""
    t, rng = g.t, g.rng
    k = t.key
    target, column = rng.choice((
        (t.name, f"{t.name}.{k}"),
        (f"{SCHEMA}.{t.name}", f"{SCHEMA}.{t.name}.{k}"),
        (t.name, f"{SCHEMA}.{t.name}.{k}"),
        (t.name, f"`{k}`"),
        (t.name, f"`{t.name}`.`{k}`"),
        (t.name, k.upper()),
        (t.name, f"{t.name}.{k.upper()}"),
        (f"{t.name} x", f"x.{k}"),
        (f"{t.name} AS x", f"x.`{k.upper()}`"),
    ))  # fmt: skip
    where = g.where_key("x") if " x" in target else g.where_key()
    extra = f"{t.column('int')} = {g.value('int')}, " if rng.random() < 0.3 else ""
    return Statement("update_key_spelling", f"UPDATE {target} SET {extra}{column} = {g.key_literal()} WHERE {where}")


def _global_outer(g: Generator) -> tuple[str, str]:
    """The global table as the preserved side of an outer join with the main table: FROM ... and its ORDER BY."""
    assert g.g is not None
    t = g.t
    on = g.rng.choice((f"a.{t.key} = c.gk", f"c.id = a.{t.column('int')}"))
    if g.rng.random() < 0.5:
        return f"{g.g.name} c LEFT JOIN {t.name} a ON {on}", "c.id, a.id"
    return f"{t.name} a RIGHT JOIN {g.g.name} c ON {on}", "c.id, a.id"


@_class("refuse_global_outer_join")
def _refuse_global_outer_join(g: Generator) -> Statement | None:
    """The global table's rows kept by a LEFT/RIGHT JOIN with a sharded table, over several shards: each shard
    would keep them once."""
    if g.g is None:
        return None
    source, order = _global_outer(g)
    sql = g.rng.choice((f"SELECT c.id, a.id FROM {source} ORDER BY {order}", f"SELECT COUNT(*) FROM {source}",
                        f"SELECT c.label, COUNT(a.id) FROM {source} GROUP BY c.label"))  # fmt: skip
    return Statement("refuse_global_outer_join", sql, ordered=True, fold=(0,) if "c.label" in sql else ())


@_class("global_outer_join_point")
def _global_outer_join_point(g: Generator) -> Statement | None:
    """The same outer join narrowed to one shard by the sharded table's key: it runs there."""
    if g.g is None:
        return None
    source, order = _global_outer(g)
    return Statement("global_outer_join_point", f"SELECT c.id, a.id, c.label FROM {source} WHERE {g.where_key('a')} "
                     f"ORDER BY {order}", ordered=True)  # fmt: skip


@_class("scatter_executable_comment")
def _scatter_executable_comment(g: Generator) -> Statement:
    """A read over every shard with an executable comment, which the server reads as SQL."""
    t, rng = g.t, g.rng
    i, d = t.column("int"), t.column("dec")
    sql = rng.choice((
        f"SELECT id, {i} FROM {t.name} /*! WHERE {i} > {rng.randint(0, 8)} */ ORDER BY id",
        f"SELECT /*! DISTINCT */ {i} FROM {t.name} ORDER BY {i}",
        f"SELECT COUNT(*) /*!, SUM({d}) */ FROM {t.name}",
        f"SELECT id FROM {t.name} ORDER BY id /*!50100 LIMIT {rng.randint(1, 5)} */",
        f"SELECT /*M! {i}, */ id FROM {t.name} ORDER BY id",
        f"SELECT /*!40001 SQL_NO_CACHE */ id, {d} FROM {t.name} ORDER BY {d} DESC, id{g.limit()}",
    ))  # fmt: skip
    return Statement("scatter_executable_comment", sql, ordered=True)


@_class("insert_multi_same_rows")
def _insert_multi_same_rows(g: Generator) -> Statement | None:
    """A multi-row INSERT IGNORE, REPLACE or INSERT ... ON DUPLICATE KEY UPDATE of fresh rows and one whose id
    exists, with its key: its OK's info (records, duplicates) as one server's."""
    rows = g.rows[g.t.name]
    if not rows:
        return None
    row = g.rng.choice(rows)
    keys = [g.keys.fresh() for _ in range(g.rng.randint(1, 4))]
    fresh = g.insert(g.t, keys, [g.keys.literal(key) for key in keys])
    same = [str(row.id) if kind == "id" else g.keys.literal(row.key) if kind == "key" else g.value(kind)
            for _, kind in g.t.columns]  # fmt: skip
    i = g.t.column("int")
    verb, tail = g.rng.choice((("INSERT IGNORE INTO", ""), ("REPLACE INTO", ""),
                               ("INSERT INTO", f" ON DUPLICATE KEY UPDATE {i} = COALESCE({i}, 0) + 1")))  # fmt: skip
    sql = f"{fresh.replace('INSERT INTO', verb, 1)}, ({', '.join(same)}){tail}"
    return Statement("insert_multi_same_rows", sql)
