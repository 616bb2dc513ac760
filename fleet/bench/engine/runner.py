"""A bench run: the plan (workload, targets, sweep, time or count, warm-up, rate), its checks (writes only against
targets marked safe; bounded in time), and the runner that sets up, steps through the sweep and cleans up.

Steps interleave the targets: for each round, for each connection count, each target in turn, so that ratios
between targets compare runs made under the same conditions. ``prepare`` and ``cleanup`` run once, through the first
target (the targets of one run share their data: a server and the proxies in front of it); the tables ``prepare``
created are dropped at the end, after a failure or a cancel too.

Why one file of this size: the plan's checks and the runner's steps are one contract (what a run may touch and how
it is cleaned up), easier to check side by side.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import uvloop

from fleet.bench.engine.recorder import merge_interval, merge_totals, restored
from fleet.bench.engine.results import IntervalPoint, RunResult, StepResult
from fleet.bench.engine.script import Script, Statement
from fleet.bench.engine.shard import Shard, StepSpec, connect, error_code
from fleet.bench.engine.targets import Target
from proxyapp.mysql.backend import BackendConnection, BackendError
from proxyapp.mysql.packets import ProtocolError
from proxyapp.mysql.wire import PeerClosed

REPO = Path(__file__).resolve().parents[3]
#: Seconds per step when a plan gives neither a time nor a count.
DEFAULT_DURATION = 10.0
#: The most a run may take unless its plan says less.
DEFAULT_TIME_LIMIT = 3600.0
#: Seconds allowed per step beyond its warm-up and time, for opening and closing connections (estimates only).
STEP_OVERHEAD_S = 1.0


class PlanError(ValueError):
    """A plan that must not run (the message says why)."""


@dataclass(kw_only=True)
class PlanBase:
    """What every run does, whatever drives it: targets, the sweep, time or count, warm-up, rate, limits."""

    targets: list[Target]
    connections: list[int] = field(default_factory=lambda: [1])
    duration: float | None = None
    events: int | None = None
    warmup: float = 0.0
    rate: float | None = None
    interval: float = 1.0
    rounds: int = 1
    time_limit: float = DEFAULT_TIME_LIMIT
    workload: str = ""

    @property
    def step_seconds(self) -> float:
        """How long a step's measured part may last: its time, or for a count without a time the whole limit."""
        if self.duration is not None:
            return self.duration
        return self.time_limit if self.events is not None else DEFAULT_DURATION

    def steps(self) -> list[tuple[int, Target, int]]:
        """(round, target, connections) in the order they run: rounds, then connection counts, then targets, the
        targets in reverse order on even rounds (so that no target always runs first, on a machine a step before
        left cold or warm)."""
        return [
            (round_no, target, connections)
            for round_no in range(1, self.rounds + 1)
            for connections in self.connections
            for target in (self.targets if round_no % 2 else self.targets[::-1])
        ]

    def least_seconds(self) -> float:
        """The least time the run takes (warm-ups and times of every step; a count-only step counts as 0)."""
        per_step = self.warmup + (self.step_seconds if self.events is None or self.duration else 0.0)
        return len(self.steps()) * (per_step + STEP_OVERHEAD_S)

    def check_common(self, writes: str | None) -> None:
        """PlanError when the plan must not run: no target, a workload that writes (``writes`` says how) against a
        target not marked safe, bad numbers, or more time than its limit."""
        if not self.targets:
            raise PlanError("no target: give at least one DSN")
        names = [t.name for t in self.targets]
        if len(set(names)) != len(names):
            raise PlanError(f"targets need distinct names (got {', '.join(names)})")
        unsafe = [t.name for t in self.targets if not t.safe]
        if writes is not None and unsafe:
            raise PlanError(
                f"workload {self.workload} writes ({writes}) and target{'s' if len(unsafe) > 1 else ''} "
                f"{', '.join(unsafe)} {'are' if len(unsafe) > 1 else 'is'} not marked safe for benchmarks"
            )
        for name, value in (("interval", self.interval), ("time limit", self.time_limit)):
            if value <= 0:
                raise PlanError(f"{name} must be above 0")
        if self.rounds < 1 or min(self.connections, default=0) < 1:
            raise PlanError("rounds and connection counts must be 1 or more")
        least = self.least_seconds()
        if least > self.time_limit:
            raise PlanError(
                f"the run would take at least {least:.0f} s ({len(self.steps())} steps), over its time limit of "
                f"{self.time_limit:.0f} s"
            )

    def settings(self) -> dict[str, Any]:
        """The plan's numbers, for the result."""
        return {
            "connections": self.connections,
            "duration": self.duration,
            "events": self.events,
            "warmup": self.warmup,
            "rate": self.rate,
            "interval": self.interval,
            "rounds": self.rounds,
            "time_limit": self.time_limit,
        }


@dataclass(kw_only=True)
class Plan(PlanBase):
    """A run of a bench script by the engine (``processes`` processes share the connections)."""

    script: Script
    processes: int = 1
    seed: int | None = None

    @classmethod
    def for_script(cls, script: Script, targets: list[Target], **overrides: Any) -> Plan:
        """A plan from a script's own options, with ``overrides`` (None values leave the script's)."""
        values: dict[str, Any] = {
            "connections": script.connections or [1],
            "duration": script.duration,
            "events": script.events,
            "warmup": script.warmup or 0.0,
            "rate": script.rate,
            "workload": script.name,
        }
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(script=script, targets=targets, **values)

    def check(self) -> None:
        """PlanError when the plan must not run (``check_common``; processes of 1 or more)."""
        if not self.workload:
            self.workload = self.script.name
        writer = self.script.first_write
        self.check_common(f"{writer.name} at line {writer.line}: {_verb(writer)}" if writer else None)
        if self.processes < 1:
            raise PlanError("processes must be 1 or more")

    def settings(self) -> dict[str, Any]:
        """The plan's numbers, for the result."""
        return {**super().settings(), "processes": self.processes, "seed": self.seed}

    def describe(self) -> dict[str, Any]:
        """The workload, for the result."""
        return {
            "name": self.workload,
            "driver": "engine",
            "script": self.script.text,
            "writes": bool(self.script.first_write),
        }


def _verb(statement: Statement) -> str:
    return " ".join(statement.text.split()[:3])


class Listener:
    """What a run tells as it goes (the CLI prints it; a job stores it). The defaults do nothing."""

    def step_started(self, step: StepResult) -> None:
        """A step begins (its connections are being opened)."""

    def interval(self, step: StepResult, point: IntervalPoint) -> None:
        """A progress interval of the running step ended."""

    def step_finished(self, step: StepResult) -> None:
        """A step ended; ``step`` holds its totals."""

    def note(self, text: str) -> None:
        """Something worth a line: setup, cleanup, a refused step."""

    def tables_made(self, names: list[str]) -> None:
        """``prepare`` created these tables (the run drops them at its end; whoever finds it lost, if it dies)."""


class Cancelled(Exception):
    """The run was cancelled."""


class Runner:
    """Runs a plan once. ``run()`` blocks (its own event loop); ``cancel()`` may be called from any thread."""

    def __init__(self, plan: Plan, listener: Listener | None = None) -> None:
        self.plan = plan
        self.listener = listener or Listener()
        self.cancelled = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._shards: list[Shard | ChildShard] = []
        self._lock = threading.Lock()

    def cancel(self) -> None:
        """Stop the run after the transactions in flight; setup's tables are still dropped."""
        with self._lock:
            self.cancelled = True
            loop = self._loop
        if loop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(self._stop_shards)

    def _stop_shards(self) -> None:
        for shard in self._shards:
            shard.stop()

    def run(self) -> RunResult:
        """Check the plan, run it, return its result (a refused plan raises PlanError before anything runs)."""
        self.plan.check()
        raise_file_limit()
        return uvloop.run(self._run())

    async def _run(self) -> RunResult:
        plan = self.plan
        with self._lock:
            self._loop = asyncio.get_running_loop()
        result = RunResult(
            workload={
                "name": plan.workload or plan.script.name,
                "script": plan.script.text,
                "writes": bool(plan.script.first_write),
            },
            targets=[t.describe() for t in plan.targets],
            settings=plan.settings(),
            started_at=time.time(),
        )
        deadline = result.started_at + plan.time_limit
        made: list[str] = []  # filled by _prepare, even when it fails half way
        try:
            await self._prepare(result, made)
            self._shards = await self._start_shards()
            for index, (round_no, target, connections) in enumerate(plan.steps()):
                if self.cancelled:
                    raise Cancelled
                if time.time() >= deadline:
                    raise TimeoutError(f"the run reached its time limit of {plan.time_limit:.0f} s")
                result.steps.append(await self._step(index, round_no, target, connections, deadline))
            result.status = "cancelled" if self.cancelled else "done"
        except Cancelled:
            result.status = "cancelled"
        except (PlanError, BackendError, TimeoutError, RuntimeError, OSError, ProtocolError) as exc:
            result.status, result.error = "failed", str(exc)
        finally:
            await self._stop_children()
            await self._cleanup(result, made)
            result.finished_at = time.time()
        if result.status == "done" and self.cancelled:
            result.status = "cancelled"
        return result

    # ------------------------------------------------------------------------------------------ set up and clean up

    async def _prepare(self, result: RunResult, made: list[str]) -> None:
        """Run ``prepare`` through the first target; the tables it created go into ``made`` (to drop at the end)."""
        script = self.plan.script
        if not script.prepare:
            return
        target = self.plan.targets[0]
        conn = await connect(target)
        try:
            wanted = script.created_tables()
            before = {name for name in wanted if await _table_exists(conn, name)}
            self.listener.note(f"prepare: {len(script.prepare)} statements through {target.name}")
            try:
                await _run_block(conn, script, script.prepare, "prepare", lambda: self.cancelled)
            finally:
                made.extend([name for name in wanted if name not in before and await _table_exists(conn, name)])
                if made:
                    result.notes.append(f"prepare created {', '.join(made)}")
                    self.listener.tables_made(list(made))
        finally:
            conn.close()

    async def _cleanup(self, result: RunResult, made: list[str]) -> None:
        """Run ``cleanup`` and drop the tables ``prepare`` created; problems become notes (never raised)."""
        script = self.plan.script
        if not script.cleanup and not made:
            return
        target = self.plan.targets[0]
        notes: list[str] = []
        try:
            conn = await connect(target)
        except BackendError as exc:
            notes.append(f"cleanup could not connect to {target.name}: {exc}; left: {', '.join(made)}")
        else:
            try:
                if script.cleanup:
                    try:
                        await _run_block(conn, script, script.cleanup, "cleanup", lambda: False)
                    except RuntimeError as exc:
                        notes.append(str(exc))
                notes += await _drop(conn, made)
            except (PeerClosed, ProtocolError, OSError) as exc:
                notes.append(f"cleanup lost its connection to {target.name}: {exc}")
            finally:
                conn.close()
        result.notes.extend(notes)
        for note in notes:
            self.listener.note(note)

    # ------------------------------------------------------------------------------------------ steps

    async def _start_shards(self) -> list[Shard | ChildShard]:
        plan = self.plan
        sequences = {name: s.next for name, s in plan.script.sequences().items()}
        if plan.processes == 1:
            shard = Shard(plan.script, plan.seed)
            shard.continue_sequences(sequences)
            return [shard]
        children = [ChildShard(i, plan.processes) for i in range(plan.processes)]
        await asyncio.gather(*(c.start(plan.script.text, plan.seed, sequences) for c in children))
        return list(children)

    async def _stop_children(self) -> None:
        for shard in self._shards:
            if isinstance(shard, ChildShard):
                await shard.quit()

    async def _step(self, index: int, round_no: int, target: Target, connections: int, deadline: float) -> StepResult:
        plan = self.plan
        step = StepResult(index=index, round=round_no, target=target.name, connections=connections)
        step.started_at = time.time()
        self.listener.step_started(step)
        shards = self._shards
        counts = _shares(connections, len(shards))
        events = _shares(plan.events, len(shards), counts) if plan.events is not None else [None] * len(shards)
        specs = [
            StepSpec(
                target=target,
                connections=n,
                warmup=plan.warmup,
                duration=plan.step_seconds,
                events=e,
                rate=plan.rate * n / connections if plan.rate else None,
                interval=plan.interval,
                deadline=deadline,
            )
            for n, e in zip(counts, events, strict=True)
        ]
        opened = await asyncio.gather(*(shard.open(spec) for shard, spec in zip(shards, specs, strict=True)))
        step.connections_opened = sum(opened)
        if self.cancelled:
            for shard in shards:
                shard.close()
            step.status = "cancelled"
            return step
        if not step.connections_opened:
            for shard in shards:
                shard.close()
            errors = {code: e for shard in shards for code, e in shard.connect_errors.items()}
            step.status = "failed"
            step.error = "no connection could be opened: " + "; ".join(str(e[1]) for e in errors.values())[:500]
            step.errors = {code: {"count": e[0], "message": e[1]} for code, e in errors.items()}
            self.listener.step_finished(step)
            return step
        active = [shard for shard, n in zip(shards, opened, strict=True) if n]
        pending: dict[int, list[tuple[float, dict[str, Any]]]] = {}

        def emit(k: int, t: float, delta: dict[str, Any]) -> None:
            pending.setdefault(k, []).append((t, delta))
            while pending and len(pending[min(pending)]) == len(active):
                first = min(pending)
                self._interval(step, first, pending.pop(first))

        go_at = time.time() + 0.05
        try:
            totals = await asyncio.gather(*(shard.run(go_at, emit) for shard in active))
        except ChildFailed as exc:
            step.status, step.error = "failed", str(exc)
            totals = []
        for k in sorted(pending):
            self._interval(step, k, pending.pop(k))
        if totals:
            merged = merge_totals(totals, [(s.name, s.text) for s in plan.script.transaction])
            for name, value in merged.items():
                setattr(step, name, value)
        if self.cancelled and step.status == "done":
            step.status = "cancelled"
        self.listener.step_finished(step)
        return step

    def _interval(self, step: StepResult, k: int, parts: list[tuple[float, dict[str, Any]]]) -> None:
        point = merge_interval(max(t for t, _ in parts), [delta for _, delta in parts])
        step.intervals.append(point)
        self.listener.interval(step, point)


def _shares(total: int, parts: int, weights: list[int] | None = None) -> list[int]:
    """``total`` split into ``parts`` whole shares (in proportion to ``weights`` when given)."""
    if weights is None:
        return [total // parts + (1 if i < total % parts else 0) for i in range(parts)]
    whole = sum(weights)
    shares = [total * w // whole for w in weights]
    for i in range(total - sum(shares)):
        shares[[j for j, w in enumerate(weights) if w][i % len([w for w in weights if w])]] += 1
    return shares


async def drop_tables(target: Target, names: list[str]) -> list[str]:
    """Drop the tables ``names`` through ``target`` (the tables of a run that died before its cleanup); a note per
    table, or why none could be dropped. Never raises."""
    try:
        conn = await connect(target)
    except BackendError as exc:
        return [f"cleanup could not connect to {target.name}: {exc}; left: {', '.join(names)}"]
    try:
        return await _drop(conn, names)
    except (PeerClosed, ProtocolError, OSError) as exc:
        return [f"cleanup lost its connection to {target.name}: {exc}"]
    finally:
        conn.close()


async def _drop(conn: BackendConnection, names: list[str]) -> list[str]:
    """DROP TABLE IF EXISTS each of ``names``; a note per table."""
    notes = []
    for name in names:
        error = (await conn.query(f"DROP TABLE IF EXISTS {_quote_name(name)}")).error
        notes.append(f"cleanup could not drop {name}: {error.message}" if error else f"cleanup dropped {name}")
    return notes


async def _table_exists(conn: BackendConnection, name: str) -> bool:
    schema, _, table = name.rpartition(".")
    where_schema = f"'{_escape(schema)}'" if schema else "DATABASE()"
    answer = await conn.fetch_row(
        "SELECT COUNT(*) FROM information_schema.TABLES "
        f"WHERE TABLE_SCHEMA = {where_schema} AND TABLE_NAME = '{_escape(table)}'"
    )
    if not isinstance(answer, tuple):
        raise RuntimeError(f"cannot look up table {name}: {answer.message}")
    return answer[1][0] not in (None, b"0")


def _why(error: Any) -> str:
    return f": {error.message}" if error is not None else ""


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("'", "\\'")


def _quote_name(name: str) -> str:
    return ".".join(f"`{part.replace('`', '``')}`" for part in name.split("."))


async def _run_block(
    conn: BackendConnection, script: Script, statements: list[Statement], block: str, cancelled: Callable[[], bool]
) -> None:
    """Run setup or cleanup statements in order; RuntimeError naming the statement's line and the server's error."""
    rng = random.Random(0)
    for statement in statements:
        values = script.draw_values(rng, [statement])
        for sql in statement.render(rng, values, script.draws):
            if cancelled():
                raise Cancelled
            try:
                response = await conn.query(sql)
            except (PeerClosed, ProtocolError, OSError) as exc:
                raise RuntimeError(f"{block} line {statement.line}: {error_code(exc)[1]}") from None
            if response.error is not None:
                error = response.error
                raise RuntimeError(f"{block} line {statement.line}: error {error.code}: {error.message}")


def raise_file_limit() -> None:
    """Hundreds of connections need more descriptors than a soft limit of 1024: raise it to the hard limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = 65536 if hard == resource.RLIM_INFINITY else hard
    if soft < wanted:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))


# ---------------------------------------------------------------------------------------------- child processes


class ChildFailed(RuntimeError):
    """A shard's child process failed or exited."""


class ChildShard:
    """A shard in a child process (``python -m fleet.bench.engine.shard``), with the same methods as ``Shard``."""

    def __init__(self, index: int, processes: int) -> None:
        self.index = index
        self.processes = processes
        self.proc: subprocess.Popen[bytes] | None = None
        self.connect_errors: dict[str, list[Any]] = {}
        self._replies: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self._emit: Callable[[int, float, dict[str, Any]], None] | None = None
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115  (the child's stderr until quit() closes it)
        self._reader: asyncio.Task[None] | None = None

    async def start(self, script_text: str, seed: int | None, sequences: dict[str, int]) -> None:
        """Start the child and hand it the script."""
        env = dict(os.environ, PYTHONPATH=str(REPO))
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "fleet.bench.engine.shard"],
            cwd=REPO,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
        )
        self._reader = asyncio.ensure_future(self._read())
        self._send(
            {
                "op": "init",
                "script": script_text,
                "seed": seed,
                "index": self.index,
                "processes": self.processes,
                "sequences": sequences,
            }
        )
        await self._reply("ready")

    async def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=1 << 24)
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), self.proc.stdout)
        while True:
            line = await reader.readline()
            if not line:
                await self._replies.put({"op": "exited"})
                return
            message = json.loads(line)
            if message["op"] == "interval" and self._emit is not None:
                self._emit(message["k"], message["t"], restored(message))
            else:
                await self._replies.put(message)

    def _send(self, message: dict[str, Any]) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        try:
            self.proc.stdin.write(json.dumps(message).encode() + b"\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, ValueError):
            raise ChildFailed(f"bench process {self.index} is gone: {self._tail()}") from None

    async def _reply(self, op: str) -> dict[str, Any]:
        message = await self._replies.get()
        if message["op"] == op:
            return message
        if message["op"] == "failed":
            raise ChildFailed(f"bench process {self.index}: {message['error']}")
        raise ChildFailed(f"bench process {self.index} exited: {self._tail()}")

    def _tail(self) -> str:
        self._stderr.seek(0)
        lines = self._stderr.read().decode(errors="replace").strip().splitlines()
        return lines[-1] if lines else "no message"

    async def open(self, spec: StepSpec) -> int:
        """Have the child open its share of the step's connections."""
        self._send({"op": "open", "spec": spec.to_dict()})
        reply = await self._reply("opened")
        self.connect_errors = reply["errors"]
        return int(reply["opened"])

    async def run(self, go_at: float, emit: Callable[[int, float, dict[str, Any]], None]) -> dict[str, Any]:
        """Start the child's connections at ``go_at``; its totals when the step ends."""
        self._emit = emit
        self._send({"op": "go", "at": go_at})
        try:
            return restored(await self._reply("done"))
        finally:
            self._emit = None

    def stop(self) -> None:
        """Ask the child to end the step."""
        with contextlib.suppress(ChildFailed):
            self._send({"op": "stop"})

    def close(self) -> None:
        """Nothing to close here: the child closes its connections after each step."""

    async def quit(self) -> None:
        """End the child (SIGKILL if it does not exit within a few seconds)."""
        if self.proc is None:
            return
        with contextlib.suppress(ChildFailed):
            self._send({"op": "quit"})
        with contextlib.suppress(OSError):
            assert self.proc.stdin is not None
            self.proc.stdin.close()
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(None, self.proc.wait, 10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            await loop.run_in_executor(None, self.proc.wait)
        if self._reader is not None:
            self._reader.cancel()
        self._stderr.close()
