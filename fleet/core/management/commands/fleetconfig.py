"""``manage.py fleetconfig``: export a cluster's draft, import a config document, or import a ProxySQL cnf."""

from __future__ import annotations

import json
import sys
from argparse import ArgumentParser
from pathlib import Path
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import CommandError

from fleet.core import publishing
from fleet.core.management.intermixed import IntermixedCommand
from fleet.core.models import Cluster
from fleet.core.proxysql_cnf import import_cnf
from proxyapp.config.document import ConfigError
from proxyapp.config.jsontext import DuplicateKey, read_json


class Command(IntermixedCommand):
    help = (
        "export: write a cluster's draft as a config document (with its passwords) to FILE or stdout; "
        "import: replace the draft with a config document; import-cnf: replace it with a ProxySQL proxysql.cnf. "
        "Imports create the cluster if needed and, with --publish, publish the result."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("action", choices=["export", "import", "import-cnf"])
        parser.add_argument("file", nargs="?", default="-", help="the file ('-' or nothing: stdin/stdout)")
        parser.add_argument("--cluster", required=True, help="cluster name")
        parser.add_argument("--user", default="", help="the account the audit log names (default: none)")
        parser.add_argument("--publish", action="store_true", help="publish the imported draft as a new version")
        parser.add_argument("--comment", default="", help="the version's comment with --publish")
        parser.add_argument(
            "--force", action="store_true", help="import-cnf: drop sections ProxyFleet lacks even if routing changes"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        user = self._user(options["user"])
        if options["action"] == "export":
            cluster = Cluster.objects.filter(name=options["cluster"]).first()
            if cluster is None:
                raise CommandError(f"no cluster named {options['cluster']!r}")
            self._write(options["file"], json.dumps(publishing.export_document(cluster), indent=2) + "\n")
            return
        text = self._read(options["file"])
        cluster, created = Cluster.objects.get_or_create(name=options["cluster"])
        try:
            if options["action"] == "import":
                config = publishing.import_document(cluster, self._json(text, options["file"]), user)
                notes: list[str] = []
            else:
                config, notes = import_cnf(cluster, text, user, force=options["force"])
        except ConfigError as error:
            if created:
                cluster.delete()
            raise CommandError(str(error)) from None
        for note in notes:
            self.stderr.write(f"note: {note}")
        rows = sum(len(rows) for rows in config.to_document().values())
        self.stdout.write(f"imported {rows} rows into the draft of {cluster.name}")
        if options["publish"]:
            try:
                version = publishing.publish(cluster, user, comment=options["comment"])
            except publishing.NothingToPublish as error:
                self.stdout.write(str(error))
            else:
                self.stdout.write(f"published version {version.number} (checksum {version.checksum})")

    def _user(self, username: str) -> Any:
        if not username:
            return None
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"no account named {username!r}")
        return user

    def _read(self, name: str) -> str:
        try:
            return sys.stdin.read() if name == "-" else Path(name).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as error:
            raise CommandError(f"{name}: cannot read: {error}") from None

    def _write(self, name: str, text: str) -> None:
        if name == "-":
            self.stdout.write(text, ending="")
            return
        try:
            Path(name).write_text(text, encoding="utf-8")
        except OSError as error:
            raise CommandError(f"{name}: cannot write: {error}") from None

    def _json(self, text: str, name: str) -> object:
        try:
            return read_json(text)
        except DuplicateKey as error:
            raise CommandError(f"{name}: invalid JSON: {error}") from None
        except json.JSONDecodeError as error:
            raise CommandError(
                f"{name}: invalid JSON at line {error.lineno} column {error.colno}: {error.msg}"
            ) from None
