"""The hot-row queue through a real proxy and a real server: transactions asking for one key wait in line in the
proxy, holding no backend connection, while the server sees at most ``concurrency`` of them; keys do not block each
other; waits end by timeout (the proxy's clock), by the holder's end (commit, rollback, disconnect, KILL), by KILL
QUERY; prepared statements and query rules queue as hints do; a reload keeps the lines."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pymysql
import pytest

from devstack.proxy import WRITER_HG, ProxyProcess
from devstack.sandbox import APP_PASSWORD, APP_USER, Sandbox
from devstack.stack import wait_until
from tests.support.harness import StartProxy, open_transactions
from tests.support.rawclient import Ok, RawClient

TABLE = "app.hot"


def config(sandbox: Sandbox, rules: list[dict[str, Any]] | None = None, **variables: Any) -> dict[str, Any]:
    """One hostgroup holding the primary, the app user, ``rules`` and ``variables``; one worker."""
    settings = {"mysql-threads": 1, **variables}
    return {
        "mysql_servers": [
            {"hostgroup_id": WRITER_HG, "hostname": "127.0.0.1", "port": sandbox.primary().port, "max_connections": 20}
        ],
        "mysql_users": [{"username": APP_USER, "password": APP_PASSWORD, "default_hostgroup": WRITER_HG}],
        "mysql_query_rules": rules or [],
        "global_variables": [{"variable_name": k, "variable_value": str(v)} for k, v in settings.items()],
    }


@pytest.fixture
def table(sandbox: Sandbox) -> Iterator[str]:
    with sandbox.primary().connect() as conn, conn.cursor() as cur:
        cur.execute(f"DROP TABLE IF EXISTS {TABLE}")
        cur.execute(f"CREATE TABLE {TABLE} (id int primary key, n int not null default 0)")
        cur.execute(f"INSERT INTO {TABLE} (id) VALUES (1), (2), (3), (4), (5)")
    yield TABLE
    with sandbox.primary().connect() as conn, conn.cursor() as cur:
        cur.execute(f"DROP TABLE IF EXISTS {TABLE}")


def bump(key: int, row: int | None = None) -> str:
    """An UPDATE of row ``row`` (default: ``key``) asking for key ``key`` of queue ``hot``."""
    return f"UPDATE /* trx_queue=hot:{key} */ {TABLE} SET n = n + 1 WHERE id = {row if row is not None else key}"


class Background:
    """Statements run on one connection in a thread, in order; the outcome of each (rows or the error)."""

    def __init__(self, conn: pymysql.Connection, *statements: str) -> None:
        self.conn = conn
        self.outcomes: list[Any] = []
        self.thread = threading.Thread(target=self._run, args=(statements,), daemon=True)
        self.thread.start()

    def _run(self, statements: tuple[str, ...]) -> None:
        for sql in statements:
            try:
                with self.conn.cursor() as cur:
                    cur.execute(sql)
                    self.outcomes.append(cur.fetchall())
            except pymysql.MySQLError as exc:
                self.outcomes.append(exc)
                return

    def done(self, timeout: float = 30) -> list[Any]:
        """The outcomes once every statement ran (or one failed)."""
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "the statements did not finish"
        return self.outcomes


def close(*conns: pymysql.Connection) -> None:
    """Close each connection still open."""
    for conn in conns:
        if conn.open:
            conn.close()


def queue_row(proxy: ProxyProcess, queue: str = "hot") -> dict[str, Any]:
    rows = [r for r in proxy.stats()["trx_queue"]["queues"] if r["queue"] == queue]
    return rows[0] if rows else {"waiters": 0, "keys_active": 0, "transactions": 0, "timeouts": 0}


def waiters(proxy: ProxyProcess, count: int) -> None:
    wait_until(lambda: queue_row(proxy)["waiters"] == count, f"{count} waiting in queue hot", 15, interval=0.01)


def counter(sandbox: Sandbox, row: int) -> int:
    with sandbox.primary().connect() as conn, conn.cursor() as cur:
        cur.execute(f"SELECT n FROM {TABLE} WHERE id = {row}")
        return int(cur.fetchone()[0])


def on_each_worker(proxy: ProxyProcess, workers: int, count: int) -> list[pymysql.Connection]:
    """``count`` connections taking turns over the proxy's ``workers`` worker processes (session ``n`` is served by
    worker ``(n - 1) % workers``; the kernel hands new connections to any)."""
    per = -(-count // workers)
    groups: list[list[pymysql.Connection]] = [[] for _ in range(workers)]
    spare: list[pymysql.Connection] = []
    while any(len(group) < per for group in groups):
        assert len(spare) < 50, "the kernel gives every connection to one worker"
        conn = proxy.connect(autocommit=True)
        group = groups[(conn.thread_id() - 1) % workers]
        (group if len(group) < per else spare).append(conn)
    turns = [group[i] for i in range(per) for group in groups]
    close(*spare, *turns[count:])
    return turns[:count]


@pytest.mark.parametrize("workers", [1, 2])  # with 2, the transactions wait in the supervisor's one line
def test_one_key_serializes_transactions_that_wait_in_the_proxy_not_on_the_server(
    sandbox: Sandbox, start_proxy: StartProxy, table: str, workers: int
) -> None:
    proxy = start_proxy(config(sandbox, **{"mysql-threads": workers}))
    first, second, third = on_each_worker(proxy, workers, 3)
    try:
        assert len({(c.thread_id() - 1) % workers for c in (first, second, third)}) == workers
        with first.cursor() as cur:
            cur.execute("BEGIN")
            cur.execute(bump(1))
            cur.execute(f"UPDATE {TABLE} SET n = n + 10 WHERE id = 1")  # the transaction goes on: it keeps the key
        later = [Background(conn, "BEGIN", bump(1), "COMMIT") for conn in (second, third)]
        waiters(proxy, 2)
        # On the server: one transaction holds the row, none waits for its lock (the waiters hold no connection).
        assert [state for _, state, _ in open_transactions(sandbox.primary())] == ["ACTIVE"]
        assert queue_row(proxy)["keys_active"] == 1
        first.commit()
        for background in later:
            assert len(background.done()) == 3
        assert counter(sandbox, 1) == 13
        row = queue_row(proxy)
        assert (row["keys_active"], row["waiters"], row["transactions"], row["waited"]) == (0, 0, 3, 2)
    finally:
        close(first, second, third)


def test_keys_do_not_block_each_other_and_autocommit_statements_queue_alone(
    sandbox: Sandbox, start_proxy: StartProxy, table: str
) -> None:
    proxy = start_proxy(config(sandbox))
    holder, other = proxy.connect(autocommit=True), proxy.connect(autocommit=True)
    try:
        with holder.cursor() as cur:
            cur.execute("BEGIN")
            cur.execute(bump(1))
        with other.cursor() as cur:
            assert cur.execute(bump(2)) == 1  # autocommit: key 2 taken and given back around the statement
            cur.execute("BEGIN")
            assert cur.execute(bump(3)) == 1
            cur.execute("COMMIT")
        assert queue_row(proxy)["keys_active"] == 1  # only the holder's
        holder.rollback()
        assert queue_row(proxy)["keys_active"] == 0
        assert (counter(sandbox, 1), counter(sandbox, 2), counter(sandbox, 3)) == (0, 1, 1)
    finally:
        holder.close()
        other.close()


def test_a_wait_past_the_timeout_fails_with_1205_naming_the_key_and_the_transaction_goes_on(
    sandbox: Sandbox, start_proxy: StartProxy, table: str
) -> None:
    proxy = start_proxy(config(sandbox, **{"mysql-trx_queue_wait_timeout_ms": 60_000}))
    holder, waiter = proxy.connect(autocommit=True), proxy.connect(autocommit=True)
    try:
        with holder.cursor() as cur:
            cur.execute("BEGIN")
            cur.execute(bump(5))
        with waiter.cursor() as cur:
            cur.execute("BEGIN")
            cur.execute(bump(4))  # holds key 4
        background = Background(waiter, bump(5))  # in order: 5 > 4
        waiters(proxy, 1)
        proxy.advance_clock(61)
        (error,) = background.done()
        assert isinstance(error, pymysql.err.OperationalError)
        assert error.args[0] == 1205
        assert "waited over mysql-trx_queue_wait_timeout_ms (60000 ms) for key 5 of queue hot" in error.args[1]
        assert queue_row(proxy)["timeouts"] == 1
        waiter.commit()  # its transaction went on: its first update commits
        holder.commit()
        assert (counter(sandbox, 4), counter(sandbox, 5)) == (1, 1)
    finally:
        holder.close()
        waiter.close()


@pytest.mark.parametrize("how", ["rollback", "disconnect", "kill"])
def test_the_holder_s_end_lets_the_next_in_line_in(
    sandbox: Sandbox, start_proxy: StartProxy, table: str, how: str
) -> None:
    proxy = start_proxy(config(sandbox))
    holder, waiter, admin = (proxy.connect(autocommit=True) for _ in range(3))
    try:
        with holder.cursor() as cur:
            cur.execute("BEGIN")
            cur.execute(bump(2))
        background = Background(waiter, "BEGIN", bump(2), "COMMIT")
        waiters(proxy, 1)
        if how == "rollback":
            holder.rollback()
        elif how == "disconnect":
            holder.close()
        else:
            with admin.cursor() as cur:
                cur.execute(f"KILL {holder.thread_id()}")
        assert len(background.done()) == 3
        assert counter(sandbox, 2) == 1  # the holder's update rolled back, the waiter's committed
        assert queue_row(proxy)["keys_active"] == 0
    finally:
        close(holder, waiter, admin)


def test_kill_query_ends_a_wait_with_1317_and_a_client_gone_leaves_the_line(
    sandbox: Sandbox, start_proxy: StartProxy, table: str
) -> None:
    proxy = start_proxy(config(sandbox))
    holder, waiter, admin = (proxy.connect(autocommit=True) for _ in range(3))
    try:
        with holder.cursor() as cur:
            cur.execute("BEGIN")
            cur.execute(bump(3))
        background = Background(waiter, bump(3))
        waiters(proxy, 1)
        with admin.cursor() as cur:
            cur.execute(f"KILL QUERY {waiter.thread_id()}")
        (error,) = background.done()
        assert error.args[0] == 1317
        assert queue_row(proxy)["waiters"] == 0
        gone = RawClient.connect(proxy.port)
        gone.send_packet(b"\x03" + bump(3).encode())
        waiters(proxy, 1)
        gone.close()
        waiters(proxy, 0)
        holder.commit()
        assert counter(sandbox, 3) == 1
    finally:
        close(holder, waiter, admin)


def test_a_key_out_of_order_held_by_a_transaction_waiting_for_this_one_is_a_deadlock(
    sandbox: Sandbox, start_proxy: StartProxy, table: str
) -> None:
    proxy = start_proxy(config(sandbox))
    one, two = proxy.connect(autocommit=True), proxy.connect(autocommit=True)
    try:
        with one.cursor() as cur:
            cur.execute("BEGIN")
            cur.execute(bump(1))
        with two.cursor() as cur:
            cur.execute("BEGIN")
            cur.execute(bump(2))
        background = Background(one, bump(2))  # in order (2 > 1): it waits for two
        waiters(proxy, 1)
        with two.cursor() as cur, pytest.raises(pymysql.err.OperationalError) as raised:
            cur.execute(bump(1))  # out of order, held by one, which waits for two: the server would deadlock them
        assert raised.value.args[0] == 1213
        assert "key 1 of queue hot is held by a transaction that waits for this one" in raised.value.args[1]
        assert len(background.done()) == 1  # two's transaction was rolled back: one goes on
        one.commit()
        assert (counter(sandbox, 1), counter(sandbox, 2)) == (1, 1)
        assert queue_row(proxy)["keys_active"] == 0
    finally:
        one.close()
        two.close()


def test_concurrency_lets_that_many_hold_a_key_on_the_server(
    sandbox: Sandbox, start_proxy: StartProxy, table: str
) -> None:
    proxy = start_proxy(config(sandbox, **{"mysql-trx_queue_concurrency": 2}))
    conns = [proxy.connect(autocommit=True) for _ in range(3)]
    try:
        for conn in conns[:2]:
            with conn.cursor() as cur:
                cur.execute("BEGIN")
                cur.execute(f"SELECT /* trx_queue=hot:1 */ n FROM {TABLE} WHERE id = 1 LOCK IN SHARE MODE")
        background = Background(conns[2], "BEGIN", f"SELECT /* trx_queue=hot:1 */ n FROM {TABLE} WHERE id = 1")
        waiters(proxy, 1)
        assert len(open_transactions(sandbox.primary())) == 2
        conns[0].commit()
        assert len(background.done()) == 2
    finally:
        for conn in conns:
            conn.close()


def test_a_rule_s_key_column_queues_prepared_statements_with_their_parameters(
    sandbox: Sandbox, start_proxy: StartProxy, table: str
) -> None:
    rule = {"rule_id": 1, "active": 1, "match_digest": r"^UPDATE app\.hot ", "trx_queue": "hot", "trx_queue_key": "id"}
    proxy = start_proxy(config(sandbox, [rule], **{"mysql-trx_queue_hints": "false"}))
    holder = proxy.connect(autocommit=True)
    client = RawClient.connect(proxy.port)
    try:
        with holder.cursor() as cur:
            cur.execute("BEGIN")
            cur.execute(f"UPDATE {TABLE} SET n = n + 1 WHERE id = 4")  # the rule's key: 4
        assert queue_row(proxy)["keys_active"] == 1
        stmt = client.prepare(f"UPDATE {TABLE} SET n = n + 1 WHERE id = ?")
        assert isinstance(client.execute(stmt.stmt_id, [5]), Ok)  # key 5: no wait
        answers: list[Any] = []
        thread = threading.Thread(target=lambda: answers.append(client.execute(stmt.stmt_id, [4])), daemon=True)
        thread.start()
        waiters(proxy, 1)
        holder.commit()
        thread.join(30)
        assert [type(a) for a in answers] == [Ok]
        assert (counter(sandbox, 4), counter(sandbox, 5)) == (2, 1)
        assert queue_row(proxy)["transactions"] == 3
    finally:
        holder.close()
        client.close()


def test_a_reload_keeps_the_lines(sandbox: Sandbox, start_proxy: StartProxy, table: str) -> None:
    proxy = start_proxy(config(sandbox))
    holder, waiter = proxy.connect(autocommit=True), proxy.connect(autocommit=True)
    try:
        with holder.cursor() as cur:
            cur.execute("BEGIN")
            cur.execute(bump(1))
        background = Background(waiter, bump(1))
        waiters(proxy, 1)
        proxy.admin("POST", "/reload", config(sandbox, **{"mysql-trx_queue_wait_timeout_ms": 20_000}))
        assert queue_row(proxy)["waiters"] == 1
        holder.commit()
        assert len(background.done()) == 1
        assert counter(sandbox, 1) == 2
    finally:
        holder.close()
        waiter.close()


def test_a_malformed_hint_is_refused_with_the_reason(sandbox: Sandbox, start_proxy: StartProxy, table: str) -> None:
    proxy = start_proxy(config(sandbox))
    conn = proxy.connect(autocommit=True)
    try:
        with conn.cursor() as cur, pytest.raises(pymysql.err.OperationalError) as raised:
            cur.execute(f"UPDATE /* trx_queue=hot */ {TABLE} SET n = 1 WHERE id = 1")
        assert raised.value.args[0] == 1210
        assert "QUEUE:KEY" in raised.value.args[1]
        assert counter(sandbox, 1) == 0
    finally:
        conn.close()


@pytest.mark.parametrize("workers", [1, 2])  # with 2, the marks of both workers count together in the supervisor
def test_the_proxy_finds_a_hot_key_by_itself_applies_a_queue_and_withdraws_it_when_the_heat_is_gone(
    sandbox: Sandbox, start_proxy: StartProxy, table: str, workers: int
) -> None:
    variables = {
        "mysql-trx_queue_auto_apply": "true",
        "mysql-trx_queue_heat_threshold": 3,
        "mysql-trx_queue_heat_cooldown_ms": 60_000,
        "mysql-threads": workers,
    }
    proxy = start_proxy(config(sandbox, **variables))
    locker = sandbox.primary().connect()  # holds row 3 on the server, not through the proxy
    clients = on_each_worker(proxy, workers, 3)
    holder, waiter = on_each_worker(proxy, workers, 2)  # on two workers: the applied queue is the node's
    update = f"UPDATE {TABLE} SET n = n + 1 WHERE id = 3"
    try:
        with locker.cursor() as cur:
            cur.execute("BEGIN")
            cur.execute(f"SELECT n FROM {TABLE} WHERE id = 3 FOR UPDATE")
        marks = [Background(c, "SET SESSION innodb_lock_wait_timeout = 1", update) for c in clients]
        for background in marks:
            assert background.done()[-1].args[0] == 1205
        locker.rollback()
        # The proxy reads a statement's marks once its client has the answer.
        wait_until(lambda: bool(proxy.stats()["trx_queue"]["proposals"]), "the proxy's proposal", 15)
        (proposal,) = proxy.stats()["trx_queue"]["proposals"]
        assert (proposal["id"], proposal["queue"], proposal["column"], proposal["state"]) == (
            "app.hot.id",
            "app.hot",
            "id",
            "applied",
        )
        assert proposal["keys"] == ["3"] and proposal["evidence"]["lock_wait_timeouts"] == 3
        assert "hot rows: proposing queue app.hot on app.hot.id (keys 3; 3 marks" in proxy.log()
        with holder.cursor() as cur:  # the digest is queued now, by the key its WHERE clause names
            cur.execute("BEGIN")
            cur.execute(update)
        background = Background(waiter, update)
        wait_until(
            lambda: queue_row(proxy, "app.hot")["waiters"] == 1, "a wait in the applied queue", 15, interval=0.01
        )
        assert 'proxyfleet_trx_queue_waiters{queue="app.hot"} 1' in proxy.admin("GET", "/metrics")
        holder.commit()
        assert len(background.done()) == 1
        proxy.advance_clock(61)
        wait_until(lambda: not proxy.stats()["trx_queue"]["proposals"], "the proposal withdrawn", 15)
        assert "withdrew the proposal of queue app.hot on app.hot.id: no mark for 60000 ms" in proxy.log()
        assert counter(sandbox, 3) == 2
    finally:
        close(locker, *clients, holder, waiter)


def test_prepared_statements_bear_marks_and_are_queued_by_a_queue_the_proxy_applied(
    sandbox: Sandbox, start_proxy: StartProxy, table: str
) -> None:
    variables = {"mysql-trx_queue_auto_apply": "true", "mysql-trx_queue_heat_threshold": 3}
    proxy = start_proxy(config(sandbox, **variables))
    locker = sandbox.primary().connect()
    clients = [RawClient.connect(proxy.port) for _ in range(4)]
    update = f"UPDATE {TABLE} SET n = n + 1 WHERE id = ?"
    try:
        statements = []
        for client in clients:
            client.query("SET SESSION innodb_lock_wait_timeout = 1")
            statements.append(client.prepare(update).stmt_id)
        with locker.cursor() as cur:
            cur.execute("BEGIN")
            cur.execute(f"SELECT n FROM {TABLE} WHERE id = 2 FOR UPDATE")
        answers: list[Any] = []
        threads = [
            threading.Thread(target=lambda c=c, s=s: answers.append(c.execute(s, [2])), daemon=True)
            for c, s in zip(clients[:3], statements[:3], strict=True)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        assert sorted(a.code for a in answers) == [1205, 1205, 1205]
        wait_until(lambda: bool(proxy.stats()["trx_queue"]["proposals"]), "the proxy's proposal", 15)
        (proposal,) = proxy.stats()["trx_queue"]["proposals"]
        assert (proposal["id"], proposal["keys"], proposal["state"]) == ("app.hot.id", ["2"], "applied")
        # Applied: an execute of that digest waits for the key its parameter names, behind the locker's twin.
        with locker.cursor() as cur:
            cur.execute("ROLLBACK")
        clients[0].query("BEGIN")
        assert isinstance(clients[0].execute(statements[0], [2]), Ok)
        thread = threading.Thread(target=lambda: answers.append(clients[1].execute(statements[1], [2])), daemon=True)
        thread.start()
        wait_until(lambda: queue_row(proxy, "app.hot")["waiters"] == 1, "a prepared execute waiting", 15)
        clients[0].query("COMMIT")
        thread.join(30)
        assert isinstance(answers[-1], Ok)
        assert counter(sandbox, 2) == 2
    finally:
        locker.close()
        for client in clients:
            client.close()
