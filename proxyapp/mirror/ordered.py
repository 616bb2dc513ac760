"""The ordered mode's lanes (ProxyFleet's own mirror, ``proxyapp.mirror.mirror`` says what it promises): each
session's committed statements queued as units on its lane, in memory within ``mysql-mirror_ordered_max_memory``,
beyond it spilled to disk (``proxyapp.mirror.spill``: lossless) or dropped (lossy); a lane's turn runs its units in
order on its own connection, brought to each statement's session state; a lane out of reach waits with backoff; a
deadlock runs the unit again.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path

from proxyapp.backends.pool import PoolError, PoolManager, ServerPool
from proxyapp.mirror.counts import MirrorCounts
from proxyapp.mirror.lanes import BACKOFF_FIRST, BACKOFF_LAST, IDLE, READY, RUNNING, WAITING, Lane
from proxyapp.mirror.proxysql_mode import LOST_CONNECTION
from proxyapp.mirror.spill import SpillRecord, SpillStore
from proxyapp.mirror.units import EXECUTE, OP_OVERHEAD, MirrorOp, MirrorUnit, decode_unit, encode_unit, unit_seq
from proxyapp.mysql.backend import BackendConnection, Credentials
from proxyapp.mysql.packets import ErrPacket
from proxyapp.mysql.wire import CONNECTION_LOST, read_response
from proxyapp.report.stats import GlobalCounters
from proxyapp.session.prepared import for_statement, prepare_on
from proxyapp.session.state import bring

log = logging.getLogger("proxyapp.mirror.ordered")

#: Errors after which the mirror rolled the transaction back, so the unit is run again (deadlock, lock wait).
RETRIABLE = frozenset({1205, 1213})
#: How many times a unit is run again (deadlocks, lost connections) before its statements count as failed.
MAX_ATTEMPTS = 10
#: Units a lane runs before it lets a waiting lane have its slot; units a lane reads back from disk at once.
LANE_TURN = 32
LOAD_BATCH = 256


class OrderedLanes:
    """A worker's lanes, their units in memory and on disk, and a lane's turn; ``kick`` asks for a runner when a lane
    becomes ready (the runners are the mirror's, shared with ProxySQL mode)."""

    def __init__(
        self,
        counts: MirrorCounts,
        counters: GlobalCounters,
        pools: PoolManager,
        worker: int,
        workers: int,
        kick: Callable[[], None],
    ) -> None:
        self.counts = counts
        self.counters = counters
        self.pools = pools
        self.worker = worker
        self.workers = workers
        self.kick = kick
        #: Distinguishes this process's lanes from those a previous run left on disk.
        self.token = f"w{worker}.{time.time_ns():x}"
        self.max_memory = 64 << 20
        self.lossless: dict[int, bool] = {}  # ordered mirror hostgroup -> lossless
        self.backend_users: dict[str, str] = {}  # username -> clear password from the config ('' when hashed)
        self.spill_dir: Path | None = None
        self.store: SpillStore | None = None
        self.lanes: dict[str, Lane] = {}
        self.ready: deque[Lane] = deque()  # lanes waiting for a runner, in turn
        self.memory = 0  # bytes of units held in lanes' memory queues
        self.memory_ops = 0
        self.disk_ops = 0
        self.next_seq = 1
        self.known_credentials: dict[str, Credentials] = {}  # the latest session's, for units read from disk
        self.stopping = False

    def drop(self, reason: str, count: int, *, handed: bool) -> None:
        """Count ``count`` statements dropped for ``reason`` (a tap's, ``tap.LaneOwner``)."""
        self.counts.drop(reason, count, handed=handed)

    async def resume(self) -> None:
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
        # Handed over again in this process: mirrored = completed + failed + dropped holds.
        self.counts.handed(sum(lane_backlog.ops for lane_backlog in backlog.lanes))
        for lane_backlog in backlog.lanes:
            lane = Lane(lane_backlog.lane, lane_backlog.hostgroup)
            lane.closed = True
            lane.disk_units = lane_backlog.units
            lane.disk_ops = lane_backlog.ops
            lane.disk_head_created = lane_backlog.first_created
            self.lanes[lane.key] = lane
            self.disk_ops += lane.disk_ops
            self.make_ready(lane)
        if backlog.lanes:
            log.info(
                "mirror: resuming %d queued statements of %d sessions from %s",
                self.disk_ops,
                len(backlog.lanes),
                store.path,
            )

    async def close(self) -> None:
        """Keep what waits in memory on disk, give the lanes' connections back, close the store (the runners are
        done)."""
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

    def _open_store(self) -> SpillStore:
        store = self.store
        if store is None:
            assert self.spill_dir is not None
            store = self.store = SpillStore(self.spill_dir, self.worker, self.workers)
        return store

    def oldest(self, now: float) -> float:
        """When the oldest unit waiting on a lane was queued (``now`` when none waits)."""
        oldest = now
        for lane in self.lanes.values():
            if lane.units:
                oldest = min(oldest, lane.units[0].created)
            elif lane.disk_units:
                oldest = min(oldest, lane.disk_head_created)
        return oldest

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
        self.counts.handed(count)
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
        elif self.lossless.get(lane.hostgroup, True):
            self._spill(lane, unit)
        else:
            self.counts.drop("memory_full", count, handed=False)
            return
        if lane.state == IDLE:
            self.make_ready(lane)

    def _spill(self, lane: Lane, unit: MirrorUnit) -> None:
        count = len(unit.ops)
        try:
            self._open_store().append(self._record(lane, unit))
        except Exception as exc:  # lossless cannot be kept without a disk: say so, count it
            self.counts.drop("spill_failed", count, handed=False)
            self.counts.last_error = f"cannot write the mirror queue to {self.spill_dir}: {exc}"
            log.error("mirror: %s", self.counts.last_error)
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

    def make_ready(self, lane: Lane) -> None:
        """``lane`` has work: it waits for a runner (``Mirror``'s)."""
        lane.move(READY)
        self.ready.append(lane)
        self.kick()

    def _wake(self, lane: Lane) -> None:
        if lane.state == WAITING:
            self.make_ready(lane)

    async def turn(self, lane: Lane) -> None:
        """Run a lane's turn; an unexpected failure (a bug) is logged and the lane tries again later, never lost."""
        try:
            await self._run_lane(lane)
        except Exception as exc:
            log.exception("mirror: lane %s failed", lane.key)
            lane.error = self.counts.last_error = f"internal error: {exc!r} (see the proxy log)"
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
            lane.error = self.counts.last_error = f"cannot read the mirror queue from {store.path}: {exc}"
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
            lane.error = self.counts.last_error = f"hostgroup {lane.hostgroup}: {unavailable}"
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
            lane.error = self.counts.last_error = f"hostgroup {lane.hostgroup}: lost the mirror connection: {lost}"
            unit.attempts += 1
            self.counts.retried += 1
            if unit.attempts >= MAX_ATTEMPTS:  # this unit breaks the connection each time: give it up
                self.counts.fail(LOST_CONNECTION, len(unit.ops))
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
                    self.counts.fail(begun.error.code, len(unit.ops))
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
                    self.counts.fail(code)
                self.counts.complete(len(unit.ops) - len(failures))
                return True
            if conn.in_transaction:
                await conn.query("ROLLBACK")
            unit.attempts += 1
            if rolled_back not in RETRIABLE or unit.attempts >= MAX_ATTEMPTS:
                self.counts.fail(rolled_back, len(unit.ops))
                return True
            self.counts.retried += 1

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
