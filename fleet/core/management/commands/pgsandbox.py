"""``python manage.py pgsandbox up|down|status|start NAME|stop [NAME]``: PostgreSQL servers (a primary and streaming
replicas, ``devstack/pgsandbox.py``) for tests, demos and benchmarks, as ``manage.py sandbox`` runs MariaDB's: ``up``
keeps the data of a sandbox already there, ``stop`` shuts servers down keeping their data and ports, ``start NAME``
brings one back; ``down`` throws everything away."""

from __future__ import annotations

import json
import time
from argparse import ArgumentParser
from dataclasses import asdict
from typing import Any

from django.core.management.base import CommandError

from devstack.pgsandbox import TLS_MODES, PgSandbox, PgServer
from devstack.sandbox import SandboxError
from fleet.core.management.intermixed import IntermixedCommand


class Command(IntermixedCommand):
    """Start, stop or show the PostgreSQL sandbox."""

    help = (
        "Bring up (up), throw away (down) or show (status) a sandbox of PostgreSQL servers, a primary and N streaming "
        "replicas; stop [NAME] shuts servers down keeping their data, start NAME starts one again."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        """Declare the command's arguments."""
        parser.add_argument("action", choices=["up", "down", "status", "start", "stop"])
        parser.add_argument("name", nargs="?", help="the server for start and stop (primary, replica1, ...)")
        parser.add_argument("--replicas", type=int, default=1, help="number of replicas for up (default 1)")
        parser.add_argument(
            "--set",
            action="append",
            default=[],
            metavar="NAME=VALUE",
            help="a server setting for up, on every server (repeat; e.g. --set max_connections=1100)",
        )
        parser.add_argument(
            "--tls",
            choices=TLS_MODES,
            default="off",
            help="for up: the servers serve TLS (on), or refuse TCP logins without it (required); default off",
        )
        parser.add_argument("--json", action="store_true", help="print the servers as a JSON list")
        parser.add_argument(
            "--dir", default="var/pgsandbox", help="the sandbox directory, relative to the repository (var/pgsandbox)"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        """Run the action and print the servers."""
        sandbox = PgSandbox(options["dir"])
        action = options["action"]
        started = time.monotonic()
        try:
            if action == "up":
                servers = sandbox.up(
                    replicas=options["replicas"], settings=_settings(options["set"]), tls=options["tls"]
                )
            elif action == "down":
                sandbox.down()
                servers = []
            elif action == "start":
                if not options["name"]:
                    raise CommandError("start needs the server's name (see status)")
                servers = [sandbox.start(options["name"])]
            elif action == "stop":
                sandbox.stop(options["name"])
                servers = sandbox.status()
            else:
                servers = sandbox.status()
        except SandboxError as exc:
            raise CommandError(str(exc)) from exc
        if options["json"]:
            self.stdout.write(json.dumps([asdict(s) for s in servers], indent=2))
            return
        for server in servers:
            self.stdout.write(_describe(server))
        if action == "up":
            self.stdout.write(f"pgsandbox up in {time.monotonic() - started:.1f} s ({sandbox.base_dir})")
        elif action == "down":
            self.stdout.write(f"pgsandbox down ({sandbox.base_dir} removed)")
        elif not servers:
            self.stdout.write(f"pgsandbox: not up ({sandbox.base_dir})")


def _settings(pairs: list[str]) -> dict[str, str]:
    """``--set NAME=VALUE`` options as settings; CommandError naming one without its ``=``."""
    settings = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise CommandError(f"--set {pair!r}: give NAME=VALUE")
        settings[name.strip()] = value.strip()
    return settings


def _describe(server: PgServer) -> str:
    state = "running" if server.running else "stopped"
    address = f"{server.host}:{server.port}"
    return f"{server.name:10} {server.role:8} {address:16} pid {server.pid}  {state}  {server.datadir}"
