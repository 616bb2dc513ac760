"""A session's transaction on sharded tables, which may reach several shards: one MariaDB XA transaction.

A transaction whose first statement is on a sharded table (after a held-back BEGIN, or with autocommit off) opens
as ``XA START`` on that statement's shard: the *home* branch, on the connection the session keeps
(``BackendLink.conn``), where the statements on no sharded table run too. A later statement on another shard opens
that shard's branch (the same gtrid) on a connection of its own, held until the transaction ends, so that every
statement of the transaction sees its own writes on every shard. A statement over several shards runs on the
branches of those shards, inside a savepoint, so that a shard's error undoes the others' part of it.

COMMIT commits every branch at once (``xa.commit``: ``XA COMMIT ... ONE PHASE`` for one branch, else two-phase
through the worker's decision log, so that a proxy killed in the middle leaves all or nothing); ROLLBACK rolls them
all back. As on one server: a deadlock on any branch (its server rolled that branch back) rolls back the others; a
statement that commits implicitly (DDL, BEGIN, ``SET autocommit = 1``...) commits the transaction first; a
SAVEPOINT is set on every branch, and ROLLBACK TO it rolls back the branches opened since entirely. A branch whose
connection is lost takes the transaction with it.
"""

from __future__ import annotations

from collections.abc import Collection

from proxyapp.backends.pool import ServerPool
from proxyapp.mysql.backend import BackendConnection
from proxyapp.mysql.constants import Command
from proxyapp.mysql.packets import ErrPacket
from proxyapp.mysql.wire import CONNECTION_LOST
from proxyapp.session.client import Client, server_status
from proxyapp.session.link import BackendLink, release
from proxyapp.session.services import SessionServices
from proxyapp.session.state import Pin, SessionState
from proxyapp.sharding.decisions import DecisionLog
from proxyapp.sharding.physical import default_schema
from proxyapp.sharding.shardmap import Shard, ShardedTable
from proxyapp.sharding.xa import Branch, BranchState, Failure, client_code, commit, rollback, xa_start_sql
from proxyapp.sql.lex import tokenize, unquote
from proxyapp.sql.scan import Kind, Statement

#: Errors after which the server has rolled the branch back (deadlock; XA_RBROLLBACK, XA_RBTIMEOUT, XA_RBDEADLOCK).
ROLLED_BACK = frozenset({1213, 1402, 1613, 1614})
#: The savepoint a statement over several shards runs inside.
STATEMENT_SAVEPOINT = "proxyfleet_statement"


class ShardTransaction:
    """The XA branches of one session's transaction: ``home`` on the link's kept connection, ``others`` by
    hostgroup on connections of their own; ``savepoints`` in the order they were set, each with the hostgroups of
    the branches that existed then."""

    def __init__(self, xid: str, home: Shard) -> None:
        self.xid = xid
        self.home = home
        self.others: dict[int, Branch] = {}
        self.savepoints: list[tuple[str, frozenset[int]]] = []
        self.home_open = False  # XA START ran on the home connection

    def reaches(self, hostgroup: int) -> bool:
        """Whether the transaction has a branch on ``hostgroup``."""
        return hostgroup == self.home.hostgroup_id or hostgroup in self.others

    async def open(self, link: BackendLink, shard: Shard) -> BackendConnection | None:
        """The connection of ``shard``'s branch, opened (``XA START``) when the transaction has none there yet;
        None after sending the error."""
        hostgroup = shard.hostgroup_id
        if hostgroup == self.home.hostgroup_id and self.home_open and link.conn is not None:
            return link.conn
        branch = self.others.get(hostgroup)
        if branch is not None:
            return branch.conn
        if any(b.shard == shard.number for b in self.others.values()) or (
            hostgroup != self.home.hostgroup_id and shard.number == self.home.number
        ):
            link.client.send_error(
                1235,
                f"ProxyFleet sharding does not support a transaction over shards of several groups yet (shard "
                f"{shard.number} twice)",
            )
            return None
        at_home = hostgroup == self.home.hostgroup_id
        schema = default_schema(shard, link.state.schema)
        conn = link.conn if at_home and link.conn is not None else await link.borrow(hostgroup, schema)
        if conn is None:
            return None
        try:
            err = await conn.simple_command(bytes((Command.QUERY,)) + xa_start_sql(self.xid, shard.number).encode())
        except CONNECTION_LOST as exc:
            pool = conn.pool
            assert isinstance(pool, ServerPool)
            link.lose(conn, pool)
            link.client.send_error(2013, f"Lost connection to shard {shard.number} (hostgroup {hostgroup}): {exc}")
            return None
        if err is not None:
            if conn is not link.conn:
                release(conn, reusable=not conn.in_transaction)
            link.client.send_error(err.code, err.message, 1, err.sqlstate)
            return None
        conn.xa = self.xid
        if at_home:
            self.home_open = True
            link.hold(conn, hostgroup)
        else:
            self.others[hostgroup] = Branch(shard.number, _server(conn), conn)
        return conn

    async def finish(
        self, link: BackendLink, commits: bool, log: DecisionLog | None, doomed: Collection[BackendConnection] = ()
    ) -> Failure | None:
        """Commit (``commits``) or roll back every branch and end the transaction; why it was not committed, if
        it was to be. The branches' connections go back to their pools, the home one to the link; ``doomed``, the
        connections whose branch their server rolled back (a deadlock), are closed instead: MariaDB 10.11 can leave
        such a branch's changes in place, locked, after its ``XA ROLLBACK``, until the connection goes."""
        home = link.conn if self.home_open else None
        branches = [Branch(self.home.number, _server(home), home)] if home is not None else []
        branches.extend(self.others.values())
        failure = None
        if commits and branches:
            if len(branches) > 1 and log is None:
                raise RuntimeError("a transaction over several shards without its decision log")
            outcome = await commit(branches, self.xid, log)  # type: ignore[arg-type]  # one branch needs none
            failure = outcome.failure
        elif branches:
            await rollback(branches, self.xid)
        for branch in branches:
            if branch.conn in doomed:
                branch.conn.close()
                branch.state = BranchState.LOST
        self._give_back(branches[1:] if home is not None else branches)
        self.others.clear()
        link.end_transaction()
        link.state.pins.discard(Pin.TRANSACTION)
        link.state.transaction_open = False
        if home is not None:
            if branches[0].reusable:
                await link.maybe_release()
            else:
                pool = home.pool
                assert isinstance(pool, ServerPool)
                link.lose(home, pool)
        return failure

    def forget(self, hostgroup: int) -> None:
        """Drop the branch on ``hostgroup``, whose connection was lost (and given back) by the link."""
        self.others.pop(hostgroup, None)

    def discard(self) -> None:
        """Close the other branches' connections (their servers roll them back): the session ended, or lost or
        reset its home connection, which takes the home branch with it."""
        for branch in self.others.values():
            release(branch.conn, reusable=False)
        self.others.clear()

    async def on_others(self, sql: str, hostgroups: frozenset[int] | None = None) -> ErrPacket | None:
        """Run ``sql`` on the other branches (those on ``hostgroups`` only, when given); the first error."""
        first = None
        for hostgroup, branch in self.others.items():
            if hostgroups is not None and hostgroup not in hostgroups:
                continue
            try:
                err = await branch.conn.simple_command(bytes((Command.QUERY,)) + sql.encode("utf-8", "surrogateescape"))
            except CONNECTION_LOST as exc:
                err = ErrPacket(2013, "HY000", f"Lost connection to shard {branch.shard}: {exc}")
            first = first or err
        return first

    async def roll_back_others_since(self, name: str) -> None:
        """ROLLBACK TO savepoint ``name``: the branches opened after it are rolled back whole and let go, and
        the savepoints set after it are forgotten (the statement itself runs on the branches that have it)."""
        at = next(i for i, (saved, _) in enumerate(self.savepoints) if saved == name)
        existing = self.savepoints[at][1]
        del self.savepoints[at + 1 :]
        newer = [branch for hostgroup, branch in self.others.items() if hostgroup not in existing]
        if newer:
            await rollback(newer, self.xid)
            self._give_back(newer)
            self.others = {h: b for h, b in self.others.items() if h in existing}

    def savepoint_hostgroups(self, name: str) -> frozenset[int] | None:
        """The hostgroups of the branches that existed when savepoint ``name`` was set (None: not set)."""
        return next((hostgroups for saved, hostgroups in reversed(self.savepoints) if saved == name), None)

    def set_savepoint(self, name: str) -> None:
        """Savepoint ``name`` was set on every branch (set again, it moves to now)."""
        self.savepoints = [(saved, h) for saved, h in self.savepoints if saved != name]
        self.savepoints.append((name, frozenset(self.others)))

    def release_savepoint(self, name: str) -> None:
        """Savepoint ``name`` and those set after it are gone."""
        at = next((i for i, (saved, _) in enumerate(self.savepoints) if saved == name), len(self.savepoints))
        del self.savepoints[at:]

    @staticmethod
    def _give_back(branches: list[Branch]) -> None:
        for branch in branches:
            release(branch.conn, reusable=branch.reusable)


def _server(conn: BackendConnection) -> str:
    pool = conn.pool
    assert isinstance(pool, ServerPool)
    return f"{pool.server.hostname}:{pool.server.port}"


#: What a held-back BEGIN may say for its transaction to open as XA: none of READ ONLY, WITH CONSISTENT SNAPSHOT.
_PLAIN_BEGINS = frozenset({"BEGIN", "BEGIN WORK", "START TRANSACTION", "START TRANSACTION READ WRITE"})


class SpanningTransactions:
    """One session's spanning transaction, if any: when one opens, where a statement of it runs, and the statements
    that end it or mark it (COMMIT, ROLLBACK, savepoints, implicit commits)."""

    def __init__(self, services: SessionServices, client: Client, state: SessionState, link: BackendLink) -> None:
        self.services = services
        self.client = client
        self.state = state
        self.link = link
        self.current: ShardTransaction | None = None

    def may_span(self, table: ShardedTable) -> bool:
        """Whether a statement on ``table`` runs in a spanning transaction: the session is in one, or is about to
        open one (a held-back plain BEGIN, or autocommit off outside a transaction) on a connection it does not
        keep, or keeps on one of the table's shards."""
        if self.current is not None:
            return True
        link = self.link
        if not self.services.runtime.settings.cross_shard_writes or self.services.xa is None:
            return False
        if link.opening is not None:
            words = " ".join(link.opening[1:].decode("utf-8", "replace").upper().rstrip("; \t\r\n").split())
            return words in _PLAIN_BEGINS
        kept = link.conn
        if self.state.autocommit or (kept is not None and kept.in_transaction):
            return False
        # Autocommit off, and at most reads since the last commit on the connection kept (the server opened no
        # transaction there yet): that connection becomes the transaction's home when it is on one of the shards.
        return kept is None or any(shard.hostgroup_id == link.hostgroup for shard in table.shards)

    async def enter(self, table: ShardedTable, hostgroup: int, shards: tuple[Shard, ...]) -> BackendConnection | bool:
        """Open the transaction (if this statement is its first) and the branches a statement on ``hostgroup``'s
        shard (or on ``shards``) needs. The branch connection the statement runs on when it is not the home one;
        True when it runs as usual (on the home connection, or over ``shards``); False after sending the error."""
        reached = shards or tuple(shard for shard in table.shards if shard.hostgroup_id == hostgroup)
        txn = self.current
        if txn is None:
            link = self.link
            kept = link.conn is not None
            home = next((s for s in table.shards if kept and s.hostgroup_id == link.hostgroup), reached[0])
            coordinator = self.services.xa
            assert coordinator is not None
            txn = self.current = ShardTransaction(coordinator.log.new_xid(), home)
        for shard in reached:
            if await txn.open(self.link, shard) is None:
                return False
        if shards or hostgroup == txn.home.hostgroup_id:
            return True
        return txn.others[hostgroup].conn

    def check(self) -> None:
        """Let a transaction go whose home connection the session lost or reset (its server rolled it back): the
        other branches' connections are closed."""
        txn = self.current
        if txn is not None and txn.home_open and (self.link.conn is None or not self.link.in_transaction):
            self.discard()

    def discard(self) -> None:
        """The session ends or is reset: the other branches' connections are closed (the home one is the link's)."""
        if self.current is not None:
            self.current.discard()
            self.current = None

    async def control(self, statements: list[Statement], sql: str) -> bool:
        """Carry out what a statement does to the spanning transaction, if the session is in one: COMMIT and
        ROLLBACK end it here (True: answered); an implicit commit commits it before the statement runs; a
        savepoint statement is run on the other branches before it runs on the home one."""
        txn = self.current
        if txn is None:
            return False
        first = statements[0]
        if len(statements) > 1:
            if any(s.kind in (Kind.COMMIT, Kind.ROLLBACK) or s.implicit_commit for s in statements):
                self.client.send_error(
                    1235,
                    "ProxyFleet sharding does not support COMMIT, ROLLBACK or a statement that commits among several "
                    "statements of one query in a transaction over shards yet: send them one by one",
                )
                return True
            return False
        if first.kind in (Kind.COMMIT, Kind.ROLLBACK):
            if "RELEASE" in sql.upper():
                self.client.send_error(
                    1235, "ProxyFleet sharding does not support COMMIT RELEASE in a transaction over shards yet"
                )
                return True
            failure = await self.end(first.kind is Kind.COMMIT)
            if failure is None:
                self.client.send_ok(server_status(self.state, self.link.in_transaction))
            return True
        if first.implicit_commit or first.kind is Kind.BEGIN or _enables_autocommit(first, self.state):
            return await self.end(True) is not None
        name = _savepoint_name(first, sql)
        if name is not None:
            return await self._savepoint(txn, sql, name)
        return False

    async def end(self, commits: bool, doomed: Collection[BackendConnection] = ()) -> Failure | None:
        """Commit or roll back the transaction (``ShardTransaction.finish``); when it was to commit and did not,
        the error is sent."""
        txn = self.current
        assert txn is not None
        self.current = None
        coordinator = self.services.xa
        failure = await txn.finish(self.link, commits, coordinator.log if coordinator is not None else None, doomed)
        if failure is not None:
            message = f"ProxyFleet sharding: the transaction over shards was rolled back: {failure}"
            self.client.send_error(client_code(failure.code), message)
        return failure

    async def after(self, error: ErrPacket | None, branch: BackendConnection | None) -> None:
        """After a statement of the transaction: a deadlock (its branch rolled back by its server) or a branch's
        lost connection rolls back the whole transaction, as one server would."""
        txn = self.current
        if txn is None:
            return
        if branch is not None and branch.wire.closed is not None:
            txn.forget(next(h for h, b in txn.others.items() if b.conn is branch))
            await self.end(False)
        elif error is not None and error.code in ROLLED_BACK:
            doomed = branch if branch is not None else self.link.conn
            await self.end(False, [doomed] if doomed is not None else [])

    async def after_scatter(self, doomed: list[BackendConnection]) -> None:
        """After a statement over several shards of the transaction: as ``after``, for each branch it ran on."""
        txn = self.current
        if txn is None:
            return
        link = self.link
        lost = [hostgroup for hostgroup, branch in txn.others.items() if branch.conn.wire.closed is not None]
        for hostgroup in lost:
            release(txn.others[hostgroup].conn, reusable=False)
            txn.forget(hostgroup)
        home = link.conn
        if txn.home_open and home is not None and home.wire.closed is not None:
            pool = home.pool
            assert isinstance(pool, ServerPool)
            link.lose(home, pool)
            lost.append(txn.home.hostgroup_id)
        if lost or doomed:
            await self.end(False, doomed)

    async def _savepoint(self, txn: ShardTransaction, sql: str, name: str) -> bool:
        """SAVEPOINT, ROLLBACK TO or RELEASE SAVEPOINT ``name``: on the other branches that have it (ROLLBACK TO:
        those opened since are rolled back whole); the home branch runs it as usual (False) unless one failed."""
        verb = sql.lstrip().split(None, 1)[0].upper()
        if verb == "SAVEPOINT":
            err = await txn.on_others(sql)
            if err is None:
                txn.set_savepoint(name)
        else:
            hostgroups = txn.savepoint_hostgroups(name)
            if hostgroups is None:
                return False  # the home branch's server tells that it does not exist
            err = await txn.on_others(sql, hostgroups)
            if err is None and verb == "ROLLBACK":
                await txn.roll_back_others_since(name)
            elif err is None:
                txn.release_savepoint(name)
        if err is not None:
            self.client.send_error(err.code, f"ProxyFleet sharding: on another shard of the transaction: {err.message}")
            return True
        return False


def _savepoint_name(statement: Statement, sql: str) -> str | None:
    """The savepoint a SAVEPOINT, RELEASE SAVEPOINT or ROLLBACK TO statement names (lowercase), else None."""
    tokens = tokenize(sql)
    words = [tokens.word(i) for i in range(len(tokens))]
    if not (statement.kind is Kind.SAVEPOINT or (words[:1] == ["ROLLBACK"] and "TO" in words)):
        return None
    name = len(tokens) - 1
    while name > 0 and tokens.texts[name] == ";":
        name -= 1
    return unquote(tokens.texts[name]).lower()


def _enables_autocommit(statement: Statement, state: SessionState) -> bool:
    """Whether ``statement`` turns autocommit on while it is off (which commits the transaction)."""
    return not state.autocommit and any(
        name == "autocommit" and value.strip().strip("'\"").lower() in ("1", "on", "true")
        for name, value in statement.session_vars
    )
