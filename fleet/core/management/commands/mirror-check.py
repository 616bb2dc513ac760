"""``python manage.py mirror-check --primary HOST:PORT --mirror HOST:PORT [--schema S ...] [--table T ...]``: compare a
primary and its mirror table by table (row counts and ``CHECKSUM TABLE``). Exit status 0 when every table is equal,
1 when some differ, 2 when they cannot be compared."""

from __future__ import annotations

import os
from argparse import ArgumentParser
from typing import Any

import pymysql
from django.core.management.base import BaseCommand, CommandError

from fleet.core.mirrorcheck import Endpoint, compare, report


class Command(BaseCommand):
    """Compare a primary and its mirror table by table."""

    help = (
        "Compare a primary and its mirror table by table: row counts and CHECKSUM TABLE. Exit status 0 when every "
        "table is equal, 1 when some differ, 2 when they cannot be compared."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        """Declare the command's arguments."""
        parser.add_argument("--primary", required=True, help="the primary, HOST:PORT")
        parser.add_argument("--mirror", required=True, help="the mirror, HOST:PORT")
        parser.add_argument("--user", default="root", help="the account on both servers (default root)")
        parser.add_argument(
            "--password-env",
            default="MIRROR_CHECK_PASSWORD",
            help="the environment variable holding its password (default MIRROR_CHECK_PASSWORD; unset: none)",
        )
        parser.add_argument(
            "--schema", action="append", help="a schema to compare (repeatable; default: every non-system schema)"
        )
        parser.add_argument("--table", action="append", help="only this table name (repeatable)")

    def handle(self, *args: Any, **options: Any) -> None:
        """Compare and print the report; the exit status tells whether the tables are equal."""
        password = os.environ.get(options["password_env"], "")
        try:
            primary = Endpoint.parse(options["primary"], options["user"], password)
            mirror = Endpoint.parse(options["mirror"], options["user"], password)
        except ValueError as exc:
            raise CommandError(f"--primary/--mirror: {exc}", returncode=2) from None
        try:
            checks = compare(primary, mirror, options["schema"], options["table"])
        except pymysql.Error as exc:
            raise CommandError(f"cannot compare {primary} and {mirror}: {exc}", returncode=2) from None
        self.stdout.write(report(checks, primary, mirror))
        differing = [c.name for c in checks if not c.equal]
        if differing:
            raise CommandError(f"the mirror differs from the primary: {', '.join(differing)}", returncode=1)
