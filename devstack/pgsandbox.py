"""Throwaway PostgreSQL servers on free loopback ports: a primary and N streaming replicas, Debian's binaries.

The PostgreSQL twin of ``devstack/sandbox.py`` (plain Python, no Django; ``python -m devstack.sandboxes pgsql``
wraps it): everything lives under one base directory whose state file (``pgsandbox.json``) records the shape, the
settings and every server's port and pid, so ``down`` stops only those processes. The binaries are those of the
newest version under ``/usr/lib/postgresql`` (``initdb``, ``postgres``, ``pg_basebackup``). PostgreSQL refuses to run
as root, so a root caller runs them as the ``postgres`` system user, which then owns the base directory.

Each server listens on 127.0.0.1 only, its unix socket in its own directory (``<base>/<name>``). Replicas are
``pg_basebackup`` copies of the primary, streaming from it (``standby.signal``, ``primary_conninfo`` naming the
replica as its ``application_name``) and in hot standby. Durability is relaxed (``fsync=off``,
``synchronous_commit=off``) as the MariaDB sandbox relaxes it: the data is thrown away.

Roles (made on the primary, so every replica has them): ``postgres`` (superuser; trust over TCP from 127.0.0.1 and
over the socket, for the tests' own set-up), ``app``/``app-pass`` (SCRAM-SHA-256; owns the databases ``app`` and
``test``), ``md5user``/``md5-pass`` (an MD5-hashed password and an ``md5`` line in pg_hba.conf: the one login that
authenticates with MD5) and ``monitor``/``monitor`` (SCRAM, member of ``pg_monitor``: reads
``pg_stat_replication`` whole and calls ``pg_is_in_recovery()``).

``up(tls="on")`` makes a CA and a server certificate for 127.0.0.1 (``proxyapp.mysql.tls.make_certificate``) and
puts the certificate and its key (0600, owned by the servers' user) in every datadir, which the servers then serve
TLS with (``ssl = on``); clients verify them against ``PgSandbox.ca_file``. ``up(tls="required")`` besides refuses
every TCP login without TLS (``hostnossl ... reject`` in pg_hba.conf), the replicas' streaming included (libpq's
default ``sslmode=prefer`` takes TLS); logins over the unix socket stay as they are.
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import re
import shutil
import signal
import subprocess
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import psycopg

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
from devstack.stack import REPO, wait_until
from proxyapp.mysql.tls import make_certificate

HOST = "127.0.0.1"
PG_LIB = Path("/usr/lib/postgresql")
#: The system user the servers run as when the caller is root (PostgreSQL refuses root).
SYSTEM_USER = "postgres"
SUPERUSER = "postgres"
APP_USER, APP_PASSWORD = "app", "app-pass"
MD5_USER, MD5_PASSWORD = "md5user", "md5-pass"
MONITOR_USER, MONITOR_PASSWORD = "monitor", "monitor"
APP_DATABASES = ("app", "test")
STATE_FILE = "pgsandbox.json"
#: What ``up(tls=...)`` asks: no TLS, TLS offered, TLS required of every login over TCP.
TLS_MODES = ("off", "on", "required")
#: The settings a TLS sandbox's servers get (the files are in the datadir, which relative paths are taken from).
TLS_SETTINGS = {"ssl": "on", "ssl_cert_file": "server.crt", "ssl_key_file": "server.key"}

#: Every server's settings unless ``up(settings=...)`` says otherwise (given on the command line, so they hold on
#: the replicas whatever ``pg_basebackup`` copied).
DEFAULT_SETTINGS: dict[str, str] = {
    "listen_addresses": HOST,
    "max_connections": "200",
    "shared_buffers": "64MB",
    "fsync": "off",
    "synchronous_commit": "off",
    "wal_level": "replica",
    "max_wal_senders": "10",
    "wal_keep_size": "256MB",
    "hot_standby": "on",
    "wal_receiver_status_interval": "1s",
    "password_encryption": "scram-sha-256",
    "logging_collector": "off",
}

_PG_HBA_HEADER = """# written by devstack/pgsandbox.py
# TYPE  DATABASE     USER        ADDRESS        METHOD
"""
_PG_HBA = f"""local   all          all                        trust
host    all          {SUPERUSER}    {HOST}/32   trust
host    replication  {SUPERUSER}    {HOST}/32   trust
host    all          {MD5_USER}     {HOST}/32   md5
host    all          all         {HOST}/32   scram-sha-256
"""

#: The lines a ``tls="required"`` sandbox puts first in pg_hba.conf: a TCP login without TLS is refused.
_PG_HBA_TLS_ONLY = f"""hostnossl all          all         {HOST}/32   reject
hostnossl replication  all         {HOST}/32   reject
"""

_PRIMARY_SETUP = (
    f"CREATE ROLE {APP_USER} LOGIN PASSWORD '{APP_PASSWORD}'",
    "SET password_encryption = 'md5'",
    f"CREATE ROLE {MD5_USER} LOGIN PASSWORD '{MD5_PASSWORD}'",
    "RESET password_encryption",
    f"CREATE ROLE {MONITOR_USER} LOGIN PASSWORD '{MONITOR_PASSWORD}' IN ROLE pg_monitor",
    *(f"CREATE DATABASE {name} OWNER {APP_USER}" for name in APP_DATABASES),
)

_START_TIMEOUT = 60.0
_STOP_TIMEOUT = 60.0
_PORT_TRIES = 3
_SOCKET_PATH_MAX = 107  # sun_path is 108 bytes with its terminating NUL
_PORT_IN_USE = "Address already in use"
_POLL_S = 0.02


def bin_dir(root: Path = PG_LIB) -> Path:
    """The bin directory of the newest PostgreSQL version installed under ``root`` (Debian's ``N/bin``)."""
    found = [path.parent for path in root.glob("*/bin/postgres")]
    if not found:
        raise SandboxError(f"no PostgreSQL server under {root}: install postgresql")
    return max(found, key=lambda path: [int(part) for part in re.findall(r"\d+", path.parent.name)] or [0])


def _system_user() -> pwd.struct_passwd | None:
    """The user the servers run as: ``SYSTEM_USER`` when we are root, None (ourselves) otherwise."""
    if os.geteuid() != 0:
        return None
    try:
        return pwd.getpwnam(SYSTEM_USER)
    except KeyError:
        raise SandboxError(f"running as root needs the {SYSTEM_USER!r} system user (Debian's postgresql)") from None


def owned_dir(path: Path) -> Path:
    """Make ``path`` a directory the servers' user owns, and reachable by it: the directories above it in the
    repository get search permission for others (``var/`` is 0700 once ``make run`` ran; search permission lets
    nobody list it)."""
    path.mkdir(parents=True, exist_ok=True)
    user = _system_user()
    if user is not None:
        os.chown(path, user.pw_uid, user.pw_gid)
        for parent in path.resolve().parents:
            if parent == REPO or not parent.is_relative_to(REPO):
                break
            parent.chmod(parent.stat().st_mode | 0o001)
    return path


def as_server_user() -> dict[str, Any]:
    """``subprocess`` arguments that run a child as the servers' user (nothing when we are not root): PostgreSQL's
    programs, and PgBouncer, which refuses root too."""
    user = _system_user()
    if user is None:
        return {}
    return {"user": user.pw_uid, "group": user.pw_gid, "extra_groups": [], "env": _env(user.pw_dir)}


def _env(home: str) -> dict[str, str]:
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": home, "LC_ALL": "C.UTF-8"}


@dataclass
class PgServer(SandboxedServer):
    """One sandbox server. Its ``home`` holds its
    datadir, its log and its unix socket."""

    socket_dir: str

    @property
    def log(self) -> Path:
        """What the server wrote to stderr (its log)."""
        return self.home / "postgres.log"

    def connect(self, **kwargs: Any) -> psycopg.Connection[Any]:
        """A psycopg connection over TCP: ``postgres`` to the ``postgres`` database, autocommit, unless ``kwargs``
        say otherwise (``user``, ``password``, ``dbname``, any libpq parameter)."""
        kwargs.setdefault("user", SUPERUSER)
        kwargs.setdefault("dbname", "postgres")
        kwargs.setdefault("autocommit", True)
        kwargs.setdefault("connect_timeout", 5)
        return psycopg.connect(host=self.host, port=self.port, **kwargs)

    def children(self) -> list[int]:
        """The pids of the postmaster's children (its backends and auxiliary processes) right now."""
        try:
            return [int(pid) for pid in Path(f"/proc/{self.pid}/task/{self.pid}/children").read_text().split()]
        except (OSError, ValueError):
            return []


@dataclass
class _State:
    """What the state file holds: the shape and settings asked for and the servers started."""

    replicas: int
    settings: dict[str, str]
    servers: list[PgServer] = field(default_factory=list)
    tls: str = "off"  # one of TLS_MODES


def _is_server_process(server: PgServer) -> bool:
    """Whether the recorded pid is alive and still the postmaster started on this server's datadir."""
    if not pid_alive(server.pid):
        return False
    try:
        argv = Path(f"/proc/{server.pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return server.datadir.encode() in argv


class PgSandbox(ServerSandbox[PgServer, _State]):
    """A primary and streaming replicas under ``base_dir`` (relative paths are taken from the repository root)."""

    WHAT = "PostgreSQL sandbox"
    STOP_SIGNAL = signal.SIGINT  # PostgreSQL's fast shutdown
    DOWN_SIGNAL = signal.SIGQUIT  # its immediate one: the data is thrown away

    def __init__(self, base_dir: Path | str = "var/pgsandbox") -> None:
        super().__init__(base_dir, STATE_FILE)

    # --- state ------------------------------------------------------------------------------------------

    def _load(self) -> _State | None:
        try:
            doc = json.loads(self.state_file.read_text())
            servers = [PgServer(**row) for row in doc["servers"]]
            state = _State(doc["replicas"], doc["settings"], servers, doc.get("tls", "off"))
        except (OSError, ValueError, KeyError, TypeError):
            return None
        for server in state.servers:
            server.running = _is_server_process(server)
        return state

    def _save(self, state: _State) -> None:
        rows = [{k: v for k, v in asdict(s).items() if k != "running"} for s in state.servers]
        tmp = self.state_file.with_suffix(".tmp")
        doc = {"replicas": state.replicas, "settings": state.settings, "servers": rows, "tls": state.tls}
        tmp.write_text(json.dumps(doc, indent=2))
        tmp.replace(self.state_file)

    def _stop(self, servers: list[PgServer], sig: int) -> None:
        """Signal the servers' postmasters (only those still ours) and wait until they and their children are gone:
        SIGINT is PostgreSQL's fast shutdown, SIGQUIT its immediate one, SIGKILL leaves the children to notice."""
        ours = [s for s in servers if s.pid and _is_server_process(s)]
        pids = [pid for s in ours for pid in (s.pid, *s.children()) if pid]
        for server in ours:
            assert server.pid is not None
            os.kill(server.pid, sig)
        stubborn = wait_gone(pids, 10 if sig in (signal.SIGKILL, signal.SIGQUIT) else _STOP_TIMEOUT)
        for pid in stubborn:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        if wait_gone(stubborn, 10):
            raise SandboxError(f"could not stop the postgres processes {stubborn}")
        for server in servers:
            server.running = False

    # --- up and down ------------------------------------------------------------------------------------

    @property
    def ca_file(self) -> Path:
        """The CA certificate a TLS sandbox's servers are verified against (``sslrootcert``)."""
        return self.base_dir / "ca.pem"

    def up(self, replicas: int = 1, settings: dict[str, str] | None = None, tls: str = "off") -> list[PgServer]:
        """Start a primary and ``replicas`` streaming replicas and wait until every replica streams and has replayed
        the primary's WAL; returns the servers, primary first. ``settings`` are server settings over
        ``DEFAULT_SETTINGS`` (``{"max_connections": "1100"}``, say), the same on every server; ``tls`` is one of
        ``TLS_MODES`` (see the module's docstring).

        Idempotent, and it keeps data, as the MariaDB sandbox's ``up``: a sandbox already in this shape with these
        settings keeps its running servers and starts its stopped ones again; any other is built afresh."""
        if replicas < 0:
            raise SandboxError("replicas must be 0 or more")
        if tls not in TLS_MODES:
            raise SandboxError(f"tls must be one of {', '.join(TLS_MODES)}, not {tls!r}")
        wanted = {**DEFAULT_SETTINGS, **(TLS_SETTINGS if tls != "off" else {}), **(settings or {})}
        state = self._load()
        if state is not None and self.base_dir.exists():
            owned_dir(self.base_dir)  # reachable again by the servers' user (``make run`` closes var/ at each start)
        if (
            state is not None
            and state.servers
            and (state.replicas, state.settings, state.tls) == (replicas, wanted, tls)
        ):
            try:
                for server in state.servers:
                    if not server.running:
                        self.start(server.name)
                self.wait_replicated()
                return self.status()
            except (SandboxError, RuntimeError, OSError, psycopg.Error) as exc:
                print(f"pgsandbox {self.base_dir}: cannot restart it as it was ({exc}); building it afresh", flush=True)
        self.down()
        owned_dir(self.base_dir)
        state = _State(replicas, wanted, [self._new_server(i) for i in range(replicas + 1)], tls)
        self._save(state)
        try:
            certificate = self._make_certificate() if tls != "off" else None
            primary, *others = state.servers
            self._initdb(primary, tls)
            if certificate:
                _install_certificate(primary, *certificate)
            self._launch(state, primary, port_may_change=True)
            self._save(state)
            with primary.connect() as conn:
                for statement in _PRIMARY_SETUP:
                    conn.execute(statement)
            for replica in others:
                self._base_backup(replica, primary)
                if certificate:
                    _install_certificate(replica, *certificate)
                self._launch(state, replica, port_may_change=True)
                self._save(state)
            self.wait_replicated()
        except BaseException:
            self._stop(state.servers, signal.SIGKILL)
            shutil.rmtree(self.base_dir, ignore_errors=True)
            raise
        return self.status()

    def wait_replicated(self, timeout: float = 30) -> None:
        """Wait until every running replica streams from the primary and has replayed the primary's WAL as far as
        it was when this was called: a transaction of its own (a WAL message) commits synchronously, which flushes every
        record before it (asynchronous commits included), and the WAL flushed then is what the replicas must replay."""
        running = [r for r in self.replicas() if r.running]
        try:
            with self.primary().connect() as conn:
                with conn.transaction():
                    conn.execute("SET LOCAL synchronous_commit = on")
                    conn.execute("SELECT pg_logical_emit_message(true, 'pgsandbox', 'replicated?')")
                position = _scalar(conn, "SELECT pg_current_wal_flush_lsn()")
                for replica in running:
                    _wait_streaming(conn, replica, timeout)
            for replica in running:
                with replica.connect() as conn:
                    _wait_replayed(conn, replica, position, timeout)
        except RuntimeError as exc:
            tails = "\n".join(f"the end of {r.log}:\n{log_tail(r.log)}" for r in running)
            raise SandboxError(f"{exc}\n{tails}") from None

    # --- one server -------------------------------------------------------------------------------------

    def _new_server(self, index: int) -> PgServer:
        name = "primary" if index == 0 else f"replica{index}"
        home = self.base_dir / name
        port = free_port()
        if len(str(home / f".s.PGSQL.{port}")) > _SOCKET_PATH_MAX:
            raise SandboxError(f"the sandbox directory is too deep for a unix socket path ({home}); use a shorter one")
        return PgServer(
            name=name,
            role="primary" if index == 0 else "replica",
            host=HOST,
            port=port,
            pid=None,
            datadir=str(home / "data"),
            socket_dir=str(home),
        )

    def _run(self, server: PgServer, command: list[str], what: str) -> None:
        """Run one of PostgreSQL's programs as the servers' user, in the server's directory; raises on failure."""
        try:
            result = subprocess.run(
                command, capture_output=True, text=True, timeout=120, cwd=server.home, **as_server_user()
            )
        except FileNotFoundError:
            raise SandboxError(f"{command[0]} not found: install postgresql") from None
        if result.returncode != 0:
            raise SandboxError(f"{what} failed for {server.name}:\n{result.stdout}\n{result.stderr}")

    def _make_certificate(self) -> tuple[bytes, bytes]:
        """A CA (its certificate into ``ca_file``) and a certificate for ``HOST`` and localhost signed by it: the
        servers' certificate and key (PEM)."""
        ca = make_certificate("ProxyFleet pgsandbox CA", is_ca=True)
        self.ca_file.write_bytes(ca[0])
        return make_certificate("ProxyFleet pgsandbox server", issuer=ca, hosts=(HOST, "localhost"))

    def _initdb(self, server: PgServer, tls: str) -> None:
        owned_dir(server.home)
        command = [
            str(bin_dir() / "initdb"),
            f"--pgdata={server.datadir}",
            f"--username={SUPERUSER}",
            "--auth=trust",
            "--encoding=UTF8",
            "--locale=C",
            "--no-sync",
        ]
        self._run(server, command, "initdb")
        (Path(server.datadir) / "pg_hba.conf").write_text(
            _PG_HBA_HEADER + (_PG_HBA_TLS_ONLY if tls == "required" else "") + _PG_HBA
        )

    def _base_backup(self, replica: PgServer, primary: PgServer) -> None:
        """The replica's datadir copied from the primary, with ``standby.signal`` (``-R``); the connection it
        streams over is on its command line (``primary_conninfo``)."""
        owned_dir(replica.home)
        command = [
            str(bin_dir() / "pg_basebackup"),
            f"--pgdata={replica.datadir}",
            f"--host={primary.host}",
            f"--port={primary.port}",
            f"--username={SUPERUSER}",
            "--wal-method=stream",
            "--checkpoint=fast",
            "--write-recovery-conf",
            "--no-sync",
        ]
        self._run(replica, command, "pg_basebackup")

    def _command(self, state: _State, server: PgServer) -> list[str]:
        settings = {
            **state.settings,
            "port": str(server.port),
            "unix_socket_directories": server.socket_dir,
            "cluster_name": server.name,  # in the process titles: "postgres: replica1: walreceiver"
        }
        if server.role == "replica":
            primary = state.servers[0]
            settings["primary_conninfo"] = (
                f"host={primary.host} port={primary.port} user={SUPERUSER} application_name={server.name}"
            )
        args = [str(bin_dir() / "postgres"), "-D", server.datadir]
        for name, value in settings.items():
            args += ["-c", f"{name}={value}"]
        return args

    def _launch(self, state: _State, server: PgServer, port_may_change: bool) -> None:
        """Start the postmaster detached and wait until ``postgres`` can log in over TCP; retry on another port if
        a free port was taken meanwhile (when the port may change)."""
        for attempt in range(1, _PORT_TRIES + 1):
            offset = server.log.stat().st_size if server.log.exists() else 0
            with open(server.log, "ab") as out:
                proc = subprocess.Popen(
                    self._command(state, server),
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                    cwd=server.home,
                    **as_server_user(),
                )
            server.pid = proc.pid
            if self._wait_ready(server, proc):
                server.running = True
                return
            server.pid = None
            if port_may_change and attempt < _PORT_TRIES and _PORT_IN_USE in log_since(server.log, offset):
                server.port = free_port()
                continue
            tail = log_tail(server.log)
            raise SandboxError(f"{server.name} exited with status {proc.returncode}; the end of {server.log}:\n{tail}")

    def _wait_ready(self, server: PgServer, proc: subprocess.Popen[bytes]) -> bool:
        """True once ``postgres`` can log in, False if the postmaster exited first; kills it and raises on a
        timeout."""

        def ready() -> bool:
            if proc.poll() is not None:
                return True
            try:
                server.connect(connect_timeout=2).close()
            except psycopg.OperationalError:
                return False
            return True

        try:
            wait_until(ready, f"login to {server.name} on port {server.port}", _START_TIMEOUT, interval=_POLL_S)
        except RuntimeError as exc:
            self._stop([server], signal.SIGKILL)
            raise SandboxError(f"{exc}; the end of {server.log}:\n{log_tail(server.log)}") from None
        return proc.poll() is None


def _install_certificate(server: PgServer, cert: bytes, key: bytes) -> None:
    """Write the certificate and its key into the server's datadir (``TLS_SETTINGS`` names them), the key readable by
    the servers' user alone as PostgreSQL requires (a copy ``pg_basebackup`` made is replaced)."""
    user = _system_user()
    for name, pem, mode in (("server.crt", cert, 0o644), ("server.key", key, 0o600)):
        path = Path(server.datadir) / name
        path.unlink(missing_ok=True)
        with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode), "wb") as out:
            out.write(pem)
        if user is not None:
            os.chown(path, user.pw_uid, user.pw_gid)


def _scalar(conn: psycopg.Connection[Any], sql: str, params: tuple[Any, ...] = ()) -> Any:
    row = conn.execute(sql, params).fetchone()
    return row[0] if row else None


def _wait_streaming(primary: psycopg.Connection[Any], replica: PgServer, timeout: float) -> None:
    """Wait until the primary has a walsender streaming to ``replica`` (named by its ``application_name``)."""
    sql = "SELECT count(*) FROM pg_stat_replication WHERE application_name = %s AND state = 'streaming'"

    def streaming() -> bool:
        return bool(_scalar(primary, sql, (replica.name,)))

    wait_until(streaming, f"{replica.name} streaming from the primary", timeout, interval=_POLL_S)


def _wait_replayed(conn: psycopg.Connection[Any], replica: PgServer, position: str, timeout: float) -> None:
    """Wait until ``replica`` (``conn``) has replayed the primary's WAL up to ``position``."""

    def replayed() -> bool:
        return bool(_scalar(conn, "SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", (position,)))

    wait_until(replayed, f"{replica.name} replaying the primary's WAL up to {position}", timeout, interval=_POLL_S)
