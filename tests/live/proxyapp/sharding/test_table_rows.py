"""Each sharded table's rows per shard, as the node reports them in ``/stats`` (``sharding_tables``,
proxyapp.sharding.tablerows): a proxy of two workers over two independent servers asks each shard's writer, as the
monitor user, for InnoDB's estimate (exact once the table is analyzed), once for the node however many workers it
runs; a table a shard does not have is reported with its rows missing, and the others still are."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from devstack.sandbox import APP_USER, MONITOR_USER, Sandbox, SandboxServer
from devstack.stack import wait_until
from proxyapp.sharding.tablerows import INTERVAL
from tests.live.proxyapp.sharding.test_single_shard import SHARD_HOSTGROUPS, config
from tests.support.harness import StartProxy

Servers = tuple[SandboxServer, SandboxServer]


@pytest.fixture
def shards(sandbox: Sandbox, other: Sandbox) -> Iterator[Servers]:
    """Both shards with an empty shop.tb_Shop and shop.cities; shop.accounts only on shard 0. The monitor user may
    read shop (information_schema shows it only the tables it has a privilege on)."""
    servers = (sandbox.primary(), other.primary())
    for number, server in enumerate(servers):
        with server.connect() as conn, conn.cursor() as cur:
            cur.execute("DROP DATABASE IF EXISTS shop")
            cur.execute("CREATE DATABASE shop")
            cur.execute("CREATE TABLE shop.tb_Shop (City_ID int PRIMARY KEY, name varchar(20))")
            cur.execute("CREATE TABLE shop.cities (id int PRIMARY KEY, name varchar(20))")
            if number == 0:
                cur.execute("CREATE TABLE shop.accounts (code varchar(20) PRIMARY KEY, n int)")
            cur.execute(f"GRANT ALL ON shop.* TO '{APP_USER}'@'%'")
            cur.execute(f"GRANT SELECT ON shop.* TO '{MONITOR_USER}'@'%'")
    yield servers
    for server in servers:
        with server.connect() as conn, conn.cursor() as cur:
            cur.execute("DROP DATABASE IF EXISTS shop")
            cur.execute(f"REVOKE SELECT ON shop.* FROM '{MONITOR_USER}'@'%'")


def analyze(server: SandboxServer, *tables: str) -> None:
    """ANALYZE TABLE: InnoDB's TABLE_ROWS is then exact for a small table."""
    with server.connect() as conn, conn.cursor() as cur:
        cur.execute(f"ANALYZE TABLE {', '.join(f'shop.{t}' for t in tables)}")
        cur.fetchall()


def test_each_shard_reports_its_tables_estimated_rows_once_for_the_node(
    shards: Servers, start_proxy: StartProxy
) -> None:
    document = config(shards)
    document["global_variables"] = [{"variable_name": "mysql-threads", "variable_value": "2"}]
    proxy = start_proxy(document)
    with proxy.connect(database="shop", autocommit=True) as conn, conn.cursor() as cur:
        cur.execute("INSERT INTO tb_Shop (City_ID, name) VALUES (1, 'a'), (2, 'b'), (3, 'c'), (4, 'd'), (5, 'e')")
        cur.execute("INSERT INTO cities VALUES (1, 'Hangzhou'), (2, 'Ningbo')")  # a global table: on both
    analyze(shards[0], "tb_Shop", "cities", "accounts")
    analyze(shards[1], "tb_Shop", "cities")
    expected = {
        ("accounts", 0): 0,
        ("accounts", 1): None,  # shard 1 has no such table: missing
        ("cities", 0): 2,
        ("cities", 1): 2,
        ("tb_Shop", 0): 2,
        ("tb_Shop", 1): 3,
    }
    seen: list[dict] = []

    def counted() -> bool:
        proxy.advance_clock(INTERVAL)  # the next pass is due
        seen[:] = proxy.stats()["sharding_tables"]
        return {(row["tablename"], row["shard"]): row["rows_estimate"] for row in seen} == expected

    wait_until(counted, "the shards' table rows in /stats", 30, interval=0.2)
    assert len(seen) == len(expected)  # worker 0 asked; the other worker reports none
    for row in seen:
        assert row["schemaname"] == "shop" and row["hostgroup"] == SHARD_HOSTGROUPS[row["shard"]]
        assert isinstance(row["checked_at"], float)  # asked, even where the rows are missing
    with proxy.connect(database="shop") as conn, conn.cursor() as cur:
        cur.execute("SELECT COUNT(*) FROM tb_Shop")
        assert cur.fetchall() == ((5,),)
