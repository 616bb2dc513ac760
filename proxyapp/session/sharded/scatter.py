"""A statement over several shards for one session: it runs on a connection to each shard side by side, then its
results merge into one (a SELECT, ``proxyapp.sharding.merge``), or its outcome is told shard by shard (DDL), or
(a write) it commits on every shard or none as one XA transaction (``proxyapp.sharding.xa``).

Each connection is borrowed from its shard's hostgroup and brought to the session's state like any other, and
given back after the statement; in the session's transaction over shards (``sharded.transactions``), the statement
runs on the transaction's branches instead, a write inside a savepoint, and they stay with it.
The query timeout applies to each shard's statement; a shard's error is the statement's error.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from dataclasses import dataclass

from proxyapp.backends.pool import ServerPool
from proxyapp.config.tables import MysqlServer
from proxyapp.config.variables import NO_TIMEOUT_MS
from proxyapp.mysql.backend import BackendConnection
from proxyapp.mysql.constants import ErrorCode
from proxyapp.mysql.packets import ErrPacket, OkPacket, ProtocolError, ok_packet, query_payload
from proxyapp.mysql.resultset import TextResult, binary_result_set_of, read_whole_result, result_set_of
from proxyapp.mysql.wire import STATUS_UNKNOWN, PeerClosed, Response
from proxyapp.session.client import Client
from proxyapp.session.link import BackendLink, release
from proxyapp.session.services import SessionServices
from proxyapp.session.sharded.transactions import ROLLED_BACK, STATEMENT_SAVEPOINT, ShardTransaction
from proxyapp.sharding.gather import MAX_ROWS, Gather, Refused
from proxyapp.sharding.merge import merge
from proxyapp.sharding.okinfo import summed_info
from proxyapp.sharding.physical import default_schema, rewrite
from proxyapp.sharding.shardmap import Shard
from proxyapp.sharding.xa import Branch, client_code, commit, rollback, xa_start_sql

log = logging.getLogger("proxyapp.session.sharded.scatter")


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
        # The session's transaction over shards, when the statement runs in one (on its branches, kept after).
        self.held: ShardTransaction | None = None
        self.doomed: list[BackendConnection] = []  # branches the statement's deadlock rolled back (``held``)

    async def read(
        self,
        shards: tuple[Shard, ...],
        plan: Gather,
        status: int,
        select_limit: str | None = None,
        binary: bool = False,
    ) -> Scattered | None:
        """Run ``plan``'s statement on ``shards`` and send the merged result, capped by the session's
        ``select_limit`` (its sql_select_limit as set; None: not set) when the SELECT has no LIMIT, a
        binary-protocol one if ``binary`` (None: an error was sent)."""
        try:
            cap = rows_cap(select_limit) if plan.limit is None else None
        except Refused as refused:
            self.client.send_error(ErrorCode.NOT_SUPPORTED, f"ProxyFleet sharding does not support {refused} yet")
            return None
        results = await self._run(shards, plan.sql, in_order=_LOCKING.search(plan.sql) is not None)
        if results is None:
            return None
        began = time.perf_counter()
        try:
            merged = merge(plan, results, cap)
        except Refused as refused:
            self.client.send_error(ErrorCode.NOT_SUPPORTED, f"ProxyFleet sharding does not support {refused} yet")
            return None
        if binary:
            self.client.wire.write(binary_result_set_of(merged.columns, merged.rows, status, merged.warnings))
        else:
            self.client.wire.write(
                result_set_of([c.payload for c in merged.columns], merged.rows, status, merged.warnings)
            )
        return Scattered(len(merged.rows), int((time.perf_counter() - began) * 1_000_000))

    async def everywhere(self, shards: tuple[Shard, ...], sql: str, status: int, what: str) -> Scattered | None:
        """Run a DDL statement ``sql`` on every shard of ``shards``; OK when all did, else an error that tells
        each shard's outcome (None: an error was sent)."""
        results = await self._run(shards, sql, keep_going=True)
        if results is None:
            return None
        failed = [(shard, result) for shard, result in zip(shards, results, strict=True) if result.error is not None]
        if not failed:
            oks = [result.ok for result in results if result.ok is not None]
            affected, warnings = sum(ok.affected_rows for ok in oks), sum(ok.warnings for ok in oks)
            info = summed_info(oks, [sql] * len(oks))
            self.client.wire.send(ok_packet(affected, 0, status, warnings, info), 1)
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

    async def write(
        self, statements: list[tuple[Shard, str]], first: Shard, status: int, what: str, copies: bool = False
    ) -> Scattered | None:
        """Run a write over several shards, each shard its statement, as one XA transaction: committed on all of
        them or none (``proxyapp.sharding.xa``); an OK whose counts add up the shards', whose insert id is shard
        ``first``'s (the statement's first row). ``copies``: the shards hold copies of one global table, the OK is
        ``first``'s, and copies that answer differently roll the write back (``copies_differ``). None: an error
        was sent, and nothing was written."""
        if self.held is not None:
            return await self._write_within(statements, first, status, what, copies)
        coordinator = self.services.xa
        if coordinator is None:
            self.client.send_error(
                ErrorCode.ERROR_ON_WRITE,
                f"ProxyFleet sharding: {what} over several shards needs the XA decision log, which could not be "
                f"opened: {self.services.xa_error}",
            )
            return None
        shards = [shard for shard, _ in statements]
        conns = await self._borrow(shards)
        if conns is None:
            return None
        xid = coordinator.log.new_xid()
        branches = [
            Branch(shard.number, f"{_server(conn).hostname}:{_server(conn).port}", conn)
            for shard, conn in zip(shards, conns, strict=True)
        ]
        opened = await self._ask(conns, [xa_start_sql(xid, shard.number) for shard in shards])
        for conn, answer in zip(conns, opened, strict=True):
            if isinstance(answer, TextResult) and answer.error is None:
                conn.xa = xid
        answers = opened
        if all(isinstance(a, TextResult) and a.error is None for a in opened):
            answers = await self._ask(conns, [rewrite(sql, shard) for shard, sql in statements], in_order=True)
        failed = self._failure(shards, answers)
        if failed is None and copies:
            differ = copies_differ(shards, [a.ok for a in answers if isinstance(a, TextResult)])
            if differ:
                failed = (ErrorCode.ERROR_DURING_COMMIT, f"ProxyFleet sharding: {what} was rolled back: {differ}", None)
        if failed is None:
            outcome = await commit(branches, xid, coordinator.log)
            if not outcome.committed:
                assert outcome.failure is not None
                failed = (outcome.failure.code, f"ProxyFleet sharding: {what} was rolled back: {outcome.failure}", None)
        else:
            await rollback(branches, xid)
        for branch, answer in zip(branches, answers, strict=True):
            # A branch its server rolled back (a deadlock) is closed, as ``ShardTransaction.finish`` closes one.
            release(branch.conn, reusable=branch.reusable and not _rolled_back(answer))
        if failed is not None:
            code, message, sqlstate = failed
            told = client_code(code)
            self.client.send_error(told, message, 1, sqlstate if told == code else None)
            return None
        return self._written(statements, answers, first, status, copies)

    async def _write_within(
        self, statements: list[tuple[Shard, str]], first: Shard, status: int, what: str, copies: bool
    ) -> Scattered | None:
        """``write`` in the session's transaction over shards: on its branches, inside a savepoint on each, so
        that a shard's error undoes the others' part of the statement (as one server undoes a failed statement)."""
        shards = [shard for shard, _ in statements]
        conns = await self._borrow(shards)
        if conns is None:
            return None
        answers = await self._ask(conns, [f"SAVEPOINT {STATEMENT_SAVEPOINT}"] * len(conns))
        if all(isinstance(a, TextResult) and a.error is None for a in answers):
            answers = await self._ask(conns, [rewrite(sql, shard) for shard, sql in statements], in_order=True)
        failed = self._failure(shards, answers)
        if failed is None and copies:
            differ = copies_differ(shards, [a.ok for a in answers if isinstance(a, TextResult)])
            if differ:
                failed = (ErrorCode.ERROR_DURING_COMMIT, f"ProxyFleet sharding: {what} was undone: {differ}", None)
        if failed is None:
            return self._written(statements, answers, first, status, copies)
        self.doomed = [c for c, a in zip(conns, answers, strict=True) if _rolled_back(a)]
        done = [c for c, a in zip(conns, answers, strict=True) if isinstance(a, TextResult) and a.error is None]
        if done:
            await self._ask(done, [f"ROLLBACK TO SAVEPOINT {STATEMENT_SAVEPOINT}"] * len(done))
        code, message, sqlstate = failed
        self.client.send_error(code, message, 1, sqlstate)
        return None

    def _written(
        self, statements: list[tuple[Shard, str]], answers: list[TextResult | BaseException], first: Shard,
        status: int, copies: bool,
    ) -> Scattered:  # fmt: skip
        """Send the OK of a write the shards all did (``write``), its info the sum of theirs (``summed_info``)."""
        shards = [shard for shard, _ in statements]
        told = [
            (a.ok, sql) for (shard, sql), a in zip(statements, answers, strict=True)
            if isinstance(a, TextResult) and a.ok is not None and (shard == first or not copies)
        ]  # fmt: skip
        oks = [ok for ok, _ in told]
        last_insert_id = next(
            (a.ok.last_insert_id for shard, a in zip(shards, answers, strict=True)
             if shard == first and isinstance(a, TextResult) and a.ok is not None),
            0,
        )  # fmt: skip
        if last_insert_id:
            self.link.last_insert_id = last_insert_id
        affected = sum(ok.affected_rows for ok in oks)
        warnings = sum(ok.warnings for ok in oks)
        info = summed_info(oks, [sql for _, sql in told])
        self.client.wire.send(ok_packet(affected, last_insert_id, status, warnings, info), 1)
        return Scattered(affected, 0)

    def _failure(
        self, shards: list[Shard], answers: list[TextResult | BaseException]
    ) -> tuple[int, str, str | None] | None:
        """The error to tell of a write's branches (a lost connection, else the first shard's error), or None."""
        for shard, answer in zip(shards, answers, strict=True):
            if isinstance(answer, BaseException):
                return (
                    ErrorCode.BACKEND_LOST,
                    f"Lost connection to shard {shard.number} (hostgroup {shard.hostgroup_id}) during query: {answer}",
                    None,
                )
        for answer in answers:
            if isinstance(answer, TextResult) and answer.error is not None:
                return answer.error.code, answer.error.message, answer.error.sqlstate
        return None

    async def _run(
        self, shards: tuple[Shard, ...], sql: str, keep_going: bool = False, in_order: bool = False
    ) -> list[TextResult] | None:
        """Run ``sql`` on a connection to each shard and read each whole result; None when a connection could not
        be had or was lost, or (unless ``keep_going``) a shard answered an error: the error is sent."""
        conns = await self._borrow(list(shards))
        if conns is None:
            return None
        answers = await self._ask(conns, [rewrite(sql, shard) for shard in shards], in_order)
        results: list[TextResult] = []
        lost: tuple[Shard, BaseException] | None = None
        for shard, conn, answer in zip(shards, conns, answers, strict=True):
            if isinstance(answer, BaseException):
                self._give_back(conn, reusable=False)
                lost = lost or (shard, answer)
                continue
            if answer.error is not None:
                await conn.settle(Response(STATUS_UNKNOWN, answer.error))
                if _rolled_back(answer):
                    self.doomed.append(conn)
            self._give_back(conn, reusable=not conn.in_transaction)
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

    def _give_back(self, conn: BackendConnection, reusable: bool) -> None:
        """Release a borrowed connection (a branch of the session's transaction stays with it)."""
        if self.held is None:
            release(conn, reusable)

    async def _borrow(self, shards: list[Shard]) -> list[BackendConnection] | None:
        """A connection to each shard, brought to the session's state (in the shard's physical schema where it
        renames the session's); None after sending the error (none kept). In the session's transaction over
        shards, its branches (``QueryPipeline`` opened them)."""
        link = self.link
        schema = link.state.schema
        if self.held is not None:
            held = self.held
            branches = [
                link.conn if shard.hostgroup_id == held.home.hostgroup_id and link.conn is not None
                else held.others[shard.hostgroup_id].conn
                for shard in shards
            ]  # fmt: skip
            for shard, branch in zip(shards, branches, strict=True):
                err = await link.sync(branch, default_schema(shard, schema))
                if err is not None:
                    self.client.send_error(err.code, err.message)
                    return None
            return branches
        conns: list[BackendConnection] = []
        for shard in shards:
            conn = await link.borrow(shard.hostgroup_id, default_schema(shard, schema))
            if conn is None:
                for taken in conns:
                    release(taken)
                return None
            conns.append(conn)
        return conns

    async def _ask(
        self, conns: list[BackendConnection], sqls: list[str], in_order: bool = False
    ) -> list[TextResult | BaseException]:
        """Send each connection its statement at once and read the whole results, under the query timeout; a
        connection lost (its exception in the list) is closed, to be given back as not reusable. ``in_order``:
        one shard after the other, in the order given (the shards' order), stopping at the first that fails (the
        rest answer ``NOT_RUN``): statements that take locks, so that two of them never wait for each other on two
        shards at once, a deadlock no server could see."""
        if in_order:
            answers: list[TextResult | BaseException] = []
            for conn, sql in zip(conns, sqls, strict=True):
                failed = answers and (isinstance(answers[-1], BaseException) or answers[-1].error is not None)
                answers.extend([NOT_RUN] if failed else await self._ask([conn], [sql]))
            return answers
        link = self.link
        timeout_ms = self.services.runtime.settings.default_query_timeout_ms
        loop = self.client.wire.loop
        timers = []
        for conn, sql in zip(conns, sqls, strict=True):
            conn.wire.send(query_payload(sql), 0)
            if timeout_ms < NO_TIMEOUT_MS:
                timers.append(loop.call_later(timeout_ms / 1000, link.on_query_timeout, conn))
        began = time.perf_counter()
        answers = await asyncio.gather(*(read_whole_result(conn.wire) for conn in conns), return_exceptions=True)
        for timer in timers:
            timer.cancel()
        elapsed_us = int((time.perf_counter() - began) * 1_000_000)
        for conn, answer in zip(conns, answers, strict=True):
            pool = conn.pool
            assert isinstance(pool, ServerPool)
            if isinstance(answer, BaseException):
                if not isinstance(answer, (PeerClosed, ProtocolError, OSError)):
                    raise answer
                conn.wire.close()
                continue
            pool.queries += 1
            pool.latency_us += (elapsed_us - pool.latency_us) >> 3
            if answer.error is None:
                conn.status = answer.status
        return answers


def rows_cap(select_limit: str | None) -> int | None:
    """The most rows a SELECT without LIMIT returns under the session's sql_select_limit set to ``select_limit``
    (None: not set, or DEFAULT: no cap); ``Refused`` for an expression the proxy does not evaluate."""
    if select_limit is None or select_limit.strip().upper() == "DEFAULT":
        return None
    if not select_limit.strip().isdigit():
        raise Refused(f"sql_select_limit = {select_limit} (only a number or DEFAULT) over several shards")
    return min(int(select_limit), MAX_ROWS)  # the server takes a larger one as the largest


def _rolled_back(answer: TextResult | BaseException) -> bool:
    """Whether ``answer`` is an error after which the server rolled its transaction back (a deadlock)."""
    return isinstance(answer, TextResult) and answer.error is not None and answer.error.code in ROLLED_BACK


def _server(conn: BackendConnection) -> MysqlServer:
    pool = conn.pool
    assert isinstance(pool, ServerPool)
    return pool.server


#: The answer of a shard a statement run ``in_order`` did not reach (an earlier shard failed).
NOT_RUN = TextResult(error=ErrPacket(ErrorCode.QUERY_INTERRUPTED, "70100", "not run: an earlier shard failed"))
#: A SELECT that locks the rows it reads.
_LOCKING = re.compile(r"\bFOR\s+(UPDATE|SHARE)\b|\bLOCK\s+IN\s+SHARE\s+MODE\b", re.IGNORECASE)


def copies_differ(shards: list[Shard], oks: list[OkPacket | None]) -> str:
    """Why the copies of a global table answered a write differently (their rows changed, insert ids or info
    counts differ: the copies already differ, and the write would keep them apart), or "" when they agree."""
    told = [(ok.affected_rows, ok.last_insert_id, ok.info) if ok is not None else None for ok in oks]
    if all(t == told[0] for t in told):
        return ""
    answers = "; ".join(
        f"shard {shard.number}: " + (f"{t[0]} rows affected, insert id {t[1]}" if t is not None else "no OK")
        for shard, t in zip(shards, told, strict=True)
    )
    return f"the copies of the global table answered differently ({answers}); they need repair"
