"""Hot rows (issue 15): the hot-row transfer direct, through a proxy without the transaction queue and through the
same proxy with it, into ``docs/benchmarks.md`` (its section "Hot rows: the transaction queue") with a PNG per case.

``.venv/bin/python -m devstack.bench.hot_rows [--quick]`` builds the proxy (``make build``: it runs compiled), starts
a MariaDB sandbox (primary only, ``var/bench-hot-rows-sandbox``) and two proxies in front of it (``python -m proxyapp
run``, one worker, one hostgroup holding the primary), identical but for ``mysql-trx_queue_hints``: true on
"proxy+queue", false on "proxy, no queue". Then the bench tool (``python -m fleet.bench.engine run``) runs, the
targets interleaved step by step:

* ``transfer-queued`` (mydbtest's transfer, its first UPDATE hinting ``/* trx_queue=acct:ID1|ID2 */``) over 1,000 rows
  and over 10 hot rows, at 1 to 256 connections, on the three targets (for direct and for the proxy without the
  queue the hint is an ordinary comment);
* no cost to other traffic: ``point-select`` and the plain ``transfer`` (no hint) on the two proxies.

Per case and connection count the docs get tps, p99, deadlocks (error 1213), lock wait timeouts (1205), other
errors, the ratios proxy+queue / proxy without it and proxy+queue / direct, and the queue's own counters from the
proxy's ``/stats``. Results go to ``var/bench-hot-rows/*.json``; the plots to ``docs/bench/``. Everything it started
is stopped at the end. ``--quick`` (shorter steps, fewer connection counts, one round) tries the harness: its section
and charts go to ``var/bench-hot-rows/``, not the docs.
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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

from devstack.bench.run_bench import write_report
from devstack.proxy import ProxyProcess
from devstack.sandbox import APP_PASSWORD, APP_USER, Sandbox
from devstack.stack import REPO
from fleet.bench.engine.plot import draw
from fleet.bench.engine.results import RunResult

OUT = REPO / "var" / "bench-hot-rows"
PLOTS = REPO / "docs" / "bench"
DOC = REPO / "docs" / "benchmarks.md"
SECTION = "## Hot rows: the transaction queue"
#: Backend connections each proxy may open to the primary (above the largest step: no step waits for the pool).
POOL = 300
DIRECT, PLAIN, QUEUE = "direct", "proxy, no queue", "proxy+queue"
#: The MySQL errors counted apart: a deadlock, a lock wait timeout (the server's, or the queue's own wait).
DEADLOCK, LOCK_WAIT = "1213", "1205"
#: The issue's bar, on the 10-hot-row case from this many connections: proxy+queue at least this many times the
#: proxy without the queue, ahead of direct, with no deadlock.
BAR_CONNECTIONS, BAR_RATIO = 64, 1.6
#: Each case's load average before and after it (the machine is shared: other work shows here).
LOADS: dict[str, tuple[str, str]] = {}


@dataclass(frozen=True)
class Case:
    """One comparison: the bench tool's arguments (targets added), the targets it runs on, its title and note."""

    key: str
    title: str
    args: list[str]
    targets: tuple[str, ...] = (DIRECT, PLAIN, QUEUE)
    note: str = ""


def cases(quick: bool, rounds: int) -> list[Case]:
    """The cases, in the order they run (``quick``: fewer and shorter steps, one round, to try the harness)."""
    hot = "1,32,128" if quick else "1,8,32,64,128,256"
    light = "1,32" if quick else "1,32,64"
    seconds, warmup = ("2", "0.5") if quick else ("5", "1")
    step = ["--time", seconds, "--warmup", warmup, "--rounds", "1" if quick else str(rounds)]
    return [
        Case(
            "hot-rows-1000",
            "transfer-queued over 1,000 rows",
            ["--workload", "transfer-queued", "--rows", "1000", "--connections", hot, *step],
            note="The first note's OneSQL run (mydbtest, direct, ids 1..1000): 2,710 transfers/s without its "
            "trx_queue, 4,372/s with it (1.61x).",
        ),
        Case(
            "hot-rows-10",
            "transfer-queued over 10 hot rows",
            ["--workload", "transfer-queued", "--rows", "10", "--connections", hot, *step],
            note=f"The issue's bar: from {BAR_CONNECTIONS} connections, proxy+queue at least {BAR_RATIO}x the proxy "
            "without the queue, ahead of direct, with zero deadlocks.",
        ),
        Case(
            "hot-rows-point-select",
            "no cost to other traffic: point-select (10,000 rows), no hint",
            ["--workload", "point-select", "--connections", light, *step],
            targets=(PLAIN, QUEUE),
        ),
        Case(
            "hot-rows-transfer-plain",
            "no cost to other traffic: transfer over 1,000 rows, no hint",
            ["--workload", "transfer", "--rows", "1000", "--connections", light, *step],
            targets=(PLAIN, QUEUE),
        ),
    ]


def proxy_config(host: str, port: int, queue: bool) -> dict[str, Any]:
    """A proxy under test: the app user to one hostgroup holding the primary, no query rules, one worker; the
    hint comment honoured or not (``queue``), the queue's other settings at their defaults."""
    return {
        "mysql_servers": [{"hostgroup_id": 0, "hostname": host, "port": port, "max_connections": POOL}],
        "mysql_users": [{"username": APP_USER, "password": APP_PASSWORD, "default_hostgroup": 0}],
        "mysql_query_rules": [],
        "global_variables": [
            {"variable_name": "mysql-max_connections", "variable_value": "5000"},
            # One worker, as in make bench: on 2 CPUs shared with the server and the client a second one costs
            # more CPU per query than it adds (docs/benchmarks.md, the proxy worker's reading).
            {"variable_name": "mysql-threads", "variable_value": "1"},
            {"variable_name": "mysql-trx_queue_hints", "variable_value": "true" if queue else "false"},
        ],
    }


def dsn(name: str, port: int) -> str:
    """A target of the sandbox's ``test`` database, marked safe (the workloads create their tables)."""
    return f"mysql://{APP_USER}:{APP_PASSWORD}@127.0.0.1:{port}/test?name={quote(name, safe='')}&safe=1"


def load() -> str:
    """The machine's load average over 1 minute (runnable threads: 2 means both CPUs busy)."""
    return f"{os.getloadavg()[0]:.1f}"


def queue_counters(proxy: ProxyProcess) -> dict[str, int] | None:
    """The proxy's trx_queue counters summed over its queues (None when its ``/stats`` has no ``trx_queue``)."""
    stats = proxy.stats()
    queues = stats.get("trx_queue", {}).get("queues") if isinstance(stats, dict) else None
    if queues is None:
        return None
    names = ("transactions", "waited", "timeouts", "refused", "wait_ms_total")
    return {name: sum(int(q.get(name, 0)) for q in queues) for name in names}


def counters_text(before: dict[str, int] | None, after: dict[str, int] | None) -> str:
    """What the queue did during a case, from its counters before and after."""
    if before is None or after is None:
        return "The proxy's /stats has no trx_queue section (the queue is not in this build)."
    done = {name: after[name] - before.get(name, 0) for name in after}
    mean = done["wait_ms_total"] / done["waited"] if done["waited"] else 0.0
    return (
        f"proxy+queue's trx_queue counters over the case: {done['transactions']:,} transactions queued, "
        f"{done['waited']:,} waited (mean {mean:.1f} ms), {done['timeouts']:,} timed out, {done['refused']:,} refused."
    )


def run_case(case: Case, ports: dict[str, int], plots: Path) -> tuple[RunResult, str]:
    """Run one case with the bench tool, its chart drawn into ``plots``; its result and the command as the docs show
    it."""
    result_path = OUT / f"{case.key}.json"
    plot_path = plots / f"{case.key}.png"
    tail = [*case.args, "--json", str(result_path.relative_to(REPO)), "--quiet"]
    targets = [arg for name in case.targets for arg in ("--target", dsn(name, ports[name]))]
    argv = [sys.executable, "-m", "fleet.bench.engine", "run", *targets, *tail]
    print(f"== {case.title}", flush=True)
    before = load()
    result_path.unlink(missing_ok=True)
    done = subprocess.run(argv, cwd=REPO, env=dict(os.environ, PYTHONPATH=str(REPO)), text=True, capture_output=True)
    LOADS[case.key] = (before, load())
    (OUT / f"{case.key}.log").write_text(done.stdout + done.stderr)
    if not result_path.exists():
        raise RuntimeError(f"{case.key} wrote no result (exit {done.returncode}):\n{done.stdout[-2000:]}{done.stderr}")
    result = RunResult.from_dict(json.loads(result_path.read_text()))
    draw(result, "sweep", plot_path, case.title)
    variables = {DIRECT: "$DIRECT", PLAIN: "$PROXY", QUEUE: "$QUEUE"}
    shown = " ".join(f'--target "{variables[name]}"' for name in case.targets)
    rest = shlex.join([*case.args, "--json", f"{case.key}.json", "--plot", f"docs/bench/{case.key}.png"])
    return result, f"python manage.py bench run {shown} {rest}"


@dataclass
class Cell:
    """One target at one connection count over the rounds: each round's tps and p99, the errors summed."""

    tpss: list[float] = field(default_factory=list)
    p99s: list[float] = field(default_factory=list)
    deadlocks: int = 0
    lock_waits: int = 0
    other: int = 0

    @property
    def tps(self) -> float:
        """The mean tps over the rounds."""
        return sum(self.tpss) / len(self.tpss) if self.tpss else 0.0

    @property
    def p99(self) -> float | None:
        """The mean p99 (ms) over the rounds that have one."""
        return sum(self.p99s) / len(self.p99s) if self.p99s else None


def cells(result: RunResult) -> dict[int, dict[str, Cell]]:
    """The finished steps by connection count and target."""
    out: dict[int, dict[str, Cell]] = {}
    for step in result.steps:
        if step.status != "done":
            continue
        cell = out.setdefault(step.connections, {}).setdefault(step.target, Cell())
        cell.tpss.append(step.tps)
        if step.latency.p99 is not None:
            cell.p99s.append(step.latency.p99)
        counts = {code: int(error["count"]) for code, error in step.errors.items()}
        cell.deadlocks += counts.pop(DEADLOCK, 0)
        cell.lock_waits += counts.pop(LOCK_WAIT, 0)
        cell.other += sum(counts.values())
    return out


def _fmt(value: float | None, spec: str = ",.0f") -> str:
    return "-" if value is None else format(value, spec)


def _ratio(top: Cell | None, bottom: Cell | None) -> float | None:
    return top.tps / bottom.tps if top and bottom and bottom.tps else None


def table(case: Case, result: RunResult) -> list[str]:
    """The case's Markdown table: tps per target, the ratios, p99 and the errors per target."""
    names = case.targets
    short = "/".join({DIRECT: "d", PLAIN: "n", QUEUE: "q"}[name] for name in names)
    ratios = [(QUEUE, PLAIN, "queue / no queue"), *([(QUEUE, DIRECT, "queue / direct")] if DIRECT in names else [])]
    head = ["connections", *(f"{name} tps" for name in names), *(label for _, _, label in ratios)]
    head += [f"p99 ms ({short})", f"deadlocks ({short})", f"lock wait timeouts ({short})", f"other errors ({short})"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---:|" * (len(head) - 4) + "---|" * 4]
    for connections, by_target in sorted(cells(result).items()):
        row = [str(connections), *(_fmt(by_target[n].tps if n in by_target else None) for n in names)]
        row += [_fmt(_ratio(by_target.get(top), by_target.get(bottom)), ".2f") for top, bottom, _ in ratios]
        got = [by_target.get(n) for n in names]
        row.append(" / ".join(_fmt(c.p99 if c else None, ".1f") for c in got))
        for attribute in ("deadlocks", "lock_waits", "other"):
            row.append(" / ".join(str(getattr(c, attribute)) if c else "-" for c in got))
        lines.append("| " + " | ".join(row) + " |")
    return lines


def bar(result: RunResult) -> str:
    """Whether the 10-hot-row case meets the issue's bar at each connection count from ``BAR_CONNECTIONS``."""
    verdicts = []
    for connections, by_target in sorted(cells(result).items()):
        if connections < BAR_CONNECTIONS:
            continue
        queued = by_target.get(QUEUE)
        over_plain, over_direct = _ratio(queued, by_target.get(PLAIN)), _ratio(queued, by_target.get(DIRECT))
        misses = []
        if over_plain is None or over_plain < BAR_RATIO:
            misses.append(f"{_fmt(over_plain, '.2f')}x the proxy without the queue")
        if over_direct is None or over_direct <= 1.0:
            misses.append(f"{_fmt(over_direct, '.2f')}x direct")
        if queued is None or queued.deadlocks:
            misses.append(f"{queued.deadlocks if queued else '?'} deadlocks")
        verdicts.append(f"{connections}: {'met' if not misses else 'not met (' + ', '.join(misses) + ')'}")
    return ("The bar at " + "; ".join(verdicts) + ".") if verdicts else "The bar: no step at its connection counts."


def machine(sandbox: Sandbox, proxy: ProxyProcess) -> str:
    """One line about the machine, the server and the proxies."""
    with sandbox.primary().connect() as conn, conn.cursor() as cur:
        cur.execute("SELECT VERSION(), @@innodb_lock_wait_timeout")
        version, lock_wait = cur.fetchone()
    stats = proxy.stats()
    native = stats.get("native", []) if isinstance(stats, dict) else []
    revision = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True)
    return (
        f"{datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC · {len(os.sched_getaffinity(0))} CPUs, "
        f"{platform.system()} {platform.release()} · MariaDB {version} (sandbox primary, innodb_lock_wait_timeout "
        f"{lock_wait} s) · ProxyFleet {revision.stdout.strip()}, {len(native)} compiled modules, two proxies of "
        f"mysql-threads 1 and a pool of {POOL} backend connections, the queue's settings at their defaults · "
        f"Python {platform.python_version()}"
    )


def render(results: list[tuple[Case, RunResult, str, str]], machine_line: str, command: str) -> str:
    """The docs section."""
    lines = [
        SECTION,
        "",
        f"Written by `{command}` (`devstack/bench/hot_rows.py`): a MariaDB sandbox and two proxies in front of it "
        "(`python -m proxyapp run`, compiled, one hostgroup holding the primary), identical but for "
        "`mysql-trx_queue_hints`: true on proxy+queue, false on the proxy with no queue; each case run by the bench "
        "tool with its targets interleaved step by step; raw results in `var/bench-hot-rows/`. `$DIRECT` stands for "
        "`mysql://app:PASSWORD@127.0.0.1:PORT/test?name=direct&safe=1`, `$PROXY` and `$QUEUE` for the same on the "
        "two proxies' ports. `transfer-queued` is mydbtest's transfer whose first UPDATE carries "
        "`/* trx_queue=acct:ID1|ID2 */` with both of the transaction's rows (`python manage.py bench show "
        "transfer-queued`); for direct and for the proxy with no queue the hint is an ordinary comment. tps and p99 "
        "are the means over the rounds, the error counts their sums: deadlocks are error 1213, lock wait timeouts "
        "1205 (the server's, or the queue's own wait over `mysql-trx_queue_wait_timeout_ms`).",
        "",
        f"- Machine: {machine_line}",
        "- The client (the bench tool, one Python process), the proxies and MariaDB share the two cores, so the "
        "ratios say more than the absolute numbers. A failed transaction is rolled back and the connection goes on "
        "with the next one.",
        "",
    ]
    for case, result, shown, queue_text in results:
        before, after = LOADS.get(case.key, ("?", "?"))
        lines += [f"### {case.title}", "", f"`{shown}`", "", *table(case, result), ""]
        verdict = f"{bar(result)} " if case.key == "hot-rows-10" else ""
        lines += [f"{verdict}{queue_text} Load average (1 min) before / after: {before} / {after}. {case.note}", ""]
        lines += [f"![{case.title}](bench/{case.key}.png)", ""]
        if result.unfinished():
            lines += [result.unfinished(), ""]
    return "\n".join(lines).rstrip() + "\n"


def main(argv: list[str] | None = None) -> int:
    """Start the sandbox and the proxies, run every case, write the docs; always stop what was started."""
    parser = argparse.ArgumentParser(prog="python -m devstack.bench.hot_rows", description=__doc__.split("\n")[0])
    parser.add_argument(
        "--quick", action="store_true", help="fewer, shorter steps; the section and charts go to var/ (to try it)"
    )
    parser.add_argument("--rounds", type=int, default=2, help="times each case's sweep is repeated (default 2)")
    parser.add_argument("--only", help="run only the cases whose key starts with this (no docs)")
    args = parser.parse_args(argv)
    OUT.mkdir(parents=True, exist_ok=True)
    PLOTS.mkdir(parents=True, exist_ok=True)
    build = subprocess.run([sys.executable, "-m", "proxyapp", "build"], cwd=REPO, text=True, capture_output=True)
    if build.returncode != 0:
        print(f"make build failed: the proxy would run uncompiled\n{build.stderr[-3000:]}", file=sys.stderr)
        return 1
    sandbox = Sandbox("var/bench-hot-rows-sandbox")
    proxies: dict[str, ProxyProcess] = {}
    try:
        sandbox.down()
        sandbox.up(replicas=0)
        primary = sandbox.primary()
        for name, queue in ((PLAIN, False), (QUEUE, True)):
            workdir = OUT / ("proxy-queue" if queue else "proxy")
            workdir.mkdir(exist_ok=True)
            proxies[name] = ProxyProcess(proxy_config(primary.host, primary.port, queue), workdir).start()
        ports = {DIRECT: primary.port, **{name: proxy.port for name, proxy in proxies.items()}}
        results = []
        for case in cases(args.quick, args.rounds):
            if args.only and not case.key.startswith(args.only):
                continue
            counters = queue_counters(proxies[QUEUE])
            result, shown = run_case(case, ports, OUT if args.quick else PLOTS)
            queue_text = counters_text(counters, queue_counters(proxies[QUEUE]))
            results.append((case, result, shown, queue_text))
            print("\n".join(table(case, result)), flush=True)
            print(queue_text, flush=True)
            if case.key == "hot-rows-10":
                print(bar(result), flush=True)
        command = ".venv/bin/python -m devstack.bench.hot_rows" + (
            " --quick" if args.quick else (f" --rounds {args.rounds}" if args.rounds != 2 else "")
        )
        section = render(results, machine(sandbox, proxies[QUEUE]), command)
        if args.quick or args.only:
            (OUT / "section.md").write_text(section)
            print(f"wrote {(OUT / 'section.md').relative_to(REPO)} (not the docs: a quick or partial run)", flush=True)
        else:
            write_report(DOC, section, SECTION.removeprefix("## "))
            print(f"wrote {DOC.relative_to(REPO)} and {PLOTS.relative_to(REPO)}/", flush=True)
        return 0
    finally:
        for proxy in proxies.values():
            proxy.stop()
        sandbox.down()


if __name__ == "__main__":
    sys.exit(main())
