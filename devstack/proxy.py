"""A real proxy process (``python -m proxyapp run``) on free loopback ports, started from a config document, and the
config documents the tests and benchmarks start it from."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pymysql

from devstack.ports import free_port
from devstack.sandbox import APP_PASSWORD, APP_USER
from devstack.stack import REPO, wait_until
from proxyapp import credential
from proxyapp.clock import TEST_CLOCK_ENV

WRITER_HG = 10
READER_HG = 20


def rw_split_config(primary_port: int, replica_ports: list[int], **overrides: Any) -> dict[str, Any]:
    """The classic ProxySQL read/write split: writer hostgroup 10, reader hostgroup 20, two routing rules."""
    servers = [{"hostgroup_id": WRITER_HG, "hostname": "127.0.0.1", "port": primary_port, "max_connections": 64}]
    servers += [
        {"hostgroup_id": READER_HG, "hostname": "127.0.0.1", "port": p, "max_connections": 64} for p in replica_ports
    ]
    doc: dict[str, Any] = {
        "mysql_servers": servers,
        "mysql_users": [{"username": APP_USER, "password": APP_PASSWORD, "default_hostgroup": WRITER_HG}],
        "mysql_query_rules": [
            {
                "rule_id": 1,
                "active": 1,
                "match_digest": r"^SELECT.*FOR UPDATE",
                "destination_hostgroup": WRITER_HG,
                "apply": 1,
            },
            {"rule_id": 2, "active": 1, "match_digest": r"^SELECT", "destination_hostgroup": READER_HG, "apply": 1},
        ],
        "mysql_replication_hostgroups": [{"writer_hostgroup": WRITER_HG, "reader_hostgroup": READER_HG}],
        "global_variables": [],
    }
    doc.update(overrides)
    return doc


def small_pool_config(primary_port: int, max_connections: int = 2, **variables: str) -> dict[str, Any]:
    """One hostgroup, the primary, with ``max_connections`` backend connections all kept when idle."""
    settings = {"mysql-free_connections_pct": "100", **variables}
    return {
        "mysql_servers": [
            {
                "hostgroup_id": WRITER_HG,
                "hostname": "127.0.0.1",
                "port": primary_port,
                "max_connections": max_connections,
            }
        ],
        "mysql_users": [{"username": APP_USER, "password": APP_PASSWORD, "default_hostgroup": WRITER_HG}],
        "global_variables": [{"variable_name": k, "variable_value": v} for k, v in settings.items()],
    }


class ProxyProcess:
    """``python -m proxyapp run`` in a child process, with its admin endpoint and a clock the caller can move
    forward (``advance_clock``; ``proxyapp.clock``)."""

    def __init__(self, config: dict[str, Any], workdir: Path, repo: Path = REPO, *, own_session: bool = False) -> None:
        self.repo = repo  # the checkout whose proxyapp runs (and whose native build it loads)
        self.workdir = workdir
        self.config_path = workdir / "proxy-config.json"
        self.log_path = workdir / "proxy.log"
        self.token_path = credential.default_path(self.config_path)  # the admin credential, made at the first start
        self.write_config(config)
        self.port = free_port()
        self.admin_port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.started = False  # it came up once: a restart keeps its ports
        self.env: dict[str, str] = {}  # more environment for the next start (a test hook, say)
        # A session of its own, as a daemon runs. Benchmarks ask for it: with the kernel's autogroup scheduling,
        # CPU time is shared between sessions first, so a proxy left in the benchmark's session competes with its
        # own load generator while the peers (haproxy, PgBouncer), started in sessions of their own, do not.
        self.own_session = own_session

    def write_config(self, config: dict[str, Any]) -> None:
        """Replace the config file (takes effect on reload).

        One worker process unless the config says otherwise: tests that count connections or pin sessions
        then see every session in one process; tests of several workers set ``mysql-threads`` themselves. And no
        login throttling unless the config sets it: tests of wrong passwords and malformed logins, all from
        127.0.0.1, must not block the address for the tests after them.
        """
        variables = list(config.get("global_variables", []))
        named = {row.get("variable_name") for row in variables}
        for name, value in (("mysql-threads", "1"), ("mysql-max_auth_errors_until_block", "0")):
            if name not in named:
                variables.append({"variable_name": name, "variable_value": value})
        self.config_path.write_text(json.dumps({**config, "global_variables": variables}, indent=2))

    def start(self, timeout: float = 15) -> ProxyProcess:
        """Start the proxy and wait until its admin endpoint answers. On a first start whose ports another process
        took meanwhile (``free_port`` only says they were free a moment ago), try again on new ones."""
        for attempt in range(3):
            logged = self.log_path.stat().st_size if self.log_path.exists() else 0
            try:
                return self._start(timeout)
            except RuntimeError:
                taken = "address already in use" in self.log()[logged:].lower()
                if self.proc is None or self.proc.returncode is None or not taken or self.started or attempt == 2:
                    raise
                self.port, self.admin_port = free_port(), free_port()
        raise AssertionError("unreachable")

    def _start(self, timeout: float) -> ProxyProcess:
        env = dict(os.environ, PYTHONPATH=str(self.repo), **{TEST_CLOCK_ENV: "1"}, **self.env)
        self._log = self.log_path.open("ab")
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "proxyapp",
                "run",
                "--config",
                str(self.config_path),
                "--listen",
                f"127.0.0.1:{self.port}",
                "--admin",
                f"127.0.0.1:{self.admin_port}",
            ],
            cwd=self.repo,
            env=env,
            start_new_session=self.own_session,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        proc = self.proc

        def answers() -> bool:
            if proc.poll() is not None:
                raise RuntimeError(f"proxy exited with {proc.returncode}:\n{self.log()}")
            try:
                self.admin("GET", "/health")
            except OSError:
                return False
            return True

        try:
            wait_until(answers, "answer from the proxy's admin endpoint", timeout, interval=0.05)
        except RuntimeError as exc:
            raise RuntimeError(f"{exc}:\n{self.log()}") if proc.poll() is None else exc from None
        self.started = True
        return self

    def log(self) -> str:
        """The proxy's output so far."""
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def admin(self, method: str, path: str, body: Any = None) -> Any:
        """Call the admin endpoint; returns the decoded JSON (for 4xx too)."""
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(f"http://127.0.0.1:{self.admin_port}{path}", data=data, method=method)
        if self.token_path.exists():
            request.headers.update(credential.header(credential.read(self.token_path)))
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                raw = response.read()
                return raw.decode() if path == "/metrics" else json.loads(raw)
        except urllib.error.HTTPError as exc:
            return json.loads(exc.read())

    def advance_clock(self, seconds: float) -> None:
        """Make ``seconds`` pass for the proxy (its housekeeping, session limits, pool ages, shunning, the monitor's
        latencies) at once: when this returns, the housekeeping has run at the new time (the sessions it ends may take
        a moment more to close)."""
        answer = self.admin("POST", "/clock", {"advance_s": seconds})
        if answer.get("ok") is not True:
            raise RuntimeError(f"the proxy's clock did not move: {answer}")

    def stats(self) -> dict[str, Any]:
        """The whole stats snapshot."""
        return self.admin("GET", "/stats")

    def connect(self, user: str = APP_USER, password: str = APP_PASSWORD, **kwargs: Any) -> pymysql.Connection:
        """A PyMySQL connection through the proxy."""
        kwargs.setdefault("connect_timeout", 10)
        kwargs.setdefault("read_timeout", 30)
        return pymysql.connect(host="127.0.0.1", port=self.port, user=user, password=password, **kwargs)

    def signal(self, sig: int) -> None:
        """Send a signal to the proxy process."""
        assert self.proc is not None
        self.proc.send_signal(sig)

    def stop(self) -> None:
        """Stop the proxy (SIGTERM, then SIGKILL)."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
        self._log.close()
