"""What a session's statements leave on record once they ran or were answered: the digest statistics (and the slow
count), the sharding statistics, the listener (the mirror and whoever follows the session), the search for hot rows
and the events log. Nothing here changes what the client gets.
"""

from __future__ import annotations

import time

from proxyapp.clock import MONOTONIC
from proxyapp.mysql.constants import ErrorCode
from proxyapp.mysql.wire import Response
from proxyapp.report.eventslog import query_event
from proxyapp.report.stats import DigestMemo
from proxyapp.rules.engine import RuleOutcome
from proxyapp.session.client import Client
from proxyapp.session.events import QueryDone
from proxyapp.session.link import BackendLink
from proxyapp.session.prepared import ClientStatement
from proxyapp.session.services import SessionServices
from proxyapp.session.state import SessionState
from proxyapp.sql.digest import Digest
from proxyapp.sql.scan import Statement


class QueryAccounting:
    """One session's record keeping, shared by its text and prepared statements."""

    def __init__(
        self, services: SessionServices, client: Client, state: SessionState, link: BackendLink, session_id: int
    ) -> None:
        self.services = services
        self.client = client
        self.state = state
        self.link = link
        self.session_id = session_id
        self.digest_memo = DigestMemo()  # its entries in the digest statistics (``DigestStats.record``)
        self.followed = False  # the listener hears every command of this session (it said so)

    def record(
        self, hostgroup: int, digest: Digest, started: float, rows: int, affected: int, ended: float = 0.0
    ) -> int:
        """Count a statement in the digest statistics (and as slow, past ``mysql-long_query_time``); the µs it
        took, from ``started`` to ``ended`` (``MONOTONIC``; 0: now). ``hostgroup`` -1: the proxy answered it."""
        if not ended:
            ended = MONOTONIC()
        elapsed_us = int((ended - started) * 1_000_000)
        services = self.services
        if elapsed_us > services.runtime.settings.long_query_time_ms * 1000:
            services.counters.Slow_queries += 1
        if services.runtime.settings.query_digests:
            services.digests.record(
                hostgroup,
                self.state.schema or "",
                self.client.username,
                self.client.addr,
                digest.hash,
                digest.text,
                elapsed_us,
                rows,
                affected,
                ended,
                self.digest_memo,
            )
        return elapsed_us

    def record_sharded(self, digest: Digest, shards: int, merge_rows: int = 0, merge_us: int = 0) -> None:
        """Count a statement on sharded tables in the sharding statistics (``shards`` 0: refused)."""
        if self.services.runtime.settings.query_digests:
            self.services.sharding.record(
                self.state.schema or "", digest.hash, digest.text, shards, merge_rows, merge_us
            )

    def tell(
        self,
        payload: bytes,
        statements: list[Statement],
        outcome: RuleOutcome | None,
        response: Response | None,
        prepared: ClientStatement | None,
    ) -> None:
        """Tell the listener that a command ran (``prepared``: an execution of it)."""
        client = self.client
        done = QueryDone(
            self.session_id,
            client.username,
            client.credentials,
            client.addr,
            client.proxy_addr,
            client.proxy_port,
            client.default_hostgroup,
            self.state,
            self.link.in_transaction,
            self.services.runtime.rules,
            payload,
            statements,
            outcome,
            response,
            prepared,
        )
        self.followed = self.services.listener.query_done(done)

    def heat_mark(self, elapsed_us: int, response: Response) -> int:
        """A hot row's mark on a statement that took ``elapsed_us``: its error 1213 or 1205, 0 for a run of
        ``mysql-trx_queue_heat_slow_ms`` or more; -1 for none."""
        code = response.error.code if response.error is not None else 0
        if code in (ErrorCode.LOCK_DEADLOCK, ErrorCode.LOCK_WAIT_TIMEOUT):
            return code
        return 0 if elapsed_us >= self.services.hot_rows.settings.slow_ms * 1000 else -1

    def look_for_heat(self, sql: str, digest: Digest, elapsed_us: int, response: Response) -> None:
        """Tell the search for hot keys (``proxyapp.hotrows.heat``) about a write or locking read that was not
        queued when it bore a hot row's mark (``heat_mark``)."""
        mark = self.heat_mark(elapsed_us, response)
        if mark >= 0:
            self.services.heat.observe(sql, self.state.schema or "", digest.hash, digest.text, mark)

    def log_event(self, hostgroup: int, digest: str, sql: str, started: float, response: Response | None) -> None:
        """Append a query to the events log (rule ``log=1`` or ``mysql-eventslog_default_log``)."""
        error = None
        if response is None:
            error = "ProxyFleet error (sent to the client)"
        elif response.error is not None:
            error = f"{response.error.code}: {response.error.message}"
        link = self.link
        last = link.last_pool
        self.services.events.write(
            query_event(
                username=self.client.username,
                schemaname=self.state.schema or "",
                client=f"{self.client.addr}",
                hostgroup=hostgroup,
                server=f"{last.server.hostname}:{last.server.port}" if last is not None else "",
                digest=digest,
                query=sql,
                thread_id=self.session_id,
                started=time.time() - (MONOTONIC() - started),
                rows_sent=response.rows if response else 0,
                rows_affected=response.affected_rows if response else 0,
                last_insert_id=link.last_insert_id,
                error=error,
            )
        )
