"""Throwaway MariaDB servers on free loopback ports: a primary and N replicas wired with GTID replication.

Plain Python (no Django): the proxy's tests, ``make run`` and the benchmarks use it directly, and
``python -m devstack.sandboxes mysql`` wraps it. Everything lives under one base directory; its state file
(``sandbox.json``) records the shape and every server's port and pid, so ``down`` stops only those processes.

Every server has ``root`` with no password over TCP, and the primary creates (and so replicates to every
replica) the databases ``test`` and ``app`` and the users ``repl`` (replication), ``app`` (for demos and proxy
tests: every privilege but READ_ONLY ADMIN, so a replica's read_only refuses its writes) and ``monitor``
(ProxySQL's default monitor login).

``up(tls=True)`` makes a CA and a server certificate for 127.0.0.1 (``cryptography``, no openssl command) in
``<base>/tls`` and starts every server with them (``ssl-ca``, ``ssl-cert``, ``ssl-key``): clients verify the servers
against ``Sandbox.ca_file``.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pymysql

from devstack.ports import free_port
from devstack.sandboxbase import (
    SandboxedServer,
    SandboxError,
    ServerSandbox,
    log_since,
    log_tail,
    pid_alive,
    wait_gone,
)
from proxyapp.mysql.tls import make_certificate

HOST = "127.0.0.1"
REPL_USER, REPL_PASSWORD = "repl", "repl-pass"
APP_USER, APP_PASSWORD = "app", "app-pass"
MONITOR_USER, MONITOR_PASSWORD = "monitor", "monitor"
#: How long a semi-sync primary waits for a replica's ack before it falls back to asynchronous replication (ms).
SEMI_SYNC_TIMEOUT_MS = 2000

_START_TIMEOUT = 60.0
_STOP_TIMEOUT = 60.0
_PORT_TRIES = 3
_SOCKET_PATH_MAX = 107  # sun_path is 108 bytes with its terminating NUL
_PORT_IN_USE = "Address already in use"

_PRIMARY_SETUP = (
    "CREATE USER IF NOT EXISTS 'root'@'%' IDENTIFIED BY ''",
    "GRANT ALL ON *.* TO 'root'@'%' WITH GRANT OPTION",
    f"CREATE USER IF NOT EXISTS '{REPL_USER}'@'%' IDENTIFIED BY '{REPL_PASSWORD}'",
    f"GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO '{REPL_USER}'@'%'",
    f"CREATE USER IF NOT EXISTS '{APP_USER}'@'%' IDENTIFIED BY '{APP_PASSWORD}'",
    f"GRANT ALL ON *.* TO '{APP_USER}'@'%'",
    f"REVOKE READ_ONLY ADMIN ON *.* FROM '{APP_USER}'@'%'",  # so a replica's read_only applies to the app
    f"CREATE USER IF NOT EXISTS '{MONITOR_USER}'@'%' IDENTIFIED BY '{MONITOR_PASSWORD}'",
    f"GRANT REPLICATION CLIENT, REPLICA MONITOR ON *.* TO '{MONITOR_USER}'@'%'",
    "CREATE DATABASE IF NOT EXISTS test",
    "CREATE DATABASE IF NOT EXISTS app",
)


@dataclass
class SandboxServer(SandboxedServer):
    """One sandbox server. Its ``home`` holds its
    datadir, error log, pid file and tmpdir."""

    socket: str
    server_id: int

    @property
    def error_log(self) -> Path:
        """The server's error log."""
        return self.home / "error.log"

    def connect(self, **kwargs: Any) -> pymysql.Connection:
        """A PyMySQL connection over TCP: root with no password and autocommit unless ``kwargs`` say otherwise."""
        kwargs.setdefault("user", "root")
        kwargs.setdefault("password", "")
        kwargs.setdefault("autocommit", True)
        kwargs.setdefault("connect_timeout", 5)
        return pymysql.connect(host=self.host, port=self.port, **kwargs)


@dataclass
class _State:
    """What ``sandbox.json`` holds: the shape asked for and the servers started."""

    replicas: int
    semi_sync: bool
    servers: list[SandboxServer] = field(default_factory=list)
    tls: bool = False  # the servers offer TLS with the sandbox's certificates


def _is_server_process(server: SandboxServer) -> bool:
    """Whether the recorded pid is alive and still the mariadbd started on this server's datadir."""
    if not pid_alive(server.pid):
        return False
    try:
        argv = Path(f"/proc/{server.pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return f"--datadir={server.datadir}".encode() in argv


class Sandbox(ServerSandbox[SandboxServer, _State]):
    """A primary and replicas under ``base_dir`` (relative paths are taken from the repository root)."""

    def __init__(self, base_dir: Path | str = "var/sandbox") -> None:
        super().__init__(base_dir, "sandbox.json")

    # --- state ------------------------------------------------------------------------------------------

    def _load(self) -> _State | None:
        try:
            doc = json.loads(self.state_file.read_text())
            servers = [SandboxServer(**row) for row in doc["servers"]]
            state = _State(doc["replicas"], doc["semi_sync"], servers, doc.get("tls", False))
        except (OSError, ValueError, KeyError, TypeError):
            return None
        for server in state.servers:
            server.running = _is_server_process(server)
        return state

    def _save(self, state: _State) -> None:
        rows = [{k: v for k, v in asdict(s).items() if k != "running"} for s in state.servers]
        doc = {"replicas": state.replicas, "semi_sync": state.semi_sync, "servers": rows, "tls": state.tls}
        tmp = self.state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(doc, indent=2))
        tmp.replace(self.state_file)

    def _stop(self, servers: list[SandboxServer], sig: int) -> None:
        """Signal the servers' processes (only those that are still ours) and wait until they are gone."""
        pids = [s.pid for s in servers if s.pid and _is_server_process(s)]
        for pid in pids:
            os.kill(pid, sig)
        stubborn = wait_gone(pids, 10 if sig == signal.SIGKILL else _STOP_TIMEOUT)
        for pid in stubborn:
            os.kill(pid, signal.SIGKILL)
        if wait_gone(stubborn, 10):
            raise SandboxError(f"could not stop the mariadbd processes {stubborn}")
        for server in servers:
            server.running = False

    # --- up and down ------------------------------------------------------------------------------------

    @property
    def tls_dir(self) -> Path:
        """Where a TLS sandbox keeps its certificates: ``ca.pem``, ``server-cert.pem``, ``server-key.pem``."""
        return self.base_dir / "tls"

    @property
    def ca_file(self) -> Path:
        """The CA certificate a TLS sandbox's servers are verified against."""
        return self.tls_dir / "ca.pem"

    def _make_certificates(self) -> None:
        """A CA and a server certificate for ``HOST`` and localhost, signed by it, into ``tls_dir``."""
        self.tls_dir.mkdir(parents=True, exist_ok=True)
        ca = make_certificate("ProxyFleet sandbox CA", is_ca=True)
        cert, key = make_certificate("ProxyFleet sandbox server", issuer=ca, hosts=(HOST, "localhost"))
        self.ca_file.write_bytes(ca[0])
        (self.tls_dir / "server-cert.pem").write_bytes(cert)
        (self.tls_dir / "server-key.pem").write_bytes(key)

    def up(self, replicas: int = 1, semi_sync: bool = False, tls: bool = False) -> list[SandboxServer]:
        """Start a primary and ``replicas`` replicas and wire replication; returns the servers, primary first.
        With ``tls`` the servers offer TLS (see the module's docstring).

        Idempotent, and it keeps data: a sandbox already in this shape keeps its running servers as they are and
        starts its stopped ones again on their datadirs and ports (a restart of ``make run`` finds its data where
        it left it). Only a sandbox of another shape, or one whose stopped server cannot start, is built afresh.
        """
        if replicas < 0:
            raise SandboxError("replicas must be 0 or more")
        state = self._load()
        same_shape = state is not None and (state.replicas, state.semi_sync, state.tls) == (replicas, semi_sync, tls)
        if same_shape and state is not None and state.servers:
            try:
                for server in state.servers:
                    if not server.running:
                        self.start(server.name)
                self.wait_replicated()
                return self.status()
            except (SandboxError, OSError, pymysql.MySQLError) as exc:
                print(f"sandbox {self.base_dir}: cannot restart it as it was ({exc}); building it afresh", flush=True)
        self.down()
        self.base_dir.mkdir(parents=True, exist_ok=True)
        if tls:
            self._make_certificates()
        state = _State(replicas, semi_sync, [self._new_server(i) for i in range(replicas + 1)], tls)
        self._save(state)
        try:
            with ThreadPoolExecutor(max_workers=len(state.servers)) as pool:
                list(pool.map(lambda s: self._initialise_and_launch(state, s), state.servers))
                self._save(state)
                primary, *others = state.servers
                self._setup_primary(primary)
                list(pool.map(lambda r: self._setup_replica(r, primary), others))
            self.wait_replicated()
        except BaseException:
            self._stop(state.servers, signal.SIGKILL)
            shutil.rmtree(self.base_dir, ignore_errors=True)
            raise
        return self.status()

    def wait_replicated(self, timeout: float = 30) -> None:
        """Wait until every running replica has applied everything in the primary's binlog (its GTID position)."""
        deadline = time.monotonic() + timeout
        with self.primary().connect() as conn, conn.cursor() as cur:
            cur.execute("SELECT @@gtid_binlog_pos")
            position = cur.fetchone()[0]
        for replica in self.replicas():
            if not replica.running:
                continue
            with replica.connect() as conn, conn.cursor() as cur:
                cur.execute("SELECT MASTER_GTID_WAIT(%s, %s)", (position, max(deadline - time.monotonic(), 0.1)))
                if cur.fetchone()[0] != 0:
                    status = _slave_status(cur)
                    raise SandboxError(
                        f"{replica.name} did not reach GTID {position} within {timeout} s (it is at "
                        f"{status.get('Gtid_Slave_Pos')!r}; IO {status.get('Slave_IO_Running')}, "
                        f"SQL {status.get('Slave_SQL_Running')}; {_replication_errors(status)})"
                    )

    # --- one server -------------------------------------------------------------------------------------

    def _new_server(self, index: int) -> SandboxServer:
        name = "primary" if index == 0 else f"replica{index}"
        home = self.base_dir / name
        sock = home / "mysqld.sock"
        if len(str(sock)) > _SOCKET_PATH_MAX:
            raise SandboxError(f"the sandbox directory is too deep for a unix socket path ({sock}); use a shorter one")
        return SandboxServer(
            name=name,
            role="primary" if index == 0 else "replica",
            host=HOST,
            port=free_port(),
            pid=None,
            datadir=str(home / "data"),
            socket=str(sock),
            server_id=index + 1,
        )

    def _initialise_and_launch(self, state: _State, server: SandboxServer) -> None:
        self._initialise(server)
        self._launch(state, server, port_may_change=True)

    def _initialise(self, server: SandboxServer) -> None:
        (server.home / "tmp").mkdir(parents=True, exist_ok=True)
        command = [
            "mariadb-install-db",
            "--no-defaults",
            "--user=root",
            f"--datadir={server.datadir}",
            "--auth-root-authentication-method=normal",
            "--skip-test-db",
            "--skip-name-resolve",
            # Passed on to the bootstrap server: the redo log is created at its final size.
            "--innodb-log-file-size=16M",
            "--innodb-buffer-pool-size=64M",
        ]
        try:
            result = subprocess.run(
                command,
                capture_output=True,
                text=True,
                timeout=120,
                env=dict(os.environ, TMPDIR=str(server.home / "tmp")),
            )
        except FileNotFoundError:
            raise SandboxError("mariadb-install-db not found: install mariadb-server") from None
        if result.returncode != 0:
            raise SandboxError(f"mariadb-install-db failed for {server.name}:\n{result.stdout}\n{result.stderr}")

    def _command(self, state: _State, server: SandboxServer) -> list[str]:
        args = [
            shutil.which("mariadbd") or "/usr/sbin/mariadbd",
            "--no-defaults",
            "--user=root",
            f"--datadir={server.datadir}",
            f"--port={server.port}",
            f"--bind-address={HOST}",
            f"--socket={server.socket}",
            f"--tmpdir={server.home / 'tmp'}",
            f"--pid-file={server.home / 'mysqld.pid'}",
            f"--log-error={server.error_log}",
            f"--server-id={server.server_id}",
            "--log-bin=mysql-bin",
            "--relay-log=relay-bin",
            "--log-slave-updates",
            "--binlog-format=ROW",
            "--gtid-strict-mode=ON",
            "--skip-name-resolve",
            "--innodb-buffer-pool-size=64M",
            "--innodb-log-file-size=16M",
            "--innodb-flush-log-at-trx-commit=2",
            "--sync-binlog=0",
            "--max-connections=2000",
            "--max-allowed-packet=256M",
            "--performance-schema=OFF",
            "--local-infile=1",
        ]
        if server.role == "replica":
            args.append("--read-only=1")
        if state.tls:
            args += [
                f"--ssl-ca={self.ca_file}",
                f"--ssl-cert={self.tls_dir / 'server-cert.pem'}",
                f"--ssl-key={self.tls_dir / 'server-key.pem'}",
            ]
        if state.semi_sync:
            # Both sides on every server, so a promoted replica is a semi-sync primary at once; with no replica
            # connected (as while ``up`` sets the primary up) a commit does not wait for an ack.
            args += [
                "--rpl-semi-sync-master-enabled=ON",
                f"--rpl-semi-sync-master-timeout={SEMI_SYNC_TIMEOUT_MS}",
                "--rpl-semi-sync-master-wait-no-slave=OFF",
                "--rpl-semi-sync-slave-enabled=ON",
            ]
        return args

    def _launch(self, state: _State, server: SandboxServer, port_may_change: bool) -> None:
        """Start mariadbd detached and wait until root can log in over TCP; retry on another port if a free
        port was taken meanwhile (when the port may change)."""
        for attempt in range(1, _PORT_TRIES + 1):
            log_offset = server.error_log.stat().st_size if server.error_log.exists() else 0
            with open(server.home / "stdout.log", "ab") as out:
                proc = subprocess.Popen(
                    self._command(state, server),
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            server.pid = proc.pid
            if self._wait_ready(server, proc):
                server.running = True
                return
            server.pid = None
            if port_may_change and attempt < _PORT_TRIES and _PORT_IN_USE in log_since(server.error_log, log_offset):
                server.port = free_port()
                continue
            raise SandboxError(
                f"{server.name} exited with status {proc.returncode}; the end of {server.error_log}:\n"
                f"{log_tail(server.error_log)}"
            )

    def _wait_ready(self, server: SandboxServer, proc: subprocess.Popen[bytes]) -> bool:
        """True once root can log in to this server (``_is_ours``), False if mariadbd exited first; kills it and
        raises on a timeout."""
        deadline = time.monotonic() + _START_TIMEOUT
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                return False
            try:
                if self._is_ours(server):
                    return True
            except pymysql.err.MySQLError:
                pass
            time.sleep(0.05)
        self._stop([server], signal.SIGKILL)
        raise SandboxError(
            f"{server.name} did not accept a root login on port {server.port} within {_START_TIMEOUT:.0f} s; "
            f"the end of {server.error_log}:\n{log_tail(server.error_log)}"
        )

    @staticmethod
    def _is_ours(server: SandboxServer) -> bool:
        """Whether the server answering on ``server``'s port is this one (by its data directory). Another sandbox's
        server that took the port first answers too while this one, still starting, has yet to fail to bind it: taken
        for this one, it was made a replica of a server with its own server id."""
        with server.connect() as conn, conn.cursor() as cur:
            cur.execute("SELECT @@datadir")
            row = cur.fetchone()
        return row is not None and Path(row[0]).resolve() == Path(server.datadir).resolve()

    @staticmethod
    def _setup_primary(primary: SandboxServer) -> None:
        with primary.connect() as conn, conn.cursor() as cur:
            for statement in _PRIMARY_SETUP:
                cur.execute(statement)

    @staticmethod
    def _setup_replica(replica: SandboxServer, primary: SandboxServer) -> None:
        with replica.connect() as conn, conn.cursor() as cur:
            cur.execute(
                f"CHANGE MASTER TO MASTER_HOST='{primary.host}', MASTER_PORT={primary.port}, "
                f"MASTER_USER='{REPL_USER}', MASTER_PASSWORD='{REPL_PASSWORD}', "
                "MASTER_USE_GTID=slave_pos, MASTER_CONNECT_RETRY=1"
            )
            cur.execute("START SLAVE")
            deadline = time.monotonic() + 30
            while True:
                status = _slave_status(cur)
                if status.get("Slave_IO_Running") == "Yes" and status.get("Slave_SQL_Running") == "Yes":
                    return
                if time.monotonic() > deadline:
                    raise SandboxError(f"replication on {replica.name} did not start: {_replication_errors(status)}")
                time.sleep(0.05)


#: Where ``make run`` keeps its independent shard servers, one sandbox of a primary each (``shard0``, ``shard1``...).
SHARDS_DIR = "var/shards"


def shard_sandboxes(count: int, base_dir: Path | str = SHARDS_DIR) -> list[Sandbox]:
    """``count`` independent servers for the shards of a shard group: a sandbox of one primary each under
    ``base_dir`` (``shard0``, ``shard1``...), up with ``up(replicas=0)``, kept across restarts like any sandbox."""
    return [Sandbox(Path(base_dir) / f"shard{number}") for number in range(count)]


def _slave_status(cur: pymysql.cursors.Cursor) -> dict[str, Any]:
    cur.execute("SHOW SLAVE STATUS")
    row = cur.fetchone()
    return dict(zip([d[0] for d in cur.description], row, strict=True)) if row else {}


def _replication_errors(status: dict[str, Any]) -> str:
    if not status:
        return "no replication configured"
    return f"IO error: {status.get('Last_IO_Error') or 'none'}; SQL error: {status.get('Last_SQL_Error') or 'none'}"
