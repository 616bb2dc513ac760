"""Throwaway MariaDB servers on free loopback ports: a primary and N replicas wired with GTID replication.

Plain Python (no Django): the proxy's tests, ``make run`` and the benchmarks use it directly, and
``python manage.py sandbox`` wraps it. Everything lives under one base directory; a state file there records
what was started, so ``down`` stops only those processes.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

import pymysql

REPO = Path(__file__).resolve().parent.parent
REPL_USER = "repl"
REPL_PASSWORD = "repl-pass"


class SandboxError(RuntimeError):
    """A sandbox server could not be set up or started."""


@dataclass
class SandboxServer:
    """One sandbox server."""

    name: str
    role: str
    host: str
    port: int
    pid: int | None
    datadir: str
    socket: str
    server_id: int
    running: bool = False

    def connect(self, **kwargs: object) -> pymysql.Connection:
        """A root connection over TCP."""
        kwargs.setdefault("connect_timeout", 5)
        return pymysql.connect(host=self.host, port=self.port, user="root", password="", autocommit=True, **kwargs)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pid_alive(pid: int | None) -> bool:
    """Whether a process with this pid runs (a zombie does not)."""
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    try:  # a zombie child of ours is not alive
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] != "Z"
    except OSError:
        return False


class Sandbox:
    """A set of MariaDB servers under ``base_dir``."""

    def __init__(self, base_dir: Path | str = "var/sandbox") -> None:
        base = Path(base_dir)
        self.base_dir = base if base.is_absolute() else REPO / base
        self.state_file = self.base_dir / "sandbox.json"

    # ---------------------------------------------------------------------------------------------- state

    def _load(self) -> list[SandboxServer]:
        if not self.state_file.exists():
            return []
        try:
            rows = json.loads(self.state_file.read_text())
        except (OSError, ValueError):
            return []
        servers = [SandboxServer(**row) for row in rows]
        for s in servers:
            s.running = pid_alive(s.pid)
        return servers

    def _save(self, servers: list[SandboxServer]) -> None:
        self.base_dir.mkdir(parents=True, exist_ok=True)
        self.state_file.write_text(json.dumps([asdict(s) for s in servers], indent=2))

    def status(self) -> list[SandboxServer]:
        """The servers this sandbox started, with whether each still runs."""
        return self._load()

    def primary(self) -> SandboxServer:
        """The primary server."""
        for s in self._load():
            if s.role == "primary":
                return s
        raise SandboxError("the sandbox is not up")

    def replicas(self) -> list[SandboxServer]:
        """The replica servers."""
        return [s for s in self._load() if s.role == "replica"]

    # ---------------------------------------------------------------------------------------------- up/down

    def up(self, replicas: int = 1, semi_sync: bool = False) -> list[SandboxServer]:
        """Start a primary and ``replicas`` replicas (idempotent when already up in that shape)."""
        current = self._load()
        if current and all(s.running for s in current) and len(current) == replicas + 1:
            return current
        if current:
            self.down()
        self.base_dir.mkdir(parents=True, exist_ok=True)
        servers = []
        for i in range(replicas + 1):
            name = "primary" if i == 0 else f"replica{i}"
            datadir = self.base_dir / name / "data"
            servers.append(
                SandboxServer(
                    name=name,
                    role="primary" if i == 0 else "replica",
                    host="127.0.0.1",
                    port=_free_port(),
                    pid=None,
                    datadir=str(datadir),
                    socket=str(self.base_dir / name / "mysqld.sock"),
                    server_id=i + 1,
                )
            )
        self._save(servers)
        try:
            with ThreadPoolExecutor(max_workers=len(servers)) as pool:
                list(pool.map(self._initialise, servers))
                self._save(servers)
                list(pool.map(self._launch, servers))
            self._save(servers)
            self._setup_primary(servers[0], semi_sync)
            for replica in servers[1:]:
                self._setup_replica(replica, servers[0], semi_sync)
        except BaseException:
            self.down()
            raise
        self.wait_replicated()
        return self._load()

    def _initialise(self, server: SandboxServer) -> None:
        datadir = Path(server.datadir)
        if datadir.exists():
            shutil.rmtree(datadir)
        datadir.mkdir(parents=True)
        tmpdir = datadir.parent / "tmp"
        tmpdir.mkdir(exist_ok=True)
        result = subprocess.run(
            [
                "mariadb-install-db",
                "--no-defaults",
                "--user=root",
                f"--datadir={datadir}",
                "--auth-root-authentication-method=normal",
                "--skip-test-db",
                "--skip-name-resolve",
            ],
            capture_output=True,
            text=True,
            timeout=120,
            env=dict(os.environ, TMPDIR=str(tmpdir)),
        )
        if result.returncode != 0:
            raise SandboxError(f"mariadb-install-db failed for {server.name}:\n{result.stdout}\n{result.stderr}")

    def _command(self, server: SandboxServer) -> list[str]:
        base = Path(server.datadir).parent
        args = [
            "mariadbd",
            "--no-defaults",
            "--user=root",
            f"--datadir={server.datadir}",
            f"--port={server.port}",
            "--bind-address=127.0.0.1",
            f"--socket={server.socket}",
            f"--tmpdir={base / 'tmp'}",
            f"--pid-file={base / 'mysqld.pid'}",
            f"--log-error={base / 'error.log'}",
            f"--server-id={server.server_id}",
            "--log-bin=mysql-bin",
            "--log-slave-updates",
            "--binlog-format=ROW",
            "--gtid-strict-mode=ON",
            "--skip-name-resolve",
            "--innodb-buffer-pool-size=64M",
            "--innodb-log-file-size=16M",
            "--innodb-flush-log-at-trx-commit=2",
            "--sync-binlog=0",
            "--max-connections=2000",
            "--performance-schema=OFF",
            "--local-infile=1",
            "--max-allowed-packet=256M",
        ]
        if server.role == "replica":
            args.append("--read-only=1")
        return args

    def _launch(self, server: SandboxServer) -> None:
        log = open(Path(server.datadir).parent / "stdout.log", "ab")  # noqa: SIM115 - handed to the child
        proc = subprocess.Popen(self._command(server), stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        server.pid = proc.pid
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise SandboxError(f"{server.name} exited with {proc.returncode}:\n{self._log_tail(server)}")
            try:
                server.connect().close()
                server.running = True
                return
            except pymysql.err.OperationalError:
                time.sleep(0.1)
        raise SandboxError(f"{server.name} did not accept connections within 60 s:\n{self._log_tail(server)}")

    def _log_tail(self, server: SandboxServer) -> str:
        path = Path(server.datadir).parent / "error.log"
        try:
            return "\n".join(path.read_text(errors="replace").splitlines()[-20:])
        except OSError:
            return "(no error log)"

    def _setup_primary(self, primary: SandboxServer, semi_sync: bool) -> None:
        with primary.connect() as conn, conn.cursor() as cur:
            for statement in (
                "CREATE USER IF NOT EXISTS 'root'@'127.0.0.1' IDENTIFIED BY ''",
                "GRANT ALL ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION",
                "CREATE USER IF NOT EXISTS 'root'@'%' IDENTIFIED BY ''",
                "GRANT ALL ON *.* TO 'root'@'%' WITH GRANT OPTION",
                f"CREATE USER IF NOT EXISTS '{REPL_USER}'@'%' IDENTIFIED BY '{REPL_PASSWORD}'",
                f"GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO '{REPL_USER}'@'%'",
                "CREATE DATABASE IF NOT EXISTS test",
            ):
                cur.execute(statement)
            if semi_sync:
                cur.execute("SET GLOBAL rpl_semi_sync_master_enabled = ON")
                cur.execute("SET GLOBAL rpl_semi_sync_master_timeout = 10000")

    def _setup_replica(self, replica: SandboxServer, primary: SandboxServer, semi_sync: bool) -> None:
        with replica.connect() as conn, conn.cursor() as cur:
            cur.execute("RESET MASTER")  # its own install wrote binlog events; start from the primary's history
            if semi_sync:
                cur.execute("SET GLOBAL rpl_semi_sync_slave_enabled = ON")
            cur.execute(
                f"CHANGE MASTER TO MASTER_HOST='{primary.host}', MASTER_PORT={primary.port}, "
                f"MASTER_USER='{REPL_USER}', MASTER_PASSWORD='{REPL_PASSWORD}', "
                "MASTER_USE_GTID=slave_pos, MASTER_CONNECT_RETRY=1"
            )
            cur.execute("START SLAVE")
            deadline = time.monotonic() + 30
            while True:
                cur.execute("SHOW SLAVE STATUS")
                cols = [d[0] for d in cur.description]
                row = dict(zip(cols, cur.fetchone() or (), strict=False))
                if row.get("Slave_IO_Running") == "Yes" and row.get("Slave_SQL_Running") == "Yes":
                    return
                if time.monotonic() > deadline:
                    raise SandboxError(
                        f"replication on {replica.name} did not start: {row.get('Last_IO_Error')} "
                        f"{row.get('Last_SQL_Error')}"
                    )
                time.sleep(0.1)

    def wait_replicated(self, timeout: float = 30) -> None:
        """Wait until every running replica has applied everything the primary has written."""
        primary = self.primary()
        with primary.connect() as conn, conn.cursor() as cur:
            cur.execute("SELECT @@gtid_binlog_pos")
            position = cur.fetchone()[0]
        for replica in self.replicas():
            if not replica.running:
                continue
            with replica.connect() as conn, conn.cursor() as cur:
                cur.execute("SELECT MASTER_GTID_WAIT(%s, %s)", (position, timeout))
                if cur.fetchone()[0] != 0:
                    raise SandboxError(f"{replica.name} did not reach GTID {position} within {timeout} s")

    def down(self) -> None:
        """Stop the servers this sandbox started and remove its data."""
        for server in self._load():
            self._stop(server)
        if self.base_dir.exists():
            shutil.rmtree(self.base_dir, ignore_errors=True)

    def _stop(self, server: SandboxServer, sig: int = signal.SIGTERM) -> None:
        if not pid_alive(server.pid):
            return
        assert server.pid is not None
        os.kill(server.pid, sig)
        deadline = time.monotonic() + 30
        while pid_alive(server.pid) and time.monotonic() < deadline:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(server.pid, os.WNOHANG)
            time.sleep(0.05)
        if pid_alive(server.pid):
            os.kill(server.pid, signal.SIGKILL)

    def kill(self, name: str, sig: int = signal.SIGKILL) -> None:
        """Stop one server abruptly (SIGKILL by default), keeping its data for ``start``."""
        for server in self._load():
            if server.name == name:
                self._stop(server, sig)
                return
        raise SandboxError(f"no sandbox server named {name}")

    def start(self, name: str) -> SandboxServer:
        """Start a stopped server again with its data directory and port."""
        servers = self._load()
        for server in servers:
            if server.name == name:
                if not server.running:
                    self._launch(server)
                    self._save(servers)
                return server
        raise SandboxError(f"no sandbox server named {name}")
