"""The PostgreSQL pooling proxy with real clients (psycopg 3 in text, binary and pipeline mode, asyncpg, psql,
pgbench in its three protocols) against the machine's PostgreSQL: logins, transaction pooling that never hands an
open transaction to another client, prepared statements across server connections, settings that follow the
session, pins, COPY both ways, LISTEN/NOTIFY, cancel requests, errors with their fields, and 200 clients on 5
server connections."""

from __future__ import annotations

import asyncio
import socket
import struct
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import asyncpg
import psycopg
import pytest

from devstack.certs import loopback_certificate
from devstack.ports import free_port
from devstack.proxy import ProxyProcess
from devstack.stack import wait_until
from tests.live.proxyapp.pgproxy.conftest import (
    DATABASE,
    HG,
    PASSWORD,
    PG_HOST,
    PG_PORT,
    ROLE,
    Pooler,
    pool_config,
    server_sessions,
)
from tests.support.relay import SlowRelay

StartPooler = Callable[..., Pooler]


def test_a_client_logs_in_and_queries(start_pooler: StartPooler) -> None:
    pooler = start_pooler()
    with pooler.connect() as conn:
        assert conn.execute("SELECT current_user, %s::int + 1", (41,)).fetchone() == (ROLE, 42)
        assert conn.info.server_version >= 150000
        assert conn.info.parameter_status("client_encoding") == "UTF8"
        with conn.cursor(binary=True) as cur:
            assert cur.execute("SELECT %s::bigint, %s::text", (2**40, "é")).fetchone() == (2**40, "é")
    stats = pooler.stats()
    assert stats["listener"]["state"] == "listening"
    assert stats["clients_total"] == 1 and stats["logins_failed"] == 0


def test_a_wrong_password_and_an_unknown_user_are_refused_alike(start_pooler: StartPooler) -> None:
    pooler = start_pooler()
    for user, password in ((ROLE, "wrong"), ("nobody_here", PASSWORD)):
        with pytest.raises(psycopg.OperationalError, match=f'password authentication failed for user "{user}"'):
            pooler.connect(user=user, password=password)
    assert pooler.stats()["logins_failed"] == 2


def test_tls_is_offered(start_pooler: StartPooler) -> None:
    pooler = start_pooler()
    with pooler.connect(sslmode="require") as conn:
        assert conn.pgconn.ssl_in_use
        assert conn.execute("SELECT 1").fetchone() == (1,)


def test_transactions_share_few_server_connections_and_never_leak(start_pooler: StartPooler) -> None:
    pooler = start_pooler(max_connections=2)
    clients = [pooler.connect() for _ in range(6)]
    try:
        clients[0].execute("CREATE TABLE IF NOT EXISTS pool_tx (id int PRIMARY KEY, who int)")
        clients[0].commit()
        for round_ in range(5):
            for i, conn in enumerate(clients):
                conn.execute("INSERT INTO pool_tx VALUES (%s, %s)", (round_ * 100 + i, i))
                if i % 2:
                    conn.rollback()
                else:
                    conn.commit()
        committed = clients[0].execute("SELECT count(*), count(DISTINCT who) FROM pool_tx").fetchone()
        assert committed == (15, 3)  # every even client's rows, none of the rolled back ones
        clients[0].commit()
        assert len(server_sessions()) <= 2
        assert server_sessions("idle in transaction") == []
    finally:
        for conn in clients:
            conn.close()


def test_a_transaction_keeps_its_server_connection(start_pooler: StartPooler) -> None:
    pooler = start_pooler(max_connections=3)
    with pooler.connect() as conn, pooler.connect(autocommit=True) as other:
        pid = conn.execute("SELECT pg_backend_pid()").fetchone()
        for _ in range(5):
            other.execute("SELECT 1")
            assert conn.execute("SELECT pg_backend_pid()").fetchone() == pid
        conn.rollback()


def test_prepared_statements_follow_the_client_across_server_connections(start_pooler: StartPooler) -> None:
    """Two clients take turns holding one of the pool's two server connections in a transaction, so each statement
    of the third runs on the other one: a different server connection every time."""
    pooler = start_pooler(max_connections=2)
    with pooler.connect(autocommit=True) as conn, pooler.connect() as holding, pooler.connect() as waiting:
        held = holding.execute("SELECT pg_backend_pid()").fetchone()
        pids = []
        for i in range(6):
            row = conn.execute("SELECT %s::int * 2, pg_backend_pid()", (i,), prepare=True).fetchone()
            assert row is not None and row[0] == i * 2
            assert (row[1],) != held
            pids.append(row[1])
            held = waiting.execute("SELECT pg_backend_pid()").fetchone()  # the connection conn let go of
            assert held == (row[1],)
            holding.commit()
            holding, waiting = waiting, holding
        assert len(set(pids)) == 2  # each statement on the other connection than the one before
        holding.commit()
        with conn.pipeline():
            cursors = [conn.execute("SELECT %s::int + 1", (i,), prepare=True) for i in range(20)]
        assert [c.fetchone() for c in cursors] == [(i + 1,) for i in range(20)]


def test_settings_follow_the_session(start_pooler: StartPooler) -> None:
    pooler = start_pooler(max_connections=2)
    with pooler.connect(autocommit=True, application_name="app-one") as one, pooler.connect(autocommit=True) as two:
        one.execute("SET search_path TO pg_catalog, public")
        one.execute("SET statement_timeout = '7s'")
        two.execute("SET statement_timeout = '3s'")
        for _ in range(3):
            assert one.execute("SHOW statement_timeout").fetchone() == ("7s",)
            assert two.execute("SHOW statement_timeout").fetchone() == ("3s",)
            assert one.execute("SHOW search_path").fetchone() == ("pg_catalog, public",)
            assert one.execute("SHOW application_name").fetchone() == ("app-one",)
        one.execute("RESET statement_timeout")
        assert one.execute("SHOW statement_timeout").fetchone() == ("0",)
    with pooler.connect() as tx:  # a SET in a transaction that rolls back is undone
        tx.execute("SET work_mem = '7MB'")
        tx.rollback()
        assert tx.execute("SHOW work_mem").fetchone() != ("7MB",)
        tx.rollback()


def test_a_temporary_table_pins_the_session(start_pooler: StartPooler) -> None:
    pooler = start_pooler(max_connections=3)
    with pooler.connect(autocommit=True) as conn, pooler.connect(autocommit=True) as churn:
        conn.execute("CREATE TEMP TABLE scratch (v int)")
        for i in range(5):
            churn.execute("SELECT 1")
            conn.execute("INSERT INTO scratch VALUES (%s)", (i,))
        assert conn.execute("SELECT sum(v) FROM scratch").fetchone() == (10,)


def test_listen_and_notify_under_session_pooling(start_pooler: StartPooler) -> None:
    pooler = start_pooler(pool_mode="session")
    with pooler.connect(autocommit=True) as listener, pooler.connect(autocommit=True) as notifier:
        listener.execute("LISTEN pool_channel")
        notifier.execute("NOTIFY pool_channel, 'hello'")
        received = next(listener.notifies(timeout=10, stop_after=1))
        assert (received.channel, received.payload) == ("pool_channel", "hello")


def test_copy_passes_both_ways(start_pooler: StartPooler) -> None:
    pooler = start_pooler()
    with pooler.connect(autocommit=True) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS pool_copy (id int, name text)")
        conn.execute("TRUNCATE pool_copy")
        with conn.cursor().copy("COPY pool_copy FROM STDIN") as copy:
            for i in range(5000):
                copy.write_row((i, f"row {i}"))
        assert conn.execute("SELECT count(*), sum(id) FROM pool_copy").fetchone() == (5000, 12497500)
        with conn.cursor().copy("COPY (SELECT id FROM pool_copy ORDER BY id LIMIT 3) TO STDOUT") as copy:
            assert [row for row in copy.rows()] == [("0",), ("1",), ("2",)]


def test_a_cancel_request_reaches_the_running_query(start_pooler: StartPooler) -> None:
    pooler = start_pooler()
    with pooler.connect(autocommit=True) as conn:
        errors: list[BaseException] = []

        def sleep() -> None:
            try:
                conn.execute("SELECT pg_sleep(60)")
            except psycopg.Error as exc:
                errors.append(exc)

        thread = threading.Thread(target=sleep)
        thread.start()
        wait_until(lambda: ("active", "SELECT pg_sleep(60)") in server_sessions(), "the sleep running", 10)
        conn.cancel_safe()
        thread.join(30)
        assert [type(e) for e in errors] == [psycopg.errors.QueryCanceled]
        assert conn.execute("SELECT 1").fetchone() == (1,)


@pytest.mark.parametrize("through", ["direct", "pooler"])
def test_a_cancel_request_is_done_when_the_client_is_told_so(start_pooler: StartPooler, through: str) -> None:
    """libpq's cancel returns when the server closes the cancel connection, the server having acted on it by then;
    the pooler closes the client's only after the server closed its own, so a cancel sent while nothing runs is
    spent, as direct, and never cancels the session's next statement (asyncpg's COPY tests cancel after a CopyFail)."""
    pooler = start_pooler()
    direct = dict(host=PG_HOST, port=PG_PORT, user=ROLE, password=PASSWORD, dbname=DATABASE, sslmode="disable")
    with psycopg.connect(**direct) if through == "direct" else pooler.connect() as conn:
        conn.execute("SELECT 1")  # in a transaction: the session holds its server connection, idle
        for _ in range(5):
            conn.cancel_safe()
            assert conn.execute("SELECT pg_sleep(0.2), 7").fetchone() == ("", 7)
        conn.rollback()


def test_a_late_cancel_never_reaches_the_next_client_of_its_connection(
    pg_database: str, start_proxy: Callable[[dict[str, Any]], ProxyProcess]
) -> None:
    """A's CancelRequest reaches the server late (the relay holds it) while A's transaction ends: A's connection,
    the only one, goes to B only once the server has acted on the cancel, so B's statement runs whole."""
    relay = SlowRelay(PG_PORT)
    port = free_port()
    config = pool_config(port, max_connections=1)
    config["pgsql_servers"][0]["port"] = relay.listener.getsockname()[1]
    pooler = Pooler(start_proxy(config), port)
    try:
        a = pooler.connect()
        a.execute("SELECT 1")  # in a transaction: A holds the one server connection, idle
        relay.hold_new()
        cancel = threading.Thread(target=a.cancel_safe)
        cancel.start()
        wait_until(lambda: relay.new_held == 1, "the cancel request held on its way", 10)
        a.commit()
        outcome: list[object] = []

        def second_client() -> None:
            try:
                with pooler.connect() as b:
                    outcome.append(b.execute("SELECT pg_sleep(0.5), 'whole'").fetchone())
            except psycopg.Error as exc:
                outcome.append(exc)

        b_thread = threading.Thread(target=second_client)
        b_thread.start()
        wait_until(
            lambda: (
                pooler.stats()["waiting_clients"] == 1
                or ("active", "SELECT pg_sleep(0.5), 'whole'") in server_sessions()
            ),
            "B waiting for the connection, or running on it",
            10,
        )
        relay.release_new()
        cancel.join(30)
        b_thread.join(30)
        assert outcome == [("", "whole")]
        a.close()
    finally:
        relay.close()


def test_errors_reach_the_client_with_their_fields(start_pooler: StartPooler) -> None:
    pooler = start_pooler()
    with pooler.connect(autocommit=True) as conn:
        with pytest.raises(psycopg.errors.DivisionByZero) as divided:
            conn.execute("SELECT 1 / 0")
        assert divided.value.diag.message_primary == "division by zero"
        conn.execute("CREATE TABLE IF NOT EXISTS pool_unique (id int CONSTRAINT pool_unique_pk PRIMARY KEY)")
        conn.execute("INSERT INTO pool_unique VALUES (1) ON CONFLICT DO NOTHING")
        with pytest.raises(psycopg.errors.UniqueViolation) as duplicate:
            conn.execute("INSERT INTO pool_unique VALUES (%s)", (1,))
        assert duplicate.value.diag.constraint_name == "pool_unique_pk"
        with pytest.raises(psycopg.errors.UndefinedTable):
            conn.execute("SELECT * FROM no_such_table WHERE id = %s", (1,), prepare=True)
        assert conn.execute("SELECT 2").fetchone() == (2,)


def test_asyncpg_prepares_copies_and_runs_many(start_pooler: StartPooler) -> None:
    pooler = start_pooler(max_connections=2)

    async def work() -> None:
        conn = await asyncpg.connect(pooler.dsn())
        other = await asyncpg.connect(pooler.dsn())
        try:
            await conn.execute("CREATE TABLE IF NOT EXISTS pool_apg (id int, v text)")
            await conn.execute("TRUNCATE pool_apg")
            await conn.copy_records_to_table("pool_apg", records=[(i, f"v{i}") for i in range(100)])
            statement = await conn.prepare("SELECT v FROM pool_apg WHERE id = $1")
            for i in (3, 50, 99):
                await other.fetchval("SELECT 1")
                assert await statement.fetchval(i) == f"v{i}"
            await conn.executemany("INSERT INTO pool_apg VALUES ($1, $2)", [(1000 + i, "m") for i in range(50)])
            assert await conn.fetchval("SELECT count(*) FROM pool_apg") == 150
            async with conn.transaction():
                await conn.execute("INSERT INTO pool_apg VALUES (-1, 'tx')")
                assert await other.fetchval("SELECT count(*) FROM pool_apg WHERE id = -1") == 0
        finally:
            await conn.close()
            await other.close()

    asyncio.run(work())


def test_psql_runs_a_script(start_pooler: StartPooler) -> None:
    pooler = start_pooler()
    done = subprocess.run(
        ["psql", pooler.dsn(), "-At", "-c", "SELECT 40 + 2", "-c", "SELECT current_user"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["42", ROLE]


def pgbench(pooler: Pooler, *args: str) -> subprocess.CompletedProcess[str]:
    """Run pgbench through the proxy."""
    return subprocess.run(["pgbench", *args, pooler.dsn()], capture_output=True, text=True, timeout=300)


def test_pgbench_in_every_protocol_and_200_clients_on_5_connections(start_pooler: StartPooler) -> None:
    pooler = start_pooler(max_connections=5)
    init = pgbench(pooler, "-i", "-s", "1", "-q")
    assert init.returncode == 0, init.stderr
    for mode in ("simple", "extended", "prepared"):
        run = pgbench(pooler, "-M", mode, "-c", "8", "-j", "2", "-t", "50")
        assert run.returncode == 0, run.stderr
        assert "number of failed transactions: 0" in run.stdout, run.stdout
        assert "number of transactions actually processed: 400/400" in run.stdout, run.stdout
    many = pgbench(pooler, "-S", "-M", "prepared", "-c", "200", "-j", "2", "-t", "20")
    assert many.returncode == 0, many.stderr
    assert "number of transactions actually processed: 4000/4000" in many.stdout, many.stdout
    pool = pooler.stats()["connection_pool"]
    assert pool[0]["MaxConnUsed"] <= 5
    assert server_sessions("idle in transaction") == []


def test_a_malformed_message_ends_that_session_alone(start_pooler: StartPooler) -> None:
    pooler = start_pooler()
    with socket.create_connection(("127.0.0.1", pooler.port), timeout=10) as raw:
        body = struct.pack("!i", 196608) + b"user\0" + ROLE.encode() + b"\0\0"
        raw.sendall(struct.pack("!i", len(body) + 4) + body)
        assert raw.recv(1)[:1] == b"R"  # the SCRAM exchange begins
        raw.sendall(b"p\x7f\xff\xff\xff")  # a password message 2 GB long
        answer = b""
        while chunk := raw.recv(4096):
            answer += chunk
        assert b"C08P01\0" in answer and b"invalid message length" in answer
    with pooler.connect() as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)


def test_query_rules_route_rewrite_and_block(start_pooler: StartPooler) -> None:
    pooler = start_pooler()
    config = pool_config(pooler.port)
    config["pgsql_servers"].append({"hostgroup_id": HG + 1, "hostname": "localhost", "port": 5432})
    config["pgsql_query_rules"] = [
        {"rule_id": 1, "active": 1, "match_pattern": "^SELECT .*reports", "destination_hostgroup": HG + 1, "apply": 1},
        {"rule_id": 2, "active": 1, "match_pattern": "forbidden_table", "error_msg": "not through the proxy"},
        {"rule_id": 3, "active": 1, "match_pattern": "^SELECT 'old'", "replace_pattern": "SELECT 'new'"},
    ]
    answer = pooler.proxy.admin("POST", "/reload", config)
    assert answer["ok"], answer
    with pooler.connect(autocommit=True) as conn:
        assert conn.execute("SELECT 'reports' AS what").fetchone() == ("reports",)
        assert conn.execute("SELECT 'old'").fetchone() == ("new",)
        with pytest.raises(psycopg.errors.InvalidAuthorizationSpecification, match="not through the proxy"):
            conn.execute("SELECT * FROM forbidden_table")
        with pytest.raises(psycopg.Error, match="not through the proxy"):
            conn.execute("SELECT * FROM forbidden_table WHERE id = %s", (1,))  # the extended protocol
        assert conn.execute("SELECT %s::int", (7,)).fetchone() == (7,)  # the session goes on
    stats = pooler.stats()
    by_hostgroup = {row["hostgroup"]: row for row in stats["connection_pool"]}
    assert by_hostgroup[HG + 1]["ConnOK"] >= 1  # the reports query went to the other hostgroup
    assert stats["blocked"] == 2
    assert {row["rule_id"]: row["hits"] for row in stats["query_rules"]} == {1: 1, 2: 2, 3: 1}


def test_statements_are_counted_by_digest(start_pooler: StartPooler) -> None:
    pooler = start_pooler()
    with pooler.connect(autocommit=True) as conn:
        for i in range(3):
            conn.execute(f"SELECT {i}::int, 'x'")
        for i in range(4):
            conn.execute("SELECT generate_series(1, %s)", (i + 1,))
    rows = {row["digest_text"]: row for row in pooler.proxy.stats()["pgsql_query_digest"]}
    simple = rows["SELECT ?::int,?"]
    assert (simple["count_star"], simple["sum_rows_sent"], simple["database"]) == (3, 3, DATABASE)
    extended = rows["SELECT generate_series(?,?)"]
    assert (extended["count_star"], extended["sum_rows_sent"]) == (4, 10)


@pytest.mark.parametrize("spelling", ["utf8", "UTF-8", "unicode", "latin1", "Sql_Ascii"])
def test_client_encoding_is_reported_as_the_server_spells_it(start_pooler: StartPooler, spelling: str) -> None:
    pooler = start_pooler()
    with psycopg.connect(host="127.0.0.1", port=5432, user=ROLE, dbname=DATABASE, client_encoding=spelling) as direct:
        expected = direct.info.parameter_status("client_encoding")
        shown = direct.execute("SHOW client_encoding").fetchone()
    with pooler.connect(client_encoding=spelling) as conn:
        assert conn.info.parameter_status("client_encoding") == expected
        assert conn.execute("SHOW client_encoding").fetchone() == shown


def test_verify_full_passes_with_a_certificate_of_the_clients_ca(start_pooler: StartPooler, tmp_path: Path) -> None:
    """The pooler presents the MySQL side's certificate (``mysql-ssl_cert``): one a CA signed satisfies libpq's
    verify-full, where the self-signed one made at start cannot (the issue's verify-ca failure)."""
    signed = loopback_certificate(tmp_path / "tls")
    pooler = start_pooler(**{"mysql-ssl_cert": str(signed.cert), "mysql-ssl_key": str(signed.key)})
    with pooler.connect(sslmode="verify-full", sslrootcert=str(signed.ca)) as conn:
        assert conn.pgconn.ssl_in_use and conn.execute("SELECT 1").fetchone() == (1,)
    unsigned = start_pooler()
    with pytest.raises(psycopg.OperationalError, match="certificate verify failed"):
        unsigned.connect(sslmode="verify-ca", sslrootcert=str(signed.ca))
