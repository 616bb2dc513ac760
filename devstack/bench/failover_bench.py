"""Failover timings with default settings: ``kill -9`` of the primary while a client writes through a proxy node in
a loop, then how long until the nodes' monitors shun it, the control plane detects it (a majority of the nodes
report it down), promotes a replica, publishes the new topology, and the client's first write succeeds again.

``make bench-failover`` runs ``.venv/bin/python -m devstack.bench.failover_bench [--runs N] [--out
docs/benchmarks.md]``. Each run builds everything afresh: a sandbox (a primary and two replicas, asynchronous
replication) under ``var/bench-failover``, a private redis-server, the control plane (gunicorn, a Celery worker, beat)
and two nodes, all with their default settings except failover, which is turned on (``devstack/failover_stack.py``).
Times are taken on one clock: the kill's, the steps' in the failover's timeline, the client's acknowledgements. The
report goes into the ``## Failover`` section of ``docs/benchmarks.md``."""

from __future__ import annotations

import argparse
import datetime
import itertools
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from devstack import stack
from devstack.bench.run_bench import write_report
from devstack.failover_sandbox import address, ids
from devstack.failover_stack import NODES, TABLE, TIMEOUT, Fleet, Writer, running_fleet
from devstack.sandbox import Sandbox
from devstack.stack import REPO

SECTION_TITLE = "Failover"
WORK_DIR = REPO / "var" / "bench-failover"
#: The issue's bar: writes resume within this many seconds of the kill, with default settings.
BAR_S = 10.0
#: How often a node reports by default (``python -m proxyapp run --report-interval``).
REPORT_CYCLE_S = 5.0


@dataclass
class Run:
    """One kill and what followed, in seconds after the kill."""

    shunned: float  # the first node's monitor shuns the primary (its read_only or ping checks failed)
    detected: float  # the control plane's "detected" step
    promoted: float
    published: float
    first_write: float  # the client's first acknowledged write once writes resumed after the kill
    chosen_detail: str
    failed_writes: int  # writes that got an error between the kill and the first success
    missing: int  # acknowledged writes the new primary lacks (asynchronous replication)


def _seconds(iso: str, since: float) -> float:
    return datetime.datetime.fromisoformat(iso).timestamp() - since


def resumed_at(acked_at: list[float], killed_at: float) -> float:
    """When writes resumed: the end of the longest pause between acknowledged writes after the kill (a write in
    flight at the kill may still be acknowledged a moment after it)."""
    before = [at for at in acked_at if at <= killed_at]
    times = [before[-1] if before else killed_at, *(at for at in acked_at if at > killed_at)]
    return max(itertools.pairwise(times), key=lambda pair: pair[1] - pair[0])[1]


def _wait_monitored(fleet: Fleet) -> None:
    """Wait until every node's report shows the primary up (their monitors watch it)."""

    def watched() -> bool:
        primary = fleet.topology()["primary"]
        return primary is not None and [n["verdict"] for n in primary["nodes"]] == ["up"] * len(NODES)

    stack.wait_until(watched, "both nodes' reports of the primary", TIMEOUT)


def one_run(number: int) -> Run:
    """Build everything, kill the primary under writes, measure, take everything down."""
    box = Sandbox(WORK_DIR / "sandbox")
    box.down()
    box.up(replicas=2)
    workdir = WORK_DIR / f"run-{number}"
    shutil.rmtree(workdir, ignore_errors=True)
    try:
        with running_fleet(box, workdir) as fleet:
            _wait_monitored(fleet)
            old = address(box.primary())
            writer = Writer(fleet.ports[NODES[0]][0], "bench", 1).start()
            try:
                # The kill comes at a random point of the nodes' report cycle (5 s), as a real crash would: how long
                # the news takes to reach the control plane depends on it.
                time.sleep(random.uniform(1, 1 + REPORT_CYCLE_S))
                killed_at = time.time()
                box.kill("primary")
                event = fleet.api.wait_event("failover", 1)
                writer.wait_more(50)
            finally:
                writer.finish()
            if event["state"] != "done":
                raise RuntimeError(f"failover #{event['id']} {event['state']}: {event['summary']}")
            steps = {step["name"]: step for step in reversed(event["steps"])}  # the first of each name wins
            moves = fleet.api.call("GET", f"/backend-transitions/?server={old}&to_status=SHUNNED")["results"]
            shunned = [  # by the monitor's checks (the pool's own connect errors may shun it sooner under traffic)
                _seconds(m["at"], killed_at)
                for m in moves
                if "failed" in m["reason"] and "connect failed" not in m["reason"]
            ]
            first_write = resumed_at(writer.acked_at, killed_at)
            new_primary = fleet.server(event["new_primary"])
            lost = set(writer.acked) - ids(new_primary, TABLE)
            return Run(
                shunned=min(shunned) if shunned else float("nan"),
                detected=_seconds(steps["detected"]["at"], killed_at),
                promoted=_seconds(steps["promoted"]["at"], killed_at),
                published=_seconds(steps["published"]["at"], killed_at),
                first_write=first_write - killed_at,
                chosen_detail=steps["chosen"]["detail"],
                failed_writes=len(writer.errors),
                missing=len(lost),
            )
    finally:
        box.down()


def machine() -> dict[str, str]:
    """CPUs, memory, kernel and versions, for the report."""
    model, memory = "unknown", "unknown"
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            model = line.split(":", 1)[1].strip()
            break
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            memory = f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB RAM"
    version = subprocess.run(["mariadbd", "--version"], capture_output=True, text=True).stdout.strip()
    revision = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return {
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "cpus": f"{len(os.sched_getaffinity(0))} CPUs ({model})",
        "memory": memory,
        "kernel": f"{platform.system()} {platform.release()}",
        "mariadb": version or "unknown",
        "python": platform.python_version(),
        "revision": revision.stdout.strip() or "unknown",
        "load": " / ".join(f"{x:.2f}" for x in os.getloadavg()),
    }


def report(runs: list[Run], info: dict[str, str], command: str) -> str:
    """The Markdown section."""
    lines = [
        f"## {SECTION_TITLE}",
        "",
        f"Command: `{command}` (written by `devstack/bench/failover_bench.py`).",
        "",
        f"- Date: {info['date']} · revision {info['revision']}",
        f"- Machine: {info['cpus']}, {info['memory']}, {info['kernel']}; load average (1/5/15 min) before: "
        f"{info['load']}, after: {' / '.join(f'{x:.2f}' for x in os.getloadavg())} (the machine is shared: a high "
        "load means other processes took CPU from this run, and the times stretch)",
        f"- {info['mariadb']} · Python {info['python']}",
        "- Setup per run, built afresh: a sandbox primary with two replicas (asynchronous replication), a private "
        "redis-server, the control plane (gunicorn, a Celery worker with two processes, beat) and two proxy nodes, "
        "every setting at its default (nodes report every 5 s; monitor read_only checks every 1 s, shun after 3 "
        "failures; `mysql-no_writer_wait_ms` 5000; failover evaluated every second) except failover, turned on. "
        "A client writes through node 1 in a loop (autocommit INSERTs); `kill -9` of the primary at a random "
        "point of the nodes' report cycle.",
        "- Seconds after the kill: the first node's monitor shuns the primary (failed checks); the control plane "
        "records it detected (a majority of the nodes' reports say it is down), promoted a replica, published the "
        "new topology; the client's first acknowledged write once writes resumed.",
        "",
        "| run | shunned | detected | promoted | published | first write | failed writes | acked writes missing |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for number, run in enumerate(runs, 1):
        lines.append(
            f"| {number} | {run.shunned:.1f} | {run.detected:.1f} | {run.promoted:.1f} | {run.published:.1f} | "
            f"**{run.first_write:.1f}** | {run.failed_writes} | {run.missing} |"
        )
    if runs:

        def median(values: list[float]) -> str:
            return f"{statistics.median(values):.1f}"

        lines.append(
            f"| median | {median([r.shunned for r in runs])} | {median([r.detected for r in runs])} | "
            f"{median([r.promoted for r in runs])} | {median([r.published for r in runs])} | "
            f"**{median([r.first_write for r in runs])}** | | |"
        )
        worst = max(r.first_write for r in runs)
        met = "met in every run" if worst <= BAR_S else "NOT met"
        lines += [
            "",
            f"The bar (writes resume within {BAR_S:.0f} s of the kill, default settings): **{met}**; the slowest "
            f"run's first write came {worst:.1f} s after the kill.",
            "",
            f"How the replica was chosen in the last run: {runs[-1].chosen_detail}",
        ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m devstack.bench.failover_bench", description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="kills to measure (default 3)")
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "benchmarks.md", help="the Markdown report")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs: at least 1")
    os.environ.setdefault("PYTHONPATH", str(REPO))
    info = machine()
    runs = []
    for number in range(1, args.runs + 1):
        run = one_run(number)
        print(f"run {number}: first write {run.first_write:.1f} s after the kill ({run})", flush=True)
        runs.append(run)
    command = "make bench-failover" + (f" BENCH_ARGS='--runs {args.runs}'" if args.runs != 3 else "")
    write_report(args.out, report(runs, info, command), SECTION_TITLE)
    print(f"wrote the {SECTION_TITLE} section of {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
