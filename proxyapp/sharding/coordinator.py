"""A worker's XA coordinator: its decision log, and recovery of the cross-shard transactions its log (or a worker
that no longer runs) left unfinished, for the shards of the config in force.

Made by the proxy when a config has sharded tables (``Coordinator.open``); the log lives in
``mysql-sharding_xa_log_dir`` (default ``xa-log`` beside the config file), one file per worker process, and its xids
start with a prefix made from ``mysql-sharding_xa_identity`` (default: the host's name and the config file's path)
and the worker's number, so that proxies sharing shard servers never resolve each other's transactions. Recovery runs at
once and then from the worker's housekeeping (``sweep``), connecting to the shards' servers as the monitor user
(``proxyapp.sharding.xa``'s docstring tells why that user will do). Worker 0 also recovers the logs of workers
numbered beyond today's count (the node was restarted with fewer).
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Callable
from pathlib import Path

from proxyapp.backends.pool import server_tls
from proxyapp.config.document import Config
from proxyapp.mysql.backend import BackendConnection, Credentials
from proxyapp.mysql.tls import TlsContexts
from proxyapp.sharding.decisions import DecisionLog, log_path, orphaned_workers
from proxyapp.sharding.xa import Connect, Recovery, xid_prefix

log = logging.getLogger("proxyapp.sharding.xa")

#: Seconds recovery may take to connect to a server.
CONNECT_TIMEOUT = 5.0


def log_directory(config: Config, config_path: Path | None) -> Path:
    """Where the decision logs are: ``mysql-sharding_xa_log_dir``, else ``xa-log`` beside the config file (or in
    the working directory for a config given as a document)."""
    configured = config.variables.text("mysql-sharding_xa_log_dir")
    if configured:
        return Path(configured)
    return (config_path.parent if config_path is not None else Path.cwd()) / "xa-log"


def identity(config: Config, config_path: Path | None) -> str:
    """The name that sets this proxy's xids apart from other proxies' on the same shard servers, the same across
    its restarts: ``mysql-sharding_xa_identity``, else the host's name and the config file's path (or
    ``mysql-interfaces`` for a config given as a document)."""
    configured = config.variables.text("mysql-sharding_xa_identity")
    where = str(config_path.resolve()) if config_path is not None else config.variables.text("mysql-interfaces")
    return configured or f"{socket.gethostname()}:{where}"


def shard_servers(config: Config) -> list[str]:
    """The servers (``host:port``) of the hostgroups that serve shards: where prepared branches can be."""
    hostgroups = {shard.hostgroup_id for shard in config.mysql_shards}
    return sorted({f"{s.hostname}:{s.port}" for s in config.mysql_servers if s.hostgroup_id in hostgroups})


def monitor_connect(config: Callable[[], Config], tls: Callable[[], TlsContexts]) -> Connect:
    """How to reach a server (``host:port``) as the monitor user, with the TLS its row asks for in the config
    ``config()`` returns and the backend TLS ``tls()``: what recovery and the table rows poll connect with."""

    async def connect(server: str) -> BackendConnection:
        loaded = config()
        host, _, port = server.rpartition(":")
        row = next((s for s in loaded.mysql_servers if s.hostname == host and str(s.port) == port), None)
        v = loaded.variables
        credentials = Credentials(v.text("mysql-monitor_username"), v.text("mysql-monitor_password"))
        context = server_tls(row, tls().backend) if row is not None else None
        return await BackendConnection.connect(host, int(port), credentials, None, timeout=CONNECT_TIMEOUT, tls=context)

    return connect


class Coordinator:
    """The decision log new cross-shard transactions are written to, and the recoveries of this worker."""

    def __init__(self, log: DecisionLog, recoveries: list[Recovery]) -> None:
        self.log = log
        self.recoveries = recoveries

    @classmethod
    def open(
        cls,
        config: Callable[[], Config],
        config_path: Path | None,
        tls: Callable[[], TlsContexts],
        worker: int,
        workers: int,
    ) -> Coordinator:
        """The coordinator of worker ``worker`` (of ``workers``), for the config ``config()`` returns at each
        recovery pass and the backend TLS ``tls()``; OSError when its log cannot be opened."""
        current = config()
        directory = log_directory(current, config_path)
        name = identity(current, config_path)

        connect = monitor_connect(config, tls)

        def servers() -> list[str]:
            return shard_servers(config())

        own = DecisionLog.open(log_path(directory, worker), xid_prefix(name, worker))
        recoveries = [Recovery(own, servers, connect)]
        if worker == 0:
            for gone in orphaned_workers(directory, workers):
                orphan = DecisionLog.open(log_path(directory, gone), xid_prefix(name, gone))
                recoveries.append(Recovery(orphan, servers, connect))
        return cls(own, recoveries)

    def sweep(self, now: float) -> None:
        """Start the recovery passes due at ``now`` (the proxy's clock)."""
        for recovery in self.recoveries:
            recovery.sweep(now)

    async def close(self) -> None:
        """Stop recovery under way and close the logs."""
        for recovery in self.recoveries:
            await recovery.stop()
        logs = {id(r.log): r.log for r in self.recoveries}
        await asyncio.gather(*(decisions.close() for decisions in logs.values()))
