"""Concurrent money transfers through a sharding proxy (issue 40): the model-based test of cross-shard atomicity.

Accounts are sharded over independent MariaDB servers by id (``mod``), so a transfer between an even and an odd
account is an XA transaction over two shards. Writers, each a client thread of its own, move random amounts between
random accounts in random ways (``KINDS``): BEGIN ... COMMIT, autocommit off ended by COMMIT or by ``SET autocommit
= 1``, one cross-shard ``UPDATE ... CASE``, ROLLBACK, a client gone mid-transaction, a KILL of the client's query;
the accounts are updated in random order, so the servers see deadlocks and, across shards, lock waits that only a
lock wait timeout ends. Optionally the proxy is killed (SIGKILL) and restarted mid-run.

The model: each writer keeps what its client was told. A transfer is *committed* when its COMMIT (or the statement
that commits it) answered OK, *not committed* when the transaction was rolled back, refused or lost before its
COMMIT was sent, and *in doubt* when the connection broke while the COMMIT was under way. At the end, once the
shards show nothing prepared, every account must equal its start plus the committed transfers (and some subset of
those in doubt, the same subset for every account). And, whatever happens: no client, none of which ever sends an
XA statement, sees an XA error (``XA_ERRORS``); no error outside ``EXPECTED`` reaches a client; and no connection
the proxy holds in its pools is left inside a transaction or an XA branch (``Report.leftovers``).

From the command line, on shard servers of its own::

    python -m tests.support.transfers --runs 40 --writers 4 --transfers 150 --restart-every 2
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import os
import random
import shutil
import signal
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pymysql

from devstack.proxy import ProxyProcess
from devstack.sandbox import APP_PASSWORD, APP_USER, Sandbox, SandboxServer
from devstack.stack import REPO, wait_until
from proxyapp.sharding.xa import XA_ERRORS
from tests.support.harness import open_transactions
from tests.support.proxy_rig import ProxyRig

SCHEMA = "bank"
ACCOUNTS = 12
START_BALANCE = 1000
#: The hostgroups of shard 0, 1, ...
SHARD_HOSTGROUP = 300
#: The ways a writer moves money, with their weights.
KINDS = {
    "begin_commit": 30,
    "autocommit_off_commit": 20,
    "autocommit_off_enable": 8,  # ended by SET autocommit = 1, which commits
    "single_statement": 15,  # one UPDATE ... CASE over both accounts, autocommit on
    "rollback": 15,
    "client_gone": 4,
    "kill_query": 3,
    "read": 5,
}
#: What a client may be told instead of a committed transfer, as a client of one server could be: a deadlock, a lock
#: wait timeout, its query or connection killed, the connection lost or refused (a restart), a server shutting down,
#: and ER_ERROR_DURING_COMMIT, the proxy's word for a transaction over shards that could not commit.
EXPECTED = frozenset({1213, 1205, 1317, 1927, 2003, 2006, 2013, 1180, 1053})
#: What the proxy logs when a connection comes back to its pool inside a transaction (``Hostgroup.release``).
RELEASED_OPEN = "was released inside a transaction"
#: Seconds a transfer may hold its first row's lock before it takes the second (contention, not timing: nothing
#: depends on how long anything takes).
HOLD_S = 0.02
#: Seconds a statement waits for a row lock before the server gives up: a cross-shard deadlock (each server sees only
#: a wait) ends by it.
LOCK_WAIT_TIMEOUT = 2


@dataclass
class Report:
    """One run: transfers by outcome, errors by code (XA ones and unexpected ones apart), the balances that differ
    from the model, and what was found left open on the shards."""

    committed: int = 0
    not_committed: int = 0
    in_doubt: int = 0
    reads: int = 0
    errors: Counter[int] = field(default_factory=Counter)
    xa_errors: list[str] = field(default_factory=list)
    unexpected: list[str] = field(default_factory=list)
    mismatches: list[str] = field(default_factory=list)
    leftovers: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Whether the run kept every invariant."""
        return not (self.xa_errors or self.unexpected or self.mismatches or self.leftovers)

    def add(self, other: Report) -> None:
        """Add another run's counts and findings to this one."""
        self.committed += other.committed
        self.not_committed += other.not_committed
        self.in_doubt += other.in_doubt
        self.reads += other.reads
        self.errors.update(other.errors)
        for name in ("xa_errors", "unexpected", "mismatches", "leftovers"):
            getattr(self, name).extend(getattr(other, name))

    def summary(self) -> str:
        """One paragraph."""
        lines = [
            f"transfers committed {self.committed}, not committed {self.not_committed}, in doubt {self.in_doubt}, "
            f"reads {self.reads}; errors by code {dict(sorted(self.errors.items()))}",
            f"XA errors to plain clients: {len(self.xa_errors)}; unexpected errors: {len(self.unexpected)}; "
            f"balance mismatches: {len(self.mismatches)}; left open: {len(self.leftovers)}",
        ]
        for name in ("xa_errors", "unexpected", "mismatches", "leftovers"):
            lines.extend(f"  {name}: {line}" for line in getattr(self, name)[:10])
        return "\n".join(lines)


@dataclass(frozen=True)
class Transfer:
    """``amount`` from account ``source`` to ``target``."""

    source: int
    target: int
    amount: int


class _Lost(Exception):
    """The connection to the proxy broke."""


class Writer:
    """One client: its connection through the proxy, its random choices, what it was told."""

    def __init__(self, proxy: ProxyProcess, seed: int, transfers: int, restarts: _Restarts) -> None:
        self.proxy = proxy
        self.rng = random.Random(seed)
        self.transfers = transfers
        self.restarts = restarts
        self.committed: list[Transfer] = []
        self.in_doubt: list[Transfer] = []
        self.report = Report()
        self.conn: pymysql.Connection | None = None

    def run(self) -> None:
        """Do ``transfers`` transfers (reads count as one)."""
        kinds, weights = list(KINDS), list(KINDS.values())
        for _ in range(self.transfers):
            self.restarts.pass_point()
            kind = self.rng.choices(kinds, weights)[0]
            source, target = self.rng.sample(range(ACCOUNTS), 2)
            transfer = Transfer(source, target, self.rng.randint(1, 50))
            try:
                self._one(kind, transfer)
            except _Lost:
                self._drop()
        self._drop()

    def _connection(self) -> pymysql.Connection:
        if self.conn is None:
            for attempt in itertools.count():
                self.restarts.up.wait(60)  # the proxy restarting: it listens again once this is set
                try:
                    self.conn = self.proxy.connect(database=SCHEMA, autocommit=True, read_timeout=60)
                    break
                except pymysql.err.OperationalError:
                    if attempt > 3:
                        raise
            self._run(f"SET SESSION innodb_lock_wait_timeout = {LOCK_WAIT_TIMEOUT}")
        assert self.conn is not None
        return self.conn

    def _drop(self) -> None:
        if self.conn is not None:
            try:
                self.conn.close()
            except Exception:  # already broken
                self.conn._force_close()
            self.conn = None

    def _run(self, sql: str) -> tuple[tuple[Any, ...], ...]:
        """Run ``sql``; its rows. A MySQL error is recorded (XA ones and unexpected ones apart) and raised; a broken
        connection raises _Lost."""
        conn = self.conn
        assert conn is not None
        if not conn.open:  # broken by an earlier statement
            raise _Lost(f"{sql!r}: the connection is closed")
        try:
            with conn.cursor() as cur:
                cur.execute(sql)
                return cur.fetchall()
        except pymysql.err.MySQLError as exc:
            code = exc.args[0] if exc.args and isinstance(exc.args[0], int) else 0
            self.report.errors[code] += 1
            where = f"{sql!r}: {exc.args}"
            if code in XA_ERRORS:
                self.report.xa_errors.append(where)
            elif code not in EXPECTED:
                self.report.unexpected.append(where)
            if code in (2006, 2013, 0) or isinstance(exc, pymysql.err.InterfaceError):
                raise _Lost(where) from exc
            raise

    def _one(self, kind: str, t: Transfer) -> None:
        conn = self._connection()
        if kind == "read":
            self._read(t)
            return
        if kind == "single_statement":
            self._single(t)
            return
        autocommit_off = kind.startswith("autocommit_off")
        try:
            if autocommit_off:
                self._run("SET autocommit = 0")
            else:
                self._run("BEGIN")
            self._moves(t, kind)
            if kind == "client_gone":
                conn._force_close()  # no COM_QUIT: the socket just closes, mid-transaction
                self.conn = None
                self.report.not_committed += 1
                return
            if kind == "rollback":
                self._run("ROLLBACK")
                self.report.not_committed += 1
            else:
                self._commit(t, "SET autocommit = 1" if kind == "autocommit_off_enable" else "COMMIT")
        except pymysql.err.MySQLError:
            self._give_up()
            self.report.not_committed += 1
        finally:
            if autocommit_off and self.conn is not None:
                self._settle_autocommit()

    def _moves(self, t: Transfer, kind: str) -> None:
        """The transfer's two updates, in random order, a read between them now and then, a KILL QUERY of the
        second one for ``kill_query``."""
        moves = [(t.source, -t.amount), (t.target, t.amount)]
        self.rng.shuffle(moves)
        for n, (account, delta) in enumerate(moves):
            if self.rng.random() < 0.2:
                self._run(f"SELECT balance FROM accounts WHERE id = {self.rng.randrange(ACCOUNTS)}")
            if n == 1 and self.rng.random() < 0.5:
                self._run(f"DO SLEEP({HOLD_S})")  # the first row's lock held a while: the writers meet
            sql = f"UPDATE accounts SET balance = balance + {delta} WHERE id = {account}"
            if kind == "kill_query" and n == 1:
                self._killed(sql)
            else:
                self._run(sql)

    def _killed(self, sql: str) -> None:
        """Run ``sql`` after ``SELECT SLEEP`` while another connection kills the query: the client is told 1317
        (or the sleep returns 1), and gives up the transfer either way."""
        conn = self.conn
        assert conn is not None
        session = conn.thread_id()

        def kill() -> None:
            def sleeping() -> bool:
                rows = self.proxy.admin("GET", "/processlist")
                return any(r["SessionID"] == session and "SLEEP" in (r["info"] or "") for r in rows)

            try:
                wait_until(sleeping, f"session {session} running its SLEEP", 30, interval=0.01)
                with self.proxy.connect() as other, other.cursor() as cur:
                    cur.execute(f"KILL QUERY {session}")
            except (pymysql.err.MySQLError, OSError, RuntimeError):
                pass  # the proxy restarted meanwhile: the SLEEP's connection is lost with it

        killer = threading.Thread(target=kill)
        killer.start()
        try:
            rows = self._run("SELECT SLEEP(30)")  # ends when the KILL comes
        finally:
            killer.join()
        if rows == ((1,),):  # the sleep was interrupted: a killed SLEEP answers 1, as on one server
            raise pymysql.err.OperationalError(1317, "killed")
        self._run(sql)

    def _commit(self, t: Transfer, sql: str) -> None:
        """End the transfer with ``sql``: committed when it answers OK, in doubt when the connection breaks."""
        try:
            self._run(sql)
        except _Lost:
            self.in_doubt.append(t)
            self.report.in_doubt += 1
            raise
        self.committed.append(t)
        self.report.committed += 1

    def _give_up(self) -> None:
        """ROLLBACK after an error, as applications do."""
        with contextlib.suppress(pymysql.err.MySQLError):
            self._run("ROLLBACK")

    def _settle_autocommit(self) -> None:
        """Autocommit back on (nothing is open: the transfer committed or rolled back)."""
        with contextlib.suppress(pymysql.err.MySQLError):
            self._run("SET autocommit = 1")

    def _single(self, t: Transfer) -> None:
        """One statement over both accounts, autocommit on: all of it or nothing (XA over two shards)."""
        sql = (
            f"UPDATE accounts SET balance = balance + CASE id WHEN {t.source} THEN {-t.amount} "
            f"WHEN {t.target} THEN {t.amount} END WHERE id IN ({t.source}, {t.target})"
        )
        try:
            self._commit(t, sql)
        except pymysql.err.MySQLError:
            self.report.not_committed += 1

    def _read(self, t: Transfer) -> None:
        """A plain read of one account and one of the sum over every shard."""
        self.report.reads += 1
        try:
            self._run(f"SELECT balance FROM accounts WHERE id = {t.source}")
            self._run("SELECT SUM(balance) FROM accounts")
        except pymysql.err.MySQLError:
            pass


class _Restarts:
    """The proxy killed and restarted once, when the writers together reach ``at`` transfers (never if 0)."""

    def __init__(self, proxy: ProxyProcess, at: int) -> None:
        self.proxy = proxy
        self.at = at
        self.count = 0
        self.lock = threading.Lock()
        self.up = threading.Event()  # clear while the proxy is down
        self.up.set()

    def pass_point(self) -> None:
        with self.lock:
            self.count += 1
            due = self.count == self.at
        if due:
            self.up.clear()
            try:
                self.proxy.signal(signal.SIGKILL)
                assert self.proxy.proc is not None
                self.proxy.proc.wait(10)
                self.proxy.start()
            finally:
                self.up.set()


class Rig(ProxyRig):
    """The shard servers (their first ``shards`` used) and a proxy sharding ``bank.accounts`` over them."""

    def __init__(self, servers: list[SandboxServer], workdir: Path) -> None:
        super().__init__(workdir)
        self.servers = servers

    def config(self) -> dict[str, Any]:
        """Accounts sharded by id mod the number of servers."""
        hostgroups = [SHARD_HOSTGROUP + n for n in range(len(self.servers))]
        return {
            "mysql_servers": [
                {"hostgroup_id": hg, "hostname": s.host, "port": s.port}
                for hg, s in zip(hostgroups, self.servers, strict=True)
            ],
            "mysql_users": [{"username": APP_USER, "password": APP_PASSWORD, "default_hostgroup": hostgroups[0]}],
            "mysql_shards": [
                {"shard_group": "bank", "shard": n, "hostgroup_id": hg} for n, hg in enumerate(hostgroups)
            ],
            "mysql_sharded_tables": [
                {
                    "schemaname": SCHEMA,
                    "tablename": "accounts",
                    "shard_group": "bank",
                    "algorithm": "mod",
                    "shard_key": "id",
                },
            ],
        }

    def reset(self) -> None:
        """Every account at ``START_BALANCE``, on its shard."""
        for n, server in enumerate(self.servers):
            with server.connect() as conn, conn.cursor() as cur:
                cur.execute(f"CREATE DATABASE IF NOT EXISTS {SCHEMA}")
                cur.execute(f"GRANT ALL ON {SCHEMA}.* TO '{APP_USER}'@'%'")
                cur.execute(f"DROP TABLE IF EXISTS {SCHEMA}.accounts")
                cur.execute(f"CREATE TABLE {SCHEMA}.accounts (id int PRIMARY KEY, balance bigint NOT NULL)")
                rows = [f"({a}, {START_BALANCE})" for a in range(ACCOUNTS) if a % len(self.servers) == n]
                cur.execute(f"INSERT INTO {SCHEMA}.accounts VALUES {', '.join(rows)}")

    def balances(self) -> dict[int, int]:
        """Every account's balance, read on its shard."""
        found: dict[int, int] = {}
        for server in self.servers:
            with server.connect() as conn, conn.cursor() as cur:
                cur.execute(f"SELECT id, balance FROM {SCHEMA}.accounts")
                found.update((int(a), int(b)) for a, b in cur.fetchall())
        return found

    def prepared(self) -> list[str]:
        """The xids prepared on the shards."""
        found: list[str] = []
        for server in self.servers:
            with server.connect() as conn, conn.cursor() as cur:
                cur.execute("XA RECOVER")
                found.extend(f"{row[3]!r}@{server.port}" for row in cur.fetchall())
        return found

    def run(self, seed: int, writers: int, transfers: int, restart: bool) -> Report:
        """One run: ``writers`` writers of ``transfers`` each, the proxy restarted halfway when ``restart``."""
        assert self.proxy is not None
        self.reset()
        logged = len(self.proxy.log())
        restarts = _Restarts(self.proxy, writers * transfers // 2 if restart else 0)
        clients = [Writer(self.proxy, seed * 1000 + n, transfers, restarts) for n in range(writers)]
        threads = [threading.Thread(target=c.run) for c in clients]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        report = Report()
        for client in clients:
            report.add(client.report)
        if restart:  # recovery resolves what the killed worker left prepared (a pass every few seconds of its clock)

            def resolved() -> bool:
                self.proxy.advance_clock(15)  # type: ignore[union-attr]
                return not self.prepared()

            wait_until(resolved, "recovery of the prepared branches", 60, interval=0.2)
        report.leftovers.extend(f"prepared {x}" for x in self.prepared())
        # The pool's last line of defence closed a connection given back inside a transaction or an XA branch:
        # the session's own bookkeeping let it go.
        report.leftovers.extend(line for line in self.proxy.log()[logged:].splitlines() if RELEASED_OPEN in line)
        for server in self.servers:
            report.leftovers.extend(f"open on {server.port}: {trx}" for trx in open_transactions(server))
        report.mismatches.extend(_mismatches(self.balances(), clients))
        return report


def _mismatches(balances: dict[int, int], clients: list[Writer]) -> list[str]:
    """The accounts that equal no outcome the clients were told: start plus the committed transfers plus one subset
    of those in doubt (up to 2**12 subsets tried)."""
    committed = [t for c in clients for t in c.committed]
    doubtful = [t for c in clients for t in c.in_doubt][:12]
    base = _apply({a: START_BALANCE for a in range(ACCOUNTS)}, committed)
    for n in range(len(doubtful) + 1):
        for subset in itertools.combinations(doubtful, n):
            if _apply(base, list(subset)) == balances:
                return []
    return [f"account {a}: {balances.get(a)} (the committed transfers say {base[a]})" for a in sorted(base)
            if balances.get(a) != base[a]] or ["no subset of the transfers in doubt explains the balances"]  # fmt: skip


def _apply(balances: dict[int, int], transfers: list[Transfer]) -> dict[int, int]:
    result = dict(balances)
    for t in transfers:
        result[t.source] -= t.amount
        result[t.target] += t.amount
    return result


def run_all(rig: Rig, seeds: Iterator[int], writers: int, transfers: int, restart_every: int) -> Iterator[Report]:
    """A run per seed; every ``restart_every``-th with a restart of the proxy (0: none)."""
    for n, seed in enumerate(seeds):
        yield rig.run(seed, writers, transfers, bool(restart_every) and n % restart_every == restart_every - 1)


def main(argv: list[str] | None = None) -> int:
    """Runs at length, on shard servers of their own (taken down at the end)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=1, help="the first seed")
    parser.add_argument("--runs", type=int, default=4, help="how many runs (seeds from --seed)")
    parser.add_argument("--writers", type=int, default=4)
    parser.add_argument("--transfers", type=int, default=150, help="transfers per writer per run")
    parser.add_argument("--shards", type=int, default=2)
    parser.add_argument("--restart-every", type=int, default=2, help="restart the proxy in every N-th run (0: never)")
    args = parser.parse_args(argv)
    base = REPO / "var" / "transfers" / str(os.getpid())
    boxes = [Sandbox(base / f"shard{n}") for n in range(args.shards)]
    started = time.monotonic()
    total = Report()
    failed = 0
    try:
        servers = []
        for box in boxes:
            box.up(replicas=0)
            servers.append(box.primary())
        with Rig(servers, base / "proxy") as rig:
            seeds = iter(range(args.seed, args.seed + args.runs))
            for n, report in enumerate(run_all(rig, seeds, args.writers, args.transfers, args.restart_every)):
                failed += not report.ok
                print(f"run {n + 1} (seed {args.seed + n}): {'ok' if report.ok else 'FAILED'}", flush=True)
                if not report.ok:
                    print(report.summary(), flush=True)
                total.add(report)
    finally:
        for box in boxes:
            box.down()
    print(total.summary())
    print(f"{failed} of {args.runs} runs failed; {time.monotonic() - started:.1f} s")
    if failed:
        print(f"the proxy's log: {base / 'proxy' / 'proxy.log'}")
        return 1
    shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
