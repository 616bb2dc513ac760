"""Scatter-gather through a real proxy on two independent servers (issue 14): a SELECT over both shards returns
exactly what one unsharded server returns for the same rows (checked against a reference copy of them on one
server): row union, ORDER BY with a case-insensitive collation, trailing spaces and NULLs, LIMIT/OFFSET, DISTINCT,
GROUP BY with COUNT, SUM, MIN, MAX, AVG and HAVING, COUNT(*), joins with a global table, a select alias shadowing a
column, the session's sql_select_limit. What the merge cannot do exactly is refused with 1235 naming the construct;
DDL runs on every shard, and a failure says what each shard did."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pymysql
import pytest

from devstack.sandbox import APP_USER, Sandbox, SandboxServer
from tests.live.proxyapp.sharding.test_single_shard import config
from tests.support.clients import answer
from tests.support.harness import ProxyProcess
from tests.support.rawclient import start_module_proxy

ROWS = [
    (1, "apple", "1.50", "2026-01-01", 3),
    (2, "Apple", "2.25", "2026-01-01", None),
    (3, "APPLE ", "0.75", "2026-01-02", 7),
    (4, "banana", "10.00", "2026-01-02", 1),
    (5, "b", "3.10", "2026-01-03", None),
    (6, "a\t", "3.10", "2026-01-03", 2),
    (7, "cherry", "99.99", "2026-01-04", 5),
    (8, "Äpfel", "4.00", "2026-01-04", 5),
    (9, "zebra", "0.01", "2026-01-05", 0),
    (10, "apple", "1.00", "2026-01-05", 9),
    (11, "Cherry", "7.50", "2026-01-06", 4),
    (12, "date", "-2.00", "2026-01-06", None),
]
VISITS = [(1, 10), (1, 11), (2, 20), (4, 40), (7, 70), (7, 71), (12, 120), (13, 130)]
TABLE = (
    "CREATE TABLE {schema}.items (City_ID int PRIMARY KEY, name varchar(20) COLLATE utf8mb4_general_ci, "
    "price decimal(8,2), made date, qty int NULL) DEFAULT CHARSET=utf8mb4"
)


@pytest.fixture(scope="module")
def shards(sandbox: Sandbox, other: Sandbox) -> Iterator[tuple[SandboxServer, SandboxServer]]:
    """Both shards with an empty shop.items and shop.cities (a global table), and the reference schema ``ref`` on
    shard 0's server holding every row of both."""
    servers = (sandbox.primary(), other.primary())
    for server in servers:
        with server.connect() as conn, conn.cursor() as cur:
            for schema in ("shop", "ref"):
                cur.execute(f"DROP DATABASE IF EXISTS {schema}")
                cur.execute(f"CREATE DATABASE {schema} DEFAULT CHARSET utf8mb4")
                cur.execute(TABLE.format(schema=schema))
                cur.execute(f"CREATE TABLE {schema}.cities (id int PRIMARY KEY, name varchar(20))")
                cur.execute(f"CREATE TABLE {schema}.visits (city int, n int)")
                cur.executemany(
                    f"INSERT INTO {schema}.cities VALUES (%s, %s)", [(n, f"city {n}") for n in range(1, 13)]
                )
            cur.execute(f"GRANT ALL ON shop.* TO '{APP_USER}'@'%'")
    with servers[0].connect() as conn, conn.cursor() as cur:
        cur.executemany("INSERT INTO ref.items VALUES (%s, %s, %s, %s, %s)", ROWS)
        cur.executemany("INSERT INTO ref.visits VALUES (%s, %s)", VISITS)
    yield servers
    for server in servers:
        with server.connect() as conn, conn.cursor() as cur:
            cur.execute("DROP DATABASE IF EXISTS shop")
            cur.execute("DROP DATABASE IF EXISTS ref")


@pytest.fixture(scope="module")
def proxy(
    shards: tuple[SandboxServer, SandboxServer], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ProxyProcess]:
    """The proxy over both shards, items sharded by City_ID mod 2, its rows inserted through it."""
    document = config(shards)
    document["mysql_sharded_tables"][0]["tablename"] = "items"
    document["mysql_sharded_tables"].append(
        {"schemaname": "shop", "tablename": "visits", "shard_group": "shops", "algorithm": "mod", "shard_key": "city"}
    )
    started = start_module_proxy(document, tmp_path_factory.mktemp("scatter-proxy"))
    with started.connect(database="shop", autocommit=True) as conn, conn.cursor() as cur:
        for row in ROWS:
            cur.execute("INSERT INTO items (City_ID, name, price, made, qty) VALUES (%s, %s, %s, %s, %s)", row)
        for visit in VISITS:
            cur.execute("INSERT INTO visits (city, n) VALUES (%s, %s)", visit)
    yield started
    started.stop()


def both(proxy: ProxyProcess, shards: tuple[SandboxServer, ...], sql: str) -> tuple[Any, Any]:
    """``sql``'s rows through the proxy (on the sharded rows) and from the reference schema on one server."""
    with proxy.connect(database="shop", autocommit=True) as conn, conn.cursor() as cur:
        cur.execute(sql)
        through = cur.fetchall()
    with shards[0].connect() as conn, conn.cursor() as cur:
        cur.execute("USE ref")
        cur.execute(sql)
        direct = cur.fetchall()
    return through, direct


ORDERED = [
    "SELECT * FROM items ORDER BY City_ID",
    "SELECT name, City_ID FROM items ORDER BY name, City_ID",
    "SELECT City_ID FROM items ORDER BY name DESC, City_ID DESC",
    "SELECT City_ID, name FROM items ORDER BY name, City_ID LIMIT 3 OFFSET 2",
    "SELECT City_ID, name FROM items ORDER BY name, City_ID LIMIT 4, 3",
    "SELECT City_ID FROM items ORDER BY City_ID DESC LIMIT 2, 18446744073709551615",
    "SELECT * FROM items ORDER BY qty, City_ID",
    "SELECT City_ID, qty FROM items ORDER BY qty DESC, City_ID DESC LIMIT 4",
    "SELECT City_ID, price FROM items WHERE price > 2 ORDER BY price DESC, City_ID LIMIT 3",
    "SELECT City_ID, made FROM items ORDER BY made DESC, 1",
    "SELECT City_ID AS id, price * 2 AS doubled FROM items ORDER BY doubled, id",
    "SELECT COUNT(*) FROM items",
    "SELECT COUNT(*), COUNT(qty), SUM(price), MIN(price), MAX(price), AVG(price), AVG(qty), SUM(qty) FROM items",
    "SELECT MIN(made), MAX(made), MIN(City_ID) FROM items WHERE City_ID IN (3, 4, 5)",
    "SELECT COUNT(*), SUM(qty), MAX(qty), AVG(price) FROM items WHERE 1 = 0",
    "SELECT made, COUNT(*), SUM(price), AVG(qty) FROM items GROUP BY made",
    # A division's value has more digits than it shows: the sums add them.
    "SELECT SUM(price / 3), AVG(price / 3), AVG(qty / 7), SUM(qty / 7 / 3) FROM items",
    "SELECT SUM(price / 7), AVG(qty / 3) FROM items WHERE City_ID > 2 HAVING AVG(price / 3) > 0.5",
    "SELECT made, COUNT(*) n FROM items GROUP BY made HAVING n > 1 AND SUM(price) < 10 ORDER BY made DESC",
    "SELECT made, SUM(qty) t FROM items GROUP BY made ORDER BY t DESC, made LIMIT 2",
    "SELECT made, MAX(qty) FROM items GROUP BY made HAVING MAX(qty) IS NULL OR MAX(qty) >= 5 ORDER BY 1",
    "SELECT made FROM items GROUP BY made ORDER BY COUNT(qty) DESC, made",
    # A select alias that is a column's name: GROUP BY and HAVING take the column, ORDER BY the alias.
    "SELECT qty, COUNT(*) AS qty FROM items GROUP BY qty HAVING qty > 2 ORDER BY qty DESC, 1",
    "SELECT qty % 3 AS m, COUNT(*) FROM items GROUP BY m",
    "SELECT DISTINCT qty FROM items ORDER BY qty",
    "SELECT DISTINCT made FROM items ORDER BY made DESC LIMIT 2",
    "SELECT i.City_ID, c.name FROM items i JOIN cities c ON c.id = i.City_ID WHERE i.qty > 2 ORDER BY i.City_ID",
    "SELECT made, COUNT(*) FROM items WHERE 1 = 0 GROUP BY made",
    # Co-located joins: visits is sharded by the same rule, joined on the keys.
    "SELECT i.City_ID, v.n FROM items i JOIN visits v ON v.city = i.City_ID ORDER BY i.City_ID, v.n",
    "SELECT i.made, COUNT(*), SUM(v.n) FROM items i JOIN visits v ON v.city = i.City_ID GROUP BY i.made",
    "SELECT i.City_ID, v.n FROM items i LEFT JOIN visits v ON i.City_ID = v.city ORDER BY i.City_ID, v.n",
    "SELECT COUNT(*) FROM items i, visits v WHERE i.City_ID = v.city AND i.City_ID IN (1, 7)",
    # COUNT(DISTINCT) and GROUP_CONCAT: each shard groups finer, the merge counts and joins.
    "SELECT COUNT(DISTINCT qty), COUNT(DISTINCT made, qty), COUNT(*) FROM items",
    "SELECT made, COUNT(DISTINCT qty) n, SUM(price) FROM items GROUP BY made HAVING COUNT(DISTINCT City_ID) > 1",
    "SELECT COUNT(DISTINCT qty) FROM items WHERE 1 = 0",
    "SELECT GROUP_CONCAT(City_ID, '=', qty ORDER BY qty DESC, City_ID SEPARATOR '; ') FROM items",
    "SELECT made, GROUP_CONCAT(price ORDER BY City_ID LIMIT 1, 2), COUNT(*) FROM items GROUP BY made",
    "SELECT GROUP_CONCAT(City_ID ORDER BY City_ID) FROM items WHERE 1 = 0",
    # Subqueries that read only the global table: each shard reads its own copy.
    "SELECT * FROM items WHERE City_ID IN (SELECT id FROM cities) ORDER BY City_ID",
    "SELECT i.City_ID, (SELECT c.name FROM cities c WHERE c.id = i.City_ID) AS n FROM items i ORDER BY 1",
]


@pytest.mark.parametrize("sql", ORDERED)
def test_a_scatter_returns_what_one_server_returns(
    proxy: ProxyProcess, shards: tuple[SandboxServer, SandboxServer], sql: str
) -> None:
    through, direct = both(proxy, shards, sql)
    assert through == direct


def test_the_session_select_limit_caps_the_merged_result(
    proxy: ProxyProcess, shards: tuple[SandboxServer, SandboxServer]
) -> None:
    """sql_select_limit caps what the client gets, not each shard's part; a LIMIT of the statement's own wins."""
    sqls = [
        "SELECT City_ID, price FROM items ORDER BY price DESC, City_ID",
        "SELECT made, COUNT(*) FROM items GROUP BY made",
        "SELECT DISTINCT qty FROM items ORDER BY qty",
        "SELECT City_ID FROM items ORDER BY City_ID LIMIT 2, 4",
    ]
    answers: list[list[Any]] = [[], []]
    for conn, schema, rows in ((proxy.connect(database="shop", autocommit=True), "shop", answers[0]),
                               (shards[0].connect(), "ref", answers[1])):  # fmt: skip
        with conn, conn.cursor() as cur:
            cur.execute(f"USE {schema}")
            cur.execute("SET SESSION sql_select_limit = 3")
            for sql in sqls:
                cur.execute(sql)
                rows.append(cur.fetchall())
    assert answers[0] == answers[1] and [len(rows) for rows in answers[0]] == [3, 3, 3, 4]


def test_unordered_rows_are_the_same_multiset(proxy: ProxyProcess, shards: tuple[SandboxServer, SandboxServer]) -> None:
    through, direct = both(proxy, shards, "SELECT * FROM items WHERE qty IS NOT NULL")
    assert sorted(through) == sorted(direct) and len(through) == 9


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT name, COUNT(*), MIN(City_ID) FROM items GROUP BY name",
        "SELECT DISTINCT name FROM items ORDER BY name",
        "SELECT MIN(name), MAX(name) FROM items",
    ],
)
def test_strings_group_and_order_by_their_collation(
    proxy: ProxyProcess, shards: tuple[SandboxServer, SandboxServer], sql: str
) -> None:
    """'apple', 'Apple' and 'APPLE ' are one value under utf8mb4_general_ci (which of them names the group is the
    server's choice, on one server too); 'a\\t' sorts before 'a'; 'Äpfel' beside 'apfel'."""
    through, direct = both(proxy, shards, sql)

    def folded(rows: Any) -> list[tuple[Any, ...]]:
        return [tuple(v.rstrip().lower() if isinstance(v, str) else v for v in row) for row in rows]

    assert folded(through) == folded(direct)
    assert len(through) == len(direct)


@pytest.mark.parametrize(
    ("sql", "construct"),
    [
        ("SELECT GROUP_CONCAT(name) FROM items", "GROUP_CONCAT without ORDER BY"),
        ("SELECT MAX(qty) + 1 FROM items", "an expression over aggregates (MAX(qty) + 1)"),
        ("SELECT SUM(DISTINCT qty) FROM items", "SUM(DISTINCT ...)"),
        ("SELECT City_ID, ROW_NUMBER() OVER (ORDER BY City_ID) FROM items", "window functions"),
        ("SELECT made FROM items GROUP BY made WITH ROLLUP", "WITH ROLLUP"),
        ("SELECT * FROM cities WHERE id IN (SELECT City_ID FROM items)", "a subquery on shop.items"),
        ("SELECT COUNT(*) FROM items i JOIN visits v ON v.n = i.qty", "not on their shard keys"),
        ("SELECT made AS qty, COUNT(*) FROM items GROUP BY qty", "GROUP BY qty, a select alias"),
        ("SELECT made, AVG(price / 3) FROM items GROUP BY made", "SUM or AVG of a division with GROUP BY"),
    ],
)
def test_what_cannot_be_merged_exactly_is_refused(proxy: ProxyProcess, sql: str, construct: str | None) -> None:
    with proxy.connect(database="shop", autocommit=True) as conn, conn.cursor() as cur:
        with pytest.raises(pymysql.err.MySQLError) as info:
            cur.execute(sql)
        assert info.value.args[0] == 1235
        assert construct is None or construct in info.value.args[1], info.value.args
        cur.execute("SELECT COUNT(*) FROM items")  # the session goes on
        assert cur.fetchall() == ((12,),)


def test_ddl_runs_on_every_shard_and_a_failure_tells_each_shard(
    proxy: ProxyProcess, shards: tuple[SandboxServer, SandboxServer]
) -> None:
    with proxy.connect(database="shop", autocommit=True) as conn, conn.cursor() as cur:
        cur.execute("ALTER TABLE items ADD COLUMN note varchar(10) NULL")
        for server in shards:
            with server.connect() as direct, direct.cursor() as check:
                check.execute("SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = 'shop' "
                              "AND TABLE_NAME = 'items' AND COLUMN_NAME = 'note'")  # fmt: skip
                assert check.fetchall() == ((1,),)
        with shards[1].connect() as direct, direct.cursor() as check:
            check.execute("ALTER TABLE shop.items DROP COLUMN note")  # shard 1 drifts
        with pytest.raises(pymysql.err.MySQLError) as info:
            cur.execute("ALTER TABLE items DROP COLUMN note")
        code, message = info.value.args
        assert code == 1091, message  # the failing shard's own error
        assert "failed on 1 of 2 shards" in message and "shard 0 (hostgroup 100): done" in message
        assert "shard 1 (hostgroup 101): 1091" in message


def test_stats_tell_each_digests_scatter_ratio(proxy: ProxyProcess) -> None:
    with proxy.connect(database="shop", autocommit=True) as conn, conn.cursor() as cur:
        for city in (1, 2, 3):
            cur.execute(f"SELECT name FROM items WHERE City_ID = {city}")  # one shard each
        cur.execute("SELECT name FROM items WHERE City_ID IN (1, 2)")  # both
        cur.execute("SELECT name FROM items WHERE qty > 100 ORDER BY name")  # both: misses the key
        with pytest.raises(pymysql.err.MySQLError):
            cur.execute("SELECT GROUP_CONCAT(name) FROM items WHERE qty > 100")
    rows = {row["digest_text"]: row for row in proxy.stats()["sharding_digest"]}
    point = rows["SELECT name FROM items WHERE City_ID = ?"]
    assert (point["single_shard"], point["scatter"], point["scatter_ratio"]) == (3, 0, 0.0)
    missed = rows["SELECT name FROM items WHERE qty > ? ORDER BY name"]
    assert (missed["scatter"], missed["shards_reached"], missed["scatter_ratio"]) == (1, 2, 1.0)
    assert rows["SELECT GROUP_CONCAT(name) FROM items WHERE qty > ?"]["refused"] == 1
    assert 'proxyfleet_sharded_statements_total{reach="scatter"}' in proxy.admin("GET", "/metrics")


@pytest.mark.parametrize(
    "sql",
    [
        "INSERT INTO items (City_ID, name) VALUES (103, 'x'), (104, 'y')",
        "REPLACE INTO items (City_ID, name) VALUES (101, 'x'), (102, 'z'), (104, 'w')",
        "INSERT INTO items (City_ID, qty) VALUES (101, 1), (102, 2) ON DUPLICATE KEY UPDATE qty = VALUES(qty)",
        "INSERT IGNORE INTO items (City_ID, name) VALUES (101, 'x'), (103, 'y'), (105, 'v')",
        "UPDATE items SET qty = 5 WHERE City_ID IN (101, 102, 103)",
    ],
)
def test_a_write_over_several_shards_tells_one_servers_ok_info(
    proxy: ProxyProcess, shards: tuple[SandboxServer, ...], sql: str
) -> None:
    """The OK of a write over both shards (each given one row or more) tells the info one server tells: its
    ``Records: 3  Duplicates: 1  Warnings: 0`` the sum of the shards', a one-row part counted as one record. Rows
    101 and 102 are there before it (one on each shard); the written rows are deleted again on both sides."""
    with proxy.connect(database="shop", autocommit=True) as through, shards[0].connect(database="ref") as direct:
        try:
            for conn in (through, direct):
                for key in (101, 102):
                    assert answer(conn, f"INSERT INTO items (City_ID, name) VALUES ({key}, 'a')").code == 0
            told, expected = answer(through, sql), answer(direct, sql)
            assert told.code == expected.code == 0
            assert told.info == expected.info != ""
        finally:
            for conn in (through, direct):
                answer(conn, "DELETE FROM items WHERE City_ID > 100")
