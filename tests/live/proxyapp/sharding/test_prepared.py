"""Prepared statements on sharded tables through a real proxy on two independent servers (issue 14): each execute is
planned with its values like the text it stands for. One shard: the statement runs there in the binary protocol
(the shard counts a COM_STMT_EXECUTE); several: a scatter whose merged result comes back as binary rows, byte for
byte what one unsharded server sends for the same rows (a reference copy on shard 0's server); a write over two
shards commits on both. String and NULL keys, long data, a refusal (1235) and a transaction held back until its
first execute chooses the shard. (MySQL Connector/Python and the raw test client do real server-side prepares.)"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import mysql.connector
import pytest

from devstack.sandbox import APP_PASSWORD, APP_USER, Sandbox, SandboxServer
from proxyapp.mysql.packets import read_lenenc_int
from tests.live.proxyapp.sharding.test_single_shard import config, ids_on
from tests.support.harness import ProxyProcess
from tests.support.rawclient import (
    RawClient,
    ServerError,
    execute_payload,
    is_eof,
    parse_column,
    parse_err,
    start_module_proxy,
)

KINDS = (
    "CREATE TABLE {schema}.kinds (City_ID int PRIMARY KEY, tiny tinyint, utiny tinyint unsigned, small smallint, "
    "med mediumint, big bigint, ubig bigint unsigned, f float, d double, amount decimal(14,4), "
    "name varchar(20) COLLATE utf8mb4_general_ci, bin varbinary(8), note text, day date, at datetime(6), t time(6), "
    "y year, e enum('a','b'), flag bit(3)) DEFAULT CHARSET utf8mb4"
)
KIND_ROWS = [
    (1, -128, 255, -32768, -8388608, -(2**63), 2**64 - 1, 0.1, 1 / 3, "-12345678.1234", "it's", b"\x00\xff",
     "a\\b", "2024-02-29", "2024-02-29 23:59:59.000001", "-838:59:59", 2024, "a", 5),
    (2, None, None, None, None, None, None, None, None, None, None, None, None, None, None, None, None, None, None),
    (3, 0, 0, 0, 0, 0, 0, 0.0, 0.0, "0", "", b"", "", "0000-00-00", "0000-00-00 00:00:00", "00:00:00", 0, "b", 0),
    (4, 127, 1, 2, 3, 4, 5, -1.5e30, 1e300, "0.0001", "Äpfel", b"abc", "x", "1999-12-31", "1999-12-31 00:00:00",
     "12:00:00.5", 1999, "b", 7),
    (5, 5, 5, 5, 5, 5, 5, 2.5, -2.5, "5.5", "apple", b"\x01", "y", "2001-01-01", "2001-01-01 01:02:03",
     "-00:00:01.25", 2001, "a", 1),
    (6, -6, 6, -6, -6, -6, 6, 3.25, 6e-7, "-6", "Apple", b"\\'", "z", "2002-02-02", "2002-02-02 02:02:02.5",
     "100:00:00", 2002, None, 2),
]  # fmt: skip


@pytest.fixture(scope="module")
def servers(sandbox: Sandbox, other: Sandbox) -> Iterator[tuple[SandboxServer, SandboxServer]]:
    """Both shards with shop.tb_Shop, shop.accounts, shop.cities (global) and shop.kinds (every column type, its rows
    by City_ID mod 2), and the reference schema ``ref`` on shard 0's server holding every row of kinds."""
    pair = (sandbox.primary(), other.primary())
    for number, server in enumerate(pair):
        with server.connect() as conn, conn.cursor() as cur:
            for schema in ("shop", "ref"):
                cur.execute(f"DROP DATABASE IF EXISTS {schema}")
                cur.execute(f"CREATE DATABASE {schema} DEFAULT CHARSET utf8mb4")
                cur.execute(f"GRANT ALL ON {schema}.* TO '{APP_USER}'@'%'")
            cur.execute("CREATE TABLE shop.tb_Shop (City_ID int PRIMARY KEY, name varchar(20))")
            cur.execute(
                "CREATE TABLE shop.accounts (code varchar(20) COLLATE utf8mb4_general_ci PRIMARY KEY, n int) "
                "DEFAULT CHARSET utf8mb4"
            )
            cur.execute("CREATE TABLE shop.cities (id int PRIMARY KEY, name varchar(20))")
            cur.execute("INSERT INTO shop.cities VALUES (1, 'Hangzhou')")
            cur.execute(KINDS.format(schema="shop"))
            mine = [row for row in KIND_ROWS if row[0] % 2 == number]
            cur.executemany(f"INSERT INTO shop.kinds VALUES ({', '.join(['%s'] * 19)})", mine)
            if number == 0:
                cur.execute(KINDS.format(schema="ref"))
                cur.executemany(f"INSERT INTO ref.kinds VALUES ({', '.join(['%s'] * 19)})", KIND_ROWS)
    yield pair
    for server in pair:
        with server.connect() as conn, conn.cursor() as cur:
            cur.execute("DROP DATABASE IF EXISTS shop")
            cur.execute("DROP DATABASE IF EXISTS ref")


@pytest.fixture(scope="module")
def proxy(
    servers: tuple[SandboxServer, SandboxServer], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ProxyProcess]:
    """The proxy over both shards: tb_Shop and kinds by City_ID mod 2, accounts by a hash of its string code."""
    document = config(servers)
    document["mysql_sharded_tables"].append(
        {"schemaname": "shop", "tablename": "kinds", "shard_group": "shops", "algorithm": "mod", "shard_key": "City_ID"}
    )
    started = start_module_proxy(document, tmp_path_factory.mktemp("prepared-proxy"))
    yield started
    started.stop()


@pytest.fixture
def shards(servers: tuple[SandboxServer, SandboxServer]) -> tuple[SandboxServer, SandboxServer]:
    """Both shards, tb_Shop and accounts emptied for the test."""
    for server in servers:
        with server.connect() as conn, conn.cursor() as cur:
            cur.execute("DELETE FROM shop.tb_Shop")
            cur.execute("DELETE FROM shop.accounts")
    return servers


def connector(proxy: ProxyProcess) -> Any:
    """A MySQL Connector/Python connection through the proxy (its prepared cursors prepare on the server)."""
    return mysql.connector.connect(
        host="127.0.0.1", port=proxy.port, user=APP_USER, password=APP_PASSWORD, database="shop", autocommit=True
    )


def executes(server: SandboxServer) -> int:
    """The server's count of COM_STMT_EXECUTE so far."""
    with server.connect() as conn, conn.cursor() as cur:
        cur.execute("SHOW GLOBAL STATUS LIKE 'Com_stmt_execute'")
        return int(cur.fetchone()[1])


def binary_result(client: RawClient, sql: str, params: list[Any]) -> tuple[list[int], list[bytes]]:
    """Prepare and execute ``sql``: its column types and its binary rows as the bytes that came."""
    prepared = client.prepare(sql)
    first = client.command(execute_payload(prepared.stmt_id, params))
    if first[:1] == b"\xff":
        raise ServerError(parse_err(first))
    count, _ = read_lenenc_int(first, 0)
    types = [parse_column(client.read_packet()).type for _ in range(count or 0)]
    assert is_eof(client.read_packet())
    rows = []
    while not is_eof(packet := client.read_packet()):
        rows.append(packet)
    return types, rows


def test_a_point_select_runs_binary_on_its_shard_and_a_new_value_on_the_new_shard(
    shards: tuple[SandboxServer, SandboxServer], proxy: ProxyProcess
) -> None:
    for number, server in enumerate(shards):
        with server.connect() as conn, conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO shop.tb_Shop VALUES (%s, %s)", [(n, f"{n} on {number}") for n in (number, 2 + number)]
            )
    conn = connector(proxy)
    try:
        cur = conn.cursor(prepared=True)
        before = [executes(server) for server in shards]
        for city, name in ((2, "2 on 0"), (3, "3 on 1"), (0, "0 on 0"), (1, "1 on 1")):  # one statement, re-executed
            cur.execute("SELECT name FROM tb_Shop WHERE City_ID = ?", (city,))
            assert cur.fetchall() == [(name,)]
        assert [executes(server) - count for server, count in zip(shards, before, strict=True)] == [2, 2]
        cur.execute("SELECT c.name FROM cities c WHERE c.id = ?", (1,))  # a global table: one shard
        assert cur.fetchall() == [("Hangzhou",)]
        cur.execute("SELECT name FROM tb_Shop WHERE City_ID = ?", (None,))  # = NULL: no shard holds it, none match
        assert cur.fetchall() == []
    finally:
        conn.close()
    digests = {row["digest_text"]: row for row in proxy.stats()["sharding_digest"]}
    point = digests["SELECT name FROM tb_Shop WHERE City_ID = ?"]
    assert (point["single_shard"], point["scatter"]) == (4, 1)


@pytest.mark.parametrize(
    ("sql", "params"),
    [
        ("SELECT * FROM kinds WHERE City_ID IN (?, ?) ORDER BY City_ID", [1, 2]),  # both shards, merged
        ("SELECT * FROM kinds WHERE City_ID = ?", [4]),  # one shard: relayed as it came
        ("SELECT * FROM kinds ORDER BY City_ID", []),
        ("SELECT City_ID, name, d FROM kinds ORDER BY name DESC, City_ID LIMIT ?", [3]),
        ("SELECT City_ID, t, at FROM kinds WHERE name > ? ORDER BY at, City_ID LIMIT 1, 3", [""]),
        ("SELECT COUNT(*), MIN(day), MAX(at), MIN(t), SUM(amount), MAX(ubig) FROM kinds WHERE City_ID > ?", [0]),
        ("SELECT y, COUNT(*), MAX(d), MIN(bin) FROM kinds WHERE City_ID <> ? GROUP BY y ORDER BY y", [7]),
    ],
)
def test_binary_rows_are_what_one_server_sends(
    servers: tuple[SandboxServer, SandboxServer], proxy: ProxyProcess, sql: str, params: list[Any]
) -> None:
    through_client = RawClient.connect(proxy.port, database="shop")
    direct_client = RawClient.connect(servers[0].port, database="ref")
    try:
        through = binary_result(through_client, sql, params)
        direct = binary_result(direct_client, sql, params)
    finally:
        through_client.close()
        direct_client.close()
    assert through[0] == direct[0]
    assert through[1] == direct[1]
    assert through[1]


def test_a_multi_row_insert_over_two_shards_and_string_keys(
    shards: tuple[SandboxServer, SandboxServer], proxy: ProxyProcess
) -> None:
    conn = connector(proxy)
    try:
        cur = conn.cursor(prepared=True)
        names = ("nul\x00'quote", "back\\slash", "\u00e9t\u00e9")  # as text: each shard its rows, in XA
        cur.execute(
            "INSERT INTO tb_Shop (City_ID, name) VALUES (?, ?), (?, ?), (?, ?)", (1, names[0], 2, names[1], 4, names[2])
        )
        assert cur.rowcount == 3
        assert ids_on(shards[0]) == [2, 4] and ids_on(shards[1]) == [1]
        cur.execute("SELECT City_ID, name FROM tb_Shop WHERE City_ID IN (?, ?) ORDER BY City_ID", (1, 4))
        assert cur.fetchall() == [(1, names[0]), (4, names[2])]
        for code, n in (("it's", 1), ("plain", 2), ("back\\slash", 3), ("\u00dcber", 4)):
            cur.execute("INSERT INTO accounts (code, n) VALUES (?, ?)", (code, n))
        codes = ("IT'S", "plain", "back\\slash", "\u00fcber")  # the collation folds case
        for n, code in enumerate(codes, 1):
            cur.execute("SELECT n FROM accounts WHERE code = ?", (code,))
            assert cur.fetchall() == [(n,)]
        cur.execute("SELECT n FROM accounts WHERE code IN (?, ?, ?, ?) ORDER BY n", codes)  # as text, over both
        assert cur.fetchall() == [(1,), (2,), (3,), (4,)]
    finally:
        conn.close()
    with proxy.connect(database="shop", autocommit=True) as text, text.cursor() as plain:
        for n, code in enumerate(codes, 1):  # text statements find them on the shard they were written to
            plain.execute("SELECT n FROM accounts WHERE code = %s", (code,))
            assert plain.fetchall() == ((n,),)
    with shards[0].connect() as direct, direct.cursor() as plain:
        plain.execute("SELECT name FROM shop.tb_Shop WHERE City_ID = 2")
        assert plain.fetchall() == ((names[1],),)
    stored = []
    for server in shards:
        with server.connect() as direct, direct.cursor() as plain:
            plain.execute("SELECT code FROM shop.accounts ORDER BY n")
            stored.append([row[0] for row in plain.fetchall()])
    assert sorted(stored[0] + stored[1]) == sorted(["it's", "plain", "back\\slash", "\u00dcber"])
    assert stored[0] and stored[1]  # four keys spread over both shards by their hash


def test_a_refused_execute_is_1235_and_the_session_goes_on(
    shards: tuple[SandboxServer, SandboxServer], proxy: ProxyProcess
) -> None:
    conn = connector(proxy)
    try:
        cur = conn.cursor(prepared=True)
        cur.execute("INSERT INTO tb_Shop (City_ID, name) VALUES (?, ?)", (5, "five"))
        with pytest.raises(mysql.connector.Error) as info:
            cur.execute("UPDATE tb_Shop SET City_ID = ? WHERE City_ID = ?", (6, 5))
        assert info.value.errno == 1235 and "changing the shard key" in info.value.msg
        with pytest.raises(mysql.connector.Error) as info:
            cur.execute("INSERT INTO tb_Shop (City_ID, name) VALUES (?, ?)", (None, "no key"))
        assert info.value.errno == 1235
        cur.execute("SELECT City_ID, name FROM tb_Shop WHERE City_ID = ?", (5,))
        assert cur.fetchall() == [(5, "five")]
    finally:
        conn.close()
    assert ids_on(shards[0]) == [] and ids_on(shards[1]) == [5]


def test_long_data_reaches_one_shard_binary_and_several_as_text(
    shards: tuple[SandboxServer, SandboxServer], proxy: ProxyProcess
) -> None:
    for number, server in enumerate(shards):
        with server.connect() as conn, conn.cursor() as cur:
            cur.execute("INSERT INTO shop.tb_Shop VALUES (%s, %s)", (2 - number, "xy"[1 - number]))
    client = RawClient.connect(proxy.port, database="shop")
    try:
        update = client.prepare("UPDATE tb_Shop SET name = ? WHERE City_ID = ?")
        client.send_long_data(update.stmt_id, 0, b"lo")
        client.send_long_data(update.stmt_id, 0, b"ng")
        done = client.execute(update.stmt_id, [None, 1], long_data=frozenset({0}))
        assert getattr(done, "affected_rows", None) == 1, done
        select = client.prepare("SELECT City_ID FROM tb_Shop WHERE name IN (?, ?) ORDER BY City_ID")
        client.send_long_data(select.stmt_id, 1, b"y")
        found = client.execute(select.stmt_id, ["long", None], long_data=frozenset({1}))
        assert getattr(found, "rows", None) == [[1], [2]], found
    finally:
        client.close()


def test_a_transaction_of_executes_spans_the_shards_it_reaches(
    shards: tuple[SandboxServer, SandboxServer], proxy: ProxyProcess
) -> None:
    conn = connector(proxy)
    try:
        conn.start_transaction()
        cur = conn.cursor(prepared=True)
        cur.execute("INSERT INTO tb_Shop (City_ID, name) VALUES (?, ?)", (3, "in"))  # the transaction: shard 1
        cur.execute("INSERT INTO tb_Shop (City_ID, name) VALUES (?, ?)", (7, "in too"))
        cur.execute("INSERT INTO tb_Shop (City_ID, name) VALUES (?, ?)", (2, "elsewhere"))  # shard 0's branch
        cur.execute("SELECT COUNT(*) FROM tb_Shop WHERE City_ID IN (?, ?)", (2, 3))  # over both: its own rows
        assert cur.fetchall() == [(2,)]
        conn.rollback()
        assert ids_on(shards[0]) == [] and ids_on(shards[1]) == []
        conn.start_transaction()
        cur.execute("INSERT INTO tb_Shop (City_ID, name) VALUES (?, ?)", (4, "kept"))
        cur.execute("INSERT INTO tb_Shop (City_ID, name) VALUES (?, ?)", (5, "kept too"))
        conn.commit()
    finally:
        conn.close()
    assert ids_on(shards[0]) == [4] and ids_on(shards[1]) == [5]
