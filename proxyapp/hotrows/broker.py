"""One set of hot-row lines for all the worker processes of a node: the supervisor keeps them (``HotRowBroker``)
and each worker asks it over a socket of its own (``BrokeredHotRows``), so that two sessions asking for one key wait in
one line whichever worker serves them. A key is thus owned by no worker: the lines live where every worker can reach
them in one local round trip, and a worker that dies gives back, through its socket's end, every key its sessions
held.

The messages are JSON lines: a worker sends ``{"op": "take", "id": N, "owner": O, "queue": Q, "key": K, "wait":
true}`` (answered ``{"id": N, "answer": A}`` once granted, or at once with another answer: ``queues``), ``{"op":
"give_back", "owner": O}`` and ``{"op": "withdraw", "owner": O}`` (no answer). Only the queued transactions pay the
round trip; a statement that asks for no key never reaches the broker.
"""

from __future__ import annotations

import asyncio
import json
import logging
import socket
from typing import Any

from proxyapp.clock import Clock
from proxyapp.hotrows.queues import UNQUEUED, QueueKey, Waiter
from proxyapp.hotrows.service import HotRows, HotRowSettings

log = logging.getLogger("proxyapp.hotrows.broker")


class HotRowBroker:
    """The supervisor's side: the node's lines, and one connection per worker."""

    def __init__(self, clock: Clock, settings: HotRowSettings) -> None:
        self.hot_rows = HotRows(clock, settings)
        self._tasks: set[asyncio.Task[None]] = set()
        self._sweeper: asyncio.Task[None] | None = None

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

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _serve(self, sock: socket.socket) -> None:
        """Serve one worker until its socket ends; then every owner it spoke for gives its keys back."""
        reader, writer = await asyncio.open_connection(sock=sock)
        owners: set[int] = set()
        try:
            while line := await reader.readline():
                message = json.loads(line)
                owner = int(message["owner"])
                op = message["op"]
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
        except (ConnectionError, ValueError, KeyError) as exc:
            log.warning("hot rows: a worker's connection broke: %s", exc)
        finally:
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
    if not writer.is_closing():
        writer.write(json.dumps({"id": request, "answer": answer}).encode() + b"\n")


class BrokeredHotRows(HotRows):
    """A worker's side: the node's lines, asked of the supervisor's broker over ``fd``."""

    def __init__(self, clock: Clock, settings: HotRowSettings, fd: int) -> None:
        super().__init__(clock, settings)
        self.fd = fd
        self._writer: asyncio.StreamWriter | None = None
        self._pending: dict[int, asyncio.Future[int]] = {}
        self._next = 0
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
        if self._writer is not None and not self._writer.is_closing():
            self._writer.write(json.dumps(message).encode() + b"\n")

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
