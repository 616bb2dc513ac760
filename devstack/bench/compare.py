"""This checkout's proxy beside another revision's, in one interleaved run: what a change does to throughput and CPU.

``python -m devstack.bench.compare REV [--threads N] [--rounds R] [--time S]`` makes a git worktree of ``REV`` under
``var/bench/compare/``, builds its native modules there (``python -m proxyapp build`` with this checkout's virtual
environment), and sets up what ``make bench`` sets up (the MariaDB sandbox, haproxy, this checkout's proxy) plus a
second proxy from the worktree, on a port of its own and with the same config. Each round then runs sysbench's point
selects through both proxies, one after the other, the order alternating from round to round, and reads each
proxy's CPU time (user and system, from /proc) around its run.

Two ``make bench`` runs, one per build, differ by the machine's drift between them as much as by the change; here
both proxies meet the same machine, minutes apart at most. It prints each run and the means: qps, and the proxy's
user and system µs per query; "this / REV" divides this checkout's by the other's.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from devstack.bench.run_bench import (
    BENCH_DIR,
    Bench,
    CpuSnapshot,
    Workload,
    descendants,
    parse_args,
    proxy_config,
)
from devstack.proxy import ProxyProcess
from devstack.stack import REPO
from fleet.bench.engine.sysbench import parse_sysbench

#: Where the other revision's worktree goes (one at a time; made again at each run).
WORKTREE = BENCH_DIR / "compare" / "worktree"
#: The targets' names: this checkout's proxy is ``make bench``'s; the other is added beside it.
THIS, OTHER = "proxyfleet", "other"


@dataclass(frozen=True)
class Sample:
    """One sysbench run through one proxy: its qps and the proxy's CPU per query, in µs."""

    target: str
    round: int
    qps: float
    user_us: float
    system_us: float


def order(round_no: int) -> tuple[str, str]:
    """The targets in the order round ``round_no`` runs them: alternating, so neither always runs second."""
    return (THIS, OTHER) if round_no % 2 == 0 else (OTHER, THIS)


def cpu_between(before: CpuSnapshot, after: CpuSnapshot, pids: tuple[int, ...]) -> tuple[float, float]:
    """(user, system) CPU seconds that ``pids`` (alive at both snapshots) used between them."""
    total = kernel = 0.0
    for pid in pids:
        total += after.ours_alive.get(pid, 0.0) - before.ours_alive.get(pid, 0.0)
        kernel += after.kernel_alive.get(pid, 0.0) - before.kernel_alive.get(pid, 0.0)
    return total - kernel, kernel


def queries_done(report: str) -> int:
    """The queries sysbench's final report counts (``parse_sysbench``, as ``make bench`` reads it)."""
    queries = parse_sysbench(report).get("queries")
    if not queries:
        raise RuntimeError(f"sysbench printed no query count:\n{report[-2000:]}")
    return int(queries)


def summary(samples: list[Sample]) -> dict[str, dict[str, float]]:
    """Each target's means (qps, user_us, system_us) over its samples."""
    out: dict[str, dict[str, float]] = {}
    for target in (THIS, OTHER):
        mine = [s for s in samples if s.target == target]
        if mine:
            out[target] = {
                "qps": sum(s.qps for s in mine) / len(mine),
                "user_us": sum(s.user_us for s in mine) / len(mine),
                "system_us": sum(s.system_us for s in mine) / len(mine),
            }
    return out


def make_worktree(revision: str) -> Path:
    """A fresh worktree of ``revision``, its native modules built with this checkout's interpreter."""
    remove_worktree()
    shutil.rmtree(WORKTREE, ignore_errors=True)  # what git no longer knew as a worktree
    WORKTREE.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "worktree", "add", "--detach", str(WORKTREE), revision], cwd=REPO, check=True)
    print(f"building {revision}'s native modules in {WORKTREE.relative_to(REPO)} (a few minutes) ...", flush=True)
    subprocess.run([sys.executable, "-m", "proxyapp", "build"], cwd=WORKTREE, check=True)
    return WORKTREE


def remove_worktree() -> None:
    """Remove the worktree (its build with it)."""
    subprocess.run(["git", "worktree", "remove", "--force", str(WORKTREE)], cwd=REPO, check=False)
    subprocess.run(["git", "worktree", "prune"], cwd=REPO, check=False)


def run(
    bench: Bench,
    proxies: dict[str, ProxyProcess],
    labels: dict[str, str],
    workload: Workload,
    rounds: int,
    seconds: int,
) -> list[Sample]:
    """The interleaved rounds, after a warm-up run through each proxy (``labels``: the targets' names to print)."""
    for target in proxies:
        subprocess.run(bench.sysbench_command(workload, target, "--time=3"), capture_output=True, check=False)
    samples = []
    for round_no in range(rounds):
        for target in order(round_no):
            process = proxies[target].proc
            assert process is not None
            pids = (process.pid, *descendants(process.pid))
            before = CpuSnapshot.take()
            done = subprocess.run(
                bench.sysbench_command(workload, target, f"--time={seconds}"), capture_output=True, text=True
            )
            after = CpuSnapshot.take()
            queries = queries_done(done.stdout)
            user, system = cpu_between(before, after, pids)
            sample = Sample(target, round_no, queries / seconds, user / queries * 1e6, system / queries * 1e6)
            samples.append(sample)
            print(
                f"round {round_no + 1}/{rounds}  {labels[target]:>16s}  qps {sample.qps:9,.0f}  "
                f"user {sample.user_us:6.1f} µs  system {sample.system_us:6.1f} µs a query",
                flush=True,
            )
    return samples


def main(argv: list[str] | None = None) -> int:
    """Build the other revision, set up, run the rounds, print the means; always tear down."""
    parser = argparse.ArgumentParser(prog="python -m devstack.bench.compare", description=__doc__.split("\n")[0])
    parser.add_argument(
        "revision", nargs="?", default="HEAD", help="the git revision to compare this checkout with (default HEAD)"
    )
    parser.add_argument("--threads", type=int, default=16, help="sysbench connections")
    parser.add_argument("--ps-mode", choices=("disable", "auto"), default="disable", help="sysbench's --db-ps-mode")
    parser.add_argument("--rounds", type=int, default=8, help="rounds, each running both proxies once")
    parser.add_argument("--time", type=int, dest="seconds", default=8, help="seconds of each sysbench run")
    args = parser.parse_args(argv)
    labels = {THIS: "this checkout", OTHER: args.revision}
    settings, _ = parse_args(["--rounds", "1", "--time", str(args.seconds)])
    bench = Bench(settings, BENCH_DIR / "compare" / "report.md")
    other: ProxyProcess | None = None
    try:
        worktree = make_worktree(args.revision)
        bench.setup()
        assert bench.proxy is not None
        workdir = BENCH_DIR / "compare" / "proxy"
        shutil.rmtree(workdir, ignore_errors=True)
        workdir.mkdir(parents=True)
        config = proxy_config(bench.sandbox.primary(), settings.proxy_threads)
        other = ProxyProcess(config, workdir, repo=worktree, own_session=True)
        other.start()
        bench.targets[OTHER] = ("127.0.0.1", other.port)
        workload = Workload("compare", "", "oltp_point_select", args.threads, args.ps_mode)
        proxies = {THIS: bench.proxy, OTHER: other}
        samples = run(bench, proxies, labels, workload, args.rounds, args.seconds)
    finally:
        if other is not None:
            other.stop()
        bench.teardown()
        remove_worktree()
    means = summary(samples)
    print(f"\nmeans over {args.rounds} rounds, oltp_point_select, {args.threads} threads, --db-ps-mode={args.ps_mode}")
    for name, label in labels.items():
        m = means[name]
        print(f"{label:>16s}  qps {m['qps']:9,.0f}  user {m['user_us']:6.2f} µs  system {m['system_us']:6.2f} µs")
    this, that = means[THIS], means[OTHER]
    ratios = {key: this[key] / that[key] if that[key] else float("nan") for key in this}
    print(
        f"{'this / ' + args.revision:>16s}  qps {ratios['qps']:9.3f}  user {ratios['user_us']:9.3f}"
        f"  system {ratios['system_us']:9.3f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
