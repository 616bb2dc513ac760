"""The ordered mirror's durable queue: units that do not fit in memory, kept in SQLite, a file per worker process.

``STATE/worker-N.sqlite3`` holds one table, ``units(seq, lane, hostgroup, username, created, ops, body)``, with an
index on ``(lane, seq)``: a lane reads its units back in order, a unit is deleted once it ran on the mirror, and a
restart finds every lane that still has units. ``seq`` is the proxy's own order of units (a lane's units on disk
are newer than those it holds in memory), so what a stop writes from memory still comes first.

Durability: the database is in WAL mode with ``synchronous=FULL``, so a commit returns only after the WAL is on
disk (fsync). Commits are grouped: one write is in flight at a time and carries everything appended while the
previous one ran, so under a sustained spill the cost is one fsync per batch, not per statement, and at most the
batch being written (a few milliseconds of statements) can be lost to a power cut. A crash of the proxy alone loses
nothing that was committed. Deletes ride along in the same batches: a unit that ran on the mirror but whose delete
was not committed yet runs again after a crash (at least once).

All SQLite work runs on one thread of the store's own (a single-thread executor, which also keeps the calls in the
order they were made), so the proxy's event loop never waits on the disk. When the worker count shrinks, worker 0
adopts the files of the workers that are gone.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import NamedTuple

log = logging.getLogger("proxyapp.mirror.mirror")

#: Seconds before a failed write is tried again (the records wait in memory meanwhile).
RETRY_SECONDS = 1.0

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS units (seq INTEGER PRIMARY KEY, lane TEXT NOT NULL, hostgroup INTEGER NOT NULL, "
    "username TEXT NOT NULL, created REAL NOT NULL, ops INTEGER NOT NULL, body BLOB NOT NULL)",
    "CREATE INDEX IF NOT EXISTS units_by_lane ON units (lane, seq)",
)


class SpillRecord(NamedTuple):
    """One unit as stored: its order, lane, mirror hostgroup, user, queueing time, statement count and bytes."""

    seq: int
    lane: str
    hostgroup: int
    username: str
    created: float
    ops: int
    body: bytes


class LaneBacklog(NamedTuple):
    """What a lane has on disk: units, statements, and when the oldest was queued."""

    lane: str
    hostgroup: int
    units: int
    ops: int
    first_created: float


class Backlog(NamedTuple):
    """What an opened store holds: the next free ``seq`` and each lane's backlog, oldest lane first."""

    next_seq: int
    lanes: list[LaneBacklog]


class LoadedUnit(NamedTuple):
    """A unit read back: its ``seq``, queueing time, user and bytes."""

    seq: int
    created: float
    username: str
    body: bytes


class SpillStore:
    """A worker's durable queue; made and used from the event loop (its SQLite work runs on its own thread)."""

    def __init__(self, directory: Path, worker: int, workers: int) -> None:
        self.path = directory / f"worker-{worker}.sqlite3"
        self._loop = asyncio.get_running_loop()
        self._executor = ThreadPoolExecutor(1, thread_name_prefix=f"mirror-spill-{worker}")
        self._db: sqlite3.Connection | None = None
        self._appends: list[SpillRecord] = []
        self._deletes: list[int] = []
        self._writing: asyncio.Future[None] | None = None
        self._retry: asyncio.TimerHandle | None = None
        #: Why the last write failed ('' after a good one).
        self.error = ""
        self._opened = self._loop.run_in_executor(self._executor, self._open, directory, worker, workers)

    async def opened(self) -> Backlog:
        """What the store held when it was opened; raises what opening it raised."""
        return await asyncio.shield(self._opened)

    def append(self, record: SpillRecord) -> None:
        """Queue a unit for writing (the next batch); OSError if the store could not be opened."""
        self._check_open()
        self._appends.append(record)
        self._flush()

    def delete(self, seq: int) -> None:
        """Queue the deletion of a unit that ran (the next batch)."""
        self._deletes.append(seq)
        self._flush()

    async def load(self, lane: str, after: int, limit: int) -> tuple[list[LoadedUnit], float | None]:
        """Up to ``limit`` of ``lane``'s units after ``seq`` ``after``, in order (everything appended before is
        written first), and when the next one after them was queued (None: there is none)."""
        await self.sync()
        rows, following = await self._loop.run_in_executor(self._executor, self._load, lane, after, limit)
        return rows, following

    async def sync(self) -> None:
        """Return once everything appended and deleted so far is committed; OSError while writes fail."""
        while True:
            writing = self._writing
            if writing is not None:
                with contextlib.suppress(Exception):
                    await asyncio.shield(writing)
                if self._writing is writing:  # done, but its callback (which starts the next write) has yet to run
                    await asyncio.sleep(0)
                continue
            if not self._appends and not self._deletes:
                return
            if self.error:
                raise OSError(f"writing {self.path} fails: {self.error}")
            self._flush()

    async def close(self) -> None:
        """Write what is pending, then close the database and the thread."""
        if self._retry is not None:
            self._retry.cancel()
            self._retry = None
        try:
            self._check_open()
            self.error = ""  # one last try for what failed before
            await self.sync()
        finally:
            await self._loop.run_in_executor(self._executor, self._close)
            self._executor.shutdown(wait=True)

    # ------------------------------------------------------------------------------------------ the loop's side

    def _check_open(self) -> None:
        opened = self._opened
        if opened.done() and not opened.cancelled() and opened.exception() is not None:
            raise OSError(f"the mirror queue {self.path} could not be opened: {opened.exception()}")

    def _flush(self) -> None:
        """Start a write of everything pending, unless one is in flight (it starts the next when done)."""
        if self._writing is not None or not (self._appends or self._deletes):
            return
        appends, deletes = self._appends, self._deletes
        self._appends, self._deletes = [], []
        writing = self._loop.run_in_executor(self._executor, self._write, appends, deletes)
        self._writing = writing
        writing.add_done_callback(lambda done: self._written(done, appends, deletes))

    def _written(self, done: asyncio.Future[None], appends: list[SpillRecord], deletes: list[int]) -> None:
        self._writing = None
        exc = None if done.cancelled() else done.exception()
        if exc is None:
            self.error = ""
            self._flush()
            return
        if not self.error:
            log.error("mirror: cannot write the queue %s (retrying every %.0f s): %s", self.path, RETRY_SECONDS, exc)
        self.error = str(exc)
        self._appends[:0] = appends
        self._deletes[:0] = deletes
        self._retry = self._loop.call_later(RETRY_SECONDS, self._flush)

    # ------------------------------------------------------------------------------------------ the thread's side

    def _open(self, directory: Path, worker: int, workers: int) -> Backlog:
        directory.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(self.path, isolation_level="DEFERRED")
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=FULL")
        for statement in _SCHEMA:
            db.execute(statement)
        db.commit()
        self._db = db
        if worker == 0:
            for orphan in sorted(directory.glob("worker-*.sqlite3")):
                index = orphan.stem.removeprefix("worker-")
                if index.isdigit() and int(index) >= workers:
                    self._adopt(db, orphan)
        (top,) = db.execute("SELECT COALESCE(MAX(seq), 0) FROM units").fetchone()
        lanes = [
            LaneBacklog(lane, hostgroup, units, ops, first)
            for lane, hostgroup, units, ops, first in db.execute(
                "SELECT lane, hostgroup, COUNT(*), SUM(ops), MIN(created) FROM units GROUP BY lane, hostgroup "
                "ORDER BY MIN(seq)"
            )
        ]
        return Backlog(top + 1, lanes)

    def _adopt(self, db: sqlite3.Connection, orphan: Path) -> None:
        """Move the units of a worker that no longer runs into this store, after its own, in their order."""
        db.execute("ATTACH DATABASE ? AS orphan", (str(orphan),))
        try:
            with db:
                moved = db.execute(
                    "INSERT INTO units (lane, hostgroup, username, created, ops, body) "
                    "SELECT lane, hostgroup, username, created, ops, body FROM orphan.units ORDER BY seq"
                ).rowcount
        finally:
            db.execute("DETACH DATABASE orphan")
        for path in (orphan, orphan.with_name(orphan.name + "-wal"), orphan.with_name(orphan.name + "-shm")):
            path.unlink(missing_ok=True)
        log.info("mirror: adopted %d queued units from %s", moved, orphan)

    def _write(self, appends: list[SpillRecord], deletes: list[int]) -> None:
        db = self._db
        if db is None:
            raise OSError(f"the mirror queue {self.path} is not open")
        with db:
            db.executemany("INSERT INTO units VALUES (?, ?, ?, ?, ?, ?, ?)", appends)
            db.executemany("DELETE FROM units WHERE seq = ?", [(seq,) for seq in deletes])

    def _load(self, lane: str, after: int, limit: int) -> tuple[list[LoadedUnit], float | None]:
        db = self._db
        if db is None:
            raise OSError(f"the mirror queue {self.path} is not open")
        rows = [
            LoadedUnit(*row)
            for row in db.execute(
                "SELECT seq, created, username, body FROM units WHERE lane = ? AND seq > ? ORDER BY seq LIMIT ?",
                (lane, after, limit + 1),
            )
        ]
        following = rows[limit].created if len(rows) > limit else None
        return rows[:limit], following

    def _close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None
