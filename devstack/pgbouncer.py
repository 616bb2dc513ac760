"""PgBouncer in transaction pooling mode in front of one PostgreSQL server, as a reference the benchmarks and the
conformance run measure the pooler beside.

The binary is Debian's (``/usr/sbin/pgbouncer``, installed by ``make deps``) unless ``PGBOUNCER`` names another: a
newer release built elsewhere, e.g. 1.21 or later, which keeps prepared statements across the server connections of
transaction pooling (``max_prepared_statements``, set here whenever the version has it). It runs as the servers' user
(PgBouncer refuses root), in the foreground, its ini, userlist and log in a directory of the caller's.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import psycopg

from devstack.pgsandbox import as_server_user, owned_dir
from devstack.ports import free_port
from devstack.stack import terminate, wait_until

#: Prepared statements PgBouncer keeps per server connection, from 1.21 (the pooler's default is the same).
MAX_PREPARED_STATEMENTS = 200


def binary() -> str:
    """The PgBouncer to run: ``PGBOUNCER`` when set, else the one on the PATH, else Debian's."""
    return os.environ.get("PGBOUNCER") or shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"


def version_line() -> str:
    """PgBouncer's version line (``PgBouncer 1.24.1``), ``unknown`` when it does not run."""
    try:
        out = subprocess.run([binary(), "--version"], capture_output=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return out.stdout.decode(errors="replace").splitlines()[0] if out.stdout else "unknown"


def version() -> tuple[int, ...]:
    """PgBouncer's version as numbers ((0,) when unknown)."""
    found = re.search(r"(\d+)\.(\d+)(?:\.(\d+))?", version_line())
    return tuple(int(n) for n in found.groups() if n is not None) if found else (0,)


class PgBouncer:
    """One PgBouncer: ``databases`` is its ``[databases]`` section's lines (``* = host=... port=...`` for every
    database), ``user`` and ``password`` the one login (SCRAM from clients; the same to the server), ``pool_size``
    server connections per user and database."""

    def __init__(
        self, workdir: Path, databases: list[str], user: str, password: str, pool_size: int, login_database: str
    ) -> None:
        self.workdir = workdir
        self.databases = databases
        self.user = user
        self.password = password
        self.pool_size = pool_size
        self.login_database = login_database  # where ``start`` logs in to know it answers
        self.port = free_port()
        self.ini = workdir / "pgbouncer.ini"
        self.userlist = workdir / "userlist.txt"
        self.log_path = workdir / "pgbouncer.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def config_text(self) -> str:
        """The ini: the databases, transaction pooling, SCRAM, prepared statements kept where the version can."""
        prepared = f"max_prepared_statements = {MAX_PREPARED_STATEMENTS}\n" if version() >= (1, 21) else ""
        return (
            "; written by devstack/pgbouncer.py\n"
            "[databases]\n" + "".join(f"{line}\n" for line in self.databases) + "[pgbouncer]\n"
            "listen_addr = 127.0.0.1\n"
            f"listen_port = {self.port}\n"
            "unix_socket_dir =\n"
            "auth_type = scram-sha-256\n"
            f"auth_file = {self.userlist}\n"
            "pool_mode = transaction\n"
            f"default_pool_size = {self.pool_size}\n"
            "max_client_conn = 2000\n"
            "ignore_startup_parameters = extra_float_digits\n" + prepared
        )

    def start(self, timeout: float = 15) -> PgBouncer:
        """Write the ini and userlist, start PgBouncer and wait until the user logs in through it."""
        owned_dir(self.workdir)
        self.ini.write_text(self.config_text())
        self.userlist.write_text(f'"{self.user}" "{self.password}"\n')
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                [binary(), str(self.ini)], stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                **as_server_user(),
            )  # fmt: skip
        proc = self.proc

        def answers() -> bool:
            if proc.poll() is not None:
                raise RuntimeError(f"pgbouncer exited with {proc.returncode}:\n{self.log_path.read_text()}")
            try:
                self.connect().close()
            except psycopg.OperationalError:
                return False
            return True

        wait_until(answers, "a login through PgBouncer", timeout, interval=0.05)
        return self

    def connect(self) -> psycopg.Connection[tuple[object, ...]]:
        """The user to the login database through PgBouncer."""
        return psycopg.connect(
            host="127.0.0.1", port=self.port, user=self.user, password=self.password, dbname=self.login_database,
            connect_timeout=5,
        )  # fmt: skip

    def stop(self) -> None:
        """Stop PgBouncer (SIGTERM, its immediate shutdown; then SIGKILL)."""
        terminate(self.proc)

    def __enter__(self) -> PgBouncer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
