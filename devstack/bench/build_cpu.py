"""CPU per query of two ProxyFleet checkouts side by side, alternating: did a change make the proxy dearer?

``python -m devstack.bench.build_cpu --old PATH [--new PATH] [--rounds 3] [--events 150000]``

Each checkout runs its own proxy (``python -m proxyapp run`` from its own directory, so each loads its own mypyc
build: run ``python -m proxyapp build`` in both first), one worker process each, both in front of one MariaDB
sandbox primary (``var/bench-cpu``). Then rounds of ``sysbench oltp_point_select --events=N`` at 16 and at 1,000
client threads through each proxy in turn, the order swapped every round. A proxy's CPU time (user + system, from
/proc) over a run divided by the run's queries is its CPU per query. Times and qps move with the machine's load;
CPU per query moves much less, and alternating puts both builds under the same load.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from devstack.bench.run_bench import SB_DB, SB_PASSWORD, SB_USER, proxy_config, sysbench_connection_args
from devstack.proxy import ProxyProcess
from devstack.sandbox import Sandbox
from devstack.stack import REPO

SANDBOX_DIR = "var/bench-cpu"
TABLE_SIZE = 10_000
THREADS = (16, 1000)


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def sysbench(port: int, threads: int, events: int, step: str = "run") -> None:
    """One sysbench oltp_point_select step (text protocol) through 127.0.0.1:``port``."""
    command = ["sysbench", "oltp_point_select", *sysbench_connection_args("127.0.0.1", port)]
    command += ["--tables=1", f"--table-size={TABLE_SIZE}", f"--threads={threads}", f"--events={events}"]
    command += ["--time=0", "--db-ps-mode=disable", step]
    subprocess.run(command, check=True, capture_output=True, timeout=900)


def measure(proxies: dict[str, ProxyProcess], rounds: int, events: int) -> dict[str, dict[int, list[float]]]:
    """CPU µs per query of each proxy, per thread count, one value per round."""
    results: dict[str, dict[int, list[float]]] = {name: {t: [] for t in THREADS} for name in proxies}
    names = list(proxies)
    for round_no in range(rounds):
        for threads in THREADS:
            for name in names if round_no % 2 == 0 else names[::-1]:
                proxy = proxies[name]
                assert proxy.proc is not None
                before = cpu_seconds(proxy.proc.pid)
                sysbench(proxy.port, threads, events)
                per_query = (cpu_seconds(proxy.proc.pid) - before) / events * 1_000_000
                results[name][threads].append(per_query)
                print(f"round {round_no + 1}, {threads:>4} threads, {name}: {per_query:.1f} µs", flush=True)
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--old", type=Path, required=True, help="the checkout to compare against (built)")
    parser.add_argument("--new", type=Path, default=REPO, help="the checkout under test (built; default: this one)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--events", type=int, default=150_000, help="queries per run")
    args = parser.parse_args()
    sandbox = Sandbox(SANDBOX_DIR)
    sandbox.down()
    sandbox.up(replicas=0)
    proxies: dict[str, ProxyProcess] = {}
    try:
        primary = sandbox.primary()
        with primary.connect() as conn, conn.cursor() as cur:
            cur.execute(f"CREATE USER IF NOT EXISTS '{SB_USER}'@'%' IDENTIFIED BY '{SB_PASSWORD}'")
            cur.execute(f"GRANT ALL ON *.* TO '{SB_USER}'@'%'")
            cur.execute(f"CREATE DATABASE IF NOT EXISTS {SB_DB}")
        sysbench(primary.port, 2, 0, "prepare")
        workdir = Path(tempfile.mkdtemp(prefix="build-cpu-"))
        for name, repo in (("old", args.old), ("new", args.new)):
            (workdir / name).mkdir()
            proxies[name] = ProxyProcess(proxy_config(primary, threads=1), workdir / name, repo.resolve()).start()
            compiled = len(proxies[name].admin("GET", "/stats").get("native") or [])
            print(f"{name}: {repo.resolve()}, {compiled} compiled modules", flush=True)
            sysbench(proxies[name].port, 16, 20_000)  # warm-up: pools filled, caches hot
        results = measure(proxies, args.rounds, args.events)
        print("\nCPU per point select (µs, each round):")
        for threads in THREADS:
            cells = [f"{name} " + "/".join(f"{v:.1f}" for v in results[name][threads]) for name in proxies]
            print(f"  {threads:>4} threads: " + " · ".join(cells))
    finally:
        for proxy in proxies.values():
            proxy.stop()
        sandbox.down()
    return 0


if __name__ == "__main__":
    sys.exit(main())
