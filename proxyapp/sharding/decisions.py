"""The XA decision log: what a worker process decided about its cross-shard transactions, on the node's disk.

One append-only file per worker process (``log_path``), one JSON record a line:

- ``{"xid": X, "state": "prepare", "servers": ["host:port", ...], "user": U}``: the branches of X, on these servers,
  run by MySQL user U, are about to be prepared;
- ``{"xid": X, "state": "commit"}``: the decision to commit X, synced to disk before the first ``XA COMMIT`` is sent;
- ``{"xid": X, "state": "done"}``: every branch of X is committed or rolled back; X is forgotten.

The rule is presumed abort: a prepared branch whose xid has no commit record is rolled back by recovery
(``proxyapp.sharding.xa``). So only the commit record is synced (fsync, on a thread, one for all the commits that
wait at the same time); prepare and done records are written to the file (a crash of the proxy loses none of them)
but not synced. A power cut that loses a prepare record leaves prepared branches that recovery still finds by the
worker's xid prefix, and rolls back; one that loses a done record makes recovery look for branches that are gone and
write it again.

Opening the log compacts it: the records of finished xids are dropped and the file is replaced atomically with the
others. A line without its newline (the last one, cut short by a crash) is ignored: its record was never acted on
(a commit record counts only once synced, and nothing is prepared before the prepare record is written). The file
is 0600 in a 0700 directory, like the node's other state files.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path

from proxyapp.statefile import write_atomically

log = logging.getLogger("proxyapp.sharding.xa")

PREPARE, COMMIT, DONE = "prepare", "commit", "done"
#: What a worker's xid prefix may be: with the rest of a gtrid (``DecisionLog.new_xid``: 16 digits of start time and a
#: count) it fits MariaDB's 64 bytes.
PREFIX = re.compile(r"[A-Za-z0-9._-]{1,32}")


def log_path(directory: Path, worker: int) -> Path:
    """Where worker process ``worker`` keeps its decision log in ``directory``."""
    return directory / f"worker-{worker}.xa"


def orphaned_workers(directory: Path, workers: int) -> list[int]:
    """The worker numbers of the logs in ``directory`` of workers that no longer run (``workers`` run now, numbered
    from 0): one of today's workers recovers their xids (``DecisionLog.open`` with that worker's prefix)."""
    numbers = (re.fullmatch(r"worker-(\d+)\.xa", path.name) for path in directory.glob("worker-*.xa"))
    return sorted(n for n in (int(found[1]) for found in numbers if found) if n >= workers)


@dataclass(slots=True)
class Entry:
    """An unfinished xid: the servers of its branches, the user that ran them, and whether COMMIT was decided."""

    servers: tuple[str, ...]
    user: str
    commit: bool = False


class DecisionLog:
    """A worker's decision log (see the module's docstring); made with ``open``, used from the event loop."""

    def __init__(self, path: Path, prefix: str, fd: int, entries: dict[str, Entry]) -> None:
        self.path = path
        #: The start of every gtrid this worker makes: recovery rolls back prepared xids with it that the log does
        #: not say to commit.
        self.prefix = prefix
        self.entries = entries
        #: The xids this process is committing or rolling back right now: recovery leaves them alone.
        self.in_flight: set[str] = set()
        self._fd = fd
        self._epoch = time.time_ns()  # wall-clock nanoseconds: gtrids of an earlier run differ
        self._count = 0
        self._written = 0  # records written, and how many of them are known synced
        self._synced = 0
        self._syncing: asyncio.Task[None] | None = None
        self._torn = False  # a write came up short: the next record starts on a line of its own

    @classmethod
    def open(cls, path: Path, prefix: str) -> DecisionLog:
        """Read ``path`` (none yet is an empty log), rewrite it with the unfinished xids only and open it for
        appending; OSError when the disk refuses, ValueError for a prefix ``PREFIX`` does not allow."""
        if not PREFIX.fullmatch(prefix):
            raise ValueError(f"an xid prefix is 1 to 32 letters, digits, '.', '_' or '-', not {prefix!r}")
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        path.parent.chmod(0o700)
        entries = _read(path)
        write_atomically(path, "".join(_line(record) for xid, entry in entries.items() for record in _kept(xid, entry)))
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        if entries:
            log.warning("xa: %s holds %d unfinished transactions for recovery", path, len(entries))
        return cls(path, prefix, fd, entries)

    def new_xid(self) -> str:
        """A gtrid no other transaction of this worker, in this run or another, has: prefix, start time, count."""
        self._count += 1
        return f"{self.prefix}{self._epoch:x}.{self._count:x}"

    def begin(self, xid: str, servers: list[str], user: str) -> None:
        """Record that the branches of ``xid`` on ``servers`` (run by ``user``) are about to be prepared; from now
        until ``finish`` or ``release`` recovery leaves ``xid`` alone. OSError when it cannot be written."""
        entry = Entry(tuple(dict.fromkeys(servers)), user)
        self._append({"xid": xid, "state": PREPARE, "servers": list(entry.servers), "user": user})
        self.entries[xid] = entry
        self.in_flight.add(xid)

    async def decide_commit(self, xid: str) -> None:
        """Record the decision to commit ``xid`` and return once it is on disk; OSError when it cannot be written
        or synced (then ``xid`` is not to be committed: ``committed`` says no)."""
        self.write_commit(xid)
        await self.synced(xid)

    def write_commit(self, xid: str) -> None:
        """Write the decision to commit ``xid`` (not yet on disk: ``synced`` makes it count); OSError when it cannot
        be written."""
        self._append({"xid": xid, "state": COMMIT})

    async def synced(self, xid: str) -> None:
        """Return once ``xid``'s written commit decision is on disk, and count it from then on; OSError when it
        cannot be synced."""
        entry = self.entries[xid]
        await self._sync()
        entry.commit = True

    def committed(self, xid: str) -> bool:
        """Whether COMMIT is the decision for ``xid`` (else its prepared branches are to be rolled back)."""
        entry = self.entries.get(xid)
        return entry is not None and entry.commit

    def finish(self, xid: str) -> None:
        """Record that every branch of ``xid`` is committed or rolled back; a write that fails is only logged
        (recovery finds nothing of it and finishes it again)."""
        self.in_flight.discard(xid)
        if self.entries.pop(xid, None) is None:
            return
        try:
            self._append({"xid": xid, "state": DONE})
        except OSError as exc:
            log.warning("xa: cannot record %s as done in %s: %s", xid, self.path, exc)

    def release(self, xid: str) -> None:
        """Leave ``xid``, some of whose branches may still be prepared, to recovery."""
        self.in_flight.discard(xid)

    def pending(self) -> dict[str, Entry]:
        """The unfinished xids that no transaction of this process is busy with: recovery's work."""
        return {xid: entry for xid, entry in self.entries.items() if xid not in self.in_flight}

    async def close(self) -> None:
        """Wait for a sync under way, then close the file."""
        if self._syncing is not None:
            await asyncio.wait([self._syncing])
        os.close(self._fd)

    def _append(self, record: dict[str, object]) -> None:
        data = (b"\n" if self._torn else b"") + _line(record).encode()
        written = os.write(self._fd, data)
        self._torn = written < len(data)
        if self._torn:
            raise OSError(f"short write to {self.path} ({written} of {len(data)} bytes)")
        self._written += 1

    async def _sync(self) -> None:
        """Return once every record written so far is on disk: one fsync serves every caller waiting meanwhile."""
        target = self._written
        while self._synced < target:
            syncing = self._syncing
            if syncing is None:
                syncing = self._syncing = asyncio.get_running_loop().create_task(self._fsync(self._written))
            await asyncio.shield(syncing)

    async def _fsync(self, upto: int) -> None:
        try:
            await asyncio.get_running_loop().run_in_executor(None, os.fsync, self._fd)
            self._synced = max(self._synced, upto)
        finally:
            self._syncing = None


def _line(record: dict[str, object]) -> str:
    return json.dumps(record, separators=(",", ":")) + "\n"


def _kept(xid: str, entry: Entry) -> list[dict[str, object]]:
    """The records compaction keeps for an unfinished xid."""
    kept: list[dict[str, object]] = [{"xid": xid, "state": PREPARE, "servers": list(entry.servers), "user": entry.user}]
    if entry.commit:
        kept.append({"xid": xid, "state": COMMIT})
    return kept


def _read(path: Path) -> dict[str, Entry]:
    """The unfinished xids ``path`` records, in order; lines without their newline or unreadable are skipped."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return {}
    entries: dict[str, Entry] = {}
    *lines, torn = data.split(b"\n")
    if torn:
        log.warning("xa: %s ends with a partly written record, ignored", path)
    for number, line in enumerate(lines, 1):
        if not line:
            continue
        try:
            record = json.loads(line)
            xid, state = str(record["xid"]), record["state"]
            if state == PREPARE:
                entries[xid] = Entry(tuple(str(s) for s in record["servers"]), str(record["user"]))
            elif state == COMMIT:
                entries.setdefault(xid, Entry((), "")).commit = True
            elif state == DONE:
                entries.pop(xid, None)
            else:
                raise ValueError(f"unknown state {state!r}")
        except (ValueError, KeyError, TypeError) as exc:
            log.warning("xa: %s line %d is unreadable, ignored: %s", path, number, exc)
    return entries
