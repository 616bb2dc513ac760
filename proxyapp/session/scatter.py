"""A statement over several shards for one session: it runs on a connection to each shard side by side, then its
results merge into one (a SELECT, ``proxyapp.sharding.merge``) or its outcome is told shard by shard (DDL).

Each connection is borrowed from its shard's hostgroup and brought to the session's state like any other, and
given back after the statement (the session is outside a transaction: ``placement`` refuses a scatter inside one).
The query timeout applies to each shard's statement; a shard's error is the statement's error.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass

from proxyapp.backends.pool import ServerPool
from proxyapp.mysql.backend import BackendConnection
from proxyapp.mysql.constants import ErrorCode
from proxyapp.mysql.packets import ProtocolError
from proxyapp.mysql.resultset import TextResult, read_whole_result, result_set_of
from proxyapp.mysql.wire import STATUS_UNKNOWN, PeerClosed, Response
from proxyapp.session.client import Client
from proxyapp.session.link import NO_TIMEOUT_MS, BackendLink, release
from proxyapp.session.services import SessionServices
from proxyapp.sharding.gather import Gather, Refused
from proxyapp.sharding.merge import merge
from proxyapp.sharding.shardmap import Shard

log = logging.getLogger("proxyapp.session.scatter")


@dataclass(frozen=True)
class Scattered:
    """What a scatter did, for the digest statistics: rows sent, the merge's time in µs."""

    rows: int
    merge_us: int


class Scatter:
    """Runs statements over several shards for one session."""

    def __init__(self, services: SessionServices, client: Client, link: BackendLink) -> None:
        self.services = services
        self.client = client
        self.link = link

    async def read(self, shards: tuple[Shard, ...], plan: Gather, status: int) -> Scattered | None:
        """Run ``plan``'s statement on ``shards`` and send the merged result (None: an error was sent)."""
        results = await self._run(shards, plan.sql)
        if results is None:
            return None
        began = time.perf_counter()
        try:
            merged = merge(plan, results)
        except Refused as refused:
            self.client.send_error(ErrorCode.NOT_SUPPORTED, f"ProxyFleet sharding does not support {refused} yet")
            return None
        self.client.wire.write(result_set_of([c.payload for c in merged.columns], merged.rows, status, merged.warnings))
        return Scattered(len(merged.rows), int((time.perf_counter() - began) * 1_000_000))

    async def everywhere(self, shards: tuple[Shard, ...], sql: str, status: int, what: str) -> Scattered | None:
        """Run a DDL statement ``sql`` on every shard of ``shards``; OK when all did, else an error that tells
        each shard's outcome (None: an error was sent)."""
        results = await self._run(shards, sql, keep_going=True)
        if results is None:
            return None
        failed = [(shard, result) for shard, result in zip(shards, results, strict=True) if result.error is not None]
        if not failed:
            self.client.send_ok(status)
            return Scattered(0, 0)
        outcomes = "; ".join(
            f"shard {shard.number} (hostgroup {shard.hostgroup_id}): "
            + (f"{result.error.code} {result.error.message}" if result.error is not None else "done")
            for shard, result in zip(shards, results, strict=True)
        )
        first = failed[0][1].error
        assert first is not None
        self.client.send_error(
            first.code, f"ProxyFleet sharding: {what} failed on {len(failed)} of {len(shards)} shards: {outcomes}"
        )
        return None

    async def _run(self, shards: tuple[Shard, ...], sql: str, keep_going: bool = False) -> list[TextResult] | None:
        """Run ``sql`` on a connection to each shard and read each whole result; None when a connection could not
        be had or was lost, or (unless ``keep_going``) a shard answered an error: the error is sent."""
        link = self.link
        conns: list[BackendConnection] = []
        for shard in shards:
            conn = await link.borrow(shard.hostgroup_id)
            if conn is None:
                for taken in conns:
                    release(taken)
                return None
            conns.append(conn)
        payload = b"\x03" + sql.encode("utf-8", "surrogateescape")
        settings = self.services.runtime.settings
        timeout_ms = settings.default_query_timeout_ms
        loop = self.client.wire.loop
        timers = []
        for conn in conns:
            conn.wire.send(payload, 0)
            if timeout_ms < NO_TIMEOUT_MS:
                timers.append(loop.call_later(timeout_ms / 1000, link.on_query_timeout, conn))
        began = time.perf_counter()
        answers = await asyncio.gather(*(read_whole_result(conn.wire) for conn in conns), return_exceptions=True)
        for timer in timers:
            timer.cancel()
        elapsed_us = int((time.perf_counter() - began) * 1_000_000)
        results: list[TextResult] = []
        lost: tuple[Shard, BaseException] | None = None
        for shard, conn, answer in zip(shards, conns, answers, strict=True):
            pool = conn.pool
            assert isinstance(pool, ServerPool)
            if isinstance(answer, BaseException):
                if not isinstance(answer, (PeerClosed, ProtocolError, OSError)):
                    raise answer
                link.lose(conn, pool)
                lost = lost or (shard, answer)
                continue
            pool.queries += 1
            pool.latency_us += (elapsed_us - pool.latency_us) >> 3
            if answer.error is None:
                conn.status = answer.status
            else:
                await conn.settle(Response(STATUS_UNKNOWN, answer.error))
            release(conn, reusable=not conn.in_transaction)
            results.append(answer)
        if lost is not None:
            shard, exc = lost
            self.client.send_error(
                ErrorCode.BACKEND_LOST,
                f"Lost connection to shard {shard.number} (hostgroup {shard.hostgroup_id}) during query: {exc}",
            )
            return None
        if not keep_going:
            for result in results:
                if result.error is not None:
                    self.client.send_error(result.error.code, result.error.message, 1, result.error.sqlstate)
                    return None
        return results
