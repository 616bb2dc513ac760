"""One set of hot-row lines for all the worker processes of a node: the supervisor keeps them (``HotRowBroker``)
and each worker asks it over a socket of its own (``BrokeredHotRows``), so that two sessions asking for one key wait in
one line whichever worker serves them. A key is thus owned by no worker: the lines live where every worker can reach
them in one local round trip, and a worker that dies gives back, through its socket's end, every key its sessions
held.

The search for hot keys is the node's too (``heat``): a worker reads a statement's mark and sends it, the supervisor's
one ``HeatMap`` counts them all, and each change of the queues it applied goes to every worker.

The messages are JSON lines: a worker sends ``{"op": "take", "id": N, "owner": O, "queue": Q, "key": K, "wait":
true}`` (answered ``{"id": N, "answer": A}`` once granted, or at once with another answer: ``queues``), ``{"op":
"give_back", "owner": O}``, ``{"op": "withdraw", "owner": O}`` and ``{"op": "mark", "reached": [schema, table,
column, value], "digest": D, "text": T, "error": E}`` (no answer); the supervisor sends ``{"op": "applied",
"digests": {D: [queue, column]}}`` on connection and at each change. Only the queued transactions pay the round
trip; a statement that asks for no key and bears no mark never reaches the broker.
"""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import time
from typing import Any

from proxyapp.clock import Clock
from proxyapp.hotrows.heat import HeatMap
from proxyapp.hotrows.queues import UNQUEUED, QueueKey, Waiter
from proxyapp.hotrows.service import HotRows, HotRowSettings
from proxyapp.tasks import spawn

log = logging.getLogger("proxyapp.hotrows.broker")


class HotRowBroker:
    """The supervisor's side: the node's lines, and one connection per worker."""

    def __init__(self, clock: Clock, settings: HotRowSettings) -> None:
        self.hot_rows = HotRows(clock, settings)
        self.heat = HeatMap(clock.now, time.time, settings, self._hand_applied)
        self._tasks: set[asyncio.Task[None]] = set()
        self._sweeper: asyncio.Task[None] | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    def configure(self, settings: HotRowSettings) -> None:
        """Follow new settings (a reload)."""
        self.hot_rows.configure(settings)
        self.heat.configure(settings)

    def pair(self) -> socket.socket:
        """A new worker's socket (its end, to pass to it: the broker serves the other end); inheritable."""
        ours, theirs = socket.socketpair()
        theirs.set_inheritable(True)
        self._spawn(self._serve(ours))
        if self._sweeper is None:
            self._sweeper = asyncio.get_running_loop().create_task(self._sweep())
        return theirs

    async def stop(self) -> None:
        """Close every worker's connection."""
        tasks = [*self._tasks, *([self._sweeper] if self._sweeper is not None else [])]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _sweep(self) -> None:
        """Once a second, end the waits past their deadline on the supervisor's clock (a clock a test moved too)."""
        while True:
            await asyncio.sleep(1)
            self.hot_rows.expire()
            self.heat.sweep()

    def _hand_applied(self, applied: dict[str, tuple[str, str]]) -> None:
        """Give every worker the queues the node applied itself."""
        for writer in self._writers:
            _send(writer, {"op": "applied", "digests": applied})

    def _spawn(self, coro: Any) -> None:
        spawn(coro, self._tasks, "a hot-row queue connection")

    async def _serve(self, sock: socket.socket) -> None:
        """Serve one worker until its socket ends; then every owner it spoke for gives its keys back."""
        reader, writer = await asyncio.open_connection(sock=sock)
        owners: set[int] = set()
        self._writers.add(writer)
        if self.heat.applied:
            _send(writer, {"op": "applied", "digests": self.heat.applied})
        try:
            while line := await reader.readline():
                message = json.loads(line)
                op = message["op"]
                owner = int(message.get("owner", 0))
                if op == "take":  # taken now, in the order the worker asked: a give_back after it comes after it
                    owners.add(owner)
                    key = (str(message["queue"]), str(message["key"]))
                    taken = self.hot_rows.take(owner, key, bool(message["wait"]))
                    if isinstance(taken, Waiter):
                        self._spawn(self._answer(writer, int(message["id"]), taken))
                    else:
                        _reply(writer, int(message["id"]), taken)
                elif op == "give_back":
                    owners.discard(owner)
                    self.hot_rows.give_back(owner)
                elif op == "withdraw":
                    self.hot_rows.withdraw(owner)
                elif op == "mark":
                    schema, table, column, value = (str(part) for part in message["reached"])
                    self.heat.record(
                        (schema, table, column, value), message["digest"], message["text"], message["error"]
                    )
        except (ConnectionError, ValueError, KeyError) as exc:
            log.warning("hot rows: a worker's connection broke: %s", exc)
        finally:
            self._writers.discard(writer)
            for owner in owners:
                self.hot_rows.give_back(owner)
            writer.close()

    async def _answer(self, writer: asyncio.StreamWriter, request: int, waiter: Waiter) -> None:
        """Answer a wait when it ends."""
        try:
            _reply(writer, request, await waiter.future)
        finally:
            self.hot_rows.queues.withdraw(waiter)  # the broker stopping: the wait ends with it


def _reply(writer: asyncio.StreamWriter, request: int, answer: int) -> None:
    _send(writer, {"id": request, "answer": answer})


def _send(writer: asyncio.StreamWriter, message: dict[str, Any]) -> None:
    if not writer.is_closing():
        writer.write(json.dumps(message).encode() + b"\n")


class BrokeredHotRows(HotRows):
    """A worker's side: the node's lines, asked of the supervisor's broker over ``fd``."""

    def __init__(self, clock: Clock, settings: HotRowSettings, fd: int) -> None:
        super().__init__(clock, settings)
        self.fd = fd
        self._writer: asyncio.StreamWriter | None = None
        self._pending: dict[int, asyncio.Future[int]] = {}
        self._next = 0
        #: digest -> (queue, column): the queues the node applied itself, as the supervisor last said.
        self.applied: dict[str, tuple[str, str]] = {}
        self._opening: asyncio.Task[asyncio.StreamWriter | None] | None = None
        self._reading: asyncio.Task[None] | None = None

    async def acquire(self, owner: int, key: QueueKey, wait: bool) -> int:
        """Ask the broker; a broker that cannot be reached lets the statement run without the queue."""
        writer = await self._connected()
        if writer is None:
            return UNQUEUED
        self._next += 1
        request = self._next
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._pending[request] = future
        message = {"op": "take", "id": request, "owner": owner, "queue": key[0], "key": key[1], "wait": wait}
        writer.write(json.dumps(message).encode() + b"\n")
        try:
            return await future
        finally:
            self._pending.pop(request, None)

    async def start(self) -> None:
        """Connect to the broker now: it says which queues the node applied before any statement asks."""
        await self._connected()

    def mark(self, reached: tuple[str, str, str, str], digest: str, text: str, error: int) -> None:
        """Hand a statement's mark to the node's search for hot keys."""
        self._send({"op": "mark", "reached": reached, "digest": digest, "text": text, "error": error})

    def withdraw(self, owner: int) -> None:
        """Tell the broker ``owner`` waits no more."""
        self._send({"op": "withdraw", "owner": owner})

    def give_back(self, owner: int) -> None:
        """Tell the broker ``owner``'s transaction ended."""
        self._send({"op": "give_back", "owner": owner})

    def expire(self) -> None:
        """The broker ends the waits (on the supervisor's clock, which a test moves with the workers')."""

    def rows(self) -> list[dict[str, object]]:
        """The supervisor reports the node's lines; a worker has none of its own."""
        return []

    def _send(self, message: dict[str, Any]) -> None:
        if self._writer is not None:
            _send(self._writer, message)

    async def _connected(self) -> asyncio.StreamWriter | None:
        """The connection to the broker, opened by the first request (once, however many ask at once)."""
        if self._opening is None:
            self._opening = asyncio.get_running_loop().create_task(self._open())
        writer = await self._opening
        return None if writer is None or writer.is_closing() else writer

    async def _open(self) -> asyncio.StreamWriter | None:
        try:
            reader, self._writer = await asyncio.open_connection(sock=socket.socket(fileno=self.fd))
        except OSError as exc:
            log.error("hot rows: the supervisor's broker cannot be reached, queues are off: %s", exc)
            return None
        self._reading = asyncio.get_running_loop().create_task(self._read(reader))
        return self._writer

    async def _read(self, reader: asyncio.StreamReader) -> None:
        """Hand each answer to its request; when the broker is gone, every request runs without the queue."""
        try:
            while line := await reader.readline():
                message = json.loads(line)
                if message.get("op") == "applied":  # updated in place: the worker's ForwardedHeat shares it
                    self.applied.clear()
                    self.applied.update({d: (str(q), str(c)) for d, (q, c) in message["digests"].items()})
                    continue
                future = self._pending.get(int(message["id"]))
                if future is not None and not future.done():
                    future.set_result(int(message["answer"]))
        except (ConnectionError, ValueError, KeyError) as exc:
            log.error("hot rows: the connection to the supervisor's broker broke: %s", exc)
        finally:
            assert self._writer is not None
            self._writer.close()
            for future in self._pending.values():
                if not future.done():
                    future.set_result(UNQUEUED)


class ForwardedHeat(HeatMap):
    """A worker's side of the node's search for hot keys: it reads each mark here and hands it to the supervisor's
    ``HeatMap`` (``HotRowBroker.heat``); the queues applied are the node's, as the broker last said."""

    def __init__(self, clock: Clock, settings: HotRowSettings, hot_rows: BrokeredHotRows) -> None:
        super().__init__(clock.now, time.time, settings)
        self.hot_rows = hot_rows
        self.applied = hot_rows.applied

    def configure(self, settings: HotRowSettings) -> None:
        """The supervisor follows the settings."""
        self.settings = settings

    def record(self, reached: tuple[str, str, str, str], digest: str, digest_text: str, error: int) -> None:
        """Hand the mark to the supervisor."""
        self.hot_rows.mark(reached, digest, digest_text, error)

    def sweep(self) -> None:
        """The supervisor withdraws what went cold."""

    def proposals(self) -> list[dict[str, Any]]:
        """The supervisor reports the node's proposals."""
        return []
