"""System calls and context switches per query, ProxyFleet beside haproxy: what each proxy asks of the kernel.

``python -m devstack.bench.kernel_calls [--threads N] [--ps-mode M] [--window S]`` sets up what ``make bench`` sets
up (the MariaDB sandbox, haproxy, one ProxyFleet worker in a session of its own), runs sysbench's point selects
through each proxy in turn and counts, over a window in the middle of each run:

- the proxy's system calls by name, with ``perf stat`` on the kernel's syscall tracepoints (perf is Debian's
  linux-perf; it needs root or a low ``kernel.perf_event_paranoid``); without perf, only the context switches;
- its context switches from /proc: voluntary (it waited for its sockets) and involuntary (it was preempted: another
  task took its CPU, and the caches it had warmed).

Each is printed per query, the queries being those sysbench reported for the window's seconds.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterable
from pathlib import Path

from devstack.bench.run_bench import Bench, Workload, descendants, parse_args
from devstack.stack import REPO

#: The system calls counted by name (a proxy's per-query ones; the rest are in ``raw_syscalls:sys_enter``).
SYSCALLS = ("recvfrom", "read", "sendto", "sendmsg", "write", "writev", "epoll_wait", "epoll_pwait", "clock_gettime")
#: Seconds of each run before the window opens (the clients have logged in by then).
SETTLE_S = 2


def perf_events() -> list[str]:
    """The perf events counted: each named system call's entry, all system calls, and context switches."""
    return [*(f"syscalls:sys_enter_{name}" for name in SYSCALLS), "raw_syscalls:sys_enter", "context-switches"]


def parse_perf_csv(text: str) -> dict[str, float]:
    """``perf stat -x,``'s counts by event name (events it could not count are left out)."""
    counts: dict[str, float] = {}
    for line in text.splitlines():
        fields = line.split(",")
        if len(fields) > 2 and re.fullmatch(r"\d+(\.\d+)?", fields[0]):
            counts[fields[2]] = float(fields[0])
    return counts


def queries_in_window(report: str, first_second: int, seconds: int) -> float:
    """The queries sysbench's per-second reports (``--report-interval=1``) count for the seconds ending at
    ``first_second + 1`` .. ``first_second + seconds``."""
    total = 0.0
    for match in re.finditer(r"^\[ (\d+)s \].*? qps: ([\d.]+)", report, re.MULTILINE):
        if first_second < int(match.group(1)) <= first_second + seconds:
            total += float(match.group(2))
    return total


def context_switches(pids: Iterable[int]) -> tuple[int, int]:
    """(voluntary, involuntary) context switches so far of every thread of ``pids``."""
    voluntary = involuntary = 0
    for pid in pids:
        for task in Path(f"/proc/{pid}/task").iterdir():
            for line in (task / "status").read_text().splitlines():
                name, _, value = line.partition(":")
                if name == "voluntary_ctxt_switches":
                    voluntary += int(value)
                elif name == "nonvoluntary_ctxt_switches":
                    involuntary += int(value)
    return voluntary, involuntary


def measure(bench: Bench, target: str, pids: list[int], workload: Workload, window: int) -> dict[str, float]:
    """Per query of one sysbench run of ``workload`` through ``target`` (whose processes are ``pids``): its counts
    over the window."""
    command = bench.sysbench_command(workload, target, f"--time={SETTLE_S + window + 1}", "--report-interval=1")
    load = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    time.sleep(SETTLE_S)
    before = context_switches(pids)
    counts: dict[str, float] = {}
    if shutil.which("perf"):
        listed = ",".join(str(pid) for pid in pids)
        stat = ["perf", "stat", "-x,", "-e", ",".join(perf_events()), "-p", listed, "--", "sleep", str(window)]
        counts = parse_perf_csv(subprocess.run(stat, capture_output=True, text=True).stderr)
    else:
        time.sleep(window)
    after = context_switches(pids)
    report = load.communicate(timeout=window + 120)[0]
    queries = queries_in_window(report, SETTLE_S, window)
    if queries <= 0:
        raise RuntimeError(f"sysbench reported no queries through {target}:\n{report[-2000:]}")
    counts["voluntary context switches"] = after[0] - before[0]
    counts["involuntary context switches"] = after[1] - before[1]
    return {name: value / queries for name, value in counts.items()} | {"queries": queries}


def main(argv: list[str] | None = None) -> int:
    """Set up as ``make bench`` does, measure each proxy once, print the counts per query; always tear down."""
    parser = argparse.ArgumentParser(prog="python -m devstack.bench.kernel_calls", description=__doc__.split("\n")[0])
    parser.add_argument("--threads", type=int, default=16, help="sysbench connections")
    parser.add_argument("--ps-mode", choices=("disable", "auto"), default="disable", help="sysbench's --db-ps-mode")
    parser.add_argument("--window", type=int, default=4, help="seconds counted in the middle of each run")
    args = parser.parse_args(argv)
    settings, _ = parse_args(["--rounds", "1", "--time", str(args.window)])
    bench = Bench(settings, REPO / "var" / "bench" / "kernel_calls.md")
    try:
        bench.setup()
        assert bench.haproxy is not None and bench.haproxy.proc is not None
        assert bench.proxy is not None and bench.proxy.proc is not None
        processes = {
            "haproxy": [bench.haproxy.proc.pid],
            "ProxyFleet": [bench.proxy.proc.pid, *descendants(bench.proxy.proc.pid)],
        }
        workload = Workload("kernel_calls", "", "oltp_point_select", args.threads, args.ps_mode)
        results = {}
        for label, pids in processes.items():
            target = "haproxy" if label == "haproxy" else "proxyfleet"
            results[label] = measure(bench, target, pids, workload, args.window)
    finally:
        bench.teardown()
    names = sorted({name for counts in results.values() for name in counts if name != "queries"})
    print(
        f"\nper query, oltp_point_select, {args.threads} threads, --db-ps-mode={args.ps_mode}, {args.window} s window"
    )
    print(f"{'':40s}" + "".join(f"{label:>12s}" for label in results))
    print(f"{'queries in the window':40s}" + "".join(f"{counts['queries']:12,.0f}" for counts in results.values()))
    for name in names:
        print(f"{name:40s}" + "".join(f"{counts.get(name, 0.0):12.3f}" for counts in results.values()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
