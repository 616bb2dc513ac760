"""``python manage.py sandbox up|down|status``: throwaway MariaDB servers for tests, demos and benchmarks."""

from __future__ import annotations

import json
from argparse import ArgumentParser
from dataclasses import asdict

from django.core.management.base import BaseCommand, CommandError

from fleet.sandbox import Sandbox, SandboxError


class Command(BaseCommand):
    """Start, stop or show the MariaDB sandbox."""

    help = "Start (up), stop (down) or show (status) a sandbox of MariaDB servers: a primary and N replicas."

    def add_arguments(self, parser: ArgumentParser) -> None:
        """Declare the command's arguments."""
        parser.add_argument("action", choices=["up", "down", "status"])
        parser.add_argument("--replicas", type=int, default=1, help="number of replicas (up)")
        parser.add_argument("--semi-sync", action="store_true", help="semi-synchronous replication (up)")
        parser.add_argument("--json", action="store_true", help="print the servers as JSON")
        parser.add_argument("--dir", default="var/sandbox", help="the sandbox directory (default var/sandbox)")

    def handle(self, *args: object, **options: object) -> None:
        """Run the action."""
        sandbox = Sandbox(str(options["dir"]))
        action = options["action"]
        try:
            if action == "up":
                replicas = int(options["replicas"])  # type: ignore[call-overload]
                if replicas < 0:
                    raise CommandError("--replicas must be 0 or more")
                servers = sandbox.up(replicas=replicas, semi_sync=bool(options["semi_sync"]))
            elif action == "down":
                sandbox.down()
                servers = []
            else:
                servers = sandbox.status()
        except SandboxError as exc:
            raise CommandError(str(exc)) from exc
        if options["json"]:
            self.stdout.write(json.dumps([asdict(s) for s in servers], indent=2))
            return
        if not servers:
            self.stdout.write("sandbox: no servers" if action != "down" else "sandbox: stopped")
        for s in servers:
            state = "running" if s.running else "stopped"
            self.stdout.write(f"{s.name:10} {s.role:8} 127.0.0.1:{s.port:<6} pid {s.pid}  {state}  {s.datadir}")
