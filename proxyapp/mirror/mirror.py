"""Mirroring: statements that query rules mark are run again on a mirror hostgroup, their results thrown away.

A rule's ``mirror_hostgroup`` (or ``mirror_flagOUT``: the mirror's hostgroup and text come from the rules that
start at that flag, ProxySQL's chain) asks for a mirror. The mirror hostgroup decides the mode:

* **ProxySQL mode** (every hostgroup not in ``mysql-mirror_ordered_hostgroups``), ProxySQL's semantics: each
  text-protocol statement below 15 MB is copied with the session's user and schema and run on any pooled connection
  of the hostgroup, in no particular order and outside any transaction. At most ``mysql-mirror_max_concurrency``
  run at once; up to ``mysql-mirror_max_queue_length`` wait in a queue per worker, and what comes when it is full
  is dropped. Unlike ProxySQL every drop is counted, by reason: ``queue_full``, ``too_large``,
  ``prepared_statement`` (ProxySQL does not mirror them either), ``blocked_by_rule``, ``shutdown``.
* **Ordered mode** (ProxyFleet's own): each client session's mirrored statements run on the mirror in the
  session's order, one mirror connection per session at a time (its *lane*), and only once the primary has
  committed them: statements of a transaction (``BEGIN`` or ``autocommit=0``, savepoints included) are buffered
  in the session until it ends; a commit (or an implicit one) queues them as one unit that the lane runs inside
  ``START TRANSACTION ... COMMIT``, a rollback (or a lost primary connection) throws them away. Prepared
  statements are replayed as prepared statements with the same parameters. A lane brings its connection to the
  session's state (schema, character set, session and user variables) before each statement and replays a
  generated ``AUTO_INCREMENT`` value with ``SET insert_id``. Units wait in memory up to
  ``mysql-mirror_ordered_max_memory``; beyond it a lossless hostgroup spills them to a durable queue on disk
  (``proxyapp.mirror.spill``) and never drops, a lossy one drops them (``memory_full``). A mirror that is down is
  retried with backoff and caught up when it returns; a deadlock on the mirror re-runs the unit; a graceful
  stop writes what is still in memory to disk and the next start resumes it.

What ordered mode cannot promise (docs/mirroring.md): order *between* sessions (lanes run concurrently), values of
nondeterministic functions (``UUID()``, ``NOW()``, ``RAND()``), statements the scanner cannot follow (XA,
savepoints inside a multi-statement packet), and exactly-once across a lost mirror connection: a unit whose
``COMMIT`` was sent when the connection broke is run again (counted in ``retried``), so a statement that is not
idempotent may apply twice; with explicit keys or replayed ``insert_id`` the second run fails as a duplicate.

Counters (``snapshot()``, merged over workers by ``report.merge.merge_mirror_sections``): statements ``mirrored``
(handed over; in ordered mode once committed), ``completed``, ``failed`` by error code (2013: the mirror connection
broke; 9001: no mirror connection), ``dropped`` by reason, ``retried`` units, the queue (ProxySQL queue, ordered in
memory and on disk), concurrency, and the age of the oldest waiting statement; the ProxySQL-style gauges and totals
are kept in ``GlobalCounters`` (``Mirror_*``).

Its parts: what it runs, in memory and on disk (``proxyapp.mirror.units``), the ordered mode's lanes and their
state machine (``proxyapp.mirror.lanes``), a session's tap (``proxyapp.mirror.tap``), the spill queue
(``proxyapp.mirror.spill``); here, the ProxySQL mode's queue and the runner that moves the lanes, which share the
rules' verdict, the mirror hostgroup's pools, the stats and the listeners' bookkeeping.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from pathlib import Path
from typing import Any

from proxyapp.backends.pool import PoolError, PoolManager, ServerPool
from proxyapp.config.document import Config
from proxyapp.config.variables import ordered_mirror_hostgroups
from proxyapp.mirror.lanes import BACKOFF_FIRST, BACKOFF_LAST, IDLE, READY, RUNNING, WAITING, Lane
from proxyapp.mirror.spill import SpillRecord, SpillStore
from proxyapp.mirror.tap import MirrorTap, insert_id, replayable
from proxyapp.mirror.units import EXECUTE, OP_OVERHEAD, QUERY, MirrorOp, MirrorUnit, decode_unit, encode_unit, unit_seq
from proxyapp.mysql.backend import BackendConnection, Credentials
from proxyapp.mysql.packets import ErrPacket
from proxyapp.mysql.wire import CONNECTION_LOST, read_response
from proxyapp.report.stats import GlobalCounters
from proxyapp.rules.engine import QueryContext, RuleEngine, RuleOutcome
from proxyapp.session.events import QueryDone, SessionListener
from proxyapp.session.prepared import ClientStatement, bind_types, for_statement, prepare_on
from proxyapp.session.state import bring
from proxyapp.sql.digest import compute_digest
from proxyapp.tasks import spawn

log = logging.getLogger("proxyapp.mirror.mirror")

#: ProxySQL mirrors only packets below this size.
PROXYSQL_MAX_PACKET = 15 << 20
#: Error codes counted when the mirror cannot be reached or its connection broke (ProxySQL's and the client's).
NO_CONNECTION = 9001
LOST_CONNECTION = 2013
#: Errors after which the mirror rolled the transaction back, so the unit is run again (deadlock, lock wait).
RETRIABLE = frozenset({1205, 1213})
#: How many times a unit is run again (deadlocks, lost connections) before its statements count as failed.
MAX_ATTEMPTS = 10
#: Units a lane runs before it lets a waiting lane have its slot; units a lane reads back from disk at once.
LANE_TURN = 32
LOAD_BATCH = 256
#: Seconds a stop waits for the units being run to finish before it cancels them.
STOP_WAIT = 5.0


class _Entry:
    """A ProxySQL-mode mirror waiting to run."""

    __slots__ = ("created", "credentials", "hostgroup", "payload", "reusable", "schema")

    def __init__(
        self, hostgroup: int, credentials: Credentials, schema: str | None, payload: bytes, reusable: bool
    ) -> None:
        self.hostgroup = hostgroup
        self.credentials = credentials
        self.schema = schema
        self.payload = payload
        self.reusable = reusable  # the statement changes no session state: its connection may go back to the pool
        self.created = time.time()


class Mirror(SessionListener):
    """A worker's mirror: the ProxySQL-mode queue, the ordered lanes, their runners and the spill queue; it hears the
    sessions' commands (``query_done``) and keeps each followed session's ordered-mode state (``taps``)."""

    def __init__(self, counters: GlobalCounters, pools: PoolManager, worker: int = 0, workers: int = 1) -> None:
        self.counters = counters
        self.pools = pools
        self.worker = worker
        self.workers = workers
        #: Distinguishes this process's lanes from those a previous run left on disk.
        self.token = f"w{worker}.{time.time_ns():x}"
        self.max_concurrency = 16
        self.max_queue_length = 32000
        self.max_memory = 64 << 20
        self.ordered: dict[int, bool] = {}  # ordered mirror hostgroup -> lossless
        self.taps: dict[int, MirrorTap] = {}  # session id -> its ordered-mode state, from its first such mirror on
        self.backend_users: dict[str, str] = {}  # username -> clear password from the config ('' when hashed)
        self.spill_dir: Path | None = None
        self.store: SpillStore | None = None
        self.queue: deque[_Entry] = deque()
        self.lanes: dict[str, Lane] = {}
        self.ready: deque[Lane] = deque()
        self.running = 0
        self.starting = 0  # runners started that have not claimed work yet
        self.memory = 0  # bytes of units held in lanes' memory queues
        self.memory_ops = 0
        self.disk_ops = 0
        self.next_seq = 1
        self.mirrored = 0
        self.completed = 0
        self.retried = 0
        self.failed: dict[int, int] = {}
        self.dropped: dict[str, int] = {}
        self.known_credentials: dict[str, Credentials] = {}  # the latest session's, for units read from disk
        self.stopping = False
        self.tasks: set[asyncio.Task[None]] = set()
        self.last_error = ""
        self.rewritten: str | None = None  # the mirror's text when mirror_flagOUT rules rewrote it (``_target``)

    # ------------------------------------------------------------------------------------------- configuration

    def configure(self, config: Config, config_path: Path | None) -> None:
        """Adopt a config's mirror variables and users (the spill directory only before ``start``)."""
        variables = config.variables
        share = max(1, -(-variables.integer("mysql-mirror_max_concurrency") // self.workers))
        self.max_concurrency = share
        self.max_queue_length = variables.integer("mysql-mirror_max_queue_length")
        self.max_memory = variables.integer("mysql-mirror_ordered_max_memory") // self.workers
        modes = ordered_mirror_hostgroups(variables.text("mysql-mirror_ordered_hostgroups"))
        self.ordered = {hostgroup: mode == "lossless" for hostgroup, mode in modes.items()}
        users = config.mysql_users
        self.backend_users = {u.username: u.password for u in users if u.active and u.backend and u.password[:1] != "*"}
        if self.spill_dir is None:
            base = config_path.resolve().parent if config_path is not None else Path.cwd() / "var"
            self.spill_dir = base / (variables.text("mysql-mirror_spill_dir") or "mirror-queue")
        self._kick()

    async def start(self) -> None:
        """Resume the queue a previous run left on disk, if any."""
        directory = self.spill_dir
        if directory is None or not directory.is_dir():
            return
        store = self._open_store()
        try:
            backlog = await store.opened()
        except Exception as exc:  # the store reports why; the proxy serves on without the old queue
            log.error("mirror: cannot resume the queue in %s: %s", directory, exc)
            return
        self.next_seq = max(self.next_seq, backlog.next_seq)
        resumed = sum(lane_backlog.ops for lane_backlog in backlog.lanes)
        self.mirrored += resumed  # handed over again in this process: mirrored = completed + failed + dropped holds
        self.counters.Mirror_queries_mirrored += resumed
        for lane_backlog in backlog.lanes:
            lane = Lane(lane_backlog.lane, lane_backlog.hostgroup)
            lane.closed = True
            lane.disk_units = lane_backlog.units
            lane.disk_ops = lane_backlog.ops
            lane.disk_head_created = lane_backlog.first_created
            self.lanes[lane.key] = lane
            self.disk_ops += lane.disk_ops
            self._make_ready(lane)
        self._gauges()
        if backlog.lanes:
            log.info(
                "mirror: resuming %d queued statements of %d sessions from %s",
                self.disk_ops,
                len(backlog.lanes),
                store.path,
            )

    def _open_store(self) -> SpillStore:
        store = self.store
        if store is None:
            assert self.spill_dir is not None
            store = self.store = SpillStore(self.spill_dir, self.worker, self.workers)
        return store

    async def stop(self) -> None:
        """Let running units finish (up to ``STOP_WAIT`` seconds), keep what waits in memory on disk, close."""
        self.stopping = True
        tasks = list(self.tasks)
        if tasks:
            _, late = await asyncio.wait(tasks, timeout=STOP_WAIT)
            for task in late:
                task.cancel()
            if late:
                await asyncio.wait(late, timeout=STOP_WAIT)
        if self.queue:
            self.drop("shutdown", len(self.queue), handed=False)
            self.queue.clear()
        waiting = sorted((u for lane in self.lanes.values() for u in lane.units if not u.on_disk), key=unit_seq)
        if waiting:
            lanes = {id(u): lane for lane in self.lanes.values() for u in lane.units}
            for unit in waiting:
                self._open_store().append(self._record(lanes[id(unit)], unit))
        for lane in self.lanes.values():
            self._release(lane, reusable=False)
        opened = self.store
        if opened is not None:
            try:
                await opened.close()
            except Exception as exc:
                log.error("mirror: the queue on disk could not be closed cleanly: %s", exc)

    # ------------------------------------------------------------------------------------------- the tap

    def query_done(self, event: QueryDone) -> bool:
        """A session's command ran on the primary: mirror it if its rules say so, follow the session's transaction
        for ordered mode; whether the session is followed from now on."""
        if event.prepared is None:
            self._after_query(event)
        else:
            self._after_execute(event, event.prepared)
        return event.session_id in self.taps

    def session_reset(self, session_id: int) -> None:
        """A followed session was reset: its open transaction rolled back."""
        tap = self.taps.get(session_id)
        if tap is not None:
            tap.reset()

    def session_ended(self, session_id: int) -> None:
        """A followed session ended: its lanes end once their units ran."""
        tap = self.taps.pop(session_id, None)
        if tap is not None:
            tap.close()

    def _tap(self, session_id: int) -> MirrorTap:
        tap = self.taps.get(session_id)
        if tap is None:
            tap = self.taps[session_id] = MirrorTap(self, session_id)
        return tap

    def _after_query(self, event: QueryDone) -> None:
        """A text-protocol command: ProxySQL mode copies it; ordered mode buffers it in the session's tap."""
        tap = self.taps.get(event.session_id)
        payload = event.payload
        outcome = event.outcome
        if outcome is None or (outcome.mirror_hostgroup is None and outcome.mirror_flagOUT is None):
            if tap is not None:
                tap.after(event, payload, None)
            return
        hostgroup = self._target(event, outcome, payload)
        if hostgroup < 0:
            if tap is not None:
                tap.after(event, payload, None)
            return
        if self.rewritten is not None:
            payload = b"\x03" + self.rewritten.encode("utf-8", "surrogateescape")
        statements = event.statements
        lossless = self.ordered.get(hostgroup)
        if lossless is None:
            if tap is not None:
                tap.after(event, payload, None)
            reusable = len(statements) == 1 and statements[0].plain and outcome.mirror_flagOUT is None
            self._proxysql(event, hostgroup, payload, reusable)
            return
        if tap is None:
            tap = self._tap(event.session_id)
        response = event.response
        op = None
        if response is not None and response.error is None and replayable(statements):
            op = MirrorOp(
                QUERY,
                hostgroup,
                payload,
                "",
                [],
                insert_id(statements, response),
                len(statements) == 1 and statements[0].plain,
                tap.context(event.state),
            )
        tap.after(event, payload, op)

    def _after_execute(self, event: QueryDone, stmt: ClientStatement) -> None:
        """A prepared statement was executed: ordered mode replays it; ProxySQL mode does not mirror prepared
        statements (counted as dropped, ``prepared_statement``)."""
        tap = self.taps.get(event.session_id)
        outcome = event.outcome
        hostgroup = -1
        if outcome is not None:
            hostgroup = self._target(event, outcome, stmt.sql)
        lossless = self.ordered.get(hostgroup) if hostgroup >= 0 else None
        if lossless is None:
            if hostgroup >= 0:
                self.drop("prepared_statement", 1, handed=True)
            if tap is not None:
                tap.after(event, b"", None)
            return
        if tap is None:
            tap = self._tap(event.session_id)
        response = event.response
        op = None
        if response is not None and response.error is None:
            execute = bind_types(event.payload, stmt)
            if len(execute) > 5 and execute[5]:
                execute = execute[:5] + b"\x00" + execute[6:]  # no cursor: the mirror never fetches
            op = MirrorOp(
                EXECUTE,
                hostgroup,
                execute,
                stmt.sql,
                list(stmt.long_data),
                insert_id(stmt.statements, response),
                len(stmt.statements) == 1 and stmt.statements[0].plain,
                tap.context(event.state),
            )
        tap.after(event, b"", op)

    def _target(self, event: QueryDone, outcome: RuleOutcome, query: bytes | str) -> int:
        """The mirror's hostgroup (-1: a rule blocks the mirror). Without ``mirror_flagOUT`` it is the rule's
        ``mirror_hostgroup``; with it, the rules from that flag run on the text and may route and rewrite it (the
        rewritten text is left in ``self.rewritten``, None when unchanged)."""
        self.rewritten = None
        fallback = outcome.mirror_hostgroup if outcome.mirror_hostgroup is not None else event.default_hostgroup
        flag = outcome.mirror_flagOUT
        if flag is None:
            return fallback
        rules: RuleEngine = event.rules
        sql = query if isinstance(query, str) else query[1:].decode("utf-8", "surrogateescape")
        digest = compute_digest(sql) if rules.needs_digest else None
        ctx = QueryContext(
            event.username,
            event.state.schema or "",
            event.client_addr,
            event.proxy_addr,
            event.proxy_port,
            sql,
            digest.hash if digest is not None else "",
            digest.text if digest is not None else "",
        )
        verdict = rules.evaluate(ctx, flag, mirror=True)
        if verdict.error_msg is not None or verdict.OK_msg is not None:
            self.drop("blocked_by_rule", 1, handed=True)
            return -1
        self.rewritten = verdict.query
        return verdict.destination_hostgroup if verdict.destination_hostgroup is not None else fallback

    # ------------------------------------------------------------------------------------------- counting

    def drop(self, reason: str, count: int, *, handed: bool) -> None:
        """Count ``count`` statements dropped for ``reason``; ``handed``: they were not counted as mirrored yet."""
        self.dropped[reason] = self.dropped.get(reason, 0) + count
        self.counters.Mirror_queries_dropped += count
        if handed:
            self.mirrored += count
            self.counters.Mirror_queries_mirrored += count

    def _fail(self, code: int, count: int = 1) -> None:
        self.failed[code] = self.failed.get(code, 0) + count
        self.counters.Mirror_queries_failed += count

    def _complete(self, count: int) -> None:
        self.completed += count
        self.counters.Mirror_queries_completed += count

    def _gauges(self) -> None:
        counters = self.counters
        counters.Mirror_concurrency = self.running
        counters.Mirror_queue_length = len(self.queue) + self.memory_ops + self.disk_ops
        counters.Mirror_queue_disk_length = self.disk_ops

    # ------------------------------------------------------------------------------------------- ProxySQL mode

    def _proxysql(self, event: QueryDone, hostgroup: int, payload: bytes, reusable: bool) -> None:
        self.mirrored += 1
        self.counters.Mirror_queries_mirrored += 1
        if len(payload) >= PROXYSQL_MAX_PACKET:
            self.drop("too_large", 1, handed=False)
            return
        entry = _Entry(hostgroup, event.credentials, event.state.schema, payload, reusable)
        if self.stopping:
            self.drop("shutdown", 1, handed=False)
        elif not self.queue and self.running < self.max_concurrency:
            self._start_runner(entry)
        elif len(self.queue) >= self.max_queue_length:
            self.drop("queue_full", 1, handed=False)
        else:
            self.queue.append(entry)
            self.counters.Mirror_queue_length += 1

    async def _run_entry(self, entry: _Entry) -> None:
        """One ProxySQL-mode mirror: a pooled connection with the session's user and schema, the text, no result."""
        hostgroup = self.pools.hostgroup(entry.hostgroup)
        try:
            idle = hostgroup.take_idle(entry.credentials, entry.schema)
            conn = (
                idle
                if isinstance(idle, BackendConnection)
                else await hostgroup.acquire(entry.credentials, entry.schema, idle)
            )
        except PoolError as unavailable:
            self._fail(unavailable.code)
            self.last_error = f"hostgroup {entry.hostgroup}: {unavailable}"
            return
        pool = conn.pool
        assert isinstance(pool, ServerPool)
        reusable = False
        try:
            if entry.schema and conn.state.schema != entry.schema:
                err = await conn.simple_command(b"\x02" + entry.schema.encode("utf-8", "surrogateescape"))
                if err is not None:
                    self._fail(err.code)
                    return
                conn.state.schema = entry.schema
            sent = conn.wire.bytes_out
            conn.wire.send(entry.payload, 0)
            response = await read_response(conn.wire, None)
            await conn.settle(response)
            pool.queries += 1
            pool.bytes_sent += conn.wire.bytes_out - sent
            if response.error is not None:
                self._fail(response.error.code)
            else:
                self._complete(1)
            reusable = entry.reusable and not conn.in_transaction
        except CONNECTION_LOST as lost:
            self._fail(LOST_CONNECTION)
            self.last_error = f"hostgroup {entry.hostgroup}: lost the mirror connection: {lost}"
        finally:
            pool.hostgroup.release(conn, pool, reusable)

    # ------------------------------------------------------------------------------------------- ordered mode

    def new_lane(self, suffix: str, hostgroup: int) -> Lane:
        """A new lane of this process (``suffix``: the session and hostgroup)."""
        lane = Lane(f"{self.token}.{suffix}", hostgroup)
        self.lanes[lane.key] = lane
        return lane

    def close_lane(self, lane: Lane) -> None:
        """The lane's session ended: it ends once its units ran."""
        lane.closed = True
        if lane.state == IDLE and not lane.has_work():
            self._retire(lane)

    def push(self, lane: Lane, ops: list[MirrorOp], transaction: bool, credentials: Credentials) -> None:
        """Queue committed statements on ``lane``: in memory within the bound, else on disk (lossless) or dropped."""
        count = len(ops)
        self.mirrored += count
        self.counters.Mirror_queries_mirrored += count
        size = 0
        for op in ops:
            size += len(op.payload) + len(op.sql) + OP_OVERHEAD
        unit = MirrorUnit(self.next_seq, ops, transaction, time.time(), credentials.username, size)
        unit.credentials = credentials
        self.known_credentials[credentials.username] = credentials
        self.next_seq += 1
        if self.stopping:
            self._spill(lane, unit)
        elif lane.disk_units == 0 and self.memory + size <= self.max_memory:
            lane.units.append(unit)
            self.memory += size
            self.memory_ops += count
            self.counters.Mirror_queue_length += count
        elif self.ordered.get(lane.hostgroup, True):
            self._spill(lane, unit)
        else:
            self.drop("memory_full", count, handed=False)
            return
        if lane.state == IDLE:
            self._make_ready(lane)

    def _spill(self, lane: Lane, unit: MirrorUnit) -> None:
        count = len(unit.ops)
        try:
            self._open_store().append(self._record(lane, unit))
        except Exception as exc:  # lossless cannot be kept without a disk: say so, count it
            self.drop("spill_failed", count, handed=False)
            self.last_error = f"cannot write the mirror queue to {self.spill_dir}: {exc}"
            log.error("mirror: %s", self.last_error)
            return
        if lane.disk_units == 0:
            lane.disk_head_created = unit.created
        lane.disk_units += 1
        lane.disk_ops += count
        self.disk_ops += count
        self.counters.Mirror_queries_spilled += count
        self.counters.Mirror_queue_length += count
        self.counters.Mirror_queue_disk_length += count

    def _record(self, lane: Lane, unit: MirrorUnit) -> SpillRecord:
        return SpillRecord(
            unit.seq, lane.key, lane.hostgroup, unit.username, unit.created, len(unit.ops), encode_unit(unit)
        )

    def _make_ready(self, lane: Lane) -> None:
        lane.move(READY)
        self.ready.append(lane)
        self._kick()

    def _wake(self, lane: Lane) -> None:
        if lane.state == WAITING:
            self._make_ready(lane)

    def _kick(self) -> None:
        """Start runners while there is work no runner has claimed yet and a free slot."""
        while (
            not self.stopping
            and self.running < self.max_concurrency
            and len(self.ready) + len(self.queue) > self.starting
        ):
            self._start_runner(None)

    def _start_runner(self, first: _Entry | None) -> None:
        self.running += 1
        if first is None:
            self.starting += 1
        self.counters.Mirror_concurrency = self.running
        spawn(self._runner(first), self.tasks, "a mirror runner", self.pools.loop())

    async def _runner(self, first: _Entry | None) -> None:
        """Run work until there is none: ProxySQL-mode entries and lanes' turns, alternately."""
        claimed = first is not None
        try:
            if first is not None:
                await self._entry_turn(first)
            lanes_turn = True
            while not self.stopping:
                if self.ready and (lanes_turn or not self.queue):
                    lane = self.ready.popleft()
                    if not claimed:
                        claimed = True
                        self.starting -= 1
                    await self._lane_turn(lane)
                elif self.queue:
                    entry = self.queue.popleft()
                    self.counters.Mirror_queue_length -= 1
                    if not claimed:
                        claimed = True
                        self.starting -= 1
                    await self._entry_turn(entry)
                else:
                    break
                lanes_turn = not lanes_turn
        finally:
            if not claimed:
                self.starting -= 1
            self.running -= 1
            self.counters.Mirror_concurrency = self.running

    async def _entry_turn(self, entry: _Entry) -> None:
        """Run a ProxySQL-mode entry; an unexpected failure (a bug) is logged and counted as a drop."""
        try:
            await self._run_entry(entry)
        except Exception as exc:
            log.exception("mirror: a mirrored statement failed in the proxy")
            self.last_error = f"internal error: {exc!r} (see the proxy log)"
            self.drop("internal_error", 1, handed=False)

    async def _lane_turn(self, lane: Lane) -> None:
        """Run a lane's turn; an unexpected failure (a bug) is logged and the lane tries again later, never lost."""
        try:
            await self._run_lane(lane)
        except Exception as exc:
            log.exception("mirror: lane %s failed", lane.key)
            lane.error = self.last_error = f"internal error: {exc!r} (see the proxy log)"
            self._release(lane, reusable=False)
            if lane.state == RUNNING:  # it failed applying a unit: try again later (after its turn: it is done)
                self._wait(lane)

    async def _run_lane(self, lane: Lane) -> None:
        """A lane's turn: up to ``LANE_TURN`` units in order; then it waits in line again, or is done."""
        lane.move(RUNNING)
        turn = 0
        while turn < LANE_TURN and not self.stopping:
            if not lane.units:
                if lane.disk_units == 0:
                    break
                if not await self._load(lane):
                    if lane.disk_units:
                        self._wait(lane)
                        return
                    break
            unit = lane.units[0]
            if not await self._apply(lane, unit):
                self._wait(lane)
                return
            lane.backoff = BACKOFF_FIRST
            lane.error = ""
            lane.units.popleft()
            count = len(unit.ops)
            self.memory -= unit.size
            self.memory_ops -= count
            self.counters.Mirror_queue_length -= count
            if unit.on_disk and self.store is not None:
                self.store.delete(unit.seq)
            turn += 1
        if lane.has_work() and not self.stopping:
            lane.move(READY)
            self.ready.append(lane)
            return
        lane.move(IDLE)
        if lane.closed and not lane.has_work():
            self._retire(lane)
        elif lane.conn is not None and not lane.dirty:
            self._release(lane, reusable=True)

    def _wait(self, lane: Lane) -> None:
        """The lane cannot go on now: it tries again after its backoff, which doubles each time."""
        lane.move(WAITING)
        self.pools.loop().call_later(lane.backoff, self._wake, lane)
        lane.backoff = min(BACKOFF_LAST, lane.backoff * 2)

    async def _load(self, lane: Lane) -> bool:
        """Read the lane's next units back from disk; False (the lane waits) if the store fails."""
        store = self._open_store()
        # Within the memory bound (units of about a KiB), but always one: a lane runs what it holds in memory.
        limit = max(1, min(LOAD_BATCH, (self.max_memory - self.memory) // 1024))
        try:
            rows, next_created = await store.load(lane.key, lane.last_loaded, limit)
        except Exception as exc:
            lane.error = self.last_error = f"cannot read the mirror queue from {store.path}: {exc}"
            log.error("mirror: %s", lane.error)
            return False
        for row in rows:
            unit = decode_unit(row.body, row.seq, row.created, row.username)
            unit.on_disk = True
            lane.units.append(unit)
            lane.last_loaded = row.seq
            count = len(unit.ops)
            lane.disk_units -= 1
            lane.disk_ops -= count
            self.disk_ops -= count
            self.memory += unit.size
            self.memory_ops += count
            self.counters.Mirror_queue_disk_length -= count
        if next_created is not None:
            lane.disk_head_created = next_created
        if not rows and lane.disk_units:  # the count and the disk disagree (the file was edited): trust the disk
            self.disk_ops -= lane.disk_ops
            self.counters.Mirror_queue_length -= lane.disk_ops
            self.counters.Mirror_queue_disk_length -= lane.disk_ops
            lane.disk_units = lane.disk_ops = 0
        return bool(lane.units)

    def _credentials(self, unit: MirrorUnit) -> Credentials | None:
        if unit.credentials is not None:
            return unit.credentials
        known = self.known_credentials.get(unit.username)
        if known is not None:
            return known
        password = self.backend_users.get(unit.username)
        if password:
            return Credentials(unit.username, password)
        return None

    async def _connection(self, lane: Lane, unit: MirrorUnit) -> BackendConnection | None:
        """The lane's connection for ``unit`` (its user's), borrowed if need be; None (the lane waits) if not."""
        conn = lane.conn
        credentials = self._credentials(unit)
        if conn is not None and conn.wire.closed is None and credentials is not None and conn.serves(credentials):
            return conn
        if conn is not None:
            self._release(lane, reusable=not lane.dirty and conn.wire.closed is None)
        if credentials is None:
            lane.error = (
                f"no password for user {unit.username!r} to reach the mirror: its mysql_users password is a hash "
                "and none of its sessions has logged in since the restart"
            )
            return None
        schema = unit.ops[0].ctx.schema
        hostgroup = self.pools.hostgroup(lane.hostgroup)
        try:
            idle = hostgroup.take_idle(credentials, schema)
            conn = idle if isinstance(idle, BackendConnection) else await hostgroup.acquire(credentials, schema, idle)
        except PoolError as unavailable:
            lane.error = self.last_error = f"hostgroup {lane.hostgroup}: {unavailable}"
            return None
        lane.conn = conn
        lane.dirty = False
        return conn

    def _release(self, lane: Lane, reusable: bool) -> None:
        conn = lane.conn
        if conn is None:
            return
        lane.conn = None
        pool = conn.pool
        assert isinstance(pool, ServerPool)
        pool.hostgroup.release(conn, pool, reusable and not conn.in_transaction and conn.wire.closed is None)

    def _retire(self, lane: Lane) -> None:
        self._release(lane, reusable=not lane.dirty)
        self.lanes.pop(lane.key, None)

    async def _apply(self, lane: Lane, unit: MirrorUnit) -> bool:
        """Run ``unit`` on the mirror; False when the mirror is out of reach (the unit stays first in line)."""
        conn = await self._connection(lane, unit)
        if conn is None:
            return False
        try:
            return await self._run_unit(lane, conn, unit)
        except CONNECTION_LOST as lost:
            self._release(lane, reusable=False)
            lane.error = self.last_error = f"hostgroup {lane.hostgroup}: lost the mirror connection: {lost}"
            unit.attempts += 1
            self.retried += 1
            if unit.attempts >= MAX_ATTEMPTS:  # this unit breaks the connection each time: give it up
                self._fail(LOST_CONNECTION, len(unit.ops))
                return True
            return False
        except asyncio.CancelledError:
            self._release(lane, reusable=False)
            raise

    async def _run_unit(self, lane: Lane, conn: BackendConnection, unit: MirrorUnit) -> bool:
        """Run the unit's statements (in a transaction when it is one); a deadlock runs it again."""
        pool = conn.pool
        assert isinstance(pool, ServerPool)
        while True:
            failures: list[int] = []
            rolled_back = 0
            if unit.transaction:
                begun = await conn.query("START TRANSACTION")
                if begun.error is not None:
                    self._fail(begun.error.code, len(unit.ops))
                    return True
            for op in unit.ops:
                code = await self._run_op(lane, conn, op)
                pool.queries += 1
                if code == 0:
                    continue
                if code in RETRIABLE or (unit.transaction and not conn.in_transaction):
                    rolled_back = code
                    break
                failures.append(code)
            if not rolled_back and unit.transaction:
                committed = await conn.query("COMMIT")
                if committed.error is not None:
                    rolled_back = committed.error.code
            if not rolled_back:
                for code in failures:
                    self._fail(code)
                self._complete(len(unit.ops) - len(failures))
                return True
            if conn.in_transaction:
                await conn.query("ROLLBACK")
            unit.attempts += 1
            if rolled_back not in RETRIABLE or unit.attempts >= MAX_ATTEMPTS:
                self._fail(rolled_back, len(unit.ops))
                return True
            self.retried += 1

    async def _run_op(self, lane: Lane, conn: BackendConnection, op: MirrorOp) -> int:
        """Run one statement in its session's context; its error code, or 0."""
        err = await bring(conn, op.ctx)
        if err is not None:
            return err.code
        if not op.plain:
            lane.dirty = True
        wire = conn.wire
        if op.kind == EXECUTE:
            prepared = await prepare_on(conn, op.sql)
            if isinstance(prepared, ErrPacket):
                return prepared.code
            for chunk in op.long_data:
                wire.send(for_statement(chunk, prepared.stmt_id), 0)
            if op.insert_id:
                wire.send(b"\x03SET insert_id = " + str(op.insert_id).encode(), 0)
            wire.send(for_statement(op.payload, prepared.stmt_id), 0)
        else:
            if op.insert_id:
                wire.send(b"\x03SET insert_id = " + str(op.insert_id).encode(), 0)
            wire.send(op.payload, 0)
        if op.insert_id:
            await read_response(wire, None)
        response = await read_response(wire, None, binary=op.kind == EXECUTE)
        await conn.settle(response)
        return response.error.code if response.error is not None else 0

    # ------------------------------------------------------------------------------------------- statistics

    def oldest_age(self, now: float) -> float:
        """Seconds the oldest waiting statement has waited (0 when none waits)."""
        oldest = now
        if self.queue:
            oldest = self.queue[0].created
        for lane in self.lanes.values():
            if lane.units:
                oldest = min(oldest, lane.units[0].created)
            elif lane.disk_units:
                oldest = min(oldest, lane.disk_head_created)
        return max(0.0, now - oldest)

    def snapshot(self) -> dict[str, Any]:
        """The mirror's counters for ``/stats`` (``mirror``); also refreshes the ``Mirror_*`` gauges."""
        age = self.oldest_age(time.time())
        self._gauges()
        self.counters.Mirror_oldest_entry_age_ms = int(age * 1000)
        waiting = [lane for lane in self.lanes.values() if lane.state == WAITING]
        return {
            "mirrored": self.mirrored,
            "completed": self.completed,
            "failed": {str(code): n for code, n in sorted(self.failed.items())},
            "dropped": dict(sorted(self.dropped.items())),
            "retried": self.retried,
            "concurrency": self.running,
            "max_concurrency": self.max_concurrency,
            "queue_length": len(self.queue) + self.memory_ops + self.disk_ops,
            "queue_proxysql": len(self.queue),
            "queue_memory": self.memory_ops,
            "queue_disk": self.disk_ops,
            "memory_bytes": self.memory,
            "memory_limit": self.max_memory,
            "oldest_age_s": round(age, 3),
            "lanes": len(self.lanes),
            "lanes_waiting": len(waiting),
            "last_error": next((lane.error for lane in waiting if lane.error), self.last_error),
            "ordered_hostgroups": {
                str(hg): "lossless" if lossless else "lossy" for hg, lossless in sorted(self.ordered.items())
            },
            "spill_path": str(self.store.path) if self.store is not None else "",
        }


# ---------------------------------------------------------------------------------------------- several workers
