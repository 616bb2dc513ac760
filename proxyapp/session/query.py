"""The COM_QUERY pipeline, in three steps: decide, carry out, account.

A query is analyzed once (``sql.analysis``: its statements and digest) and the rules give their verdict
(``rules.engine``); what the proxy does with it is decided by the pure functions of ``session.decide`` (answer it
here, or run it on a hostgroup that ``session.route`` picks), carried out here (the query cache, the hot-row queue, a
sharded table's shard through ``sharded.router``, then the backend through the link), and what ran is left on record
by ``session.accounting`` (digest statistics, the listener, the hot-row search, the events log).
"""

from __future__ import annotations

import asyncio
from typing import Final

from proxyapp.mysql.backend import BackendConnection
from proxyapp.mysql.constants import ErrorCode, FieldType
from proxyapp.mysql.packets import load_byte_work, query_payload
from proxyapp.mysql.resultset import result_set
from proxyapp.mysql.wire import Response, Wire
from proxyapp.rules.engine import QueryContext, RuleOutcome
from proxyapp.session.accounting import QueryAccounting
from proxyapp.session.client import Client, server_status
from proxyapp.session.decide import Act, Verdict, decide, screen
from proxyapp.session.kill import KillRefused, carry_out, parse_kill
from proxyapp.session.link import BackendLink, CacheKey
from proxyapp.session.relay import Forward, InfileAbandoned
from proxyapp.session.route import route
from proxyapp.session.services import SessionServices
from proxyapp.session.sharded.router import ShardRouter
from proxyapp.session.state import Pin, SessionState
from proxyapp.session.trxqueue import NO_KEYS, QueueKey, TransactionQueue
from proxyapp.sql.analysis import analyze
from proxyapp.sql.digest import Digest
from proxyapp.sql.scan import Statement, scan

_WARNING_QUERIES = ("SHOW WARNINGS", "SHOW ERRORS", "SHOW COUNT")
#: A command's text, decoded from its payload with no slice made first (``_bytes.text``, or its Python twin).
_TEXT: Final = load_byte_work()[5]
#: The verdict when no rule can apply (shared: never modified).
NO_RULES: Final = RuleOutcome()


class QueryPipeline:
    """COM_QUERY for one session, and the steps COM_STMT_PREPARE and COM_STMT_EXECUTE share with it."""

    def __init__(
        self, services: SessionServices, client: Client, state: SessionState, link: BackendLink, session_id: int
    ) -> None:
        self.services = services
        self.client = client
        self.state = state
        self.link = link
        self.session_id = session_id
        self.flag_in = 0  # the rules' flagIN for the next statement (a rule's next_query_flagIN sets it)
        #: How a statement runs on its backend: sent as it is, its response relayed, a LOCAL INFILE request answered by
        #: ``_relay_infile`` (one for the session, its payload set per statement).
        self.forward = Forward(b"", relay_infile=self._relay_infile)
        self.accounting = QueryAccounting(services, client, state, link, session_id)
        self.sharding = ShardRouter(services, client, state, link, self.accounting)  # statements on sharded tables
        self.queue = TransactionQueue(services, client, link, session_id)  # its place in the hot-row queues
        self.verdict = Verdict()  # ``decide``'s, filled in anew for each query

    async def com_query(self, payload: bytes) -> None:
        """Serve a COM_QUERY."""
        services = self.services
        link = self.link
        rt = services.runtime
        services.counters.Questions += 1
        started = link.arrived
        sql = _TEXT(payload, 1)
        statements, digest, commented = analyze(sql, rt.settings.max_digest_length)
        outcome = self.apply_rules(sql, digest, commented) if statements else NO_RULES
        if outcome.next_query_flagIN is not None:  # ProxySQL: it stays the session's flagIN until a rule changes it
            self.flag_in = outcome.next_query_flagIN
        if outcome.query is not None:
            sql = outcome.query
            payload = query_payload(sql)
            statements = scan(sql) or statements
        act = screen(statements, outcome, self.client.local_files and rt.settings.local_infile)
        if act is not Act.RUN:
            await self.answer(act, sql, outcome, digest, started)
            return
        delay = outcome.delay if outcome.delay is not None else rt.settings.default_query_delay_ms
        if delay:
            await asyncio.sleep(delay / 1000)
        pins = self.state.pins
        if len(pins) and Pin.WARNINGS in pins and not sql.lstrip().upper().startswith(_WARNING_QUERIES):
            pins.discard(Pin.WARNINGS)
            await link.maybe_release()
        sharding = self.sharding if rt.shard_map is not None else None
        if sharding is not None:
            sharding.spanning.check()
            if await sharding.spanning.control(statements, sql):
                self.accounting.record(-1, digest, started, 0, 0)
                return
        verdict = decide(statements, sql, outcome, link.situation(), rt.writer_of, rt.holds_begin, self.verdict)
        hostgroup = services.pools.stand_in(verdict.hostgroup) if verdict.stand_in else verdict.hostgroup
        if verdict.act is not Act.RUN:
            self.answer_held(verdict.act, payload, hostgroup)
            self.accounting.record(-1, digest, started, 1 if verdict.act is Act.LAST_INSERT_ID else 0, 0)
            return
        cache_key: CacheKey | None = None
        if verdict.cacheable:
            cache_key = (self.client.username, self.state.schema or "", payload[1:])
            hit = services.cache.get(cache_key)
            if hit is not None:
                self.client.wire.write(hit)
                self.accounting.record(-1, digest, started, 0, 0)
                return
        keys = NO_KEYS
        if outcome.trx_queue is not None or outcome.annotations or services.heat.applied:
            taken = await self.queue.wait_for(sql, outcome, digest.hash)
            if taken is None:
                self.accounting.record(-1, digest, started, 0, 0)
                return
            keys = taken
        sent = payload
        branch: BackendConnection | None = None  # a branch of the spanning transaction the statement runs on
        physical: str | None = None  # the default schema it runs in on its shard instead of the session's
        if sharding is not None:
            on = await sharding.query(sql, statements[0], hostgroup, digest, started)
            if on is None:
                return
            if on.numbered is not None:  # the statement the shards run, the mirror hears, the events log holds
                sql = on.numbered
                payload = sent = query_payload(sql)
            if on.sql is not None:
                sent = query_payload(on.sql)
            hostgroup, branch, physical = on.hostgroup, on.branch, on.schema
        forward = self.forward
        forward.payload = sent
        response = await link.execute(hostgroup, forward, statements, outcome, cache_key, branch, physical)
        if sharding is not None and sharding.spanning.current is not None:
            await sharding.spanning.after(response.error if response is not None else None, branch)
        self.account(payload, sql, statements, outcome, digest, started, hostgroup, keys, response)

    async def answer(self, act: Act, sql: str, outcome: RuleOutcome, digest: Digest, started: float) -> None:
        """Answer a query ``screen`` did not let run."""
        client = self.client
        if act is Act.EMPTY:
            client.send_error(1065, "Query was empty", 1)
            return
        if act is Act.INFILE_REFUSED:  # as MariaDB refuses it: the backend would ask for a file it cannot have
            client.send_error(
                ErrorCode.LOCAL_INFILE_DISABLED,
                "The used command is not allowed because the MariaDB server or client has disabled the local "
                "infile capability",
                1,
            )
            return
        if act is Act.BLOCKED:
            assert outcome.error_msg is not None
            client.send_error(ErrorCode.RULE_BLOCKED, outcome.error_msg, 1)
        elif act is Act.RULE_OK:
            assert outcome.OK_msg is not None
            client.send_ok(self.status(), outcome.OK_msg.encode())
        else:
            try:
                request = parse_kill(sql)
            except KillRefused as refused:
                client.send_error(ErrorCode.NOT_SUPPORTED, str(refused), 1)
                return
            await carry_out(request, self.session_id, client, self.services, self.status())
        self.accounting.record(-1, digest, started, 0, 0)

    def answer_held(self, act: Act, payload: bytes, hostgroup: int) -> None:
        """Answer what ``decide`` said the proxy answers from what the session holds: LAST_INSERT_ID, a BEGIN held
        back (bound for ``hostgroup``) or the end of one that never ran a statement."""
        link = self.link
        if act is Act.LAST_INSERT_ID:
            self.client.wire.write(result_set([("LAST_INSERT_ID()", FieldType.LONGLONG)], [[link.last_insert_id]]))
            return
        if act is Act.HOLD_BEGIN:
            link.defer(payload, hostgroup)
        else:
            link.end_transaction()
        self.client.send_ok(self.status())

    def account(
        self,
        payload: bytes,
        sql: str,
        statements: list[Statement],
        outcome: RuleOutcome,
        digest: Digest,
        started: float,
        hostgroup: int,
        keys: list[QueueKey],
        response: Response | None,
    ) -> None:
        """Leave a query that ran on record: the listener, the digest statistics, the hot-row search (``keys``: the
        hot-row keys it held, if any), the events log."""
        accounting = self.accounting
        if outcome.mirror_hostgroup is not None or outcome.mirror_flagOUT is not None or accounting.followed:
            accounting.tell(payload, statements, outcome, response, None)
        if response is not None:
            elapsed_us = accounting.record(
                hostgroup, digest, started, response.rows, response.affected_rows, response.ended
            )
            if not keys and not statements[0].is_read:
                accounting.look_for_heat(sql, digest, elapsed_us, response)
        if outcome.log or (outcome.log is None and self.services.runtime.settings.eventslog_default_log):
            accounting.log_event(hostgroup, digest.hash, sql, started, response)

    def status(self) -> int:
        """The session's server status flags, for the proxy's own answers."""
        return server_status(self.state, self.link.in_transaction)

    def apply_rules(self, sql: str, digest: Digest, commented: bool) -> RuleOutcome:
        """The query rules' verdict on ``sql`` for this session, from its current flagIN (``commented``: ``sql`` may
        hold an annotation, ``analyze`` says)."""
        rules = self.services.runtime.rules
        if not rules.active and not commented:  # no rule and no annotation can apply: the shared empty verdict
            return NO_RULES
        client = self.client
        return rules.evaluate(
            QueryContext(
                client.username,
                self.state.schema or "",
                client.addr,
                client.proxy_addr,
                client.proxy_port,
                sql,
                digest.hash,
                digest.text,
            ),
            self.flag_in,
        )

    def route(self, statements: list[Statement], outcome: RuleOutcome) -> int:
        """The hostgroup ``statements`` run in (``route.route`` for this session, its stand-in resolved)."""
        services = self.services
        situation = self.link.situation()
        hostgroup, stand_in = route(statements, outcome.destination_hostgroup, services.runtime.writer_of, situation)
        return services.pools.stand_in(hostgroup) if stand_in else hostgroup

    async def _relay_infile(self, backend: Wire) -> None:
        """Relay a LOAD DATA LOCAL INFILE: the client's file packets go to the backend until the empty one."""
        if not (self.client.local_files and self.services.runtime.settings.local_infile):
            backend.send(b"", backend.seq + 1)
            return
        client = self.client.wire
        await client.drain()
        expected = (backend.seq + 1) & 0xFF  # the file's packets continue the request's numbering
        while True:
            _, length = await client.next_part()
            if client.seq != expected:  # not a file packet: the client gave up (its file is missing) and moved on
                raise InfileAbandoned(client.seq)
            expected = (expected + 1) & 0xFF
            backend.write(client.take())
            if length == 0:
                break
            if backend.transport.get_write_buffer_size() > 1 << 20:
                await backend.drain()
        backend.seq = client.seq
