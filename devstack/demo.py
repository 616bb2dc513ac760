"""The demo proxy config for a sandbox: ProxySQL's classic read/write split over its primary and replicas, and
Amoeba's sharded ``tb_Shop`` over independent shard servers (its schema, global table and first rows)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pymysql

from devstack.pgsandbox import APP_PASSWORD as PG_APP_PASSWORD
from devstack.pgsandbox import APP_USER as PG_APP_USER
from devstack.pgsandbox import MONITOR_PASSWORD as PG_MONITOR_PASSWORD
from devstack.pgsandbox import MONITOR_USER as PG_MONITOR_USER
from devstack.pgsandbox import PgServer
from devstack.sandbox import APP_PASSWORD, APP_USER, HOST, MONITOR_USER, SandboxServer

WRITER_HOSTGROUP = 10
READER_HOSTGROUP = 20
# Reads go to the replicas; the primary is a reader too, with a weight low enough to take reads only when
# no replica is available.
REPLICA_READ_WEIGHT = 1000
PRIMARY_READ_WEIGHT = 1
#: The demo's shard group, its schema, and the hostgroup of shard N (one shard server each).
SHARD_GROUP = "shops"
SHARD_SCHEMA = "shop"
FIRST_SHARD_HOSTGROUP = 100
#: The tables on every shard server: Amoeba's tb_Shop, sharded by City_ID mod N, and the global cities.
SHARD_TABLES = (
    "CREATE TABLE shop.tb_Shop (Shop_ID int NOT NULL PRIMARY KEY, City_ID int NOT NULL, "
    "ShopName varchar(40) NOT NULL, Address varchar(100) NOT NULL, ShopStatus int NOT NULL DEFAULT 1, "
    "KEY (City_ID)) DEFAULT CHARSET = utf8mb4",
    "CREATE TABLE shop.cities (City_ID int NOT NULL PRIMARY KEY, Name varchar(40) NOT NULL) DEFAULT CHARSET = utf8mb4",
)
CITIES = ((1, "Hangzhou"), (2, "Shanghai"), (3, "Beijing"), (4, "Shenzhen"))
#: The demo's shops (Shop_ID, City_ID, ShopName, Address), inserted through the proxy: each lands on its city's shard.
SHOPS = (
    (1, 1, "West Lake Books", "1 Nanshan Road"),
    (2, 2, "Bund Coffee", "8 Zhongshan Road"),
    (3, 3, "Hutong Noodles", "5 Nanluoguxiang"),
    (4, 4, "Bay Electronics", "12 Shennan Avenue"),
    (5, 1, "Longjing Tea House", "30 Longjing Road"),
)


def demo_config(
    primary: SandboxServer, replicas: Sequence[SandboxServer], shard_servers: Sequence[SandboxServer] = ()
) -> dict[str, Any]:
    """A ProxySQL-style config document: writer hostgroup 10 (the primary), reader hostgroup 20 (the replicas
    and, lightly weighted, the primary), the user ``app`` writing by default, and two routing rules that send
    plain SELECTs to the readers and SELECT ... FOR UPDATE to the writer. With ``shard_servers``, the shard group
    ``shops`` (shard N on hostgroup 100 + N, served by the Nth of them) with ``shop.tb_Shop`` sharded by
    ``City_ID`` mod N and the global table ``shop.cities``."""
    servers: list[dict[str, Any]] = [
        {"hostgroup_id": WRITER_HOSTGROUP, "hostname": primary.host, "port": primary.port, "comment": primary.name},
        {
            "hostgroup_id": READER_HOSTGROUP,
            "hostname": primary.host,
            "port": primary.port,
            "weight": PRIMARY_READ_WEIGHT,
            "comment": primary.name,
        },
    ]
    servers += [
        {
            "hostgroup_id": READER_HOSTGROUP,
            "hostname": replica.host,
            "port": replica.port,
            "weight": REPLICA_READ_WEIGHT,
            "comment": replica.name,
        }
        for replica in replicas
    ]
    servers += [
        {
            "hostgroup_id": FIRST_SHARD_HOSTGROUP + n,
            "hostname": server.host,
            "port": server.port,
            "comment": f"shard {n}",
        }
        for n, server in enumerate(shard_servers)
    ]
    document = {
        "mysql_servers": servers,
        "mysql_users": [{"username": APP_USER, "password": APP_PASSWORD, "default_hostgroup": WRITER_HOSTGROUP}],
        "mysql_query_rules": [
            {
                "rule_id": 1,
                "active": 1,
                "match_digest": r"^SELECT.*FOR UPDATE",
                "destination_hostgroup": WRITER_HOSTGROUP,
                "apply": 1,
            },
            {
                "rule_id": 2,
                "active": 1,
                "match_digest": r"^SELECT",
                "destination_hostgroup": READER_HOSTGROUP,
                "apply": 1,
            },
        ],
        "mysql_replication_hostgroups": [
            {"writer_hostgroup": WRITER_HOSTGROUP, "reader_hostgroup": READER_HOSTGROUP, "comment": "sandbox"}
        ],
    }
    if shard_servers:
        document["mysql_shards"] = [
            {"shard_group": SHARD_GROUP, "shard": n, "hostgroup_id": FIRST_SHARD_HOSTGROUP + n}
            for n in range(len(shard_servers))
        ]
        shared = {"schemaname": SHARD_SCHEMA, "shard_group": SHARD_GROUP}
        document["mysql_sharded_tables"] = [
            {**shared, "tablename": "tb_Shop", "algorithm": "mod", "shard_key": "City_ID", "comment": "Amoeba's"},
            {**shared, "tablename": "cities", "algorithm": "global", "comment": "whole on every shard"},
        ]
    return document


def prepare_shop(primary: SandboxServer, shard_servers: Sequence[SandboxServer]) -> bool:
    """The demo's ``shop`` schema and tables on every shard server, with the global table's rows, and the schema
    (empty) on the sandbox's primary, where a session that logs in with ``shop`` as its schema opens its first
    backend (the user's default hostgroup); True when the shard tables were made now (a first run, or shard servers
    built afresh), so that the demo's shops are still to be inserted."""
    with primary.connect() as conn, conn.cursor() as cur:
        cur.execute(f"CREATE DATABASE IF NOT EXISTS {SHARD_SCHEMA}")
    made = False
    for server in shard_servers:
        with server.connect() as conn, conn.cursor() as cur:
            cur.execute(f"CREATE DATABASE IF NOT EXISTS {SHARD_SCHEMA}")
            # The Shards page's rows per shard: information_schema shows the monitor only tables it may read.
            cur.execute(f"GRANT SELECT ON {SHARD_SCHEMA}.* TO '{MONITOR_USER}'@'%'")
            cur.execute(f"SHOW TABLES FROM {SHARD_SCHEMA} LIKE 'tb_Shop'")
            if cur.fetchone() is not None:
                continue
            for statement in SHARD_TABLES:
                cur.execute(statement)
            cur.executemany("INSERT INTO shop.cities VALUES (%s, %s)", CITIES)
            made = True
    return made


def insert_shops(port: int) -> None:
    """The demo's shops inserted through the proxy listening on ``port``, one INSERT each: the proxy sends each to
    the shard of its City_ID."""
    with (
        pymysql.connect(
            host=HOST, port=port, user=APP_USER, password=APP_PASSWORD, database=SHARD_SCHEMA, autocommit=True
        ) as conn,
        conn.cursor() as cur,
    ):
        for shop in SHOPS:
            cur.execute("INSERT INTO tb_Shop (Shop_ID, City_ID, ShopName, Address) VALUES (%s, %s, %s, %s)", shop)


#: The demo's PostgreSQL side: hostgroups (numbered apart from MySQL's), the pooling proxy's port and the
#: forwarding listener's.
PG_WRITER_HOSTGROUP, PG_READER_HOSTGROUP = 10, 20
PG_POOL_PORT, PG_FORWARD_PORT = 6133, 6432


def with_postgresql(document: dict[str, Any], primary: PgServer, replicas: Sequence[PgServer]) -> dict[str, Any]:
    """``document`` with the PostgreSQL sandbox behind it: the writer hostgroup 10 (primary) and reader hostgroup 20
    (replicas) as a pgsql_replication_hostgroups pair, the user ``app`` pooled per transaction, plain SELECTs routed
    to the readers, the pooling proxy on 127.0.0.1:6133 and a forwarding listener on 6432 to the writers (both nodes
    bind both ports: the kernel spreads clients over them)."""
    servers = [{"hostgroup_id": PG_WRITER_HOSTGROUP, "hostname": primary.host, "port": primary.port}]
    servers += [
        {"hostgroup_id": PG_READER_HOSTGROUP, "hostname": replica.host, "port": replica.port} for replica in replicas
    ]
    variables = list(document.get("global_variables", []))
    variables += [
        {"variable_name": "pgsql-interfaces", "variable_value": f"127.0.0.1:{PG_POOL_PORT}"},
        {"variable_name": "pgsql-monitor_username", "variable_value": PG_MONITOR_USER},
        {"variable_name": "pgsql-monitor_password", "variable_value": PG_MONITOR_PASSWORD},
    ]
    return {
        **document,
        "pgsql_servers": servers,
        "pgsql_users": [
            {"username": PG_APP_USER, "password": PG_APP_PASSWORD, "default_hostgroup": PG_WRITER_HOSTGROUP}
        ],
        "pgsql_query_rules": [
            {
                "rule_id": 1,
                "active": 1,
                "match_digest": r"^SELECT",
                "destination_hostgroup": PG_READER_HOSTGROUP,
                "apply": 1,
            }
        ],
        "pgsql_replication_hostgroups": [
            {"writer_hostgroup": PG_WRITER_HOSTGROUP, "reader_hostgroup": PG_READER_HOSTGROUP, "comment": "sandbox"}
        ],
        "pgsql_forward_listeners": [{"port": PG_FORWARD_PORT, "hostgroup_id": PG_WRITER_HOSTGROUP}],
        "global_variables": variables,
    }
