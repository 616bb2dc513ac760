"""Transaction integrity as a model-based test: random sessions through a real proxy against a model of each one.

Walkers (client sessions, through PyMySQL or mysqlclient, half of them asking for CLIENT_FOUND_ROWS) take random
steps: BEGIN / START TRANSACTION, autocommit on and off, inserts that succeed or collide (1062), updates of a few hot
rows in random order (so deadlocks, 1213, and lock-wait timeouts, 1205, happen), SAVEPOINT / ROLLBACK TO / RELEASE
(a SAVEPOINT first with autocommit off too, which MariaDB does not flag as a transaction), COMMIT, ROLLBACK,
statements that commit implicitly (DDL, LOCK TABLES), LOCK TABLES / UNLOCK TABLES, GET_LOCK / RELEASE_LOCK, a
temporary table, reading back ``@@autocommit`` and ``@@in_transaction``, disconnects mid-transaction, a KILL QUERY
of their own statement and, once, a transaction that outlives ``mysql-max_transaction_time``. Each keeps a model of
what the server must have committed for it, and of what its session holds (its lock, its locked table, its temporary
table), checked by statements whose answer tells whether they ran on the session's own connection. Each also has a
direct twin: a session on the server itself, opened exactly as the walker opens the proxy's, on which the walker's
"twin" step runs the same change and reads the same session variables, and which must answer the same (affected
rows, the OK's info, sql_mode and the rest). Churners meanwhile take whatever pooled connection is free and check
that none is inside a transaction. The pool is small, so connections move between sessions all the time.

Afterwards the tables must hold exactly what the models say (a transaction whose COMMIT lost its connection may
have gone either way, but all of it or none of it), and no backend connection may be left in a transaction.

``python -m tests.support.txmodel --walkers 12 --steps 2000`` runs a long one on a sandbox of its own
(``make txmodel``).
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import random
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import MySQLdb
import pymysql
from pymysql.constants import CLIENT

from devstack.proxy import ProxyProcess, small_pool_config
from devstack.stack import wait_until
from tests.support.clients import Answer, answer, open_session
from tests.support.harness import advance_clock_while_running, open_transactions

ROWS = "app.txm_rows"
LEDGER = "app.txm_ledger"
HOT = "app.txm_hot"
TWIN = "app.txm_twin"  # rows by walker and side ('p' through the proxy, 'd' direct), never changed in value
HOT_ROWS = 3
#: What the twin step reads back from both sessions.
TWIN_VARIABLES = (
    "SELECT @@session.sql_mode, @@session.wait_timeout, @@session.character_set_client, "
    "@@session.collation_connection, @@session.time_zone, @@session.tx_isolation, @@session.innodb_lock_wait_timeout"
)
#: Error numbers meaning the client's connection is gone (the proxy ended the session, or the socket broke).
LOST = frozenset({0, 2006, 2013, 2055, 4031, 1927})
#: Errors that undo one statement and leave its transaction open (innodb_rollback_on_timeout is off).
STATEMENT_ERRORS = frozenset({1062, 1205, 1317})
DEADLOCK = 1213
#: The proxy ends transactions older than this: the overstay step moves the proxy's clock past it (ending every
#: transaction open at that moment); short, so that transactions stuck in lock waits do not hold the small pool's
#: connections for long (walkers waiting for one would time out with 9001).
MAX_TRANSACTION_TIME_MS = 3000
SAVEPOINTS = ("s1", "s2", "s3")


class Lost(Exception):
    """The session's connection is gone."""


@dataclass
class Txn:
    """The model's open transaction: what it did, and its savepoints (name -> what it had done by then)."""

    explicit: bool
    rows: list[int] = field(default_factory=list)
    bumps: int = 0
    savepoints: dict[str, tuple[int, int]] = field(default_factory=dict)

    @property
    def did_something(self) -> bool:
        """Whether the server has it open for sure (BEGIN, or a change made)."""
        return self.explicit or bool(self.rows) or self.bumps > 0


@dataclass
class Outcome:
    """What a walker found and what its model says the tables hold for it."""

    walker: int
    rows: set[int] = field(default_factory=set)
    bumps: int = 0
    in_doubt: list[tuple[list[int], int]] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    steps: Counter[str] = field(default_factory=Counter)


def own_table(walker: int) -> str:
    """The table a walker alone locks with LOCK TABLES."""
    return f"app.txm_own_{walker}"


def create_tables(conn: pymysql.Connection, walkers: int) -> None:
    """(Re)make the model's tables on the primary: rows by walker, one ledger row per walker, the hot rows, the
    twin rows, and each walker's own table."""
    with conn.cursor() as cur:
        for table in (ROWS, LEDGER, HOT, TWIN, *(own_table(w) for w in range(walkers))):
            cur.execute(f"DROP TABLE IF EXISTS {table}")
        cur.execute(f"CREATE TABLE {ROWS} (k BIGINT PRIMARY KEY, walker INT NOT NULL) ENGINE=InnoDB")
        cur.execute(f"CREATE TABLE {LEDGER} (walker INT PRIMARY KEY, n INT NOT NULL) ENGINE=InnoDB")
        cur.execute(f"CREATE TABLE {HOT} (id INT PRIMARY KEY, n INT NOT NULL) ENGINE=InnoDB")
        cur.execute(
            f"CREATE TABLE {TWIN} (walker INT, side CHAR(1), id INT, v INT NOT NULL, PRIMARY KEY (walker, side, id))"
        )
        cur.executemany(f"INSERT INTO {LEDGER} VALUES (%s, 0)", [(w,) for w in range(walkers)])
        cur.executemany(f"INSERT INTO {HOT} VALUES (%s, 0)", [(h,) for h in range(HOT_ROWS)])
        cur.executemany(
            f"INSERT INTO {TWIN} VALUES (%s, %s, %s, 0)",
            [(w, side, i) for w in range(walkers) for side in "pd" for i in (1, 2)],
        )
        for w in range(walkers):
            cur.execute(f"CREATE TABLE {own_table(w)} (a INT) ENGINE=InnoDB")


def model_config(primary_port: int, max_connections: int = 4) -> dict[str, Any]:
    """The proxy under test: the primary in one hostgroup with a small pool, the transaction time limit set."""
    limit = {"mysql-max_transaction_time": str(MAX_TRANSACTION_TIME_MS)}
    return small_pool_config(primary_port, max_connections, **limit)


def _code(exc: Exception) -> int:
    args = getattr(exc, "args", ())
    return int(args[0]) if args and isinstance(args[0], int) else 0


class Walker:
    """One client session taking random steps, with its model."""

    def __init__(
        self, index: int, proxy: ProxyProcess, direct_port: int, rng: random.Random, steps: int, overstay: bool
    ) -> None:
        self.index = index
        self.proxy = proxy
        self.direct_port = direct_port  # the server itself, for the twin
        self.rng = rng
        self.steps = steps
        self.overstay = overstay  # once, keep a transaction open past mysql-max_transaction_time
        self.driver = "mysqlclient" if index % 2 else "pymysql"
        self.flags = CLIENT.FOUND_ROWS if index % 4 >= 2 else 0  # what the client asks beyond its driver's own
        self.out = Outcome(index)
        self.keys = itertools.count(index * 10_000_000 + 1)
        self.autocommit = True
        self.txn: Txn | None = None
        self.conn: Any = None
        self.twin: Any = None
        # What the session holds outside any transaction, in the model: its named lock, a LOCK TABLES on its own
        # table, its temporary table's row count (None: no such table).
        self.lock_held = False
        self.table_locked = False
        self.temp_rows: int | None = None

    # ------------------------------------------------------------------------------------------- connection

    def open(self, port: int) -> Any:
        """A session on ``port`` as this walker's client opens it (its driver, its flags), autocommit on."""
        return open_session(port, self.driver, self.flags)

    def connect(self) -> None:
        """A new session (autocommit on, no transaction), and its twin when it has none."""
        self.conn = self.open(self.proxy.port)
        if self.twin is None:
            self.twin = self.open(self.direct_port)
            with self.twin.cursor() as cur:
                cur.execute("SET SESSION innodb_lock_wait_timeout = 1")
        self.autocommit = True
        self.txn = None
        self.lock_held = self.table_locked = False
        self.temp_rows = None
        self.run("SET SESSION innodb_lock_wait_timeout = 1")

    def disconnect(self) -> None:
        """Close the session as a client that goes away does: whatever transaction it had is rolled back, whatever
        it held is let go."""
        with contextlib.suppress(Exception):  # already gone
            self.conn.close()
        self.conn = None
        self.txn = None
        self.lock_held = self.table_locked = False
        self.temp_rows = None

    def run(self, sql: str, allowed: frozenset[int] = frozenset()) -> tuple[int, list[tuple[Any, ...]]]:
        """Run ``sql``: (0, rows) or (error number, []) for an allowed error; Lost if the connection is gone;
        any other error is a violation (recorded, and returned)."""
        try:
            cur = self.conn.cursor()
            try:
                cur.execute(sql)
                rows = [tuple(r) for r in cur.fetchall()] if cur.description else []
            finally:
                cur.close()
            return 0, rows
        except (pymysql.err.MySQLError, MySQLdb.MySQLError) as exc:
            code = _code(exc)
            if code in LOST or isinstance(exc, pymysql.err.InterfaceError | MySQLdb.InterfaceError):
                raise Lost(str(exc)) from None
            if code not in allowed:
                self.violation(f"{sql!r} failed with {code}: {exc}")
            self.out.steps[f"error {code}"] += 1
            return code, []

    def violation(self, what: str) -> None:
        """Record something the model says cannot happen."""
        self.out.violations.append(f"walker {self.index} ({self.driver}): {what}")

    # ------------------------------------------------------------------------------------------- the model

    def commit_model(self) -> None:
        """The open transaction's changes are committed."""
        if self.txn is not None:
            self.out.rows.update(self.txn.rows)
            self.out.bumps += self.txn.bumps
        self.txn = None

    def lose(self, committing: bool, extra: tuple[list[int], int] = ([], 0)) -> None:
        """The connection went away; what was being committed may or may not have been."""
        rows = list(self.txn.rows) if self.txn is not None else []
        bumps = self.txn.bumps if self.txn is not None else 0
        rows += extra[0]
        bumps += extra[1]
        if committing and (rows or bumps):
            self.out.in_doubt.append((rows, bumps))
        self.disconnect()
        self.connect()

    def write(self, sql: str, row: int | None, bump: bool, allowed: frozenset[int]) -> None:
        """A change: in the open transaction, opening one (autocommit off), or committed on its own."""
        autocommitted = self.autocommit and self.txn is None
        if not autocommitted and self.txn is None:
            self.txn = Txn(explicit=False)
        try:
            code, _ = self.run(sql, allowed | STATEMENT_ERRORS | {DEADLOCK})
        except Lost:
            self.lose(committing=autocommitted, extra=([row] if row is not None else [], int(bump)))
            return
        if code == DEADLOCK:
            self.txn = None  # the server rolled the whole transaction back
            return
        if code:
            return
        if autocommitted:
            self.out.rows.update([row] if row is not None else [])
            self.out.bumps += int(bump)
        else:
            assert self.txn is not None
            if row is not None:
                self.txn.rows.append(row)
            self.txn.bumps += int(bump)

    # ------------------------------------------------------------------------------------------- steps

    def step(self) -> None:
        """One random step, chosen among those that make sense in the model's state."""
        if self.table_locked:  # only its own table may be touched until UNLOCK TABLES
            action = self.rng.choice(["locked_insert", "locked_check", "unlock_tables"])
            self.out.steps[action] += 1
            getattr(self, "_" + action)()
            return
        txn = self.txn
        choices: list[tuple[str, int]] = [("insert", 5), ("bump", 8 if txn else 2), ("check", 2), ("twin", 2)]
        choices += [("ddl", 1), ("lock_tables", 1), ("lock" if not self.lock_held else "unlock", 1)]
        choices.append(("temp_create" if self.temp_rows is None else self.rng.choice(["temp_insert", "temp_drop"]), 1))
        if self.lock_held:
            choices.append(("lock_check", 1))
        if self.temp_rows is not None:
            choices.append(("temp_check", 1))
        if txn is None and not self.autocommit:
            choices.append(("savepoint", 2))  # a transaction's first statement, which MariaDB does not flag
        if self.out.rows or (txn and txn.rows):
            choices.append(("duplicate", 2))
        if txn is None or not txn.explicit:
            choices.append(("begin", 2))
        choices.append(("autocommit", 1))
        if txn is not None:
            choices += [("commit", 3), ("rollback", 1), ("disconnect", 1)]
            if txn.explicit or not self.autocommit:
                choices.append(("savepoint", 2))
            if txn.savepoints:
                choices += [("rollback_to", 2), ("release", 1)]
            if txn.did_something:
                choices.append(("kill_query", 1))
        names, weights = zip(*choices, strict=True)
        action = self.rng.choices(names, weights)[0]
        self.out.steps[action] += 1
        getattr(self, "_" + action)()

    def _insert(self) -> None:
        key = next(self.keys)
        self.write(f"INSERT INTO {ROWS} VALUES ({key}, {self.index})", key, False, frozenset())

    def _duplicate(self) -> None:
        known = list(self.out.rows) + (self.txn.rows if self.txn else [])
        key = self.rng.choice(known)
        self.write(f"INSERT INTO {ROWS} VALUES ({key}, {self.index})", None, False, frozenset({1062}))

    def _bump(self) -> None:
        hot = self.rng.randrange(HOT_ROWS)
        sql = (
            f"UPDATE {HOT} h, {LEDGER} l SET h.n = h.n + 1, l.n = l.n + 1 "
            f"WHERE h.id = {hot} AND l.walker = {self.index}"
        )
        self.write(sql, None, True, frozenset())

    def _begin(self) -> None:
        try:
            self.run(self.rng.choice(["BEGIN", "START TRANSACTION"]))
        except Lost:
            self.lose(committing=True)  # BEGIN commits an open transaction first
            return
        self.commit_model()
        self.txn = Txn(explicit=True)

    def _commit(self) -> None:
        try:
            self.run("COMMIT")
        except Lost:
            self.lose(committing=True)
            return
        self.commit_model()

    def _rollback(self) -> None:
        try:
            self.run("ROLLBACK")
        except Lost:
            self.lose(committing=False)
            return
        self.txn = None

    def _autocommit(self) -> None:
        on = not self.autocommit
        try:
            self.run(f"SET autocommit = {int(on)}")
        except Lost:
            self.lose(committing=on)
            return
        self.autocommit = on
        if on:
            self.commit_model()  # turning autocommit on commits the open transaction

    def _savepoint(self) -> None:
        if self.txn is None:  # autocommit off: the savepoint opens the transaction
            self.txn = Txn(explicit=False)
        name = self.rng.choice(SAVEPOINTS)
        try:
            self.run(f"SAVEPOINT {name}")
        except Lost:
            self.lose(committing=False)
            return
        self.txn.savepoints.pop(name, None)
        self.txn.savepoints[name] = (len(self.txn.rows), self.txn.bumps)

    def _ddl(self) -> None:
        """A statement that commits the open transaction before it runs (and after)."""
        table = f"app.txm_ddl_{self.index}"
        sql = self.rng.choice([f"CREATE TABLE IF NOT EXISTS {table} (a INT)", f"DROP TABLE IF EXISTS {table}"])
        try:
            self.run(sql)
        except Lost:
            self.lose(committing=True)
            return
        self.commit_model()

    def _lock_tables(self) -> None:
        """LOCK TABLES on its own table: commits the open transaction; until UNLOCK TABLES, any other table is
        refused (1100) on the session's connection, and only there."""
        try:
            self.run(f"LOCK TABLES {own_table(self.index)} WRITE")
        except Lost:
            self.lose(committing=True)
            return
        self.commit_model()
        self.table_locked = True

    def _locked_insert(self) -> None:
        try:
            self.run(f"INSERT INTO {own_table(self.index)} VALUES ({self.index})")
        except Lost:
            self.lose(committing=False)

    def _locked_check(self) -> None:
        try:
            code, _ = self.run(f"SELECT COUNT(*) FROM {ROWS}", frozenset({1100}))
        except Lost:
            self.lose(committing=False)
            return
        if code != 1100:
            self.violation(f"a table it did not lock was readable under LOCK TABLES (error {code})")

    def _unlock_tables(self) -> None:
        try:
            self.run("UNLOCK TABLES")
        except Lost:
            self.lose(committing=False)
            return
        self.table_locked = False
        self.commit_model()  # UNLOCK TABLES commits what ran under the lock (nothing of the model's)

    def _lock(self) -> None:
        try:
            _, rows = self.run(f"SELECT GET_LOCK('txm_{self.index}', 0)")
        except Lost:
            self.lose(committing=False)
            return
        if rows != [(1,)]:
            self.violation(f"GET_LOCK of its own lock answered {rows}")
        self.lock_held = True

    def _lock_check(self) -> None:
        try:
            _, rows = self.run(f"SELECT IS_USED_LOCK('txm_{self.index}') = CONNECTION_ID()")
        except Lost:
            self.lose(committing=False)
            return
        if rows != [(1,)]:
            self.violation(f"its GET_LOCK is not held by the connection it runs on ({rows})")

    def _unlock(self) -> None:
        try:
            _, rows = self.run(f"SELECT RELEASE_LOCK('txm_{self.index}')")
        except Lost:
            self.lose(committing=False)
            return
        if rows != [(1,)]:
            self.violation(f"RELEASE_LOCK of the lock it holds answered {rows}")
        self.lock_held = False

    def _temp_create(self) -> None:
        try:
            self.run("CREATE TEMPORARY TABLE txm_tmp (a INT) ENGINE=MEMORY")
        except Lost:
            self.lose(committing=False)
            return
        self.temp_rows = 0

    def _temp_insert(self) -> None:
        try:
            self.run("INSERT INTO txm_tmp VALUES (1)")
        except Lost:
            self.lose(committing=False)
            return
        assert self.temp_rows is not None
        self.temp_rows += 1

    def _temp_check(self) -> None:
        try:
            code, rows = self.run("SELECT COUNT(*) FROM txm_tmp", frozenset({1146}))
        except Lost:
            self.lose(committing=False)
            return
        if code or rows != [(self.temp_rows,)]:
            self.violation(f"its temporary table holds {rows or code}, not {self.temp_rows} rows")

    def _temp_drop(self) -> None:
        try:
            self.run("DROP TEMPORARY TABLE txm_tmp")
        except Lost:
            self.lose(committing=False)
            return
        self.temp_rows = None

    def _twin(self) -> None:
        """The same change and the same session variables through the proxy and on the direct twin: the same
        affected rows, the same info, the same values."""
        change = "UPDATE {table} SET v = 0 WHERE walker = {walker} AND side = '{side}'"
        if not self.autocommit and self.txn is None:
            self.txn = Txn(explicit=False)  # the change opens one, as every statement does with autocommit off
        try:
            through = self.answer(self.conn, change.format(table=TWIN, walker=self.index, side="p"))
            through_vars = self.answer(self.conn, TWIN_VARIABLES)
        except Lost:
            self.lose(committing=False)
            return
        direct = self.answer(self.twin, change.format(table=TWIN, walker=self.index, side="d"))
        direct_vars = self.answer(self.twin, TWIN_VARIABLES)
        if through != direct or through_vars != direct_vars:
            self.violation(f"through the proxy {through} {through_vars}, direct {direct} {direct_vars}")

    def answer(self, conn: Any, sql: str) -> Answer:
        """What a client sees of ``sql`` on ``conn`` (``clients.answer``); Lost if the session is gone."""
        try:
            got = answer(conn, sql)
        except (pymysql.err.InterfaceError, MySQLdb.InterfaceError) as exc:
            raise Lost(str(exc)) from None
        if got.code in LOST:
            raise Lost(f"error {got.code}")
        return got

    def _rollback_to(self) -> None:
        txn = self.txn
        assert txn is not None
        name = self.rng.choice(list(txn.savepoints))
        try:
            code, _ = self.run(f"ROLLBACK TO SAVEPOINT {name}")
        except Lost:
            self.lose(committing=False)
            return
        if code:
            return
        rows, bumps = txn.savepoints[name]
        del txn.rows[rows:]
        txn.bumps = bumps
        names = list(txn.savepoints)
        for later in names[names.index(name) + 1 :]:
            del txn.savepoints[later]

    def _release(self) -> None:
        txn = self.txn
        assert txn is not None
        name = self.rng.choice(list(txn.savepoints))
        try:
            self.run(f"RELEASE SAVEPOINT {name}")
        except Lost:
            self.lose(committing=False)
            return
        names = list(txn.savepoints)
        for gone in names[names.index(name) :]:
            del txn.savepoints[gone]

    def _check(self) -> None:
        try:
            _, rows = self.run("SELECT @@autocommit, @@in_transaction")
        except Lost:
            self.lose(committing=False)
            return
        if not rows:
            return
        autocommit, in_transaction = rows[0]
        if int(autocommit) != int(self.autocommit):
            self.violation(f"@@autocommit is {autocommit}, the session set {int(self.autocommit)}")
        if self.txn is None and in_transaction:
            self.violation("@@in_transaction is 1 with no transaction open")
        if self.txn is not None and self.txn.did_something and not in_transaction:
            self.violation("@@in_transaction is 0 inside the session's transaction")

    def _disconnect(self) -> None:
        self.disconnect()
        self.connect()

    def _kill_query(self) -> None:
        """KILL QUERY of this session's own running statement, from another session through the proxy."""
        session_id = self.session_id()
        killer = threading.Thread(target=kill_when_running, args=(self.proxy, session_id, "txm_sleep"))
        killer.start()
        try:
            self.run("SELECT SLEEP(20) AS txm_sleep", frozenset({1317}))
        except Lost:
            self.lose(committing=False)
        killer.join(30)

    def _overstay(self) -> None:
        """Keep the transaction running past mysql-max_transaction_time (the proxy's clock moved past it while its
        statement runs): the proxy ends the session, and whatever other transaction is open then."""
        self.overstay = False
        self.out.steps["overstay"] += 1
        seconds = MAX_TRANSACTION_TIME_MS / 1000 + 1
        advancer = advance_clock_while_running(self.proxy, self.session_id(), "txm_overstay", seconds)
        try:
            self.run("SELECT SLEEP(30) AS txm_overstay")
        except Lost:
            self.lose(committing=False)
            self.out.steps["overstay ended by the proxy"] += 1
            return
        finally:
            advancer.join(30)
        self.violation("a transaction outlived mysql-max_transaction_time")

    def session_id(self) -> int:
        """The proxy's id of this session (the handshake's connection id)."""
        conn = self.conn
        return int(conn.thread_id() if callable(conn.thread_id) else conn.thread_id)

    def walk(self) -> Outcome:
        """Take all the steps, then close the session (rolling back whatever is open) and its twin."""
        self.connect()
        for i in range(self.steps):
            if self.overstay and i == self.steps // 2:
                if self.table_locked:
                    self._unlock_tables()
                self._begin()
                self._insert()
                self._overstay()
            self.step()
        self.disconnect()
        with contextlib.suppress(Exception):
            self.twin.close()
        return self.out


def kill_when_running(proxy: ProxyProcess, session_id: int, marker: str, timeout: float = 20) -> None:
    """Once ``session_id`` runs a statement containing ``marker``, KILL QUERY it through the proxy."""
    gone: list[bool] = []

    def running_or_gone() -> bool:
        rows = proxy.admin("GET", "/processlist")
        if not any(r["SessionID"] == session_id for r in rows):
            gone.append(True)
        return bool(gone) or any(r["SessionID"] == session_id and marker in r["info"] for r in rows)

    wait_until(running_or_gone, f"session {session_id} running {marker!r}", timeout, interval=0)
    if gone:
        return  # the session is gone (the proxy ended it): nothing to kill
    with proxy.connect() as conn, conn.cursor() as cur:
        try:
            cur.execute(f"KILL QUERY {session_id}")
        except pymysql.err.OperationalError as exc:
            if exc.args[0] != 1094:  # unknown thread: it ended meanwhile
                raise


def churn(proxy: ProxyProcess, stop: threading.Event, violations: list[str], counts: Counter[str]) -> None:
    """Another client taking whatever connection is free: it must never find itself inside a transaction."""
    while not stop.is_set():
        with proxy.connect(database="app", autocommit=True) as conn, conn.cursor() as cur:
            for _ in range(20):
                cur.execute("SELECT @@in_transaction, @@autocommit")
                in_transaction, autocommit = cur.fetchone()
                counts["churn checks"] += 1
                if in_transaction or not autocommit:
                    violations.append(
                        f"a fresh session found @@in_transaction={in_transaction} autocommit={autocommit}"
                    )
                cur.execute("SET autocommit = 1")  # would commit a transaction it had inherited


def verify(primary: Any, outcomes: list[Outcome]) -> list[str]:
    """Compare the tables with the models; the problems found."""
    problems: list[str] = []
    with primary.connect() as conn, conn.cursor() as cur:
        cur.execute(f"SELECT walker, k FROM {ROWS}")
        found: dict[int, set[int]] = {}
        for walker, key in cur.fetchall():
            found.setdefault(walker, set()).add(key)
        cur.execute(f"SELECT walker, n FROM {LEDGER}")
        ledger = dict(cur.fetchall())
        cur.execute(f"SELECT SUM(n) FROM {HOT}")
        hot_total = int(cur.fetchone()[0])
    if hot_total != sum(ledger.values()):
        problems.append(f"the hot rows count {hot_total} changes, the ledger {sum(ledger.values())}")
    for out in outcomes:
        rows, bumps = found.get(out.walker, set()), ledger.get(out.walker, 0)
        if len(out.in_doubt) > 12:
            problems.append(f"walker {out.walker}: {len(out.in_doubt)} transactions in doubt, too many to check")
            continue
        explained = False
        for mask in range(1 << len(out.in_doubt)):
            chosen = [t for i, t in enumerate(out.in_doubt) if mask >> i & 1]
            want_rows = out.rows.union(*(set(r) for r, _ in chosen))
            if want_rows == rows and out.bumps + sum(b for _, b in chosen) == bumps:
                explained = True
                break
        if not explained:
            extra = sorted(rows - out.rows)[:10]
            missing = sorted(out.rows - rows)[:10]
            problems.append(
                f"walker {out.walker}: the tables do not match the model: rows committed that were not "
                f"{extra}, rows missing {missing}, changes counted {bumps} against {out.bumps} "
                f"({len(out.in_doubt)} in doubt)"
            )
    return problems


@dataclass
class Report:
    """What a model run did and found."""

    walkers: int
    steps: int
    seconds: float
    counts: Counter[str]
    in_doubt: int
    problems: list[str]

    def summary(self) -> str:
        """One paragraph for a log or a closing note."""
        common = ", ".join(f"{name} {n}" for name, n in sorted(self.counts.items()))
        return (
            f"{self.walkers} walkers x {self.steps} steps in {self.seconds:.0f} s: {common}; "
            f"{self.in_doubt} commits in doubt; {len(self.problems)} problems"
        )


def run_model(
    proxy: ProxyProcess, primary: Any, *, walkers: int, steps: int, churners: int = 2, seed: int | None = None
) -> Report:
    """Run the walkers and churners through ``proxy`` against ``primary`` and check the outcome."""
    seed = random.randrange(1 << 30) if seed is None else seed
    with primary.connect() as conn:
        create_tables(conn, walkers)
    started = time.monotonic()
    stop = threading.Event()
    churn_violations: list[str] = []
    counts: Counter[str] = Counter()
    churn_threads = [
        threading.Thread(target=churn, args=(proxy, stop, churn_violations, counts)) for _ in range(churners)
    ]
    people = [
        Walker(i, proxy, primary.port, random.Random(seed * 1000 + i), steps, overstay=i == 0) for i in range(walkers)
    ]
    outcomes: list[Outcome] = []
    errors: list[str] = []

    def walk(walker: Walker) -> None:
        try:
            outcomes.append(walker.walk())
        except Exception as exc:  # a harness failure is a failure of the run, reported with the rest
            errors.append(f"walker {walker.index} stopped: {exc!r}")
            outcomes.append(walker.out)

    threads = [threading.Thread(target=walk, args=(w,)) for w in people]
    for t in churn_threads + threads:
        t.start()
    for t in threads:
        t.join()
    stop.set()
    for t in churn_threads:
        t.join()
    for out in outcomes:
        counts.update(out.steps)
    problems = errors + churn_violations + [v for out in outcomes for v in out.violations]
    problems += verify(primary, outcomes)
    left_open = open_transactions(primary)
    if left_open:
        problems.append(f"backend connections left inside a transaction: {left_open}")
    problems += [
        f"proxy log: {line}"
        for line in proxy.log().splitlines()
        if "released inside a transaction" in line or "internal error" in line
    ]
    return Report(
        walkers,
        steps,
        time.monotonic() - started,
        counts,
        sum(len(o.in_doubt) for o in outcomes),
        [f"(seed {seed}) {p}" for p in problems],
    )


def main(argv: list[str] | None = None) -> int:
    """A long run on a sandbox of its own."""
    from pathlib import Path

    from devstack.sandbox import Sandbox

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--walkers", type=int, default=12)
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--seed", type=int)
    args = parser.parse_args(argv)
    box = Sandbox("var/txmodel-sandbox")
    box.up(replicas=0)
    workdir = Path("var/txmodel")
    workdir.mkdir(parents=True, exist_ok=True)
    proxy = ProxyProcess(model_config(box.primary().port), workdir)
    try:
        proxy.start()
        report = run_model(proxy, box.primary(), walkers=args.walkers, steps=args.steps, seed=args.seed)
    finally:
        proxy.stop()
        box.down()
    print(report.summary())
    for problem in report.problems:
        print(problem)
    return 1 if report.problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
