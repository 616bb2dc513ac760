"""One process's share of a step: its connections, each running the script's transaction in a loop.

A shard opens its connections (``BackendConnection``, the proxy's compiled asyncio MySQL client), waits for the
agreed start, runs the warm-up unrecorded, then measures: for a duration, or until its share of the step's
transactions is done, or until it is stopped; every interval it hands the interval's counts to ``emit``. With
several processes each child runs a shard (``python -m fleet.bench.engine.shard``, driven over its standard input
and output as JSON lines); with one, the runner runs it in its own event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import sys
import time
from collections.abc import Callable
from typing import Any

from fleet.bench.engine.recorder import Recorder, portable
from fleet.bench.engine.script import Script, Statement, parse_script
from fleet.bench.engine.targets import Target
from proxyapp.mysql.backend import BackendConnection, BackendError, Credentials
from proxyapp.mysql.packets import ProtocolError
from proxyapp.mysql.wire import PeerClosed

#: Handshakes in flight at once while opening a step's connections.
CONNECT_CONCURRENCY = 32
#: How long transactions still running at the end of a step may take to finish before their connections are closed.
STOP_GRACE_S = 10.0
LOST_CONNECTION = 2013
#: Seconds between attempts to open a lost connection again.
RECONNECT_PAUSE_S = 0.2


class StepSpec:
    """What a shard runs in one step (its share of connections, transactions and rate)."""

    __slots__ = ("connections", "deadline", "duration", "events", "interval", "rate", "target", "warmup")

    def __init__(
        self,
        target: Target,
        connections: int,
        warmup: float,
        duration: float,
        events: int | None,
        rate: float | None,
        interval: float,
        deadline: float,
    ) -> None:
        self.target = target
        self.connections = connections
        self.warmup = warmup
        self.duration = duration  # the measured part's length (the cap when events are given)
        self.events = events  # this shard's share of the step's transactions
        self.rate = rate  # this shard's share of the step's rate
        self.interval = interval
        self.deadline = deadline  # time.time() at which the run's time is up, whatever the step says

    def to_dict(self) -> dict[str, Any]:
        """The spec as JSON (the target's password included: it goes only to our own child processes)."""
        target = self.target
        return {
            "target": {
                "name": target.name,
                "host": target.host,
                "port": target.port,
                "user": target.user,
                "password": target.password,
                "database": target.database,
                "safe": target.safe,
            },
            **{name: getattr(self, name) for name in self.__slots__ if name != "target"},
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> StepSpec:
        """The inverse of ``to_dict``."""
        return cls(**{**data, "target": Target(**data["target"])})


async def connect(target: Target, timeout: float = 10.0) -> BackendConnection:
    """One connection to ``target``; BackendError when it cannot be opened."""
    credentials = Credentials(username=target.user, password=target.password)
    return await BackendConnection.connect(
        target.host, target.port, credentials, target.database or None, timeout=timeout
    )


def error_code(exc: BaseException) -> tuple[int, str]:
    """The MySQL error number and message a connection failure stands for."""
    if isinstance(exc, BackendError):
        return exc.code, str(exc)
    return LOST_CONNECTION, f"lost connection: {exc or type(exc).__name__}"


class Shard:
    """One process's connections and counts for the steps of a run."""

    def __init__(self, script: Script, seed: int | None, index: int = 0, processes: int = 1) -> None:
        self.script = script
        self.rng = random.Random(None if seed is None else seed * 1000 + index)
        self.index = index
        self.processes = processes
        self.conns: list[BackendConnection | None] = []
        self.connect_errors: dict[str, list[Any]] = {}
        self.recorder = Recorder(len(script.transaction))
        self.stopping = False
        self.remaining: int | None = None
        self.next_slot = 0.0
        self.rate = 0.0
        self.spec: StepSpec | None = None

    def continue_sequences(self, after: dict[str, int]) -> None:
        """Start each ``seq`` variable where the setup left it, this process counting its own residue class."""
        for name, sequence in self.script.sequences().items():
            sequence.next = after.get(name, sequence.next) + self.index
            sequence.stride = self.processes

    async def open(self, spec: StepSpec) -> int:
        """Open the step's connections; how many opened (failures are counted as errors)."""
        self.spec = spec
        self.connect_errors = {}
        if spec.connections == 0:
            self.conns = []
            return 0
        gate = asyncio.Semaphore(CONNECT_CONCURRENCY)

        async def one() -> BackendConnection | None:
            async with gate:
                try:
                    return await connect(spec.target)
                except BackendError as exc:
                    code, message = error_code(exc)
                    entry = self.connect_errors.setdefault(str(code), [0, message])
                    entry[0] += 1
                    return None

        self.conns = [c for c in await asyncio.gather(*(one() for _ in range(spec.connections))) if c is not None]
        return len(self.conns)

    def stop(self) -> None:
        """End the step after the transactions in flight."""
        self.stopping = True

    async def run(self, go_at: float, emit: Callable[[int, float, dict[str, Any]], None]) -> dict[str, Any]:
        """Run the opened connections from ``go_at`` (time.time()); ``emit(k, t, delta)`` after each interval;
        returns the step's totals. Closes the connections."""
        spec = self.spec
        assert spec is not None
        loop = asyncio.get_running_loop()
        self.stopping = False
        self.remaining = None
        self.recorder = Recorder(len(self.script.transaction))
        await asyncio.sleep(max(0.0, go_at - time.time()))
        start = loop.time()
        self.rate = spec.rate or 0.0
        self.next_slot = start
        clients = [asyncio.ensure_future(self._client(i, loop)) for i in range(len(self.conns))]
        everyone = asyncio.gather(*clients)
        try:
            warm_end = start + spec.warmup
            if spec.warmup > 0:
                await asyncio.wait([everyone], timeout=max(0.0, min(warm_end, self._deadline(loop)) - loop.time()))
            self.recorder = Recorder(len(self.script.transaction))
            measured = loop.time()
            self.remaining = spec.events
            end = min(measured + spec.duration, self._deadline(loop))
            k = 0
            last = measured
            while not everyone.done():
                tick = min(measured + (k + 1) * spec.interval, end)
                await asyncio.wait([everyone], timeout=max(0.0, tick - loop.time()))
                now = loop.time()
                # A whole interval, or a last part of at least half of one (a shorter tail counts in the totals only).
                if now >= tick or (everyone.done() and (now - last >= spec.interval / 2 or k == 0)):
                    k += 1
                    emit(k, now - measured, self.recorder.take_interval(now - last))
                    last = now
                if now >= end or self.stopping:
                    self.stopping = True
                    break
            seconds = loop.time() - measured
            await asyncio.wait([everyone], timeout=STOP_GRACE_S)
            if not everyone.done():
                everyone.cancel()
            with contextlib.suppress(BaseException):
                await everyone
            totals = self.recorder.totals(seconds)
            totals["errors"] = {**self.connect_errors, **totals["errors"]}
            return totals
        finally:
            if not everyone.done():
                everyone.cancel()
            self.close()

    def _deadline(self, loop: asyncio.AbstractEventLoop) -> float:
        spec = self.spec
        assert spec is not None
        return loop.time() + max(0.0, spec.deadline - time.time())

    async def _client(self, slot: int, loop: asyncio.AbstractEventLoop) -> None:
        """One connection's loop: pace, draw the values, run the transaction, record."""
        script = self.script
        statements: list[Statement] = script.transaction
        draws = script.draws
        rng = self.rng
        spec = self.spec
        assert spec is not None
        clock = time.perf_counter_ns
        while not self.stopping:
            if self.remaining is not None:
                if self.remaining <= 0:
                    return
                self.remaining -= 1
            lag_us: int | None = None
            if self.rate > 0:
                slot_at = self.next_slot
                self.next_slot = slot_at + rng.expovariate(self.rate)
                delay = slot_at - loop.time()
                if delay > 0:
                    await asyncio.sleep(delay)
                    if self.stopping:
                        return
                lag_us = int(max(0.0, -delay) * 1e6)
            conn = self.conns[slot]
            recorder = self.recorder
            if conn is None:
                conn = await self._reconnect(slot, recorder)
                if conn is None:
                    continue
            values = script.draw_values(rng, statements)
            began = clock()
            ok = True
            for index, statement in enumerate(statements):
                for sql in statement.render(rng, values, draws):
                    sent = clock()
                    try:
                        response = await conn.query(sql)
                    except (PeerClosed, ProtocolError, OSError) as lost:
                        code, message = error_code(lost)
                        recorder.statement_failed(index, code, message)
                        conn.close()
                        self.conns[slot] = None
                        ok = False
                        break
                    error = response.error
                    if error is not None:
                        recorder.statement_failed(index, error.code, error.message)
                        ok = False
                        break
                    rows = response.rows if response.result_sets else response.affected_rows
                    recorder.statement(index, (clock() - sent) // 1000, rows)
                if not ok:
                    break
            if not ok and self.conns[slot] is not None and conn.in_transaction:
                with contextlib.suppress(PeerClosed, ProtocolError, OSError):
                    await conn.query("ROLLBACK")
            recorder.transaction((clock() - began) // 1000, ok, lag_us)

    async def _reconnect(self, slot: int, recorder: Recorder) -> BackendConnection | None:
        spec = self.spec
        assert spec is not None
        try:
            conn = await connect(spec.target)
        except BackendError as exc:
            recorder.error(*error_code(exc))
            await asyncio.sleep(RECONNECT_PAUSE_S)
            return None
        self.conns[slot] = conn
        return conn

    def close(self) -> None:
        """Close every connection of the step."""
        for conn in self.conns:
            if conn is not None:
                conn.close()
        self.conns = []


# ------------------------------------------------------------------------------------------ as a child process


def _send(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def _send_interval(k: int, t: float, delta: dict[str, Any]) -> None:
    _send({"op": "interval", "k": k, "t": t, **portable(delta)})


async def _serve() -> None:
    """Answer the runner's commands (one JSON object a line) until ``quit`` or the end of input."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    shard: Shard | None = None
    running: asyncio.Task[dict[str, Any]] | None = None

    async def run_step(go_at: float) -> None:
        assert shard is not None
        try:
            totals = await shard.run(
                go_at, lambda k, t, delta: _send({"op": "interval", "k": k, "t": t, **portable(delta)})
            )
            _send({"op": "done", **portable(totals)})
        except Exception as exc:  # reported to the runner, which fails the step
            _send({"op": "failed", "error": f"{type(exc).__name__}: {exc}"})

    while True:
        line = await reader.readline()
        if not line:
            if shard is not None:
                shard.stop()
            return
        command = json.loads(line)
        op = command["op"]
        if op == "init":
            shard = Shard(parse_script(command["script"]), command["seed"], command["index"], command["processes"])
            shard.continue_sequences(command["sequences"])
            _send({"op": "ready"})
        elif op == "open" and shard is not None:
            opened = await shard.open(StepSpec.from_dict(command["spec"]))
            _send({"op": "opened", "opened": opened, "errors": shard.connect_errors})
        elif op == "go" and shard is not None:
            running = asyncio.ensure_future(run_step(command["at"]))
        elif op == "stop" and shard is not None:
            shard.stop()
        elif op == "quit":
            if running is not None:
                await running
            return


if __name__ == "__main__":
    import uvloop

    uvloop.run(_serve())
