"""The proxy process: the MySQL listener, the admin endpoint, atomic config reloads, and the servers it routes by
(the config's, as the monitor's findings rearrange them: ``proxyapp.backends.topology``)."""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from pathlib import Path
from typing import Any

import aiohttp

from proxyapp import credential
from proxyapp.backends.monitor import Monitor
from proxyapp.backends.pool import ONLINE, PoolManager, PoolSettings
from proxyapp.backends.topology import MonitorState, runtime_view, server_row
from proxyapp.clients.owner import worker_of
from proxyapp.clients.seats import Seats
from proxyapp.clients.throttle import AuthThrottle
from proxyapp.clock import Clock, admin_may_advance
from proxyapp.config.document import Config, ConfigError, load_config_file, parse_config
from proxyapp.forward.forwarding import Forwarding
from proxyapp.hotrows.broker import BrokeredHotRows, ForwardedHeat
from proxyapp.hotrows.heat import HeatMap
from proxyapp.hotrows.service import HotRows, HotRowSettings
from proxyapp.mirror.mirror import Mirror
from proxyapp.mysql.constants import ErrorCode
from proxyapp.mysql.stream import WireProtocol
from proxyapp.mysql.tls import TlsContexts, TlsError, contexts
from proxyapp.mysql.wire import Wire
from proxyapp.native import compiled_modules
from proxyapp.pgproxy.front import PgFront
from proxyapp.process.admin import AdminServer, ReloadResult
from proxyapp.process.memory import TRIM_EVERY_S, Memory
from proxyapp.report.eventslog import EventsLog
from proxyapp.report.sharding import ShardingStats
from proxyapp.report.stats import DigestStats, GlobalCounters
from proxyapp.rules.cache import QueryCache
from proxyapp.rules.runtime import Runtime
from proxyapp.session.kill import forward_kill, outcome, unknown_thread
from proxyapp.session.limits import ABANDON, DISCONNECT, KILL, TIME_OUT, overstay
from proxyapp.session.services import SessionServices
from proxyapp.session.session import Session
from proxyapp.sharding.coordinator import Coordinator, monitor_connect
from proxyapp.sharding.nodeblocks import NodeBlocks
from proxyapp.sharding.sequence import Sequences
from proxyapp.sharding.tablerows import TableRows
from proxyapp.tasks import spawn

log = logging.getLogger("proxyapp")


class _ClientProtocol(WireProtocol):
    """A client connection: the wire, and the session serving it."""

    __slots__ = ("proxy",)

    def __init__(self, proxy: Proxy) -> None:
        super().__init__()
        self.proxy = proxy

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        """Start the session."""
        super().connection_made(transport)
        assert self.wire is not None
        self.proxy.start_session(self.wire)


def parse_address(text: str, default_port: int) -> tuple[str, int]:
    """'host:port', ':port' or 'host' -> (host, port)."""
    host, sep, port = text.rpartition(":")
    if not sep:
        return text or "127.0.0.1", default_port
    try:
        return host.strip("[]") or "127.0.0.1", int(port)
    except ValueError:
        raise ValueError(f"bad address {text!r}: the port must be a number") from None


def load_tls(config: Config) -> TlsContexts:
    """The TLS contexts ``config`` asks for, its certificate files read now; ConfigError names the variable whose
    file cannot be used (a start fails with it, a reload is refused and the running config stays)."""
    try:
        return contexts(config.variables)
    except TlsError as exc:
        raise ConfigError([f"global_variables {exc}"]) from None


class Proxy(SessionServices):
    """A running proxy: one config, its pools and statistics, the listener and the admin endpoint; its sessions see
    it as ``SessionServices``.

    Why one class of ~490 lines: it is the process's composition root, and half of it is one thin method per admin
    route (``process.admin`` calls them: stats, reload, processlist, KILL, the monitor's state); each hands the work to
    the room that does it (``report``, ``config``, ``session.kill``, ``backends.monitor``)."""

    def __init__(
        self,
        config: Config,
        config_path: Path | None = None,
        worker: int = 0,
        workers: int = 1,
        seats: Seats | None = None,
        blocks: NodeBlocks | None = None,
        admin_token: str = "",
        hot_rows_fd: int | None = None,
    ) -> None:
        self.config_path = config_path
        self.admin_token = admin_token  # the admin credential (``proxyapp.credential``); "" only without an admin
        self.worker = worker
        self.workers = workers
        self.counters = GlobalCounters()
        self.digests = DigestStats()
        self.sharding = ShardingStats()
        self.clock = Clock()
        self.pools = PoolManager(self.counters, workers, self.clock)
        self.runtime = Runtime.build(config, str(config_path or "document"))
        self.tls = load_tls(config)
        self.xa: Coordinator | None = None
        self.xa_error = ""
        self._open_xa()
        #: Each sharded table's rows per shard (``proxyapp.sharding.tablerows``): worker 0 asks, for the node.
        self.table_rows = (
            TableRows(
                lambda: self.runtime.shard_map,
                self._writer_of,
                monitor_connect(lambda: self.runtime.config, lambda: self.tls),
            )
            if worker == 0
            else None
        )
        self.sequences = Sequences(blocks)  # ``blocks``: the node's, shared by its workers
        #: The hot-row queues' lines: this process's, or (a worker of several) the node's, kept by the supervisor.
        self.hot_rows = (
            HotRows(self.clock, HotRowSettings(config))
            if hot_rows_fd is None
            else BrokeredHotRows(self.clock, HotRowSettings(config), hot_rows_fd)
        )
        self.heat = (
            ForwardedHeat(self.clock, HotRowSettings(config), self.hot_rows)
            if isinstance(self.hot_rows, BrokeredHotRows)
            else HeatMap(self.clock.now, time.time, HotRowSettings(config))
        )
        #: The monitor's latest findings, from this process's own monitor or (a worker) from the supervisor's.
        self.monitor_state = MonitorState()
        #: The monitor, when this process runs it: with one worker process (else the supervisor does).
        self.monitor: Monitor | None = None
        #: The forwarding listeners (``pgsql_forward_listeners``) and the PostgreSQL servers they forward to.
        self.forwarding = Forwarding(workers)
        self.throttle = AuthThrottle()  # failed logins by client address, MySQL's and PostgreSQL's
        #: The PostgreSQL pooling proxy (``pgsql-interfaces``, ``pgsql_users``).
        self.pgsql = PgFront(
            config,
            self.clock,
            self.throttle,
            self._forward_pgsql_cancel,
            self._pgsql_close_idle_elsewhere,
            worker,
            workers,
        )
        self._apply_servers()
        self.cache = QueryCache(
            config.variables.integer("mysql-query_cache_size_MB") << 20, self.counters, self.clock.now
        )
        self.events = EventsLog(self.runtime.settings.eventslog_filename)
        self.mirror = Mirror(self.counters, self.pools, worker, workers)
        self.mirror.configure(config, config_path)
        self.listener = self.mirror
        self.background: set[asyncio.Task[None]] = set()
        self.memory = Memory()
        self.started = self.clock.now()
        self.seats = seats if seats is not None else Seats()
        self._configure_throttle(config)
        self.listen_address: tuple[str, int] = ("127.0.0.1", 0)
        self.admin: AdminServer | None = None
        self._server: Any = None  # asyncio's Server, or uvloop's (whose sockets are a list, not a tuple)
        self._next_session = worker + 1  # ids stay unique across worker processes
        self._sessions: set[asyncio.Task[None]] = set()
        self.clients: dict[asyncio.Task[None], Session] = {}
        #: Each worker process's admin port, by worker index (from the supervisor): where a KILL of a session
        #: in another worker goes.
        self.worker_admin_ports: list[int] = []

    async def start(
        self, listen: tuple[str, int], admin: tuple[str, int] | None, sock: socket.socket | None = None
    ) -> None:
        """Open the MySQL listener (or serve ``sock``) and the admin endpoint; port 0 picks a free port."""
        loop = asyncio.get_running_loop()
        if sock is not None:
            self._server = await loop.create_server(self._client_protocol, sock=sock, backlog=4096)
        else:
            self._server = await loop.create_server(self._client_protocol, listen[0], listen[1], backlog=4096)
        self.listen_address = self._server.sockets[0].getsockname()[:2]
        await self.forwarding.bind()
        await self.pgsql.bind()
        sweeper = loop.create_task(self._housekeeping())
        self.background.add(sweeper)  # type: ignore[arg-type]
        await self.mirror.start()
        await self.hot_rows.start()
        if self.workers == 1:
            monitor = self.monitor = Monitor(
                self.runtime.config, self._adopt_monitor_state, self.clock.now, tls=self.tls.backend
            )
            monitor.start()
        if admin is not None:
            self.admin = AdminServer(self, admin[0], admin[1], self.admin_token, clock_movable=admin_may_advance())
            await self.admin.start()
        log.info(
            "ProxyFleet listening on %s:%d (admin %s), config %s",
            *self.listen_address,
            f"{self.admin.host}:{self.admin.port}" if self.admin else "off",
            self.runtime.config.checksum[:12],
        )
        for warning in self.runtime.config.warnings:
            log.warning("config: %s", warning)

    def _client_protocol(self) -> WireProtocol:
        """A protocol for a new client connection; its session starts once the transport is there."""
        return _ClientProtocol(self)

    def start_session(self, wire: Wire) -> None:
        """Serve a new client connection."""
        session_id = self._next_session
        self._next_session += self.workers
        session = Session(self, wire, session_id)
        task = asyncio.get_running_loop().create_task(session.run())
        self._sessions.add(task)
        self.clients[task] = session
        task.add_done_callback(self._session_done)

    def _session_done(self, task: asyncio.Task[None]) -> None:
        self._sessions.discard(task)
        session = self.clients.pop(task, None)
        if session is not None:  # its client's bytes join those of the sessions that ended before
            self.counters.Queries_frontends_bytes_sent += session.wire.bytes_out
            self.counters.Queries_frontends_bytes_recv += session.wire.bytes_in
        if not task.cancelled() and (error := task.exception()) is not None:  # run() never raises: a bug, told
            log.error("session %s ended with an unhandled error", getattr(session, "id", "?"), exc_info=error)

    async def _housekeeping(self) -> None:
        """Every second, ``sweep``."""
        while True:
            await asyncio.sleep(1)
            self.sweep()

    def sweep(self) -> None:
        """End sessions past their limits (``proxyapp.session.limits``: idle past their wait_timeout, a
        transaction too long or idle too long, a packet left half sent) and tidy the pools' idle backend connections
        (``PoolManager.housekeeping``), at the proxy's clock's time; every ``TRIM_EVERY_S`` seconds, give the
        memory no longer used back (``Memory.give_back``)."""
        settings = self.runtime.settings
        now = self.clock.now()
        if now - self.memory.trimmed_at >= TRIM_EVERY_S:
            self.memory.trimmed_at = now
            self.memory.give_back()
        for session in list(self.clients.values()):
            stalled = session.stalled(now)
            since = session.transaction_since
            action, why = overstay(
                session.in_transaction,
                since,
                session.idle_since,
                stalled,
                now,
                settings,
                session.login_since,
                session.gone_since,
                session.state.wait_timeout_s,
            )
            if session.killed and action != ABANDON:  # being killed already: only a backend ignoring it matters
                continue
            if action == KILL:
                self._end(session, why)
            elif action == ABANDON:
                log.warning("session %d: %s: dropping its backend connection", session.id, why)
                session.abandon()
            elif action == DISCONNECT:
                log.info("session %d: %s, disconnecting", session.id, why)
                session.wire.close()
            elif action == TIME_OUT:
                log.info("session %d: %s, disconnecting", session.id, why)
                session.time_out()
        self.pools.housekeeping(now)
        if self.forwarding.needs_bind() or self.pgsql.needs_bind():
            self._rebind()
        self.pgsql.sweep()
        self.hot_rows.expire()
        self.heat.sweep()
        if self.xa is not None:
            self.xa.sweep(now)
        if self.table_rows is not None:
            self.table_rows.sweep(now)

    def _rebind(self) -> None:
        """Open and close the PostgreSQL listeners as the config wants, in the background."""
        spawn(self._bind_pgsql(), self.background, "binding the PostgreSQL listeners")

    async def _bind_pgsql(self) -> None:
        """Open and close the forwarding listeners and the pooling proxy's listener as the config wants."""
        await self.forwarding.bind()
        await self.pgsql.bind()

    async def _forward_pgsql_cancel(self, owner: int, pid: int, key: int) -> None:
        """Hand a PostgreSQL cancel request to the worker process serving session ``pid``."""
        ports = self.worker_admin_ports
        if owner >= len(ports) or not ports[owner]:
            return
        try:
            async with (
                aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as http,
                http.post(
                    f"http://127.0.0.1:{ports[owner]}/pgsql/cancel",
                    json={"pid": pid, "key": key},
                    headers=credential.header(self.admin_token),
                ),
            ):
                pass
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            log.warning("pgsql: worker %d did not take a cancel request: %s", owner, exc)

    async def _pgsql_close_idle_elsewhere(self, database: str) -> None:
        """Have every other worker process close its idle PostgreSQL server connections to ``database``, and wait
        until they did (a DROP DATABASE that follows is refused while any is connected)."""

        async def close(index: int, port: int) -> None:
            try:
                async with (
                    aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as http,
                    http.post(
                        f"http://127.0.0.1:{port}/pgsql/close_idle",
                        json={"database": database},
                        headers=credential.header(self.admin_token),
                    ),
                ):
                    pass
            except (aiohttp.ClientError, OSError, TimeoutError) as exc:
                log.warning("pgsql: worker %d did not close its idle connections to %s: %s", index, database, exc)

        ports = self.worker_admin_ports
        await asyncio.gather(*(close(i, p) for i, p in enumerate(ports) if p and i != self.worker))

    def _end(self, session: Session, why: str) -> None:
        """Kill ``session`` (its running statement, its connection; its transaction is rolled back)."""
        log.warning("session %d of %s@%s killed: %s", session.id, session.username, session.client.addr, why)
        spawn(session.kill(False), self.background, f"killing session {session.id}")

    async def stop(self) -> None:
        """Stop listening, end the sessions and close the pools."""
        if self._server is not None:
            self._server.close()
        if self.admin is not None:
            await self.admin.stop()
        for task in list(self._sessions) + list(self.background):
            task.cancel()
        if self._sessions:
            await asyncio.wait(list(self._sessions), timeout=5)
        await self.mirror.stop()
        await self.forwarding.stop()
        await self.pgsql.stop()
        if self.xa is not None:
            await self.xa.close()
        if self.table_rows is not None:
            await self.table_rows.stop()
        monitor = self.monitor
        if monitor is not None:
            await monitor.stop()
        self.pools.close_all()

    # --------------------------------------------------------------------------------------- reloads

    def apply(self, config: Config, source: str, tls: TlsContexts) -> None:
        """Swap in a validated config and its TLS contexts (``load_tls``): new sessions and new commands use them,
        commands in flight finish as they are, established TLS sessions keep theirs."""
        self.runtime = Runtime.build(config, source)
        self.tls = tls
        self._apply_servers()
        monitor = self.monitor
        if monitor is not None:
            monitor.reconfigure(config, tls.backend)
        self.cache.max_bytes = config.variables.integer("mysql-query_cache_size_MB") << 20
        self._configure_throttle(config)
        self.hot_rows.configure(HotRowSettings(config))
        self.heat.configure(HotRowSettings(config))
        self.mirror.configure(config, self.config_path)
        self._open_xa()
        if self.table_rows is not None:
            self.table_rows.reconfigure()
        if self.events.path != self.runtime.settings.eventslog_filename:
            self.events.close()
            self.events = EventsLog(self.runtime.settings.eventslog_filename)
        self.cache.clear()
        self._rebind()
        log.info("config %s loaded from %s", config.checksum[:12], source)
        for warning in config.warnings:
            log.warning("config: %s", warning)

    def _open_xa(self) -> None:
        """Open the XA decision log and recovery the first time the config has sharded tables."""
        if self.xa is not None or self.runtime.shard_map is None:
            return
        try:
            self.xa = Coordinator.open(
                lambda: self.runtime.config, self.config_path, lambda: self.tls, self.worker, self.workers
            )
            self.xa_error = ""
        except (OSError, ValueError) as exc:
            self.xa_error = str(exc)
            log.error("sharding: the XA decision log cannot be opened, writes over several shards are refused: %s", exc)

    def _writer_of(self, hostgroup_id: int) -> str | None:
        """The first ONLINE server (``host:port``) of a hostgroup as this process routes by, None when it has none."""
        hostgroup = self.pools.hostgroups.get(hostgroup_id)
        pools = hostgroup.pools if hostgroup is not None else []
        return next((f"{p.server.hostname}:{p.server.port}" for p in pools if p.status == ONLINE), None)

    def _configure_throttle(self, config: Config) -> None:
        v = config.variables
        self.throttle.configure(v.integer("mysql-max_auth_errors_until_block"), v.integer("mysql-auth_block_time_ms"))

    def _apply_servers(self) -> None:
        """Give the pools the runtime view of the config's servers under the monitor's latest findings."""
        config = self.runtime.config
        view = runtime_view(config, self.monitor_state)
        settings = PoolSettings.from_variables(config.variables, self.tls.backend)
        self.pools.apply(view.servers, settings, view.reader_of, view.placement, view.status_reasons)
        self.forwarding.apply(config, self.monitor_state)
        self.pgsql.apply(config, self.monitor_state, self.tls.frontend, self.tls.backend)

    def _adopt_monitor_state(self, state: MonitorState) -> None:
        """The monitor's findings changed: route by them."""
        self.monitor_state = state
        self._apply_servers()

    def reload_file(self) -> ReloadResult:
        """Re-read the config file; a broken file is refused and the running config stays."""
        running = self.runtime.config.checksum
        if self.config_path is None:
            return ReloadResult.refused(running, ["the proxy was not started from a config file"])
        try:
            config = load_config_file(self.config_path)
            tls = load_tls(config)
        except ConfigError as exc:
            log.error("reload refused, keeping config %s:\n%s", running[:12], exc)
            return ReloadResult.refused(running, exc.errors)
        self.apply(config, str(self.config_path), tls)
        return ReloadResult.loaded(config.checksum, config.warnings)

    # --------------------------------------------------------------------------------------- admin provider

    async def reload(self, document: dict | None) -> ReloadResult:
        """Admin call: load ``document`` (or re-read the file when None)."""
        if document is None:
            return self.reload_file()
        try:
            config = parse_config(document)
            tls = load_tls(config)
        except ConfigError as exc:
            return ReloadResult.refused(self.runtime.config.checksum, exc.errors)
        self.apply(config, "admin", tls)
        await self._bind_pgsql()  # the listeners are open (or their error reported) when the answer comes
        return ReloadResult.loaded(config.checksum, config.warnings)

    async def config_document(self) -> dict:
        """The running config as a document."""
        return self.runtime.config.to_document()

    async def reset_query_digest(self) -> list[dict]:
        """Admin call: the digest rows, then an empty digest table (and sharding's per-digest table)."""
        self.sharding.reset()
        return self.digests.reset()

    async def stats_snapshot(self) -> dict:
        """Everything the admin endpoint reports."""
        rt = self.runtime
        mirror = self.mirror.snapshot()  # first: it refreshes the Mirror_* gauges
        counters = self.counters.snapshot()
        for session in self.clients.values():  # the bytes of the sessions still open (``_session_done``)
            counters["Queries_frontends_bytes_sent"] += session.wire.bytes_out
            counters["Queries_frontends_bytes_recv"] += session.wire.bytes_in
        snapshot = {
            "global": counters,
            "connection_pool": self.pools.rows(),
            "query_digest": self.digests.rows(),
            "query_digest_overflow": self.digests.overflow,
            "sharding_digest": self.sharding.rows(),
            "query_rules": [{"rule_id": k, "hits": v} for k, v in sorted(rt.rules.hits.items())],
            "config": {"checksum": rt.config.checksum, "loaded_at": rt.loaded_at, "source": rt.source},
            "native": compiled_modules(),
            "mirror": mirror,
            "server_transitions": list(self.pools.transitions),
            "trx_queue": {"queues": self.hot_rows.rows(), "proposals": self.heat.proposals()},
            "pgsql_forward": self.forwarding.rows(),
            "pgsql": self.pgsql.rows(),
            "pgsql_query_digest": self.pgsql.digests.rows(),
            "pgsql_query_digest_overflow": self.pgsql.digests.overflow,
            "memory": {"workers": [self.memory.row()]},
        }
        if self.table_rows is not None:
            snapshot["sharding_tables"] = self.table_rows.rows()
        monitor = self.monitor
        if monitor is not None:
            snapshot["monitor"] = monitor.server_rows()
            snapshot["monitor_checks"] = monitor.check_rows()
        return snapshot

    async def monitor_log(self, check: str, limit: int | None) -> list[dict]:
        """A monitor check's log (``proxyapp.backends.monitor.CHECKS``); LookupError when this process runs no
        monitor."""
        monitor = self.monitor
        if monitor is None:
            raise LookupError("this worker runs no monitor: ask the supervisor's admin endpoint")
        return monitor.log_rows(check, limit)

    async def runtime_servers(self) -> list[dict]:
        """The runtime mysql_servers this process routes by: every column, the status and why it has it."""
        return [
            server_row(pool.server, pool.status, pool.status_reason)
            for hostgroup in sorted(self.pools.hostgroups)
            for pool in self.pools.hostgroups[hostgroup].pools
        ]

    async def processlist(self) -> list[dict]:
        """The client sessions, a row each (ProxySQL's stats_mysql_processlist), oldest first."""
        now = self.clock.now()
        return [session.process_row(now) for session in sorted(self.clients.values(), key=lambda s: s.id)]

    async def kill_session(self, target: int, query_only: bool, username: str | None) -> dict:
        """KILL [QUERY] of session ``target``: ``username`` may kill only its own sessions (None: the admin may
        kill any). A session of another worker process is that worker's to kill."""
        if target < 1:
            return unknown_thread(target)
        owner = worker_of(target, self.workers)
        if owner != self.worker:
            ports = self.worker_admin_ports
            if owner >= len(ports) or not ports[owner]:
                return unknown_thread(target)
            return await forward_kill(ports[owner], self.admin_token, target, query_only, username)
        session = next((s for s in self.clients.values() if s.id == target), None)
        if session is None:
            return unknown_thread(target)
        if username is not None and session.username != username:
            return outcome(False, ErrorCode.KILL_DENIED, f"You are not owner of thread {target}")
        await session.kill(query_only)
        return outcome(True)

    async def pgsql_close_idle(self, database: str) -> int:
        """Close this worker's idle PostgreSQL server connections to ``database`` (another worker's DROP DATABASE)."""
        return self.pgsql.pools.close_idle_of(database)

    async def pgsql_cancel(self, pid: int, key: int) -> None:
        """A PostgreSQL cancel request another worker process took for a session of this one."""
        if worker_of(pid, self.workers) == self.worker:
            await self.pgsql.cancel(pid, key)

    async def advance_clock(self, seconds: float) -> dict:
        """Move the proxy's clock ``seconds`` forward (tests only, ``proxyapp.clock``) and sweep at once, so that
        what the time passed ends is ended before the answer; the monitor's next checks see it too."""
        self.clock.advance(seconds)
        self.sweep()
        return {"ok": True, "offset_s": self.clock.offset}

    async def set_worker_ports(self, ports: list[int]) -> None:
        """The supervisor's list of every worker's admin port (by worker index)."""
        self.worker_admin_ports = list(ports)

    async def monitor_seq(self) -> int:
        """The number of the monitor findings this process routes by."""
        return self.monitor_state.seq

    async def apply_monitor_state(self, document: dict) -> dict:
        """The supervisor's monitor state (a worker's admin call): routed by unless an equal or newer one was."""
        if self.monitor is not None:
            return {"ok": False, "error": "this process runs its own monitor"}
        try:
            state = MonitorState.from_json(document)
        except ValueError as exc:
            return {"ok": False, "error": f"bad monitor state: {exc}"}
        if state.seq > self.monitor_state.seq:
            self._adopt_monitor_state(state)
        return {"ok": True, "seq": self.monitor_state.seq}
