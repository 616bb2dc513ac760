"""``manage.py bench``: the bench engine's commands (``run``, ``workloads``, ``show``, ``check``, ``report``), where a
``--target`` may also name a stored target, plus the stored jobs: ``jobs`` lists them, ``job NAME`` runs one now
(recorded like a run from the UI)."""

from __future__ import annotations

from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from fleet.bench import service
from fleet.bench.engine.cli import CommandError as EngineCommandError
from fleet.bench.engine.cli import PrintListener, add_commands, execute
from fleet.bench.engine.results import run_report
from fleet.bench.engine.targets import Target, TargetError, parse_dsn
from fleet.bench.models import BenchJob, BenchRun, BenchTarget


def resolve_target(text: str) -> Target:
    """A DSN, or the name of a stored target."""
    if "://" in text or "@" in text:
        return parse_dsn(text)
    stored = BenchTarget.objects.filter(name=text).first()
    if stored is None:
        names = ", ".join(BenchTarget.objects.values_list("name", flat=True)) or "none stored"
        raise TargetError(f"target {text!r}: neither a DSN nor a stored target ({names})")
    return stored.engine_target()


class Command(BaseCommand):
    help = (
        "The bench tool: run a workload against targets (DSNs or stored targets) and report per interval and per "
        "statement; list, show or check workloads; print or draw a stored result; list or run stored jobs."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        subparsers = parser.add_subparsers(dest="command", required=True)
        add_commands(subparsers)
        subparsers.add_parser("jobs", help="list the stored benchmark jobs")
        job = subparsers.add_parser("job", help="run a stored job now, here, and record it like any run")
        job.add_argument("name")
        job.add_argument("--quiet", action="store_true", help="no progress lines")

    def handle(self, *args: Any, **options: Any) -> None:
        self.stdout.ending = ""  # the engine prints whole lines itself
        command = options["command"]
        if command == "jobs":
            for job in BenchJob.objects.all():
                targets = ", ".join(t.name for t in job.ordered_targets())
                schedule = job.schedule or "no schedule"
                self.stdout.write(f"{job.name:<24} {job.workload:<22} {job.connections:<16} {schedule:<16} {targets}\n")
            return
        if command == "job":
            self._run_job(options["name"], options["quiet"])
            return
        namespace = type("Arguments", (), options)()
        try:
            status = execute(namespace, self.stdout, resolve_target)  # type: ignore[arg-type]
        except EngineCommandError as exc:
            raise CommandError(str(exc)) from None
        if status:
            raise CommandError(f"the run ended with status {status}", returncode=status)

    def _run_job(self, name: str, quiet: bool) -> None:
        job = BenchJob.objects.filter(name=name).first()
        if job is None:
            raise CommandError(f"no bench job named {name!r}")
        run = BenchRun.objects.create(job=job, trigger=BenchRun.Trigger.CLI)
        finished = service.execute(run.pk, PrintListener(self.stdout, quiet=quiet))
        assert finished is not None
        if finished.result:
            from fleet.bench.engine.results import RunResult

            self.stdout.write(run_report(RunResult.from_dict(finished.result), steps=quiet) + "\n")
        self.stdout.write(f"run {finished.pk}: {finished.status}{': ' + finished.error if finished.error else ''}\n")
        if finished.status != BenchRun.Status.DONE:
            raise CommandError(f"run {finished.pk} {finished.status}", returncode=1)
