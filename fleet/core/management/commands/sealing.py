"""``python manage.py sealing status|seal|rotate``: the MySQL passwords sealed in the control plane's database
(``fleet.core.sealing``). ``status`` counts sealed and plain values and checks that every sealed one opens with the
configured keys; ``seal`` seals every secret with the first key (after an upgrade, or once a new key is put first in
``FLEET_SEALING_KEY``); ``rotate`` puts a new key in the key file, seals everything with it and drops the old ones."""

from __future__ import annotations

from argparse import ArgumentParser
from typing import Any

from django.apps import apps
from django.core.management.base import BaseCommand, CommandError

from fleet.core import sealing


class Command(BaseCommand):
    """Show, seal or rotate the sealed passwords."""

    help = "status: count sealed and plain secrets; seal: seal all with the first key; rotate: a new key file key."

    def add_arguments(self, parser: ArgumentParser) -> None:
        """Declare the command's arguments."""
        parser.add_argument("action", choices=["status", "seal", "rotate"])

    def handle(self, *args: Any, **options: Any) -> None:
        """Run the action and say what it did."""
        try:
            if options["action"] == "seal":
                rows = sealing.seal_all(apps)
                self.stdout.write(f"sealed the secrets of {rows} rows with the first key")
            elif options["action"] == "rotate":
                path = sealing.rotate_key_file(apps)
                self.stdout.write(f"a new key is in {path}; every secret is sealed with it, the old keys are gone")
            sealed, plain = sealing.count_values(apps)
        except sealing.SealingError as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(f"{sealed} secrets sealed, {plain} in plain text")
