"""Mirroring: statements that query rules mark are run again on a mirror hostgroup, their results thrown away.

A rule's ``mirror_hostgroup`` (or ``mirror_flagOUT``: the mirror's hostgroup and text come from the rules that
start at that flag, ProxySQL's chain) asks for a mirror. The mirror hostgroup decides the mode:

* **ProxySQL mode** (every hostgroup not in ``mysql-mirror_ordered_hostgroups``), ProxySQL's semantics: each
  text-protocol statement below 15 MB is copied with the session's user and schema and run on any pooled connection
  of the hostgroup, in no particular order and outside any transaction. At most ``mysql-mirror_max_concurrency``
  run at once; up to ``mysql-mirror_max_queue_length`` wait in a queue per worker, and what comes when it is full
  is dropped. Unlike ProxySQL every drop is counted, by reason: ``queue_full``, ``too_large``,
  ``prepared_statement`` (ProxySQL does not mirror them either), ``blocked_by_rule``, ``shutdown``.
* **Ordered mode** (ProxyFleet's own): each client session's mirrored statements run on the mirror in the
  session's order, one mirror connection per session at a time (its *lane*), and only once the primary has
  committed them: statements of a transaction (``BEGIN`` or ``autocommit=0``, savepoints included) are buffered
  in the session until it ends; a commit (or an implicit one) queues them as one unit that the lane runs inside
  ``START TRANSACTION ... COMMIT``, a rollback (or a lost primary connection) throws them away. Prepared
  statements are replayed as prepared statements with the same parameters. A lane brings its connection to the
  session's state (schema, character set, session and user variables) before each statement and replays a
  generated ``AUTO_INCREMENT`` value with ``SET insert_id``. Units wait in memory up to
  ``mysql-mirror_ordered_max_memory``; beyond it a lossless hostgroup spills them to a durable queue on disk
  (``proxyapp.mirror.spill``) and never drops, a lossy one drops them (``memory_full``). A mirror that is down is
  retried with backoff and caught up when it returns; a deadlock on the mirror re-runs the unit; a graceful
  stop writes what is still in memory to disk and the next start resumes it.

What ordered mode cannot promise (docs/mirroring.md): order *between* sessions (lanes run concurrently), values of
nondeterministic functions (``UUID()``, ``NOW()``, ``RAND()``), statements the scanner cannot follow (XA,
savepoints inside a multi-statement packet), and exactly-once across a lost mirror connection: a unit whose
``COMMIT`` was sent when the connection broke is run again (counted in ``retried``), so a statement that is not
idempotent may apply twice; with explicit keys or replayed ``insert_id`` the second run fails as a duplicate.

Counters (``snapshot()``, merged over workers by ``report.merge.merge_mirror_sections``): statements ``mirrored``
(handed over; in ordered mode once committed), ``completed``, ``failed`` by error code (2013: the mirror connection
broke; 9001: no mirror connection), ``dropped`` by reason, ``retried`` units, the queue (ProxySQL queue, ordered in
memory and on disk), concurrency, and the age of the oldest waiting statement; the ProxySQL-style gauges and totals
are kept in ``GlobalCounters`` (``Mirror_*``).

Its parts: a session's tap (``tap``), what the mirror runs, in memory and on disk (``units``), a lane's state
machine (``lanes``), the ordered mode's lanes and their turns (``ordered``), the spill queue (``spill``), ProxySQL's
mode (``proxysql_mode``), the counts (``counts``). Here, the facade the proxy sees: the listener that hears the
sessions and picks the mode from the rules' verdict, ProxySQL mode's queue, and the runners both modes share.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from pathlib import Path
from typing import Any

from proxyapp.backends.pool import PoolManager
from proxyapp.config.document import Config
from proxyapp.config.variables import ordered_mirror_hostgroups
from proxyapp.mirror.counts import MirrorCounts
from proxyapp.mirror.lanes import WAITING
from proxyapp.mirror.ordered import OrderedLanes
from proxyapp.mirror.proxysql_mode import PROXYSQL_MAX_PACKET, ProxysqlEntry, run_entry
from proxyapp.mirror.tap import MirrorTap, insert_id, replayable
from proxyapp.mirror.units import EXECUTE, QUERY, MirrorOp
from proxyapp.mysql.packets import query_payload
from proxyapp.report.stats import GlobalCounters
from proxyapp.rules.engine import QueryContext, RuleEngine, RuleOutcome
from proxyapp.session.events import QueryDone, SessionListener
from proxyapp.session.prepared import ClientStatement, bind_types
from proxyapp.sql.digest import compute_digest
from proxyapp.tasks import spawn

log = logging.getLogger("proxyapp.mirror.mirror")

#: Seconds a stop waits for the units being run to finish before it cancels them.
STOP_WAIT = 5.0


class Mirror(SessionListener):
    """A worker's mirror: it hears the sessions' commands (``query_done``), keeps each followed session's tap,
    queues ProxySQL-mode statements, hands ordered-mode units to the lanes (``ordered``), and runs both on at most
    ``mysql-mirror_max_concurrency`` runners."""

    def __init__(self, counters: GlobalCounters, pools: PoolManager, worker: int = 0, workers: int = 1) -> None:
        self.counters = counters
        self.pools = pools
        self.workers = workers
        self.counts = MirrorCounts(counters)
        self.ordered = OrderedLanes(self.counts, counters, pools, worker, workers, self._kick)
        self.max_concurrency = 16
        self.max_queue_length = 32000
        self.taps: dict[int, MirrorTap] = {}  # session id -> its ordered-mode state, from its first such mirror on
        self.queue: deque[ProxysqlEntry] = deque()
        self.running = 0
        self.starting = 0  # runners started that have not claimed work yet
        self.stopping = False
        self.tasks: set[asyncio.Task[None]] = set()
        self.rewritten: str | None = None  # the mirror's text when mirror_flagOUT rules rewrote it (``_target``)

    # ------------------------------------------------------------------------------------------- configuration

    def configure(self, config: Config, config_path: Path | None) -> None:
        """Adopt a config's mirror variables and users (the spill directory only before ``start``)."""
        variables = config.variables
        share = max(1, -(-variables.integer("mysql-mirror_max_concurrency") // self.workers))
        self.max_concurrency = share
        self.max_queue_length = variables.integer("mysql-mirror_max_queue_length")
        ordered = self.ordered
        ordered.max_memory = variables.integer("mysql-mirror_ordered_max_memory") // self.workers
        modes = ordered_mirror_hostgroups(variables.text("mysql-mirror_ordered_hostgroups"))
        ordered.lossless = {hostgroup: mode == "lossless" for hostgroup, mode in modes.items()}
        users = config.mysql_users
        ordered.backend_users = {
            u.username: u.password for u in users if u.active and u.backend and u.password[:1] != "*"
        }
        if ordered.spill_dir is None:
            base = config_path.resolve().parent if config_path is not None else Path.cwd() / "var"
            ordered.spill_dir = base / (variables.text("mysql-mirror_spill_dir") or "mirror-queue")
        self._kick()

    async def start(self) -> None:
        """Resume the queue a previous run left on disk, if any."""
        await self.ordered.resume()
        self._gauges()

    async def stop(self) -> None:
        """Let running units finish (up to ``STOP_WAIT`` seconds), keep what waits in memory on disk, close."""
        self.stopping = self.ordered.stopping = True
        tasks = list(self.tasks)
        if tasks:
            _, late = await asyncio.wait(tasks, timeout=STOP_WAIT)
            for task in late:
                task.cancel()
            if late:
                await asyncio.wait(late, timeout=STOP_WAIT)
        if self.queue:
            self.counts.drop("shutdown", len(self.queue), handed=False)
            self.queue.clear()
        await self.ordered.close()

    # ------------------------------------------------------------------------------------------- the tap

    def query_done(self, event: QueryDone) -> bool:
        """A session's command ran on the primary: mirror it if its rules say so, follow the session's transaction
        for ordered mode; whether the session is followed from now on."""
        if event.prepared is None:
            self._after_query(event)
        else:
            self._after_execute(event, event.prepared)
        return event.session_id in self.taps

    def session_reset(self, session_id: int) -> None:
        """A followed session was reset: its open transaction rolled back."""
        tap = self.taps.get(session_id)
        if tap is not None:
            tap.reset()

    def session_ended(self, session_id: int) -> None:
        """A followed session ended: its lanes end once their units ran."""
        tap = self.taps.pop(session_id, None)
        if tap is not None:
            tap.close()

    def _tap(self, session_id: int) -> MirrorTap:
        tap = self.taps.get(session_id)
        if tap is None:
            tap = self.taps[session_id] = MirrorTap(self.ordered, session_id)
        return tap

    def _after_query(self, event: QueryDone) -> None:
        """A text-protocol command: ProxySQL mode copies it; ordered mode buffers it in the session's tap."""
        tap = self.taps.get(event.session_id)
        payload = event.payload
        outcome = event.outcome
        if outcome is None or (outcome.mirror_hostgroup is None and outcome.mirror_flagOUT is None):
            if tap is not None:
                tap.after(event, payload, None)
            return
        hostgroup = self._target(event, outcome, payload)
        if hostgroup < 0:
            if tap is not None:
                tap.after(event, payload, None)
            return
        if self.rewritten is not None:
            payload = query_payload(self.rewritten)
        statements = event.statements
        lossless = self.ordered.lossless.get(hostgroup)
        if lossless is None:
            if tap is not None:
                tap.after(event, payload, None)
            reusable = len(statements) == 1 and statements[0].plain and outcome.mirror_flagOUT is None
            self._proxysql(event, hostgroup, payload, reusable)
            return
        if tap is None:
            tap = self._tap(event.session_id)
        response = event.response
        op = None
        if response is not None and response.error is None and replayable(statements):
            op = MirrorOp(
                QUERY,
                hostgroup,
                payload,
                "",
                [],
                insert_id(statements, response),
                len(statements) == 1 and statements[0].plain,
                tap.context(event.state),
            )
        tap.after(event, payload, op)

    def _after_execute(self, event: QueryDone, stmt: ClientStatement) -> None:
        """A prepared statement was executed: ordered mode replays it; ProxySQL mode does not mirror prepared
        statements (counted as dropped, ``prepared_statement``)."""
        tap = self.taps.get(event.session_id)
        outcome = event.outcome
        hostgroup = -1
        if outcome is not None:
            hostgroup = self._target(event, outcome, stmt.sql)
        lossless = self.ordered.lossless.get(hostgroup) if hostgroup >= 0 else None
        if lossless is None:
            if hostgroup >= 0:
                self.counts.drop("prepared_statement", 1, handed=True)
            if tap is not None:
                tap.after(event, b"", None)
            return
        if tap is None:
            tap = self._tap(event.session_id)
        response = event.response
        op = None
        if response is not None and response.error is None:
            execute = bind_types(event.payload, stmt)
            if len(execute) > 5 and execute[5]:
                execute = execute[:5] + b"\x00" + execute[6:]  # no cursor: the mirror never fetches
            op = MirrorOp(
                EXECUTE,
                hostgroup,
                execute,
                stmt.sql,
                list(stmt.long_data),
                insert_id(stmt.statements, response),
                len(stmt.statements) == 1 and stmt.statements[0].plain,
                tap.context(event.state),
            )
        tap.after(event, b"", op)

    def _target(self, event: QueryDone, outcome: RuleOutcome, query: bytes | str) -> int:
        """The mirror's hostgroup (-1: a rule blocks the mirror). Without ``mirror_flagOUT`` it is the rule's
        ``mirror_hostgroup``; with it, the rules from that flag run on the text and may route and rewrite it (the
        rewritten text is left in ``self.rewritten``, None when unchanged)."""
        self.rewritten = None
        fallback = outcome.mirror_hostgroup if outcome.mirror_hostgroup is not None else event.default_hostgroup
        flag = outcome.mirror_flagOUT
        if flag is None:
            return fallback
        rules: RuleEngine = event.rules
        sql = query if isinstance(query, str) else query[1:].decode("utf-8", "surrogateescape")
        digest = compute_digest(sql) if rules.needs_digest else None
        ctx = QueryContext(
            event.username,
            event.state.schema or "",
            event.client_addr,
            event.proxy_addr,
            event.proxy_port,
            sql,
            digest.hash if digest is not None else "",
            digest.text if digest is not None else "",
        )
        verdict = rules.evaluate(ctx, flag, mirror=True)
        if verdict.error_msg is not None or verdict.OK_msg is not None:
            self.counts.drop("blocked_by_rule", 1, handed=True)
            return -1
        self.rewritten = verdict.query
        return verdict.destination_hostgroup if verdict.destination_hostgroup is not None else fallback

    def _gauges(self) -> None:
        counters = self.counters
        ordered = self.ordered
        counters.Mirror_concurrency = self.running
        counters.Mirror_queue_length = len(self.queue) + ordered.memory_ops + ordered.disk_ops
        counters.Mirror_queue_disk_length = ordered.disk_ops

    # ------------------------------------------------------------------------------------------- the runners

    def _proxysql(self, event: QueryDone, hostgroup: int, payload: bytes, reusable: bool) -> None:
        self.counts.handed(1)
        if len(payload) >= PROXYSQL_MAX_PACKET:
            self.counts.drop("too_large", 1, handed=False)
            return
        entry = ProxysqlEntry(hostgroup, event.credentials, event.state.schema, payload, reusable)
        if self.stopping:
            self.counts.drop("shutdown", 1, handed=False)
        elif not self.queue and self.running < self.max_concurrency:
            self._start_runner(entry)
        elif len(self.queue) >= self.max_queue_length:
            self.counts.drop("queue_full", 1, handed=False)
        else:
            self.queue.append(entry)
            self.counters.Mirror_queue_length += 1

    def _kick(self) -> None:
        """Start runners while there is work no runner has claimed yet and a free slot."""
        while (
            not self.stopping
            and self.running < self.max_concurrency
            and len(self.ordered.ready) + len(self.queue) > self.starting
        ):
            self._start_runner(None)

    def _start_runner(self, first: ProxysqlEntry | None) -> None:
        self.running += 1
        if first is None:
            self.starting += 1
        self.counters.Mirror_concurrency = self.running
        spawn(self._runner(first), self.tasks, "a mirror runner", self.pools.loop())

    async def _runner(self, first: ProxysqlEntry | None) -> None:
        """Run work until there is none: ProxySQL-mode entries and lanes' turns, alternately."""
        claimed = first is not None
        try:
            if first is not None:
                await self._entry_turn(first)
            lanes_turn = True
            while not self.stopping:
                if self.ordered.ready and (lanes_turn or not self.queue):
                    lane = self.ordered.ready.popleft()
                    if not claimed:
                        claimed = True
                        self.starting -= 1
                    await self.ordered.turn(lane)
                elif self.queue:
                    entry = self.queue.popleft()
                    self.counters.Mirror_queue_length -= 1
                    if not claimed:
                        claimed = True
                        self.starting -= 1
                    await self._entry_turn(entry)
                else:
                    break
                lanes_turn = not lanes_turn
        finally:
            if not claimed:
                self.starting -= 1
            self.running -= 1
            self.counters.Mirror_concurrency = self.running

    async def _entry_turn(self, entry: ProxysqlEntry) -> None:
        """Run a ProxySQL-mode entry; an unexpected failure (a bug) is logged and counted as a drop."""
        try:
            await run_entry(entry, self.pools, self.counts)
        except Exception as exc:
            log.exception("mirror: a mirrored statement failed in the proxy")
            self.counts.last_error = f"internal error: {exc!r} (see the proxy log)"
            self.counts.drop("internal_error", 1, handed=False)

    # ------------------------------------------------------------------------------------------- statistics

    def oldest_age(self, now: float) -> float:
        """Seconds the oldest waiting statement has waited (0 when none waits)."""
        oldest = self.ordered.oldest(now)
        if self.queue:
            oldest = min(oldest, self.queue[0].created)
        return max(0.0, now - oldest)

    def snapshot(self) -> dict[str, Any]:
        """The mirror's counters for ``/stats`` (``mirror``); also refreshes the ``Mirror_*`` gauges."""
        age = self.oldest_age(time.time())
        self._gauges()
        self.counters.Mirror_oldest_entry_age_ms = int(age * 1000)
        counts = self.counts
        ordered = self.ordered
        waiting = [lane for lane in ordered.lanes.values() if lane.state == WAITING]
        return {
            "mirrored": counts.mirrored,
            "completed": counts.completed,
            "failed": {str(code): n for code, n in sorted(counts.failed.items())},
            "dropped": dict(sorted(counts.dropped.items())),
            "retried": counts.retried,
            "concurrency": self.running,
            "max_concurrency": self.max_concurrency,
            "queue_length": len(self.queue) + ordered.memory_ops + ordered.disk_ops,
            "queue_proxysql": len(self.queue),
            "queue_memory": ordered.memory_ops,
            "queue_disk": ordered.disk_ops,
            "memory_bytes": ordered.memory,
            "memory_limit": ordered.max_memory,
            "oldest_age_s": round(age, 3),
            "lanes": len(ordered.lanes),
            "lanes_waiting": len(waiting),
            "last_error": next((lane.error for lane in waiting if lane.error), counts.last_error),
            "ordered_hostgroups": {
                str(hg): "lossless" if lossless else "lossy" for hg, lossless in sorted(ordered.lossless.items())
            },
            "spill_path": str(ordered.store.path) if ordered.store is not None else "",
        }
