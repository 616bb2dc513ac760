"""``python -m devstack.sandboxes mysql|pgsql up|down|status|start NAME|stop [NAME]``: the sandboxes of MariaDB
(``devstack/sandbox.py``) and PostgreSQL (``devstack/pgsandbox.py``) servers, a primary and replicas, for tests, demos
and benchmarks. ``up`` keeps the data of a sandbox already there (it restarts its stopped servers), ``stop`` shuts
servers down keeping their data and ports, ``start NAME`` brings one back; ``down`` throws everything away.

Development tooling: the product (``fleet/``, ``proxyapp/``) never imports it."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict
from typing import TextIO

from devstack.pgsandbox import TLS_MODES, PgSandbox, PgServer
from devstack.sandbox import Sandbox, SandboxError, SandboxServer

#: Each engine's sandbox directory unless ``--dir`` names another (relative to the repository).
DEFAULT_DIRS = {"mysql": "var/sandbox", "pgsql": "var/pgsandbox"}


def parser() -> argparse.ArgumentParser:
    """The command line's arguments."""
    parse = argparse.ArgumentParser(
        prog="python -m devstack.sandboxes",
        description="Bring up (up), throw away (down) or show (status) a sandbox of MariaDB or PostgreSQL servers, a "
        "primary and N replicas; stop [NAME] shuts servers down keeping their data, start NAME starts one again.",
    )
    parse.add_argument("engine", choices=sorted(DEFAULT_DIRS))
    parse.add_argument("action", choices=["up", "down", "status", "start", "stop"])
    parse.add_argument("name", nargs="?", help="the server for start and stop (primary, replica1, ...)")
    parse.add_argument("--replicas", type=int, default=1, help="number of replicas for up (default 1)")
    parse.add_argument("--semi-sync", action="store_true", help="mysql, up: semi-synchronous replication")
    parse.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="pgsql, up: a server setting on every server (repeat; e.g. --set max_connections=1100)",
    )
    parse.add_argument(
        "--tls",
        choices=TLS_MODES,
        default="off",
        help="up: the servers offer TLS with a CA of the sandbox's own (on); pgsql also: they refuse TCP logins "
        "without it (required); default off",
    )
    parse.add_argument("--json", action="store_true", help="print the servers as a JSON list")
    parse.add_argument("--dir", help="the sandbox directory, relative to the repository (var/sandbox, var/pgsandbox)")
    return parse


def settings(pairs: list[str]) -> dict[str, str]:
    """``--set NAME=VALUE`` options as settings; SandboxError naming one without its ``=``."""
    found = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise SandboxError(f"--set {pair!r}: give NAME=VALUE")
        found[name.strip()] = value.strip()
    return found


def run(options: argparse.Namespace) -> tuple[Sandbox | PgSandbox, Sequence[SandboxServer | PgServer]]:
    """Carry out the action; the sandbox and its servers afterwards (SandboxError: what went wrong)."""
    where = options.dir or DEFAULT_DIRS[options.engine]
    sandbox: Sandbox | PgSandbox
    if options.engine == "mysql":
        if options.set or options.tls == "required":
            raise SandboxError("--set and --tls required are PostgreSQL's (pgsql)")
        sandbox = Sandbox(where)
    else:
        if options.semi_sync:
            raise SandboxError("--semi-sync is MariaDB's (mysql)")
        sandbox = PgSandbox(where)
    action = options.action
    if action == "up":
        if isinstance(sandbox, Sandbox):
            return sandbox, sandbox.up(options.replicas, semi_sync=options.semi_sync, tls=options.tls == "on")
        return sandbox, sandbox.up(options.replicas, settings=settings(options.set), tls=options.tls)
    if action == "down":
        sandbox.down()
        return sandbox, []
    if action == "start":
        if not options.name:
            raise SandboxError("start needs the server's name (see status)")
        return sandbox, [sandbox.start(options.name)]
    if action == "stop":
        sandbox.stop(options.name)
    return sandbox, sandbox.status()


def describe(server: SandboxServer | PgServer) -> str:
    """One server as a line: name, role, address, pid, state, data directory."""
    state = "running" if server.running else "stopped"
    address = f"{server.host}:{server.port}"
    return f"{server.name:10} {server.role:8} {address:16} pid {server.pid}  {state}  {server.datadir}"


def main(argv: list[str] | None = None, out: TextIO = sys.stdout) -> int:
    """Run the command line; its exit status (2: the sandbox refused, its reason on stderr)."""
    options = parser().parse_args(argv)
    started = time.monotonic()
    try:
        sandbox, servers = run(options)
    except SandboxError as exc:
        print(f"sandboxes: {exc}", file=sys.stderr)
        return 2
    if options.json:
        print(json.dumps([asdict(s) for s in servers], indent=2), file=out)
        return 0
    for server in servers:
        print(describe(server), file=out)
    name = "sandbox" if options.engine == "mysql" else "pgsandbox"
    if options.action == "up":
        print(f"{name} up in {time.monotonic() - started:.1f} s ({sandbox.base_dir})", file=out)
    elif options.action == "down":
        print(f"{name} down ({sandbox.base_dir} removed)", file=out)
    elif not servers:
        print(f"{name}: not up ({sandbox.base_dir})", file=out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
