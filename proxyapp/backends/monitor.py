"""The monitor: ProxySQL's connect, ping, read_only and replication lag checks, and what the proxy concludes from them.

One ``Monitor`` runs per proxy node, in the process that owns the admin endpoint: the proxy itself with one worker,
the supervisor with several (``proxyapp.process.workers``), so that N workers do not check every server N times. Its
conclusions, a ``proxyapp.backends.topology.MonitorState`` (a verdict per server and the writer of each replication
pair),
go to ``publish``, which applies them to the pools (one process) or hands them to every worker (the supervisor);
every process then routes by the same ``runtime_view``.

Each check runs every ``mysql-monitor_<check>_interval`` ms on all its servers at once, each probe bounded by
``mysql-monitor_<check>_timeout`` (a server that accepts TCP and never answers times out, it never hangs a check).
The ping, read_only and lag checks share one persistent connection per server (``mysql-monitor_username``); the
connect check opens a fresh one. Results go to a bounded log per check with ProxySQL's ``mysql_server_*_log``
columns (kept ``mysql-monitor_history`` ms, at most ``MAX_LOG_ROWS`` rows).

What the checks decide:

- SHUNNED after ``mysql-monitor_ping_max_failures`` pings (or connect checks) in a row that could not reach the
  server, or ``mysql-monitor_read_only_max_timeout_count`` such read_only checks (the read_only check runs every
  second, so a dead server of a replication pair is shunned within about 3 s with the defaults, where ProxySQL's
  pings take 24 s); back ONLINE at the first check that reaches it once ``mysql-shun_recovery_time_sec`` passed.
  An error the server answers with (an unknown variable, a missing privilege) is logged, never a reason to shun.
- SHUNNED when the replication lag exceeds the server's ``max_replication_lag`` (the smallest non-zero one of its
  rows) ``mysql-monitor_replication_lag_count`` checks in a row; back when it no longer does. A stopped or broken
  replica (``Seconds_Behind_Master`` NULL) counts as ``mysql-monitor_slave_lag_when_null`` seconds. The lag of
  every server of a replication pair is measured too, limit or not, for the node's report to show it.
- SHUNNED while its latest ping took longer than its ``max_latency_ms`` (the smallest non-zero one of its rows);
  back at the first ping within it. ProxySQL leaves such a server ONLINE and silently skips it; here the status
  and its reason say why no query goes there.
- The writer of each replication pair: the server reporting ``read_only=0``. The one already the writer stays the
  writer while it reports so and is not shunned; another server reporting ``read_only=0`` meanwhile is refused as a
  second writer (logged as an error, kept out of the writer hostgroup). A new writer is picked only when the
  writer is gone (``read_only=1``, or shunned while another server reports ``read_only=0``): the one the config puts
  in the writer hostgroup first, then config order, so every node picks the same.

Why one file of this size: the four checks share the check connections, their schedule and the verdict rules
(shun, recover, lag) they feed, which ``topology.py`` turns into the runtime view.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from proxyapp.backends.pool import OFFLINE_HARD, ONLINE, SHUNNED, server_tls
from proxyapp.backends.topology import Address, MonitorState, ServerVerdict, runtime_view, show_address
from proxyapp.config.document import Config
from proxyapp.config.tables import (
    MysqlReplicationHostgroup,
    MysqlServer,
    PgsqlReplicationHostgroup,
    PgsqlServer,
)
from proxyapp.config.variables import Variables
from proxyapp.mysql.backend import BackendConnection, BackendError, Credentials
from proxyapp.mysql.constants import Command
from proxyapp.mysql.packets import ErrPacket
from proxyapp.mysql.wire import CONNECTION_LOST
from proxyapp.pgsql.auth import ServerSecret
from proxyapp.pgsql.backend import PgConnection, PgError, PgUnreachable

log = logging.getLogger("proxyapp.backends.monitor")

#: The checks, in the order the admin endpoint lists them.
CHECKS = ("connect", "ping", "read_only", "replication_lag")
#: Each check's log columns: ProxySQL's ``monitor.mysql_server_<check>_log``.
LOG_COLUMNS: dict[str, tuple[str, ...]] = {
    "connect": ("hostname", "port", "time_start_us", "connect_success_time_us", "connect_error"),
    "ping": ("hostname", "port", "time_start_us", "ping_success_time_us", "ping_error"),
    "read_only": ("hostname", "port", "time_start_us", "success_time_us", "read_only", "error"),
    "replication_lag": ("hostname", "port", "time_start_us", "success_time_us", "repl_lag", "error"),
}
#: The most rows a check's log keeps, however long ``mysql-monitor_history`` is.
MAX_LOG_ROWS = 10_000
#: How a check is named in a reason ("ping failed 3 times: ...").
_CHECK_NAMES = {
    "connect": "connect check",
    "ping": "ping",
    "read_only": "read_only check",
    "replication_lag": "replication lag check",
}
#: BackendError's code when the server could not be reached at all (refused, timed out, broken handshake).
_NOT_REACHED = 2003

#: A PostgreSQL server's replication lag in seconds: NULL on a primary, 0 while the replica has replayed all it
#: received, -1 when it cannot be told (nothing replayed yet).
_PG_LAG_SQL = (
    "SELECT CASE WHEN NOT pg_is_in_recovery() THEN NULL "
    "WHEN pg_last_wal_receive_lsn() = pg_last_wal_replay_lsn() THEN 0 "
    "ELSE COALESCE(EXTRACT(EPOCH FROM now() - pg_last_xact_replay_timestamp())::int, -1) END"
)

# A SHOW, not a SELECT: the monitor's checks never show up in the servers' Com_select.
_READ_ONLY_SQL = "SHOW GLOBAL VARIABLES WHERE Variable_name IN ('read_only', 'innodb_read_only', 'super_read_only')"


@dataclass(frozen=True, slots=True)
class MonitorSettings:
    """The global variables the monitor follows (intervals and timeouts in ms)."""

    enabled: bool
    username: str
    password: str
    intervals: dict[str, int]
    timeouts: dict[str, int]
    ping_max_failures: int
    read_only_max_failures: int
    lag_count: int
    lag_when_null: int
    history_ms: int
    shun_recovery_time_sec: int
    pgsql_username: str = "monitor"
    pgsql_password: str = "monitor"
    pgsql_dbname: str = "postgres"

    @classmethod
    def from_variables(cls, v: Variables) -> MonitorSettings:
        """Read the ``mysql-monitor_*`` variables (and ``mysql-shun_recovery_time_sec``)."""
        return cls(
            enabled=v.flag("mysql-monitor_enabled"),
            username=v.text("mysql-monitor_username"),
            password=v.text("mysql-monitor_password"),
            intervals={check: v.integer(f"mysql-monitor_{check}_interval") for check in CHECKS},
            timeouts={check: v.integer(f"mysql-monitor_{check}_timeout") for check in CHECKS},
            ping_max_failures=v.integer("mysql-monitor_ping_max_failures"),
            read_only_max_failures=v.integer("mysql-monitor_read_only_max_timeout_count"),
            lag_count=v.integer("mysql-monitor_replication_lag_count"),
            lag_when_null=v.integer("mysql-monitor_slave_lag_when_null"),
            history_ms=v.integer("mysql-monitor_history"),
            shun_recovery_time_sec=v.integer("mysql-shun_recovery_time_sec"),
            pgsql_username=v.text("pgsql-monitor_username"),
            pgsql_password=v.text("pgsql-monitor_password"),
            pgsql_dbname=v.text("pgsql-monitor_dbname"),
        )


class _Unreachable(Exception):
    """A check could not reach the server: it refused, timed out or broke the connection."""


@dataclass(slots=True)
class Outcome:
    """One probe's answer: its value (read_only, lag; None for the others) and the error the server answered, if any."""

    value: Any = None
    error: str | None = None


class _Server:
    """One monitored server: its monitor connection, the latest findings and the counts that decide its status."""

    def __init__(self, address: Address, row: MysqlServer | PgsqlServer) -> None:
        self.address = address
        self.row = row  # a config row of the address (one with use_ssl=1 if any: how it is reached)
        self.conn: BackendConnection | PgConnection | None = None
        self.lock = asyncio.Lock()  # one query at a time on the shared connection
        self.connect_ok: bool | None = None
        self.ping_ok: bool | None = None
        self.read_only: bool | None = None
        self.lag_s: int | None = None
        self.last_error: str | None = None
        self.checked_at: float | None = None
        self.latest: dict[str, tuple[float, int, bool]] = {}  # check -> (time, latency in µs, succeeded)
        self.failures = {"ping": 0, "read_only": 0}  # checks in a row that could not reach the server
        self.lag_over = 0  # lag checks in a row over max_replication_lag
        self.shun_reason: str | None = None  # why it is shunned for being unreachable
        self.shunned_at = 0.0
        self.lag_reason: str | None = None  # why it is shunned for its lag
        self.latency_reason: str | None = None  # why it is shunned for its ping time
        self.recovered = ""  # how it came back ONLINE the last time

    def verdict(self) -> ServerVerdict:
        """Its status as the monitor decides it."""
        reason = self.shun_reason or self.lag_reason or self.latency_reason
        if reason is not None:
            return ServerVerdict(SHUNNED, reason, self.read_only)
        return ServerVerdict(ONLINE, self.recovered, self.read_only)

    def discard(self, conn: BackendConnection | PgConnection | None) -> None:
        """Close ``conn`` and forget it if it is the shared connection (broken, or in an unknown state)."""
        if conn is not None:
            conn.close()
            if self.conn is conn:
                self.conn = None


class Monitor:
    """Checks the servers of the running config and publishes what follows from the results.

    Why one class of ~490 lines: the checks (connect, ping, read_only, replication lag, for MySQL and PostgreSQL),
    their log, the verdicts drawn from them (shunning, lag and latency limits, a replication pair's writer) and the
    rows the admin endpoint shows all read and write the same per-server record (``_Server``); the verdicts are
    published as one ``MonitorState`` that the workers apply (``process.workers``)."""

    def __init__(
        self,
        config: Config,
        publish: Callable[[MonitorState], None],
        clock: Callable[[], float] = time.monotonic,
        *,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.config = config
        self.clock = clock  # what latencies, shunning and recovery count time with (``proxyapp.clock``)
        self.tls = tls  # how servers with use_ssl=1 are reached
        self.settings = MonitorSettings.from_variables(config.variables)
        self.publish = publish
        self.state = MonitorState()
        self.logs: dict[str, deque[dict[str, Any]]] = {check: deque(maxlen=MAX_LOG_ROWS) for check in CHECKS}
        self._servers: dict[Address, _Server] = {}
        self._writers: dict[int, Address] = {}
        self._refused: dict[int, frozenset[Address]] = {}
        self._pgsql_writers: dict[int, Address] = {}  # the PostgreSQL pairs' (their hostgroups are numbered apart)
        self._pgsql_refused: dict[int, frozenset[Address]] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._sync_servers()

    # ------------------------------------------------------------------------------------------- lifecycle

    def start(self) -> None:
        """Start the checks (in the running event loop) if ``mysql-monitor_enabled``."""
        if self.settings.enabled and not self._tasks:
            loop = asyncio.get_running_loop()
            self._tasks = [loop.create_task(self._run(check), name=f"monitor {check}") for check in CHECKS]

    async def stop(self) -> None:
        """Stop the checks and close the monitor connections."""
        tasks = self._cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)

    def _cancel(self) -> list[asyncio.Task[None]]:
        """Cancel the checks and close the monitor connections; returns the cancelled tasks."""
        tasks, self._tasks = self._tasks, []
        for task in tasks:
            task.cancel()
        for server in self._servers.values():
            server.discard(server.conn)
        return tasks

    def reconfigure(self, config: Config, tls: ssl.SSLContext | None = None) -> None:
        """Follow a new config (in the running event loop): its servers, pairs, variables and TLS context; the checks
        start over at once, with what is known of the servers kept."""
        self._cancel()
        self.config = config
        self.tls = tls
        self.settings = MonitorSettings.from_variables(config.variables)
        self._sync_servers()
        pairs = {pair.writer_hostgroup for pair in config.mysql_replication_hostgroups}
        self._writers = {hg: a for hg, a in self._writers.items() if hg in pairs}
        pg_pairs = {pair.writer_hostgroup for pair in config.pgsql_replication_hostgroups}
        self._pgsql_writers = {hg: a for hg, a in self._pgsql_writers.items() if hg in pg_pairs}
        self.conclude()
        self.start()

    def _sync_servers(self) -> None:
        """Monitor every address of the config, MySQL's and PostgreSQL's (except those only OFFLINE_HARD); forget
        the others."""
        wanted: dict[Address, MysqlServer | PgsqlServer] = {}
        rows: list[MysqlServer | PgsqlServer] = [*self.config.mysql_servers, *self.config.pgsql_servers]
        for row in rows:
            if row.status != OFFLINE_HARD and (row.address not in wanted or row.use_ssl):
                wanted[row.address] = row
        for address in list(self._servers):
            if address not in wanted:
                gone = self._servers.pop(address)
                gone.discard(gone.conn)
        for address in sorted(wanted):
            server = self._servers.setdefault(address, _Server(address, wanted[address]))
            if server.row.use_ssl != wanted[address].use_ssl or type(server.row) is not type(wanted[address]):
                server.discard(server.conn)  # reached another way from now on
            server.row = wanted[address]

    # ------------------------------------------------------------------------------------------- checking

    async def _run(self, check: str) -> None:
        """Run ``check`` on its servers every interval."""
        loop = asyncio.get_running_loop()
        while True:
            began = loop.time()
            targets = self._targets(check)
            if targets:
                await asyncio.gather(*(self._check(check, server) for server in targets))
                try:
                    self.conclude()
                except Exception:
                    log.exception("monitor: cannot apply the %s check's results", check)
            await asyncio.sleep(max(0.0, self.settings.intervals[check] / 1000 - (loop.time() - began)))

    def _targets(self, check: str) -> list[_Server]:
        """The servers ``check`` applies to: read_only for servers of replication pairs, lag for those and for
        servers with a max_replication_lag (only a limit shuns: the others' lag is measured to be shown), the others
        for every monitored server."""
        if check == "read_only":
            addresses = set(self._read_only_sql())
        elif check == "replication_lag":
            addresses = set(self._limits("max_replication_lag")) | set(self._read_only_sql())
        else:
            addresses = set(self._servers)
        return [server for address, server in self._servers.items() if address in addresses]

    def _read_only_sql(self) -> dict[Address, str]:
        """The check_type of each server in a replication pair (the first pair's, for a server in several); a
        PostgreSQL server's is "read_only" (``pg_is_in_recovery()``)."""
        check_types: dict[Address, str] = {}
        for pair in self.config.mysql_replication_hostgroups:
            for hostgroup in (pair.writer_hostgroup, pair.reader_hostgroup):
                for server in self.config.servers_in(hostgroup):
                    check_types.setdefault(server.address, pair.check_type)
        for pg_pair in self.config.pgsql_replication_hostgroups:
            for hostgroup in (pg_pair.writer_hostgroup, pg_pair.reader_hostgroup):
                for pg_server in self.config.pgsql_servers_in(hostgroup):
                    check_types.setdefault(pg_server.address, "read_only")
        return check_types

    def _limits(self, column: str) -> dict[Address, int]:
        """Each server's smallest non-zero value of the ``column`` of mysql_servers or pgsql_servers among its
        rows."""
        limits: dict[Address, int] = {}
        rows: list[MysqlServer | PgsqlServer] = [*self.config.mysql_servers, *self.config.pgsql_servers]
        for server in rows:
            value = getattr(server, column)
            if value > 0:
                old = limits.get(server.address)
                limits[server.address] = min(old, value) if old else value
        return limits

    async def _check(self, check: str, server: _Server) -> None:
        """Probe one server within the check's timeout, log the result and update the server's findings."""
        timeout_ms = self.settings.timeouts[check]
        at = time.time()
        began = self.clock()
        reached = logged_in = True
        try:
            async with asyncio.timeout(timeout_ms / 1000):  # in this task: no inner task whose error may be lost
                outcome = await self._probe(check, server, timeout_ms / 1000)
        except TimeoutError:
            outcome, reached = Outcome(error=f"{_CHECK_NAMES[check]} timed out after {timeout_ms} ms"), False
        except BackendError as refused:  # no login: unreachable, or it answered with an error (a wrong password)
            outcome, reached, logged_in = Outcome(error=str(refused)), refused.code != _NOT_REACHED, False
            server.connect_ok = False
        except _Unreachable as broken:
            outcome, reached = Outcome(error=str(broken)), False
        except Exception as unexpected:  # a reply the monitor cannot read: logged, the checks go on
            log.exception("monitor: %s of %s failed", check, show_address(server.address))
            outcome = Outcome(error=f"unexpected reply: {unexpected}")
        latency_us = int((self.clock() - began) * 1_000_000)
        self.record(check, server.address, at, latency_us, outcome, reached, logged_in)

    def record(
        self,
        check: str,
        address: Address,
        at: float,
        latency_us: int,
        outcome: Outcome,
        reached: bool = True,
        logged_in: bool = True,
    ) -> None:
        """Take in one probe of ``check`` on the server at ``address`` (started at wall time ``at``, answered in
        ``latency_us``; ``reached``: the server answered at all, ``logged_in``: it let the monitor user in) and update
        the findings that decide its status; ``conclude`` then publishes what follows."""
        server = self._servers.get(address)
        if server is None:  # no longer in the config: a probe that finished after a reload
            return
        self._log(check, server, at, latency_us if outcome.error is None else 0, outcome)
        server.latest[check] = (at, latency_us, outcome.error is None)
        server.checked_at = at
        server.last_error = outcome.error
        if check == "connect":
            server.connect_ok = logged_in
        else:
            server.ping_ok = reached and logged_in
        if reached:
            self._reached(check, server, outcome)
            if check == "ping" and outcome.error is None:
                self._judge_latency(server, latency_us)
        else:
            self._unreachable(check, server, outcome.error or "")

    async def _probe(self, check: str, server: _Server, timeout: float) -> Outcome:
        if isinstance(server.row, PgsqlServer):
            return await self._probe_pgsql(check, server)
        host, port = server.address
        credentials = Credentials(self.settings.username, self.settings.password)
        tls = server_tls(server.row, self.tls)
        if check == "connect":
            fresh = await BackendConnection.connect(host, port, credentials, None, timeout=timeout, tls=tls)
            fresh.close()
            return Outcome()
        async with server.lock:
            kept = server.conn
            if not isinstance(kept, BackendConnection) or kept.wire.closed is not None:
                server.discard(kept)
                kept = server.conn = await BackendConnection.connect(
                    host, port, credentials, None, timeout=timeout, tls=tls
                )
                server.connect_ok = True
            conn = kept
            try:
                return await self._query(check, conn, server)
            except CONNECTION_LOST as broken:
                server.discard(conn)
                raise _Unreachable(f"lost the connection to {show_address(server.address)}: {broken}") from None
            except BaseException:  # a timeout (cancelled): the connection's state is unknown
                server.discard(conn)
                raise

    async def _pg_login(self, server: _Server) -> PgConnection:
        """A PostgreSQL monitor connection (``pgsql-monitor_*``); BackendError as MySQL's connect raises it."""
        host, port = server.address
        s = self.settings
        try:
            return await PgConnection.connect(
                host,
                port,
                s.pgsql_username,
                ServerSecret(password=s.pgsql_password),
                s.pgsql_dbname,
                tls=server_tls(server.row, self.tls),
            )
        except PgUnreachable as exc:
            raise BackendError(str(exc), _NOT_REACHED) from None
        except PgError as exc:  # it answered: a wrong password, an unknown database
            raise BackendError(f"{show_address(server.address)} refused the monitor: {exc}", 1045) from None

    async def _probe_pgsql(self, check: str, server: _Server) -> Outcome:
        """A check on a PostgreSQL server: connect logs in afresh, ping runs an empty query, the lag reads how far
        a replica's replay is behind; ping and lag share one connection."""
        if check == "connect":
            (await self._pg_login(server)).close()
            return Outcome()
        async with server.lock:
            kept = server.conn
            if not isinstance(kept, PgConnection) or kept.closed:
                server.discard(kept)
                kept = server.conn = await self._pg_login(server)
                server.connect_ok = True
            conn = kept
            try:
                if check == "replication_lag":
                    ((lag,),) = await conn.query(_PG_LAG_SQL)
                    return Outcome(value=None if lag is None else int(lag))
                if check == "read_only":
                    ((in_recovery,),) = await conn.query("SELECT pg_is_in_recovery()")
                    return Outcome(value=in_recovery == "t")
                await conn.query("")
                return Outcome()
            except PgError as exc:
                return Outcome(error=str(exc))
            except PgUnreachable as broken:
                server.discard(conn)
                raise _Unreachable(f"lost the connection to {show_address(server.address)}: {broken}") from None
            except BaseException:  # a timeout (cancelled): the connection's state is unknown
                server.discard(conn)
                raise

    async def _query(self, check: str, conn: BackendConnection, server: _Server) -> Outcome:
        if check == "ping":
            err = await conn.simple_command(bytes((Command.PING,)))
            return Outcome(error=_error_text(err) if err is not None else None)
        if check == "read_only":
            result = await conn.fetch_named(_READ_ONLY_SQL)
            if isinstance(result, ErrPacket):
                return Outcome(error=_error_text(result))
            values = {bytes(row[0] or b"").decode(): (row[1] or b"").upper() in (b"ON", b"1") for row in result[1]}
            return _read_only(self._read_only_sql().get(server.address, "read_only"), values)
        result = await conn.fetch_named("SHOW SLAVE STATUS")
        if isinstance(result, ErrPacket):
            return Outcome(error=_error_text(result))
        names, rows = result
        if not rows or "Seconds_Behind_Master" not in names:
            return Outcome()  # not a replica: no lag
        raw = rows[0][names.index("Seconds_Behind_Master")]
        return Outcome(value=int(raw) if raw is not None else -1)  # -1: NULL, replication stopped or broken

    def _log(self, check: str, server: _Server, at: float, latency_us: int, outcome: Outcome) -> None:
        host, port = server.address
        row: dict[str, Any] = {"hostname": host, "port": port, "time_start_us": int(at * 1_000_000)}
        if check == "connect":
            row.update(connect_success_time_us=latency_us, connect_error=outcome.error)
        elif check == "ping":
            row.update(ping_success_time_us=latency_us, ping_error=outcome.error)
        elif check == "read_only":
            value = outcome.value
            row.update(success_time_us=latency_us, read_only=None if value is None else int(value), error=outcome.error)
        else:
            lag = outcome.value
            row.update(
                success_time_us=latency_us, repl_lag=None if lag is None or lag < 0 else lag, error=outcome.error
            )
        entries = self.logs[check]
        entries.append(row)
        oldest = int((at - self.settings.history_ms / 1000) * 1_000_000)
        while entries and entries[0]["time_start_us"] < oldest:
            entries.popleft()

    # ------------------------------------------------------------------------------------------- deciding

    def _unreachable(self, check: str, server: _Server, error: str) -> None:
        counter = "read_only" if check == "read_only" else "ping" if check in ("ping", "connect") else None
        if counter is None:
            return
        server.failures[counter] += 1
        failures = server.failures[counter]
        limit = self.settings.read_only_max_failures if counter == "read_only" else self.settings.ping_max_failures
        if failures >= limit and server.shun_reason is None:
            server.shun_reason = f"{_CHECK_NAMES[check]} failed {failures} times: {error}"
            server.shunned_at = self.clock()

    def _reached(self, check: str, server: _Server, outcome: Outcome) -> None:
        server.failures = {"ping": 0, "read_only": 0}
        if server.shun_reason is not None:
            down = self.clock() - server.shunned_at
            if down >= self.settings.shun_recovery_time_sec:
                server.shun_reason = None
                server.recovered = f"{_CHECK_NAMES[check]} succeeded again after {down:.0f} s SHUNNED"
        if outcome.error is not None:
            return
        if check == "read_only":
            server.read_only = outcome.value
        elif check == "replication_lag":
            self._judge_lag(server, outcome.value)

    def _judge_lag(self, server: _Server, lag: int | None) -> None:
        limit = self._limits("max_replication_lag").get(server.address, 0)
        if lag is not None and lag < 0:
            counted = self.settings.lag_when_null
            shown = (
                f"replication lag unknown (Seconds_Behind_Master is NULL: replication stopped or broken), counted as "
                f"{counted} s (mysql-monitor_slave_lag_when_null)"
            )
        else:
            counted = lag or 0
            shown = f"replication lag {counted} s" if lag is not None else "not a replica any more (no lag to measure)"
        server.lag_s = None if lag is None else counted
        if limit and lag is not None and counted > limit:
            server.lag_over += 1
            if server.lag_over >= self.settings.lag_count and server.lag_reason is None:
                server.lag_reason = f"{shown} > max_replication_lag {limit}"
            return
        server.lag_over = 0
        if server.lag_reason is not None:
            server.lag_reason = None
            server.recovered = f"{shown} <= max_replication_lag {limit}" if lag is not None else shown

    def _judge_latency(self, server: _Server, latency_us: int) -> None:
        limit = self._limits("max_latency_ms").get(server.address, 0)
        shown = f"ping took {latency_us / 1000:.1f} ms"
        if limit and latency_us > limit * 1000:
            if server.latency_reason is None:
                server.latency_reason = f"{shown} > max_latency_ms {limit}"
        elif server.latency_reason is not None:
            server.latency_reason = None
            server.recovered = f"{shown} <= max_latency_ms {limit}" if limit else "max_latency_ms lifted"

    def conclude(self) -> None:
        """Pick each pair's writer, and publish the state if anything changed."""
        enabled = self.settings.enabled
        verdicts = {address: server.verdict() for address, server in self._servers.items()} if enabled else {}
        writers = self._choose_writers(verdicts, self.config.mysql_replication_hostgroups, self.config.servers_in)
        pgsql_writers = self._choose_writers(
            verdicts, self.config.pgsql_replication_hostgroups, self.config.pgsql_servers_in, pgsql=True
        )
        state = self.state
        if verdicts == state.servers and writers == state.writers and pgsql_writers == state.pgsql_writers:
            return
        for address, verdict in verdicts.items():
            before = self.state.servers.get(address)
            if (before.status if before is not None else ONLINE) != verdict.status:
                level = logging.WARNING if verdict.status == SHUNNED else logging.INFO
                shown = show_address(address)
                log.log(level, "server %s is %s: %s", shown, verdict.status, verdict.reason or "checks succeed")
        self.state = MonitorState(self.state.seq + 1, verdicts, writers, pgsql_writers)
        self.publish(self.state)

    def _choose_writers(
        self,
        verdicts: dict[Address, ServerVerdict],
        pairs: Sequence[MysqlReplicationHostgroup] | Sequence[PgsqlReplicationHostgroup],
        servers_in: Callable[[int], Sequence[MysqlServer] | Sequence[PgsqlServer]],
        pgsql: bool = False,
    ) -> dict[int, Address]:
        """The writer of each of ``pairs`` (MySQL's, or PostgreSQL's with ``pgsql``)."""
        kept = self._pgsql_writers if pgsql else self._writers
        chosen: dict[int, Address] = {}
        for pair in pairs:
            writer_hg = pair.writer_hostgroup
            members: list[Address] = []
            for hostgroup in (writer_hg, pair.reader_hostgroup):
                members += [s.address for s in servers_in(hostgroup) if s.address not in members]
            claims = [a for a in members if a in verdicts and verdicts[a].read_only is False]
            live = [a for a in claims if verdicts[a].status == ONLINE]
            current = kept.get(writer_hg)
            writer: Address | None = None
            if current in live or (current in claims and not live):
                writer = current
            elif live or claims:
                writer = (live or claims)[0]
            engine = "pgsql hostgroup" if pgsql else "hostgroup"
            if writer is None:
                kept.pop(writer_hg, None)
            else:
                chosen[writer_hg] = kept[writer_hg] = writer
                if writer != current:
                    log.log(
                        logging.INFO if current is None else logging.WARNING,
                        "%s %d: %s is the writer now (read_only=0; it was %s)",
                        engine,
                        writer_hg,
                        show_address(writer),
                        show_address(current),
                    )
            self._note_refused(writer_hg, writer, frozenset(a for a in live if a != writer), pgsql)
        return chosen

    def _note_refused(
        self, writer_hg: int, writer: Address | None, refused: frozenset[Address], pgsql: bool = False
    ) -> None:
        """Log loudly when servers besides the writer report read_only=0 (and when that ends)."""
        kept = self._pgsql_refused if pgsql else self._refused
        before = kept.get(writer_hg, frozenset())
        for address in sorted(refused - before):
            log.error(
                "TWO WRITERS in hostgroup %d: %s reports read_only=0 while %s is the writer; writes stay on %s and "
                "%s is kept out of hostgroup %d. Set read_only=1 on the one that is not the primary, or publish a "
                "config that says which one is.",
                writer_hg,
                show_address(address),
                show_address(writer),
                show_address(writer),
                show_address(address),
                writer_hg,
            )
        for address in sorted(before - refused):
            log.info("hostgroup %d: %s no longer claims to be a writer", writer_hg, show_address(address))
        kept[writer_hg] = refused

    # ------------------------------------------------------------------------------------------- reporting

    def log_rows(self, check: str, limit: int | None = None) -> list[dict[str, Any]]:
        """A check's log, oldest first (the last ``limit`` rows when given); KeyError for an unknown check."""
        rows = list(self.logs[check])
        return rows if limit is None else rows[max(0, len(rows) - limit) :]

    def server_rows(self) -> list[dict[str, Any]]:
        """One row per server of the runtime view (per hostgroup it is in): its status and the latest findings.

        Empty while the monitor is disabled. Keys: hostgroup, srv_host, srv_port, status, connect_ok, ping_ok,
        read_only, lag_s, last_error, checked_at (unix time of its latest check).
        """
        if not self.settings.enabled:
            return []
        rows = []
        for row in runtime_view(self.config, self.state).servers:
            server = self._servers.get(row.address)
            if server is None:
                continue
            rows.append(
                {
                    "hostgroup": row.hostgroup_id,
                    "srv_host": row.hostname,
                    "srv_port": row.port,
                    "status": row.status,
                    "connect_ok": server.connect_ok,
                    "ping_ok": server.ping_ok,
                    "read_only": server.read_only,
                    "lag_s": server.lag_s,
                    "last_error": server.last_error,
                    "checked_at": server.checked_at,
                }
            )
        return rows

    def check_rows(self) -> list[dict[str, Any]]:
        """The latest result of each check on each server: check, srv_host, srv_port, ok, latency_us, at."""
        return [
            {"check": check, "srv_host": address[0], "srv_port": address[1], "ok": ok, "latency_us": us, "at": at}
            for address, server in self._servers.items()
            for check, (at, us, ok) in server.latest.items()
        ]


def _error_text(err: ErrPacket) -> str:
    return f"{err.code}: {err.message}"


def _read_only(check_type: str, values: dict[str, bool]) -> Outcome:
    """The read_only verdict of ``check_type`` from the server's variables (ProxySQL's check types)."""
    needed = check_type.replace("&", "|").split("|")
    missing = [name for name in needed if name not in values]
    if missing:
        return Outcome(error=f"check_type {check_type}: the server has no variable {missing[0]}")
    if "&" in check_type:
        return Outcome(value=all(values[name] for name in needed))
    return Outcome(value=any(values[name] for name in needed))
