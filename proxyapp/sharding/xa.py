"""Cross-shard write transactions with MariaDB XA: xids, two-phase commit, and recovery after a crash.

A write transaction over several shards runs one branch per shard, each on its own backend connection, inside
``XA START 'gtrid','shard'`` (``xa_start_sql``; gtrids from the worker's ``DecisionLog.new_xid``). ``commit`` then
runs the protocol (presumed abort; the log is ``proxyapp.sharding.decisions``):

1. ``log.begin``: the xid, its branches' servers and user are written to the decision log;
2. ``XA END`` and ``XA PREPARE`` on every branch, all at once. If one is refused, times out or loses its connection,
   every branch is rolled back (``XA ROLLBACK``, prepared ones too) and the transaction is reported failed;
3. ``log.decide_commit``: the decision COMMIT, on disk before any branch is committed;
4. ``XA COMMIT`` on every branch. One that does not confirm (its connection lost) stays prepared on its server and
   is left to recovery: the transaction is committed (the decision says so), one branch later than the others;
5. ``log.finish``: done, once every branch is committed or rolled back.

A crash (the proxy killed) before step 3 leaves no decision: branches not yet prepared die with their connections,
prepared ones stay on their servers and recovery rolls them back. A crash after step 3 leaves the decision: recovery
commits every branch still prepared. A transaction on one branch skips all of this: ``XA COMMIT ... ONE PHASE``.

``recover`` runs ``XA RECOVER`` on each server and resolves the prepared xids that are this worker's (in its log, or
with its prefix) and that no transaction of this process is busy with: ``XA COMMIT`` when the log says COMMIT, else
``XA ROLLBACK``; an xid of the log is finished once every server of its branches shows none of it prepared.
``Recovery`` runs it at a worker's start and, while the log has unfinished xids, every ``RECOVERY_INTERVAL``.

What MariaDB 10.11 does (tried on 10.11.19, by hand with a USAGE-only user; the live tests recover as the sandbox's
monitor user and rely on the rest):

- ``XA RECOVER`` needs no privilege: a user with USAGE only lists every prepared xid of the server, of every user,
  including those still attached to the connection that prepared them.
- ``XA COMMIT`` and ``XA ROLLBACK`` of a prepared xid whose connection is gone need no privilege either, and any user
  may run them, not only the one that prepared it: recovery connects as one user per server, the monitor user will
  do (no privilege on any data), and the user in the log is for the reader.
- While the connection that prepared an xid lives (or the server has not yet noticed it is dead), other connections
  get 1397 (XAER_NOTA) for it. So an xid ``XA RECOVER`` does not list has no prepared branch there, and one it lists
  that answers 1397 is tried again on the next pass.
- ``XA PREPARE`` is written to the binary log and replicated: replicas list the xid too. A server with
  ``read_only=ON`` refuses ``XA COMMIT``/``XA ROLLBACK`` (1290) to a user without ``READ_ONLY ADMIN``. Recovery must
  be given the shards' writers and connect as such a user (the monitor user), so that a replica, or a primary
  demoted since, refuses instead of committing there and breaking replication.
- A prepared branch survives the client going away and the server's own crash and restart.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import re
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from enum import StrEnum

from proxyapp.mysql.backend import BackendConnection, BackendError
from proxyapp.mysql.constants import ErrorCode
from proxyapp.mysql.packets import ErrPacket
from proxyapp.mysql.wire import CONNECTION_LOST
from proxyapp.sharding.decisions import DecisionLog

log = logging.getLogger("proxyapp.sharding.xa")

#: Seconds an XA command may take before its connection is given up as lost.
COMMAND_TIMEOUT = 10.0
#: Seconds between recovery passes while the log has unfinished xids.
RECOVERY_INTERVAL = 10.0
XAER_NOTA = 1397  # "Unknown XID": gone, or attached to another connection
#: The XA errors (XAER_*, XA_RB*). Clients never see them for the proxy's own XA statements (``client_code``).
XA_ERRORS = frozenset({1397, 1398, 1399, 1400, 1401, 1402, 1440, 1613, 1614})
_XA_RBTIMEOUT, _XA_RBDEADLOCK = 1613, 1614
#: A test hook: the worker process dies (as by ``kill -9``) when ``commit`` reaches the step this environment
#: variable names: ``prepared`` (every branch prepared, no decision yet) or ``decided`` (COMMIT on disk, no branch
#: committed yet); the tests restart the proxy and check that recovery leaves all or nothing.
FAILPOINT = "PROXYFLEET_XA_FAILPOINT"
_XID_PART = re.compile(r"[A-Za-z0-9._-]{1,64}")


class BranchState(StrEnum):
    """Where a branch is."""

    ACTIVE = "active"  # inside XA START
    IDLE = "idle"  # ended
    PREPARING = "preparing"  # XA PREPARE sent, not answered yet
    PREPARED = "prepared"
    COMMITTED = "committed"  # finished, its connection reusable
    ROLLED_BACK = "rolled back"  # finished, its connection reusable
    LOST = "lost"  # its connection gone before it was prepared: the server rolled it back
    IN_DOUBT = "in doubt"  # maybe prepared, its connection closed: recovery finishes it


_FINISHED = (BranchState.COMMITTED, BranchState.ROLLED_BACK, BranchState.LOST)


def xid_prefix(identity: str, worker: int) -> str:
    """The start of the gtrids of worker process ``worker`` of the proxy named ``identity`` (the node's name, or any
    name unique among the proxies that share these shards): a short digest of the name, so that any name fits."""
    return f"pf{hashlib.blake2b(identity.encode(), digest_size=5).hexdigest()}.{worker}."


def xid_sql(gtrid: str, branch: int | str) -> str:
    """The xid ``'gtrid','branch'`` as XA statements write it; ValueError unless both parts are 1 to 64 letters,
    digits, '.', '_' or '-' (nothing to quote)."""
    bqual = str(branch)
    if not (_XID_PART.fullmatch(gtrid) and _XID_PART.fullmatch(bqual)):
        raise ValueError(f"not an xid ProxyFleet makes: {gtrid!r}, {bqual!r}")
    return f"'{gtrid}','{bqual}'"


def xa_start_sql(gtrid: str, shard: int) -> str:
    """The statement that opens shard ``shard``'s branch of transaction ``gtrid``."""
    return f"XA START {xid_sql(gtrid, shard)}"


@dataclass(slots=True)
class Branch:
    """One shard's part of a cross-shard transaction: its connection, on which ``xa_start_sql`` and the
    transaction's statements ran, and the server as the config names it (``host:port``: where recovery looks)."""

    shard: int
    server: str
    conn: BackendConnection
    state: BranchState = BranchState.ACTIVE

    @property
    def reusable(self) -> bool:
        """Whether its connection is back outside any transaction (else it was closed: do not pool it)."""
        return self.state in (BranchState.COMMITTED, BranchState.ROLLED_BACK)

    def finished(self, state: BranchState) -> None:
        """The branch is committed or rolled back (``state``): its connection is out of it."""
        self.state = state
        self.conn.xa = ""


@dataclass(frozen=True, slots=True)
class Failure:
    """Why a transaction was not committed: the shard (None: the decision log), its server, the error."""

    shard: int | None
    server: str
    code: int
    message: str

    def __str__(self) -> str:
        where = "the XA decision log" if self.shard is None else f"shard {self.shard} ({self.server})"
        return f"{where}: {self.message} ({self.code})"


def client_code(code: int) -> int:
    """The error code to tell a client whose transaction over shards failed with ``code`` (a branch's server error,
    or the proxy's own): the client sent no XA statement, so it is told what one server would have said, the
    deadlock for a branch rolled back by one, the lock wait timeout for one rolled back for taking too long, and
    ER_ERROR_DURING_COMMIT for another XA error; any other error as it is."""
    if code not in XA_ERRORS:
        return code
    if code == _XA_RBDEADLOCK:
        return ErrorCode.LOCK_DEADLOCK
    if code == _XA_RBTIMEOUT:
        return ErrorCode.LOCK_WAIT_TIMEOUT
    return ErrorCode.ERROR_DURING_COMMIT


@dataclass(frozen=True, slots=True)
class Outcome:
    """What ``commit`` did: committed or not, why not, and the shards left prepared for recovery to finish (to
    commit when ``committed``, else to roll back)."""

    committed: bool
    failure: Failure | None = None
    pending: tuple[int, ...] = ()


async def commit(branches: list[Branch], xid: str, log: DecisionLog, timeout: float = COMMAND_TIMEOUT) -> Outcome:
    """Commit ``xid`` on every branch, all or none (the module's docstring); never raises for a branch's error."""
    if len(branches) == 1:
        return await _commit_one_phase(branches[0], xid, timeout)
    failure = await prepare(branches, xid, log, timeout)
    if failure is None:
        _failpoint("prepared")
        try:
            await log.decide_commit(xid)
        except OSError as exc:
            failure = _unwritable(log, exc)
    if failure is not None:
        await rollback(branches, xid, timeout)
        return _settled(branches, xid, log, Outcome(False, failure, _pending(branches)))
    _failpoint("decided")
    return await commit_prepared(branches, xid, log, timeout)


def _failpoint(step: str) -> None:
    """Die here when the ``FAILPOINT`` test hook names ``step``."""
    if os.environ.get(FAILPOINT) == step:
        log.error("xa: %s=%s: the process dies here, as if killed", FAILPOINT, step)
        os._exit(137)


async def prepare(
    branches: list[Branch], xid: str, log: DecisionLog, timeout: float = COMMAND_TIMEOUT
) -> Failure | None:
    """Phase one, ``commit``'s steps 1 and 2: log the branches, ``XA END`` and ``XA PREPARE`` every one; the first
    failure, if any (then ``rollback``)."""
    try:
        log.begin(xid, [b.server for b in branches], branches[0].conn.username)
    except OSError as exc:
        return _unwritable(log, exc)
    failures = await asyncio.gather(*(_prepare_branch(b, xid, timeout) for b in branches))
    return next((f for f in failures if f is not None), None)


async def commit_prepared(
    branches: list[Branch], xid: str, log: DecisionLog, timeout: float = COMMAND_TIMEOUT
) -> Outcome:
    """Phase two, ``commit``'s steps 4 and 5, once the COMMIT decision is on disk: ``XA COMMIT`` every branch."""
    await asyncio.gather(*(_commit_branch(b, xid, timeout) for b in branches))
    return _settled(branches, xid, log, Outcome(True, None, _pending(branches)))


async def rollback(branches: list[Branch], xid: str, timeout: float = COMMAND_TIMEOUT) -> None:
    """Roll back every branch of ``xid`` that is not finished: ``XA END`` where it is still active, ``XA ROLLBACK``.
    A branch that cannot be rolled back has its connection closed: the server rolls it back unless it was
    prepared, which recovery then does (``BranchState.IN_DOUBT``)."""
    await asyncio.gather(*(_rollback_branch(b, xid, timeout) for b in branches))


class _Lost(Exception):
    """The branch's connection broke, or its server did not answer in time (the connection is closed)."""


async def _run(branch: Branch, sql: str, timeout: float) -> ErrPacket | None:
    """Run an XA statement on the branch's connection: the server's error, if it refused; _Lost."""
    try:
        response = await asyncio.wait_for(branch.conn.query(sql), timeout)
    except TimeoutError:
        branch.conn.close()
        raise _Lost(f"no answer to {sql.split(' ', 2)[1]} within {timeout:g} s") from None
    except CONNECTION_LOST as exc:
        branch.conn.close()
        raise _Lost(f"connection lost: {exc}") from None
    if response.error is not None and branch.conn.wire.transport.is_closing():
        raise _Lost(f"connection lost: {response.error.message}")
    return response.error


async def _prepare_branch(branch: Branch, xid: str, timeout: float) -> Failure | None:
    sql = xid_sql(xid, branch.shard)
    try:
        err = await _run(branch, f"XA END {sql}", timeout)
        if err is None:
            branch.state = BranchState.PREPARING
            err = await _run(branch, f"XA PREPARE {sql}", timeout)
    except _Lost as lost:
        branch.state = _after_closing(branch)
        return Failure(branch.shard, branch.server, ErrorCode.BACKEND_LOST, str(lost))
    if err is not None:
        if branch.state == BranchState.PREPARING:
            branch.state = BranchState.IDLE  # refused: not prepared
        return Failure(branch.shard, branch.server, err.code, err.message)
    branch.state = BranchState.PREPARED
    return None


async def _commit_branch(branch: Branch, xid: str, timeout: float) -> None:
    try:
        err = await _run(branch, f"XA COMMIT {xid_sql(xid, branch.shard)}", timeout)
        why = "" if err is None else f"refused: {err.message} ({err.code})"
    except _Lost as lost:
        why = str(lost)
    if not why:
        branch.finished(BranchState.COMMITTED)
        return
    log.warning("xa: %s on shard %d (%s) left to recovery: %s", xid, branch.shard, branch.server, why)
    branch.conn.close()
    branch.state = BranchState.IN_DOUBT


async def _rollback_branch(branch: Branch, xid: str, timeout: float) -> None:
    if branch.state in _FINISHED or branch.state == BranchState.IN_DOUBT:
        return
    sql = xid_sql(xid, branch.shard)
    try:
        if branch.state == BranchState.ACTIVE:  # refused when the server made it rollback-only: XA ROLLBACK still works
            await _run(branch, f"XA END {sql}", timeout)
        err = await _run(branch, f"XA ROLLBACK {sql}", timeout)
    except _Lost:
        branch.state = _after_closing(branch)
        return
    if err is None or err.code == XAER_NOTA:
        branch.finished(BranchState.ROLLED_BACK)
        return
    log.warning("xa: cannot roll back %s on shard %d (%s): %s", xid, branch.shard, branch.server, err.message)
    branch.conn.close()
    branch.state = _after_closing(branch)


def _after_closing(branch: Branch) -> BranchState:
    """What a branch whose connection was closed is: LOST if it cannot have been prepared, else IN_DOUBT."""
    unprepared = branch.state in (BranchState.ACTIVE, BranchState.IDLE)
    return BranchState.LOST if unprepared else BranchState.IN_DOUBT


async def _commit_one_phase(branch: Branch, xid: str, timeout: float) -> Outcome:
    """One branch: ``XA END`` and ``XA COMMIT ... ONE PHASE``, no log (nothing to agree on)."""
    sql = xid_sql(xid, branch.shard)
    try:
        err = await _run(branch, f"XA END {sql}", timeout)
        if err is None:
            branch.state = BranchState.IDLE
            err = await _run(branch, f"XA COMMIT {sql} ONE PHASE", timeout)
    except _Lost as lost:
        outcome = "; whether it committed is unknown" if branch.state == BranchState.IDLE else ""
        branch.state = BranchState.LOST
        return Outcome(False, Failure(branch.shard, branch.server, ErrorCode.BACKEND_LOST, f"{lost}{outcome}"))
    if err is not None:
        await _rollback_branch(branch, xid, timeout)
        return Outcome(False, Failure(branch.shard, branch.server, err.code, err.message))
    branch.finished(BranchState.COMMITTED)
    return Outcome(True)


def _unwritable(log: DecisionLog, exc: OSError) -> Failure:
    return Failure(None, str(log.path), ErrorCode.ERROR_ON_WRITE, f"cannot be written: {exc}")


def _pending(branches: list[Branch]) -> tuple[int, ...]:
    return tuple(b.shard for b in branches if b.state == BranchState.IN_DOUBT)


def _settled(branches: list[Branch], xid: str, log: DecisionLog, outcome: Outcome) -> Outcome:
    """Finish ``xid`` in the log when every branch is, else leave it to recovery."""
    if outcome.pending:
        log.release(xid)
    else:
        log.finish(xid)
    return outcome


# ------------------------------------------------------------------------------------------------------ recovery

#: Opens a connection to a server named ``host:port`` (its credentials and TLS are the caller's); BackendError.
Connect = Callable[[str], Awaitable[BackendConnection]]


@dataclass(slots=True)
class RecoveryReport:
    """What a recovery pass did: branches committed and rolled back (``gtrid,bqual@server``), what failed, the
    servers it could scan, and the xids of the log still unfinished after it."""

    committed: list[str] = field(default_factory=list)
    rolled_back: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    scanned: set[str] = field(default_factory=set)
    unfinished: list[str] = field(default_factory=list)


async def recover(
    log: DecisionLog, servers: Iterable[str], connect: Connect, timeout: float = COMMAND_TIMEOUT
) -> RecoveryReport:
    """Resolve the prepared branches of this worker's xids on ``servers`` (the shards' writers) and on the servers
    the log names for its unfinished xids; finish each xid of the log that none of its servers shows prepared."""
    known = log.pending()
    targets = sorted(set(servers).union(*(entry.servers for entry in known.values())))
    report = RecoveryReport()
    stuck: set[str] = set()  # xids with a branch this pass could not resolve
    await asyncio.gather(*(_recover_server(log, server, connect, timeout, report, stuck) for server in targets))
    for xid, entry in known.items():
        if xid in stuck or not report.scanned.issuperset(entry.servers):
            report.unfinished.append(xid)
        else:
            log.finish(xid)
    return report


async def _recover_server(
    log: DecisionLog, server: str, connect: Connect, timeout: float, report: RecoveryReport, stuck: set[str]
) -> None:
    try:
        conn = await connect(server)
    except BackendError as exc:
        report.errors.append(f"{server}: {exc}")
        return
    try:
        listed = await asyncio.wait_for(conn.fetch_named("XA RECOVER"), timeout)
        if isinstance(listed, ErrPacket):
            report.errors.append(f"{server}: XA RECOVER refused: {listed.message} ({listed.code})")
            return
        clean = True
        for gtrid, bqual in _xids(listed[1]):
            if gtrid in log.in_flight or not (gtrid in log.entries or gtrid.startswith(log.prefix)):
                continue
            verb = "COMMIT" if log.committed(gtrid) else "ROLLBACK"
            response = await asyncio.wait_for(conn.query(f"XA {verb} {xid_sql(gtrid, bqual)}"), timeout)
            where = f"{gtrid},{bqual}@{server}"
            if response.error is None:
                (report.committed if verb == "COMMIT" else report.rolled_back).append(where)
            else:  # 1397: still attached to a connection; 1290: read_only
                report.errors.append(f"{where}: XA {verb} refused: {response.error.message} ({response.error.code})")
                stuck.add(gtrid)
                clean = False
        if clean:
            report.scanned.add(server)
    except CONNECTION_LOST as exc:
        report.errors.append(f"{server}: connection lost: {exc or 'timed out'}")
    finally:
        conn.close()


def _xids(rows: list[list[bytes | None]]) -> list[tuple[str, str]]:
    """The (gtrid, bqual) of ``XA RECOVER``'s rows (formatID, gtrid_length, bqual_length, data) that could be
    ProxyFleet's: format 1, both parts of the characters ``xid_sql`` allows."""
    found = []
    for format_id, gtrid_length, bqual_length, data in rows:
        if format_id != b"1" or gtrid_length is None or bqual_length is None or data is None:
            continue
        split = int(gtrid_length)
        gtrid = data[:split].decode("latin-1")
        bqual = data[split : split + int(bqual_length)].decode("latin-1")
        if _XID_PART.fullmatch(gtrid) and _XID_PART.fullmatch(bqual):
            found.append((gtrid, bqual))
    return found


class Recovery:
    """Recovery for one worker: a pass as soon as it starts, then, while the log has unfinished xids (or a pass
    could not reach every server), one every ``interval`` seconds; never two at once. ``servers`` gives the
    shards' writers of the config in force, ``connect`` how to reach one (the monitor user's credentials)."""

    def __init__(
        self,
        log: DecisionLog,
        servers: Callable[[], Iterable[str]],
        connect: Connect,
        interval: float = RECOVERY_INTERVAL,
    ) -> None:
        self.log = log
        self.servers = servers
        self.connect = connect
        self.interval = interval
        self.last: RecoveryReport | None = None
        self._task: asyncio.Task[RecoveryReport] | None = None
        self._next = float("-inf")  # on the proxy's clock
        self._swept = False  # a pass has scanned every server once: only the log's xids are left to look for

    def sweep(self, now: float) -> asyncio.Task[RecoveryReport] | None:
        """Start a pass if one is due at ``now`` (the proxy's clock) and return it; called from the worker's
        housekeeping."""
        if (self._task is not None and not self._task.done()) or now < self._next:
            return None
        if self._swept and not self.log.pending():
            return None
        self._next = now + self.interval
        self._task = asyncio.get_running_loop().create_task(self.run())
        return self._task

    async def run(self) -> RecoveryReport:
        """One pass now; its report is logged and kept in ``last``."""
        servers = list(self.servers())
        report = await recover(self.log, servers, self.connect)
        self._swept = self._swept or report.scanned.issuperset(servers)
        self.last = report
        for where in report.committed:
            log.warning("xa recovery: committed %s", where)
        for where in report.rolled_back:
            log.warning("xa recovery: rolled back %s", where)
        for error in report.errors:
            log.error("xa recovery: %s", error)
        return report

    async def stop(self) -> None:
        """Cancel a pass under way."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.wait([self._task])
