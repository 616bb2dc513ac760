"""Several worker processes on one listening socket, so that the proxy uses every core.

``mysql-threads`` (capped at the number of CPUs) worker processes share the listening socket; the kernel spreads
new clients among them and each session lives in one worker. Each worker holds its share of every server's
``max_connections``. The supervisor (the process that was started) owns the admin endpoint: it merges the
workers' statistics, validates reloads once and hands the new config to every worker, and restarts a worker
that dies. It also runs the node's one monitor (``proxyapp.backends.monitor``) and hands each change of its findings to
every worker (``POST /runtime/monitor``; a restarted worker gets the latest before it serves), so that the servers
are checked once per node, not once per worker, and every worker routes by the same findings.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import socket
import sys
from pathlib import Path
from typing import Any

import aiohttp

from proxyapp import credential
from proxyapp.backends.monitor import Monitor
from proxyapp.backends.topology import MonitorState
from proxyapp.clients.owner import worker_of
from proxyapp.clients.seats import Seats
from proxyapp.clock import Clock, admin_may_advance
from proxyapp.config.document import Config, ConfigError, load_config_file, parse_config
from proxyapp.hotrows.broker import HotRowBroker
from proxyapp.hotrows.service import HotRowSettings
from proxyapp.process.admin import AdminServer, ReloadResult
from proxyapp.process.server import load_tls
from proxyapp.report.merge import merge_digest_rows, merge_snapshots
from proxyapp.session.kill import forward_kill, unknown_thread
from proxyapp.sharding.nodeblocks import NodeBlocks

log = logging.getLogger("proxyapp.process.workers")


def worker_count(config: Config) -> int:
    """How many worker processes to run: ``mysql-threads``, at most one per CPU."""
    return max(1, min(config.variables.integer("mysql-threads"), os.cpu_count() or 1))


class _Worker:
    """A worker process and its private admin port."""

    def __init__(self, index: int) -> None:
        self.index = index
        self.proc: asyncio.subprocess.Process | None = None
        self.admin_port = 0


class Supervisor:
    """Starts the workers, serves the merged admin endpoint, drives reloads."""

    def __init__(self, config: Config, config_path: Path, workers: int, token: str) -> None:
        self.config = config
        self.token = token  # the admin credential: of the supervisor's endpoint and the workers' internal ones
        self.config_path = config_path
        self.clock = Clock()  # the monitor's and the hot-row lines'; each worker has its own, moved with this one
        self.workers = [_Worker(i) for i in range(workers)]
        #: The node's session count, shared with the workers (mysql-max_connections counts across them).
        self.seats_fd = Seats.create(workers)
        self.seats = Seats(self.seats_fd, 0, workers)
        #: The node's sequence blocks, shared with the workers (ids increase across the node).
        self.sequences_fd = NodeBlocks.create()
        #: The node's hot-row lines, which every worker asks over a socket of its own (made at its start).
        self.hot_rows = HotRowBroker(self.clock, HotRowSettings(config))
        self.sock: socket.socket | None = None
        self.admin: AdminServer | None = None
        self.monitor: Monitor | None = None
        self._http: aiohttp.ClientSession | None = None
        self._stopping = False
        self._pushes: set[asyncio.Task[None]] = set()

    async def run(self, listen: tuple[str, int], admin: tuple[str, int] | None) -> None:
        """Serve until SIGINT/SIGTERM; SIGHUP reloads the config file. A SIGINT or SIGTERM while the workers start
        stops the start: the workers started so far are stopped too, none is left behind."""
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()
        loop.add_signal_handler(signal.SIGTERM, stop.set)
        loop.add_signal_handler(signal.SIGINT, stop.set)
        self.sock = socket.create_server(listen, backlog=4096, reuse_port=False)
        self.sock.set_inheritable(True)
        self._http = aiohttp.ClientSession(
            timeout=aiohttp.ClientTimeout(total=10), headers=credential.header(self.token)
        )
        try:
            if not await self._start_unless_stopped(admin, stop):
                log.info("stopped while starting")
                return
            log.info(
                "ProxyFleet listening on %s:%d with %d worker processes (admin %s), config %s",
                *self.sock.getsockname()[:2],
                len(self.workers),
                f"{self.admin.host}:{self.admin.port}" if self.admin else "off",
                self.config.checksum[:12],
            )
            loop.add_signal_handler(signal.SIGHUP, lambda: loop.create_task(self.reload(None)))
            watchers = [loop.create_task(self._watch(w)) for w in self.workers]
            await stop.wait()
            self._stopping = True
            for task in watchers:
                task.cancel()
        finally:
            self._stopping = True
            if self.monitor is not None:
                await self.monitor.stop()
            await self._stop_workers()
            await self.hot_rows.stop()
            if self.admin is not None:
                await self.admin.stop()
            await self._http.close()
            self.sock.close()

    async def _start_unless_stopped(self, admin: tuple[str, int] | None, stop: asyncio.Event) -> bool:
        """Start the workers, the monitor and the admin endpoint; False when ``stop`` came first (the start is
        cancelled where it was: ``run`` then stops what did start)."""
        loop = asyncio.get_running_loop()
        starting = loop.create_task(self._start(admin))
        stopped = loop.create_task(stop.wait())
        try:
            await asyncio.wait((starting, stopped), return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopped.cancel()
        if starting.done():
            starting.result()  # a start that failed raises here
            return True
        starting.cancel()
        with contextlib.suppress(asyncio.CancelledError, OSError, RuntimeError, TimeoutError):
            await starting
        return False

    async def _start(self, admin: tuple[str, int] | None) -> None:
        """Spawn the workers, then start the monitor and the admin endpoint."""
        await asyncio.gather(*(self._spawn(w) for w in self.workers))
        self.monitor = Monitor(self.config, self._relay_state, self.clock.now, tls=load_tls(self.config).backend)
        self.monitor.start()
        if admin is not None:
            self.admin = AdminServer(self, admin[0], admin[1], self.token, clock_movable=admin_may_advance())
            await self.admin.start()

    async def _spawn(self, worker: _Worker) -> None:
        assert self.sock is not None
        fd = self.sock.fileno()
        self.seats.clear(worker.index)  # a restarted worker's sessions died with it
        hot_rows = self.hot_rows.pair()  # a restarted worker's keys were given back when its socket ended
        worker.proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "proxyapp",
            "worker",
            "--listen-fd",
            str(fd),
            "--index",
            str(worker.index),
            "--count",
            str(len(self.workers)),
            "--config-path",
            str(self.config_path),
            "--seats-fd",
            str(self.seats_fd),
            "--sequences-fd",
            str(self.sequences_fd),
            "--hot-rows-fd",
            str(hot_rows.fileno()),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            pass_fds=(fd, self.seats_fd, self.sequences_fd, hot_rows.fileno()),
        )
        hot_rows.close()
        assert worker.proc.stdin is not None and worker.proc.stdout is not None
        worker.proc.stdin.write(f"{self.token}\n{json.dumps(self.config.to_document())}".encode())
        worker.proc.stdin.close()
        line = await asyncio.wait_for(worker.proc.stdout.readline(), 30)
        if not line.startswith(b"ADMIN_PORT "):
            raise RuntimeError(f"worker {worker.index} did not start (it said {line!r})")
        worker.admin_port = int(line.split()[1])
        if self.monitor is not None and self.monitor.state.seq:  # a restarted worker: the monitor's findings first
            await self._push(worker, self.monitor.state)
        await self._share_ports()

    async def _share_ports(self) -> None:
        """Tell every running worker every worker's admin port (a KILL of a sibling's session goes there)."""
        assert self._http is not None
        ports = {"admin_ports": [w.admin_port for w in self.workers]}

        async def share(worker: _Worker) -> None:
            url = f"http://127.0.0.1:{worker.admin_port}/runtime/workers"
            try:
                async with self._http.post(url, json=ports) as response:  # type: ignore[union-attr]
                    await response.read()
            except (aiohttp.ClientError, OSError, TimeoutError) as exc:
                log.warning("worker %d did not take the workers' admin ports: %s", worker.index, exc)

        await asyncio.gather(*(share(w) for w in self.workers if w.admin_port))

    def _relay_state(self, state: MonitorState) -> None:
        """The monitor's findings changed: hand them to every worker."""
        task = asyncio.get_running_loop().create_task(self._push_all(state))
        self._pushes.add(task)
        task.add_done_callback(self._pushes.discard)

    async def _push_all(self, state: MonitorState) -> None:
        await asyncio.gather(*(self._push(w, state) for w in self.workers))

    async def _push(self, worker: _Worker, state: MonitorState) -> None:
        """Send ``state`` to one worker; a worker that is down gets the latest state when it is restarted."""
        assert self._http is not None
        url = f"http://127.0.0.1:{worker.admin_port}/runtime/monitor"
        try:
            async with self._http.post(url, json=state.to_json()) as response:
                answer = await response.json()
            if not answer.get("ok"):
                log.error("worker %d refused the monitor state %d: %s", worker.index, state.seq, answer.get("error"))
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            log.warning("worker %d did not take the monitor state %d: %s", worker.index, state.seq, exc)

    async def _watch(self, worker: _Worker) -> None:
        """Restart the worker when it dies."""
        while not self._stopping:
            assert worker.proc is not None
            code = await worker.proc.wait()
            if self._stopping:
                return
            log.error("worker %d exited with status %s; restarting it", worker.index, code)
            await asyncio.sleep(0.5)
            try:
                await self._spawn(worker)
            except (OSError, RuntimeError, TimeoutError) as exc:
                log.error("worker %d could not be restarted: %s", worker.index, exc)

    async def _stop_workers(self) -> None:
        for worker in self.workers:
            if worker.proc is not None and worker.proc.returncode is None:
                worker.proc.send_signal(signal.SIGTERM)
        for worker in self.workers:
            if worker.proc is not None:
                try:
                    await asyncio.wait_for(worker.proc.wait(), 10)
                except TimeoutError:
                    worker.proc.kill()

    async def _each(self, method: str, path: str, body: Any = None) -> list[Any]:
        """Call every worker's admin endpoint; returns their JSON answers."""
        assert self._http is not None
        http = self._http

        async def call(worker: _Worker) -> Any:
            url = f"http://127.0.0.1:{worker.admin_port}{path}"
            async with http.request(method, url, json=body) as response:
                return await response.json()

        return list(await asyncio.gather(*(call(w) for w in self.workers)))

    # ------------------------------------------------------------------------------------------ admin provider

    async def stats_snapshot(self) -> dict[str, Any]:
        """The workers' statistics, merged as if one process had them, and the monitor's findings."""
        merged = merge_snapshots(await self._each("GET", "/stats"))
        merged["trx_queue"] = {"queues": self.hot_rows.hot_rows.rows(), "proposals": self.hot_rows.heat.proposals()}
        if self.monitor is not None:
            merged["monitor"] = self.monitor.server_rows()
            merged["monitor_checks"] = self.monitor.check_rows()
        return merged

    async def monitor_log(self, check: str, limit: int | None) -> list[dict[str, Any]]:
        """A monitor check's log."""
        if self.monitor is None:
            raise LookupError("the monitor has not started yet")
        return self.monitor.log_rows(check, limit)

    async def runtime_servers(self) -> list[dict[str, Any]]:
        """The workers' runtime servers, merged: a server one worker has shunned shows as that worker has it."""
        merged: dict[tuple[Any, ...], dict[str, Any]] = {}
        for rows in await self._each("GET", "/runtime/servers"):
            for row in rows:
                key = (row["hostgroup_id"], row["hostname"], row["port"])
                if key not in merged or merged[key]["status"] == "ONLINE":
                    merged[key] = row
        return [merged[key] for key in sorted(merged)]

    async def processlist(self) -> list[dict[str, Any]]:
        """Every worker's sessions, by session id."""
        rows = [row for answer in await self._each("GET", "/processlist") for row in answer]
        return sorted(rows, key=lambda row: row["SessionID"])

    async def kill_session(self, target: int, query_only: bool, username: str | None) -> dict[str, Any]:
        """Kill session ``target`` in the worker that serves it."""
        if target < 1:
            return unknown_thread(target)
        worker = self.workers[worker_of(target, len(self.workers))]
        return await forward_kill(worker.admin_port, self.token, target, query_only, username)

    async def pgsql_cancel(self, pid: int, key: int) -> None:
        """Hand a PostgreSQL cancel request to the worker that serves session ``pid``."""
        if pid >= 1:
            worker = self.workers[worker_of(pid, len(self.workers))]
            assert self._http is not None
            url = f"http://127.0.0.1:{worker.admin_port}/pgsql/cancel"
            try:
                async with self._http.post(url, json={"pid": pid, "key": key}):
                    pass
            except (aiohttp.ClientError, OSError, TimeoutError) as exc:
                log.warning("worker %d did not take a cancel request: %s", worker.index, exc)

    async def pgsql_close_idle(self, database: str) -> int:
        """Close every worker's idle PostgreSQL server connections to ``database``."""
        answers = await self._each("POST", "/pgsql/close_idle", {"database": database})
        return sum(answer["closed"] for answer in answers)

    async def advance_clock(self, seconds: float) -> dict[str, Any]:
        """Move the monitor's clock and every worker's ``seconds`` forward (tests only, ``proxyapp.clock``)."""
        self.clock.advance(seconds)
        await self._each("POST", "/clock", {"advance_s": seconds})
        return {"ok": True, "offset_s": self.clock.offset}

    async def set_worker_ports(self, ports: list[int]) -> None:
        """Only workers take the list."""
        raise LookupError("the supervisor knows its workers' ports itself")

    async def monitor_seq(self) -> int:
        """The number of the monitor's findings."""
        return self.monitor.state.seq if self.monitor is not None else 0

    async def apply_monitor_state(self, document: dict[str, Any]) -> dict[str, Any]:
        """Refused: the supervisor runs the monitor itself."""
        return {"ok": False, "error": "this process runs its own monitor"}

    async def config_document(self) -> dict[str, Any]:
        """The running config."""
        return self.config.to_document()

    async def reset_query_digest(self) -> list[dict[str, Any]]:
        """Every worker's digest rows, merged, then empty tables."""
        return merge_digest_rows(
            [row for rows in await self._each("POST", "/stats/query_digest/reset") for row in rows]
        )

    async def reload(self, document: dict[str, Any] | None) -> ReloadResult:
        """Validate once (the file when ``document`` is None), then load the config in every worker."""
        try:
            config = load_config_file(self.config_path) if document is None else parse_config(document)
            tls = load_tls(config)
        except ConfigError as exc:
            log.error("reload refused, keeping config %s:\n%s", self.config.checksum[:12], exc)
            return ReloadResult.refused(self.config.checksum, exc.errors)
        results = await self._each("POST", "/reload", config.to_document())
        failed = [r for r in results if not r.get("ok")]
        if failed:
            return ReloadResult.refused(self.config.checksum, failed[0].get("errors", []))
        self.config = config
        self.hot_rows.configure(HotRowSettings(config))
        if self.monitor is not None:
            self.monitor.reconfigure(config, tls.backend)
        log.info("config %s loaded in %d workers", config.checksum[:12], len(self.workers))
        return ReloadResult.loaded(config.checksum, config.warnings)
