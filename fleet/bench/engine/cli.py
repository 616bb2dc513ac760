"""The bench command line: ``python -m fleet.bench.engine ...`` (no Django), and the same commands under
``python manage.py bench ...`` (which adds the stored jobs and targets).

::

    bench run --target mysql://app:pw@127.0.0.1:3306/app?name=direct&safe=1 \\
              --target mysql://app:pw@127.0.0.1:6033/app?name=proxy&safe=1 \\
              --workload shop-insert --connections 50..500/50 --time 10 --warmup 2 --json out.json
    bench run --script transfer.txt --target ...     # a mydbtest-style script (fleet/bench/engine/script.py)
    bench run --workload sysbench:oltp_read_only --target ...
    bench workloads | show NAME | check FILE | report RESULT.json [--plot out.png --chart sweep]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from fleet.bench.engine.plans import SCRIPT, make_plan, runner_for, workload_names
from fleet.bench.engine.plot import CHARTS, draw
from fleet.bench.engine.results import (
    IntervalPoint,
    RunResult,
    StepResult,
    progress_line,
    run_report,
    step_report,
    sweep_table,
)
from fleet.bench.engine.runner import Listener, PlanError
from fleet.bench.engine.script import ScriptError, parse_script, parse_sweep
from fleet.bench.engine.targets import Target, TargetError, parse_dsn
from fleet.bench.engine.workloads import BUILTINS, UnknownWorkload, builtin_script


class PrintListener(Listener):
    """Prints progress as sysbench does: a line per interval, a report per step."""

    def __init__(self, out: TextIO, quiet: bool = False) -> None:
        self.out = out
        self.quiet = quiet

    def _print(self, text: str) -> None:
        print(text, file=self.out, flush=True)

    def step_started(self, step: StepResult) -> None:
        if not self.quiet:
            self._print(f"-- step {step.index + 1}: {step.target}, {step.connections} connections, round {step.round}")

    def interval(self, step: StepResult, point: IntervalPoint) -> None:
        if not self.quiet:
            self._print(progress_line(step, point))

    def step_finished(self, step: StepResult) -> None:
        if not self.quiet:
            self._print(step_report(step))

    def note(self, text: str) -> None:
        if not self.quiet:
            self._print(text)


def _sweep(text: str) -> list[int]:
    try:
        return parse_sweep(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _positive(kind: type) -> Callable[[str], Any]:
    def convert(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a {kind.__name__}, got {text!r}") from None
        if value < 0:
            raise argparse.ArgumentTypeError(f"expected 0 or more, got {text!r}")
        return value

    return convert


def add_commands(subparsers: Any) -> None:
    """Add ``run``, ``workloads``, ``show``, ``check`` and ``report`` to a parser's subparsers."""
    run = subparsers.add_parser("run", help="run a workload against targets and report")
    run.add_argument(
        "--target",
        action="append",
        default=[],
        metavar="DSN",
        help="mysql://USER:PASSWORD@HOST:PORT/DB?name=NAME&safe=1 (repeat for several, interleaved; safe=1 allows "
        "workloads that write)",
    )
    source = run.add_mutually_exclusive_group()
    source.add_argument("--workload", help=f"a built-in workload or sysbench:SCRIPT ({', '.join(BUILTINS)})")
    source.add_argument("--script", type=Path, help="a bench script file (mydbtest's format with MyCat templates)")
    run.add_argument("--connections", type=_sweep, help="connection counts: 1,8,64 or 50..500/50")
    run.add_argument("--time", type=_positive(float), dest="duration", help="seconds per step (default 10)")
    run.add_argument("--events", type=_positive(int), help="transactions per step (a count instead of a time)")
    run.add_argument("--warmup", type=_positive(float), help="seconds run unrecorded before each step")
    run.add_argument("--rate", type=_positive(float), help="transactions per second, all connections together")
    run.add_argument("--interval", type=_positive(float), help="seconds between progress lines (default 1)")
    run.add_argument("--rounds", type=_positive(int), help="times the whole sweep is repeated (default 1)")
    run.add_argument("--processes", type=_positive(int), help="processes sharing the connections (default 1)")
    run.add_argument("--time-limit", type=_positive(float), help="the most the whole run may take (default 3600 s)")
    run.add_argument("--seed", type=int, help="seed of the random values (default: random)")
    run.add_argument("--rows", type=_positive(int), help="rows a built-in workload's table gets (sysbench: per table)")
    run.add_argument("--batch", type=_positive(int), help="mycat-insert: inserts per transaction (default 100)")
    run.add_argument("--tables", type=_positive(int), help="sysbench: tables (default 1)")
    run.add_argument(
        "--sysbench-option", action="append", default=[], metavar="--NAME=VALUE", help="more sysbench options"
    )
    run.add_argument("--json", type=Path, help="write the result as JSON to this file (- for standard output)")
    run.add_argument("--plot", type=Path, help="draw a PNG chart of the result to this file")
    run.add_argument("--chart", choices=CHARTS, default="sweep", help="which chart --plot draws (default sweep)")
    run.add_argument("--quiet", action="store_true", help="no progress lines, only the final report")

    subparsers.add_parser("workloads", help="list the built-in workloads")
    show = subparsers.add_parser("show", help="print a built-in workload's script (to copy and edit)")
    show.add_argument("name")
    show.add_argument("--rows", type=_positive(int))
    check = subparsers.add_parser("check", help="parse a bench script and say what it does, or what is wrong")
    check.add_argument("file", type=Path)
    report = subparsers.add_parser("report", help="print a stored JSON result, or draw it")
    report.add_argument("file", type=Path)
    report.add_argument("--plot", type=Path, help="draw a PNG chart to this file")
    report.add_argument("--chart", choices=CHARTS, default="sweep")
    report.add_argument("--title", default="", help="the chart's title")
    report.add_argument("--markdown", action="store_true", help="print the sweep as a Markdown table")


def build_parser() -> argparse.ArgumentParser:
    """The standalone parser (``python -m fleet.bench.engine``)."""
    parser = argparse.ArgumentParser(prog="python -m fleet.bench.engine", description="ProxyFleet's bench tool")
    add_commands(parser.add_subparsers(dest="command", required=True))
    return parser


class CommandError(Exception):
    """A command that cannot do what it was asked; the message says why (exit status 2)."""


def plan_from_args(args: argparse.Namespace, resolve_target: Callable[[str], Target] = parse_dsn) -> Any:
    """The plan ``run``'s arguments describe; CommandError naming what is wrong."""
    try:
        targets = [resolve_target(text) for text in args.target]
    except TargetError as exc:
        raise CommandError(str(exc)) from None
    workload = args.workload or (SCRIPT if args.script else None)
    if workload is None:
        raise CommandError("give --workload NAME or --script FILE")
    script_text = ""
    if args.script is not None:
        try:
            script_text = args.script.read_text()
        except OSError as exc:
            raise CommandError(f"--script {args.script}: {exc.strerror}") from None
        if not targets:
            default = parse_script(script_text).user if _parses(script_text) else None
            if default:
                targets = [parse_dsn(default, name="script")]
    try:
        return make_plan(
            workload,
            targets,
            script_text=script_text,
            rows=args.rows,
            batch=args.batch,
            tables=args.tables,
            sysbench_options=args.sysbench_option,
            processes=args.processes,
            seed=args.seed,
            connections=args.connections,
            duration=args.duration,
            events=args.events,
            warmup=args.warmup,
            rate=args.rate,
            interval=args.interval,
            rounds=args.rounds,
            time_limit=args.time_limit,
        )
    except ScriptError as exc:
        raise CommandError(f"{args.script}: {exc}") from None
    except (PlanError, TargetError) as exc:
        raise CommandError(str(exc)) from None


def _parses(text: str) -> bool:
    try:
        parse_script(text)
    except ScriptError:
        return False
    return True


def write_outputs(result: RunResult, args: argparse.Namespace, out: TextIO) -> None:
    """``--json`` and ``--plot`` of ``run``."""
    if args.json is not None:
        if str(args.json) == "-":
            print(result.to_json(), file=out)
        else:
            args.json.parent.mkdir(parents=True, exist_ok=True)
            args.json.write_text(result.to_json() + "\n")
    if args.plot is not None:
        draw(result, args.chart, args.plot)


def markdown_sweep(run: RunResult) -> str:
    """The sweep as a Markdown table: tps and p95 per target at each connection count, and the ratios."""
    targets = [t["name"] for t in run.targets]
    head = ["connections", *(f"{t} tps" for t in targets), *(f"{t} p95 ms" for t in targets)]
    head += [f"{t}/{targets[0]}" for t in targets[1:]]
    lines = ["| " + " | ".join(head) + " |", "|" + "---:|" * len(head)]
    for row in sweep_table(run):
        cells = [str(row["connections"])]
        cells += [_fmt(row["tps"].get(t), ",.0f") for t in targets]
        cells += [_fmt(row["p95"].get(t), ".2f") for t in targets]
        cells += [_fmt(row["ratio"].get(t), ".2f") for t in targets[1:]]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def execute(args: argparse.Namespace, out: TextIO, resolve_target: Callable[[str], Target] = parse_dsn) -> int:
    """Carry out a parsed command; the exit status. CommandError for a refused one."""
    if args.command == "workloads":
        for name in workload_names():
            summary = (
                BUILTINS[name].summary
                if name in BUILTINS
                else ("a bench script (--script FILE)" if name == SCRIPT else "sysbench's own script")
            )
            print(f"{name:<28} {summary}", file=out)
        return 0
    if args.command == "show":
        try:
            script = builtin_script(args.name, rows=args.rows, table=f"pfbench_{args.name.replace('-', '_')}")
            print(script.text, file=out)
        except UnknownWorkload as exc:
            raise CommandError(str(exc)) from None
        return 0
    if args.command == "check":
        try:
            script = parse_script(args.file.read_text())
        except OSError as exc:
            raise CommandError(f"{args.file}: {exc.strerror}") from None
        except ScriptError as exc:
            raise CommandError(f"{args.file}: {exc}") from None
        writer = script.first_write
        print(
            f"{args.file}: {script.name}: {len(script.prepare)} prepare, {len(script.transaction)} transaction, "
            f"{len(script.cleanup)} cleanup statement(s); variables {', '.join(script.draws) or 'none'}; "
            + (f"writes ({writer.name}, line {writer.line})" if writer else "read-only"),
            file=out,
        )
        return 0
    if args.command == "report":
        try:
            result = RunResult.from_dict(json.loads(args.file.read_text()))
        except (OSError, ValueError) as exc:
            raise CommandError(f"{args.file}: {exc}") from None
        if args.plot is not None:
            draw(result, args.chart, args.plot, args.title)
        print(markdown_sweep(result) if args.markdown else run_report(result), file=out)
        return 0
    plan = plan_from_args(args, resolve_target)
    runner = runner_for(plan, PrintListener(out, quiet=args.quiet or str(args.json) == "-"))
    try:
        result = runner.run()
    except PlanError as exc:
        raise CommandError(str(exc)) from None
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    if str(args.json) != "-":
        print(run_report(result, steps=args.quiet), file=out)
    write_outputs(result, args, out)
    return 0 if result.status == "done" else 1


def main(argv: list[str] | None = None) -> int:
    """``python -m fleet.bench.engine``."""
    args = build_parser().parse_args(argv)
    try:
        return execute(args, sys.stdout)
    except CommandError as exc:
        print(f"bench: {exc}", file=sys.stderr)
        return 2
