"""KILL through the proxy names proxy sessions (the thread id of the handshake), never a backend's thread number.

Passed on to a backend, ``KILL QUERY 3`` would interrupt whichever backend thread is number 3: another client's
statement, since all sessions of a user share its backend connections. Also: the admin endpoint's processlist and
its kill, COM_PROCESS_KILL, and a KILL of a session served by another worker process.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pymysql
import pytest

from devstack.proxy import ProxyProcess, rw_split_config
from devstack.sandbox import APP_USER, Sandbox, SandboxServer
from devstack.stack import wait_until
from tests.support.harness import backend_thread
from tests.support.rawclient import RawClient
from tests.support.relay import SlowRelay

OTHER_USER, OTHER_PASSWORD = "kill-other", "kill-other-pass"
#: How long the statements that get killed would run if nothing killed them.
LONG_SLEEP = 60


def config(sandbox: Sandbox, threads: int = 1) -> dict[str, Any]:
    """Read/write split, and a second user."""
    doc = rw_split_config(
        sandbox.primary().port,
        [r.port for r in sandbox.replicas()],
        global_variables=[{"variable_name": "mysql-threads", "variable_value": str(threads)}],
    )
    doc["mysql_users"].append({"username": OTHER_USER, "password": OTHER_PASSWORD, "default_hostgroup": 10})
    return doc


@pytest.fixture
def proxy(sandbox: Sandbox, start_proxy: Callable[[dict[str, Any]], ProxyProcess]) -> Iterator[ProxyProcess]:
    """A proxy over the sandbox, whose servers know the second user too."""
    with sandbox.primary().connect() as conn, conn.cursor() as cur:
        cur.execute(f"CREATE USER IF NOT EXISTS '{OTHER_USER}'@'%' IDENTIFIED BY '{OTHER_PASSWORD}'")
        cur.execute(f"GRANT SELECT ON app.* TO '{OTHER_USER}'@'%'")
    yield start_proxy(config(sandbox))
    with sandbox.primary().connect() as conn, conn.cursor() as cur:
        cur.execute(f"DROP USER IF EXISTS '{OTHER_USER}'@'%'")


@pytest.fixture
def kill_table(sandbox: Sandbox) -> Iterator[str]:
    with sandbox.primary().connect() as conn, conn.cursor() as cur:
        cur.execute("CREATE DATABASE IF NOT EXISTS app")
        cur.execute("DROP TABLE IF EXISTS app.kill_rows")
        cur.execute("CREATE TABLE app.kill_rows (id int primary key)")
    yield "app.kill_rows"
    with sandbox.primary().connect() as conn, conn.cursor() as cur:
        cur.execute("DROP TABLE IF EXISTS app.kill_rows")


class Running:
    """A statement running in a thread of its own on ``conn``; ``result()`` is its rows or its error."""

    def __init__(self, conn: pymysql.Connection, sql: str) -> None:
        self.outcome: Any = None
        self.thread = threading.Thread(target=self._run, args=(conn, sql), daemon=True)
        self.thread.start()

    def _run(self, conn: pymysql.Connection, sql: str) -> None:
        try:
            with conn.cursor() as cur:
                cur.execute(sql)
                self.outcome = cur.fetchall()
        except pymysql.err.MySQLError as exc:
            self.outcome = exc

    def result(self) -> Any:
        self.thread.join(LONG_SLEEP / 2)
        assert not self.thread.is_alive(), "the statement was not interrupted"
        return self.outcome


def error_of(call: Callable[[], Any]) -> tuple[int, str]:
    with pytest.raises(pymysql.err.MySQLError) as info:
        call()
    return info.value.args[0], info.value.args[1]


def test_kill_query_interrupts_the_sessions_statement_and_the_session_goes_on(
    proxy: ProxyProcess, sandbox: Sandbox
) -> None:
    victim = proxy.connect(autocommit=True)
    killer = proxy.connect(autocommit=True)
    try:
        running = Running(victim, f"SELECT SLEEP({LONG_SLEEP}) AS kill_query_marker")
        thread = backend_thread(sandbox.replicas()[0], "kill_query_marker")
        # The proxy's id is not the backend's: a KILL passed on would have hit some other backend thread.
        assert thread != victim.thread_id()
        with killer.cursor() as cur:
            assert cur.execute(f"KILL QUERY {victim.thread_id()}") == 0
        outcome = running.result()
        assert isinstance(outcome, pymysql.err.MySQLError) and outcome.args[0] == 1317
        with victim.cursor() as cur:  # only the statement was killed
            cur.execute("SELECT 7")
            assert cur.fetchone() == (7,)
        assert proxy.stats()["global"]["mysql_killed_backend_queries"] == 1
    finally:
        victim.close()
        killer.close()


def test_kill_connection_ends_the_session_and_rolls_back_its_transaction(
    proxy: ProxyProcess, sandbox: Sandbox, kill_table: str
) -> None:
    victim = proxy.connect(autocommit=True)
    killer = proxy.connect(autocommit=True)
    try:
        with victim.cursor() as cur:
            cur.execute("BEGIN")
            cur.execute(f"INSERT INTO {kill_table} VALUES (1)")
        running = Running(victim, f"SELECT SLEEP({LONG_SLEEP}) AS kill_connection_marker FOR UPDATE")
        backend_thread(sandbox.primary(), "kill_connection_marker")
        with killer.cursor() as cur:
            cur.execute(f"KILL CONNECTION {victim.thread_id()}")
        outcome = running.result()
        assert isinstance(outcome, pymysql.err.MySQLError)
        assert error_of(lambda: victim.cursor().execute("SELECT 1"))[0] in (0, 2006, 2013)
        with sandbox.primary().connect() as conn, conn.cursor() as cur:
            cur.execute(f"SELECT COUNT(*) FROM {kill_table}")
            assert cur.fetchone() == (0,)  # the killed session's transaction left nothing
        assert proxy.stats()["global"]["Client_Connections_connected"] == 1
    finally:
        victim.close()
        killer.close()


def test_a_session_killed_while_waiting_for_a_connection_never_runs_its_statement(
    sandbox: Sandbox, start_proxy: Callable[[dict[str, Any]], ProxyProcess], kill_table: str
) -> None:
    document = config(sandbox)
    document["mysql_servers"][0]["max_connections"] = 1  # the writer: one backend connection for everyone
    proxy = start_proxy(document)
    holder = proxy.connect(autocommit=True)
    victim = proxy.connect(autocommit=True)
    killer = proxy.connect(autocommit=True)
    try:
        with holder.cursor() as cur:
            cur.execute("BEGIN")
            cur.execute(f"SELECT COUNT(*) FROM {kill_table} FOR UPDATE")  # holds the writer's only connection
        running = Running(victim, f"INSERT INTO {kill_table} VALUES (2)")
        wait_until(
            lambda: any(r["SessionID"] == victim.thread_id() and r["command"] == "Query" for r in proxy.admin(
                "GET", "/processlist")),
            "the victim waiting for the writer's connection",
            10,
        )  # fmt: skip
        with killer.cursor() as cur:
            cur.execute(f"KILL {victim.thread_id()}")
        with holder.cursor() as cur:
            cur.execute("COMMIT")  # the connection is free: the killed session must not take it to insert
        assert isinstance(running.result(), pymysql.err.MySQLError)
        with holder.cursor() as cur:
            cur.execute(f"SELECT COUNT(*) FROM {kill_table} FOR UPDATE")  # on the writer, after the victim let go
            assert cur.fetchone() == (0,)
    finally:
        for conn in (holder, victim, killer):
            conn.close()


def test_kill_of_an_idle_session_through_com_process_kill(proxy: ProxyProcess) -> None:
    victim = proxy.connect(autocommit=True)
    killer = proxy.connect(autocommit=True)
    try:
        killer.kill(victim.thread_id())  # COM_PROCESS_KILL
        assert error_of(lambda: victim.cursor().execute("SELECT 1"))[0] in (0, 2006, 2013)
        with killer.cursor() as cur:
            cur.execute("SELECT 1")
            assert cur.fetchone() == (1,)
    finally:
        victim.close()
        killer.close()


def test_kill_refusals_name_the_cause(proxy: ProxyProcess) -> None:
    mine = proxy.connect(autocommit=True)
    other = proxy.connect(user=OTHER_USER, password=OTHER_PASSWORD, autocommit=True)
    try:
        cur = mine.cursor()
        assert error_of(lambda: cur.execute("KILL 999999")) == (1094, "Unknown thread id: 999999")
        assert error_of(lambda: cur.execute(f"KILL {other.thread_id()}")) == (
            1095,
            f"You are not owner of thread {other.thread_id()}",
        )
        code, message = error_of(lambda: cur.execute("KILL QUERY ID 5"))
        assert code == 1235 and "query id" in message
        assert error_of(lambda: cur.execute("KILL USER root"))[0] == 1235
        assert error_of(lambda: cur.execute(f"KILL QUERY {mine.thread_id()}")) == (
            1317,
            "Query execution was interrupted",
        )
        cur.execute("SELECT 1")  # still connected after all of that
        assert cur.fetchone() == (1,)
        with other.cursor() as other_cur:  # the other user's session was not touched
            other_cur.execute("SELECT 2")
            assert other_cur.fetchone() == (2,)
        assert error_of(lambda: cur.execute(f"KILL {mine.thread_id()}")) == (1927, "Connection was killed")
        assert error_of(lambda: mine.cursor().execute("SELECT 1"))[0] in (0, 2006, 2013)
    finally:
        mine.close()
        other.close()


def test_admin_processlist_shows_what_runs_and_kills(proxy: ProxyProcess, sandbox: Sandbox) -> None:
    idle = proxy.connect(database="app", autocommit=True)
    busy = proxy.connect(autocommit=True)
    try:
        running = Running(busy, f"SELECT SLEEP({LONG_SLEEP}) AS processlist_marker, PASSWORD('hunter2')")
        backend_thread(sandbox.replicas()[0], "processlist_marker")
        rows = {row["SessionID"]: row for row in proxy.admin("GET", "/processlist")}
        assert set(rows) == {idle.thread_id(), busy.thread_id()}
        assert rows[idle.thread_id()]["command"] == "Sleep" and rows[idle.thread_id()]["db"] == "app"
        row = rows[busy.thread_id()]
        assert (row["command"], row["user"], row["hostgroup"]) == ("Query", "app", 20)
        assert "processlist_marker" in row["info"] and row["srv_port"] == sandbox.replicas()[0].port
        assert "PASSWORD(?)" in row["info"] and "hunter2" not in row["info"]  # the statement's shape, no literals
        assert row["backend_thread_id"] == backend_thread(sandbox.replicas()[0], "processlist_marker")

        assert proxy.admin("POST", f"/processlist/{busy.thread_id()}/kill", {"query_only": True}) == {"ok": True}
        assert running.result().args[0] == 1317
        assert proxy.admin("POST", f"/processlist/{idle.thread_id()}/kill") == {"ok": True}
        assert error_of(lambda: idle.cursor().execute("SELECT 1"))[0] in (0, 2006, 2013)
        assert proxy.admin("POST", "/processlist/424242/kill")["code"] == 1094
        assert "must be a number" in proxy.admin("POST", "/processlist/abc/kill")["error"]
    finally:
        idle.close()
        busy.close()


def test_kill_reaches_a_session_of_another_worker_process(
    sandbox: Sandbox, start_proxy: Callable[[dict[str, Any]], ProxyProcess]
) -> None:
    proxy = start_proxy(config(sandbox, threads=2))
    if proxy.stats().get("workers") != 2:
        pytest.fail("this machine runs one worker process: the test needs two CPUs")
    connections = [proxy.connect(autocommit=True)]
    try:
        # The kernel hands each new client to either worker; the id's parity says which (worker 0: odd ids).
        while len({c.thread_id() % 2 for c in connections}) < 2 and len(connections) < 64:
            connections.append(proxy.connect(autocommit=True))
        ids = [c.thread_id() for c in connections]
        assert {i % 2 for i in ids} == {0, 1}, f"all {len(ids)} sessions landed in one worker"
        killer = connections[0]
        victim = next(c for c in connections if c.thread_id() % 2 != killer.thread_id() % 2)
        running = Running(victim, f"SELECT SLEEP({LONG_SLEEP}) AS cross_worker_marker")
        backend_thread(sandbox.replicas()[0], "cross_worker_marker")
        with killer.cursor() as cur:
            cur.execute(f"KILL QUERY {victim.thread_id()}")
        assert running.result().args[0] == 1317
        with killer.cursor() as cur:
            cur.execute(f"KILL {victim.thread_id()}")
        assert error_of(lambda: victim.cursor().execute("SELECT 1"))[0] in (0, 2006, 2013)

        def listed() -> set[int]:
            return {row["SessionID"] for row in proxy.admin("GET", "/processlist")}

        # The killed session leaves the processlist once its worker has ended it (its backend connection reset),
        # which on a loaded machine comes after the client has seen its connection close.
        wait_until(lambda: victim.thread_id() not in listed(), "the killed session gone from the processlist", 30)
        assert listed() == set(ids) - {victim.thread_id()}
    finally:
        for conn in connections:
            conn.close()


def still_running(server: SandboxServer, marker: str) -> bool:
    """Whether a statement of the app user containing ``marker`` runs on ``server``."""
    with server.connect() as conn, conn.cursor() as cur:
        sql = "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE USER = %s AND INFO LIKE %s"
        cur.execute(sql, (APP_USER, f"%{marker}%"))
        return int(cur.fetchone()[0]) > 0


def test_a_client_that_disconnects_mid_statement_has_it_killed_on_the_backend(
    proxy: ProxyProcess, sandbox: Sandbox
) -> None:
    client = RawClient.connect(proxy.port, database=None)
    client.send_packet(b"\x03" + f"SELECT SLEEP({LONG_SLEEP}) AS gone_client_marker".encode(), 0)
    backend_thread(sandbox.replicas()[0], "gone_client_marker")
    client.close()  # mysql-kill_backend_connection_when_disconnect (default true): the statement goes with it
    wait_until(lambda: not still_running(sandbox.replicas()[0], "gone_client_marker"), "the statement killed", 30)
    assert proxy.stats()["global"]["mysql_killed_backend_queries"] == 1
    with proxy.connect(autocommit=True) as other, other.cursor() as cur:  # the proxy serves on
        cur.execute("SELECT 1")
        assert cur.fetchone() == (1,)


def test_a_client_gone_from_a_backend_gone_silent_does_not_keep_its_session(
    sandbox: Sandbox, start_proxy: Callable[[dict[str, Any]], ProxyProcess]
) -> None:
    relay = SlowRelay(sandbox.primary().port)
    try:
        doc = config(sandbox)
        doc["mysql_servers"].append(
            {"hostgroup_id": 30, "hostname": "127.0.0.1", "port": relay.listener.getsockname()[1]}
        )
        rule = {"rule_id": 1, "active": 1, "match_pattern": "silent_marker", "destination_hostgroup": 30, "apply": 1}
        doc["mysql_query_rules"] = [rule]
        proxy = start_proxy(doc)
        client = RawClient.connect(proxy.port, database=None)
        assert client.rows("SELECT 1 AS silent_marker") == [[b"1"]]  # a backend connection through the relay
        relay.hold()  # from now on the server's replies do not arrive: not even to the proxy's KILL
        client.send_packet(b"\x03SELECT 2 AS silent_marker", 0)
        session = client.greeting.connection_id if client.greeting is not None else 0

        def running() -> bool:
            return any(
                r["SessionID"] == session and r["command"] == "Query" for r in proxy.admin("GET", "/processlist")
            )

        def ended() -> bool:
            return all(r["SessionID"] != session for r in proxy.admin("GET", "/processlist"))

        wait_until(running, "the statement sent to the silent backend", 15)
        client.close()

        def seconds_later_ended() -> bool:
            # The proxy KILLs the statement once it sees the client gone; the backend ignores it; 5 s after that
            # (on the proxy's clock, moved here) the housekeeping drops the backend connection.
            proxy.advance_clock(6)
            return ended()

        wait_until(seconds_later_ended, "the session of the client gone ended", 30)
        assert "did not end the statement of a client gone" in proxy.log()
    finally:
        relay.close()
