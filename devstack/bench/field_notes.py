"""The field notes' benchmarks reproduced with the bench tool, direct and through ProxyFleet, into
``docs/benchmarks.md`` (its section "Benchmark jobs: the field notes' workloads") with a PNG per workload.

``.venv/bin/python -m devstack.bench.field_notes [--quick]`` builds the proxy (``make build``: it runs compiled), starts
a MariaDB sandbox (primary only, ``var/bench-notes-sandbox``) and a proxy in front of it (``python -m proxyapp run``,
one hostgroup holding the primary, a pool of at most 200 backend connections), then runs each workload with ``python -m
fleet.bench.engine run`` (the engine behind ``manage.py bench``), the two targets interleaved step by step:

* MyCat's insert test (note 002), scaled down: 50 connections, transactions of 100 templated single-row INSERTs;
* Amoeba's sweep (note 003): ``tb_Shop`` insert, update, select and delete at 50, 100, ... 500 connections;
* the hot-row transfer (note 000): mydbtest's two UPDATEs in a transaction over 1,000 rows and over 100 hot rows.

Results go to ``var/bench-notes/*.json``; the plots to ``docs/bench/``. Everything it started is stopped at the end.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shlex
import subprocess
import sys
from dataclasses import dataclass
from typing import Any

from devstack.bench.run_bench import write_report
from devstack.proxy import ProxyProcess
from devstack.sandbox import APP_PASSWORD, APP_USER, Sandbox
from devstack.stack import REPO
from fleet.bench.engine.plot import draw
from fleet.bench.engine.results import RunResult, sweep_table

OUT = REPO / "var" / "bench-notes"
PLOTS = REPO / "docs" / "bench"
DOC = REPO / "docs" / "benchmarks.md"
SECTION = "## Benchmark jobs: the field notes' workloads"
#: Backend connections the proxy may open to the primary (the 500-connection steps are pooled onto these).
POOL = 200
#: Each case's load average before and after it (the machine is shared: other work shows here).
LOADS: dict[str, tuple[str, str]] = {}


@dataclass(frozen=True)
class Case:
    """One reproduction: the bench tool's arguments (targets added), its plot and how its table reads."""

    key: str
    title: str
    args: list[str]
    chart: str = "sweep"
    note: str = ""  # what the field note measured


def cases(quick: bool) -> list[Case]:
    """The workloads, in the order they run (``quick``: fewer and shorter steps, to try the harness)."""
    sweep = "50..150/50" if quick else "50..500/50"
    seconds, warmup = ("2", "0.5") if quick else ("5", "1")
    amoeba = [
        Case(
            f"amoeba-{op}",
            f"Amoeba tb_Shop {op}, {sweep.replace('..', ' to ').replace('/', ' step ')} connections",
            ["--workload", f"shop-{op}", "--connections", sweep, "--time", seconds, "--warmup", warmup],
            note="Amoeba's note (single-proxy mode, 50 to 500 connections): up to 20% slower than direct at low load, "
            "about 5x faster on average at high load (pooling), the break-even near 150 connections.",
        )
        for op in ("insert", "update", "select", "delete")
    ]
    events, rounds = ("100", "1") if quick else ("400", "3")
    transfer = f"--workload transfer --connections 1,8,32,64 --time {seconds} --warmup {warmup}"
    return [
        Case(
            "mycat-insert",
            "MyCat insert test, 50 connections, 100 INSERTs a transaction",
            f"--workload mycat-insert --batch 100 --connections 50 --events {events} --rounds {rounds}".split(),
            note="MyCat's note: 10,000,000 rows, 50 threads, batches of 100: 2,804 rows/s through MyCat, 4,347 direct "
            "(0.65).",
        ),
        *amoeba,
        Case(
            "transfer-1000",
            "hot-row transfer over 1,000 rows (mydbtest's ids 1..1000)",
            [*transfer.split(), "--rows", "1000"],
            note="The first note's OneSQL run (mydbtest, direct): 2,710 transfers/s without its trx_queue, 4,372/s "
            "with it.",
        ),
        Case(
            "transfer-100",
            "hot-row transfer over 100 hot rows",
            [*transfer.split(), "--rows", "100"],
            note="The note's third run locked both rows first (ids 1..100): 3,170 transfers/s with OneSQL's trx_queue.",
        ),
    ]


def proxy_config(host: str, port: int) -> dict[str, Any]:
    """The proxy under test: the app user to one hostgroup holding the primary; no query rules."""
    return {
        "mysql_servers": [{"hostgroup_id": 0, "hostname": host, "port": port, "max_connections": POOL}],
        "mysql_users": [{"username": APP_USER, "password": APP_PASSWORD, "default_hostgroup": 0}],
        "mysql_query_rules": [],
        "global_variables": [
            {"variable_name": "mysql-max_connections", "variable_value": "5000"},
            # One worker, as in make bench: on 2 CPUs shared with the server and the client a second one costs
            # more CPU per query than it adds (docs/benchmarks.md, the proxy worker's reading).
            {"variable_name": "mysql-threads", "variable_value": "1"},
        ],
    }


def dsn(name: str, port: int) -> str:
    """A target of the sandbox's ``test`` database, marked safe (the workloads create their tables)."""
    return f"mysql://{APP_USER}:{APP_PASSWORD}@127.0.0.1:{port}/test?name={name}&safe=1"


def load() -> str:
    """The machine's load average over 1 minute (runnable threads: 2 means both CPUs busy)."""
    return f"{os.getloadavg()[0]:.1f}"


def run_case(case: Case, direct_port: int, proxy_port: int) -> tuple[RunResult, str]:
    """Run one case with the bench tool; its result and the command as the docs show it."""
    result_path = OUT / f"{case.key}.json"
    plot_path = PLOTS / f"{case.key}.png"
    tail = [*case.args, "--json", str(result_path.relative_to(REPO)), "--quiet"]
    targets = ["--target", dsn("direct", direct_port), "--target", dsn("proxyfleet", proxy_port)]
    argv = [sys.executable, "-m", "fleet.bench.engine", "run", *targets, *tail]
    print(f"== {case.title}", flush=True)
    before = load()
    done = subprocess.run(argv, cwd=REPO, env=dict(os.environ, PYTHONPATH=str(REPO)), text=True, capture_output=True)
    LOADS[case.key] = (before, load())
    (OUT / f"{case.key}.log").write_text(done.stdout + done.stderr)
    if not result_path.exists():
        raise RuntimeError(f"{case.key} wrote no result (exit {done.returncode}):\n{done.stdout[-2000:]}{done.stderr}")
    result = RunResult.from_dict(json.loads(result_path.read_text()))
    draw(result, case.chart, plot_path, case.title)
    shown = [*case.args, "--json", f"{case.key}.json", "--plot", f"docs/bench/{case.key}.png"]
    return result, 'python manage.py bench run --target "$DIRECT" --target "$PROXY" ' + shlex.join(shown)


def _fmt(value: float | None, spec: str = ",.0f") -> str:
    return "-" if value is None else format(value, spec)


def table(case: Case, result: RunResult) -> list[str]:
    """The case's Markdown table: tps (and rows/s for inserts) per target per connection count, and the ratio."""
    rows_per_tx = 100 if case.key == "mycat-insert" else 1
    unit = "rows/s" if rows_per_tx > 1 else "tps"
    lines = [
        f"| connections | direct {unit} | ProxyFleet {unit} | ProxyFleet/direct | direct p95 ms | ProxyFleet p95 ms "
        "| errors (d/P) |",
        "|---:|---:|---:|---:|---:|---:|---|",
    ]
    errors = {(s.target, s.connections): errors_of(result, s.target, s.connections) for s in result.steps}
    for row in sweep_table(result):
        tps, p95, ratio = row["tps"], row["p95"], row["ratio"]
        n = row["connections"]
        lines.append(
            f"| {n} | {_fmt(_times(tps.get('direct'), rows_per_tx))} "
            f"| {_fmt(_times(tps.get('proxyfleet'), rows_per_tx))} | {_fmt(ratio.get('proxyfleet'), '.2f')} "
            f"| {_fmt(p95.get('direct'), '.2f')} | {_fmt(p95.get('proxyfleet'), '.2f')} "
            f"| {errors.get(('direct', n), 0)}/{errors.get(('proxyfleet', n), 0)} |"
        )
    return lines


def observed(result: RunResult) -> str:
    """The lowest and highest ProxyFleet/direct ratio of the run, and where."""
    ratios = [(row["ratio"].get("proxyfleet"), row["connections"]) for row in sweep_table(result)]
    ratios = [(r, n) for r, n in ratios if r is not None]
    if not ratios:
        return "No ratio: a target has no finished step."
    (low, at_low), (high, at_high) = min(ratios), max(ratios)
    if len(ratios) == 1:
        return f"ProxyFleet/direct here: {low:.2f}."
    return f"ProxyFleet/direct here: from {low:.2f} ({at_low} connections) to {high:.2f} ({at_high} connections)."


def errors_of(result: RunResult, target: str, connections: int) -> int:
    return sum(s.error_count for s in result.steps if s.target == target and s.connections == connections)


def _times(value: float | None, factor: int) -> float | None:
    return None if value is None else value * factor


def machine(sandbox: Sandbox, proxy: ProxyProcess) -> str:
    """One line about the machine, the server and the proxy."""
    with sandbox.primary().connect() as conn, conn.cursor() as cur:
        cur.execute("SELECT VERSION()")
        version = cur.fetchone()[0]
    stats = proxy.admin("GET", "/stats")
    native = stats.get("native", []) if isinstance(stats, dict) else []
    revision = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True)
    return (
        f"{datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC · {len(os.sched_getaffinity(0))} CPUs, "
        f"{platform.system()} {platform.release()} · MariaDB {version} (sandbox primary) · ProxyFleet "
        f"{revision.stdout.strip()}, {len(native)} compiled modules, mysql-threads "
        f"{proxy_config('', 0)['global_variables'][1]['variable_value']}, pool {POOL} backend connections · "
        f"Python {platform.python_version()}"
    )


def render(results: list[tuple[Case, RunResult, str]], machine_line: str, command: str) -> str:
    """The docs section."""
    lines = [
        SECTION,
        "",
        f"Written by `{command}` (`devstack/bench/field_notes.py`): a MariaDB sandbox and a proxy in front of it "
        "(`python -m proxyapp run`, compiled, one hostgroup holding the primary), each workload run by the bench "
        "tool with the two targets interleaved step by step; raw results in `var/bench-notes/`. `$DIRECT` and "
        "`$PROXY` stand for `mysql://app:PASSWORD@127.0.0.1:PORT/test?name=direct&safe=1` and the same on the "
        "proxy's port. The client, the proxy and the server share the machine's two cores, so the ratios say more "
        "than the absolute numbers; tps and p95 are the means over the rounds.",
        "",
        f"- Machine: {machine_line}",
        "- The client (the bench tool, one Python process), the proxy (one worker process) and MariaDB share the "
        "two cores: every CPU second the proxy spends is taken from the server and the client. In the notes the "
        "proxy had a machine of its own (MyCat) or shared one with MySQL (Amoeba); the gap to direct here is "
        "therefore an upper bound of what the proxy costs. The load averages under each table count runnable "
        "threads, MariaDB's threads for the run's own connections included: a high value after a 500-connection "
        "sweep is the sweep itself; the first table's value before tells whether the machine was quiet.",
        "- Amoeba's statements are kept, with bounded ranges: the update touches 10 shops from a random id, the "
        "select reads up to 10 of 100, the delete removes one shop by id (a second delete of it finds nothing, as "
        "in Amoeba's run); MyCat's 10,000,000 rows are scaled down to 40,000 per step.",
        "",
    ]
    for case, result, shown in results:
        before, after = LOADS.get(case.key, ("?", "?"))
        lines += [f"### {case.title}", "", f"`{shown}`", "", *table(case, result), ""]
        lines += [f"{observed(result)} Load average (1 min) before / after: {before} / {after}. {case.note}", ""]
        lines += [f"![{case.title}](bench/{case.key}.png)", ""]
        if result.unfinished():
            lines += [result.unfinished(), ""]
    return "\n".join(lines).rstrip() + "\n"


def main(argv: list[str] | None = None) -> int:
    """Start the sandbox and the proxy, run every case, write the docs; always stop what was started."""
    parser = argparse.ArgumentParser(prog="python -m devstack.bench.field_notes", description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer, shorter steps (to try the harness)")
    parser.add_argument("--only", help="run only the cases whose key starts with this")
    args = parser.parse_args(argv)
    OUT.mkdir(parents=True, exist_ok=True)
    PLOTS.mkdir(parents=True, exist_ok=True)
    build = subprocess.run([sys.executable, "-m", "proxyapp", "build"], cwd=REPO, text=True, capture_output=True)
    if build.returncode != 0:
        print(f"make build failed: the proxy would run uncompiled\n{build.stderr[-3000:]}", file=sys.stderr)
        return 1
    sandbox = Sandbox("var/bench-notes-sandbox")
    proxy: ProxyProcess | None = None
    try:
        sandbox.down()
        sandbox.up(replicas=0)
        primary = sandbox.primary()
        workdir = OUT / "proxy"
        workdir.mkdir(exist_ok=True)
        proxy = ProxyProcess(proxy_config(primary.host, primary.port), workdir).start()
        results = []
        for case in cases(args.quick):
            if args.only and not case.key.startswith(args.only):
                continue
            result, shown = run_case(case, primary.port, proxy.port)
            results.append((case, result, shown))
            for row in sweep_table(result):
                print(f"   {row['connections']:>4} conns  {row['tps']}", flush=True)
        command = ".venv/bin/python -m devstack.bench.field_notes" + (" --quick" if args.quick else "")
        if not args.only:
            write_report(DOC, render(results, machine(sandbox, proxy), command), SECTION.removeprefix("## "))
            print(f"wrote {DOC.relative_to(REPO)} and {PLOTS.relative_to(REPO)}/", flush=True)
        return 0
    finally:
        if proxy is not None:
            proxy.stop()
        sandbox.down()


if __name__ == "__main__":
    sys.exit(main())
