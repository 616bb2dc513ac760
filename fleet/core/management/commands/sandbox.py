"""``python manage.py sandbox up|down|status|start NAME|stop [NAME]``: MariaDB servers for tests, demos and
benchmarks. ``up`` keeps the data of a sandbox already there (it restarts its stopped servers), ``stop`` shuts servers
down keeping their data and ports, ``start NAME`` brings one back; ``down`` throws everything away."""

from __future__ import annotations

import json
import time
from argparse import ArgumentParser
from dataclasses import asdict
from typing import Any

from django.core.management.base import CommandError

from devstack.sandbox import Sandbox, SandboxError, SandboxServer
from fleet.core.management.intermixed import IntermixedCommand


class Command(IntermixedCommand):
    """Start, stop or show the MariaDB sandbox."""

    help = (
        "Bring up (up), throw away (down) or show (status) a sandbox of MariaDB servers, a primary and N replicas; "
        "stop [NAME] shuts servers down keeping their data, start NAME starts one again."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        """Declare the command's arguments."""
        parser.add_argument("action", choices=["up", "down", "status", "start", "stop"])
        parser.add_argument("name", nargs="?", help="the server for start and stop (primary, replica1, ...)")
        parser.add_argument("--replicas", type=int, default=1, help="number of replicas for up (default 1)")
        parser.add_argument("--semi-sync", action="store_true", help="semi-synchronous replication (up)")
        parser.add_argument("--tls", action="store_true", help="servers offer TLS with a CA of the sandbox's own (up)")
        parser.add_argument("--json", action="store_true", help="print the servers as a JSON list")
        parser.add_argument(
            "--dir", default="var/sandbox", help="the sandbox directory, relative to the repository (var/sandbox)"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        """Run the action and print the servers."""
        sandbox = Sandbox(options["dir"])
        action = options["action"]
        started = time.monotonic()
        try:
            if action == "up":
                servers = sandbox.up(replicas=options["replicas"], semi_sync=options["semi_sync"], tls=options["tls"])
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
            self.stdout.write(f"sandbox up in {time.monotonic() - started:.1f} s ({sandbox.base_dir})")
        elif action == "down":
            self.stdout.write(f"sandbox down ({sandbox.base_dir} removed)")
        elif not servers:
            self.stdout.write(f"sandbox: not up ({sandbox.base_dir})")


def _describe(server: SandboxServer) -> str:
    state = "running" if server.running else "stopped"
    address = f"{server.host}:{server.port}"
    return f"{server.name:10} {server.role:8} {address:16} pid {server.pid}  {state}  {server.datadir}"
