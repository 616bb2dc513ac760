"""Instructions per query: the proxy's own cost, counted by callgrind, which does not move with the machine's load.

``make bench-instructions`` (``python -m devstack.bench.instructions [--queries N] [--threads N]``) starts one proxy
process (``mysql-threads`` 1) under ``valgrind --tool=callgrind`` with counting off, in front of the machine's
MariaDB (127.0.0.1:3306, whose root may create the ``sbtest`` user and tables); warms it up with sysbench point selects;
then, once sysbench's connections have logged in again, counts the instructions the proxy executes (in user space:
the kernel's socket work is not counted) while they run about ``--queries`` more (the proxy's own Questions counter
says how many), and prints instructions per query for the text protocol and for prepared
statements. Times on a shared 2-CPU machine vary by 10 % between runs; these counts vary by well under 1 %, so they
are the regression check for the per-query path. callgrind runs the proxy about fifty times slower: a run takes a
minute or two.

``--cache`` has callgrind simulate the caches too (``CACHES``: a 48 KiB first-level data cache and a 2 MiB last
level, one core's L1d and L2 on the machines here) and prints the misses per query beside the instructions. With
1,000 connections (``--threads 1000``) the sessions' working set no longer fits, and its misses, not its
instructions, set what a query costs; the simulation sees only the proxy's own accesses (the kernel's, the server's
and the clients' evict more on a real machine), so its counts are a floor that, like the instructions, does not move
with the machine's load. ``--pool`` sets the backend connections (the machine's MariaDB allows 151).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from devstack.ports import free_port
from devstack.stack import REPO

SERVER = ("127.0.0.1", 3306)
SB_USER, SB_PASSWORD, SB_DB = "sbinstr", "sbinstr-pass", "sbinstr"
TABLES, TABLE_SIZE = 2, 5000
WARMUP_QUERIES = 400
DRAIN_S = 1.0  # long enough for the proxy under callgrind to answer the queries in flight
#: The caches ``--cache`` simulates (valgrind's size,associativity,line): first-level instruction and data, last level.
CACHES = ("--I1=65536,16,64", "--D1=49152,12,64", "--LL=2097152,16,64")


@dataclass(frozen=True)
class Count:
    """What callgrind counted per query: instructions, and with the simulated caches their data misses (None
    without them): first-level (reads and writes) and last-level."""

    instructions: float
    l1_misses: float | None = None
    ll_misses: float | None = None

    def describe(self) -> str:
        """The count as the command prints it."""
        text = f"{self.instructions:,.0f} instructions per query"
        if self.l1_misses is not None and self.ll_misses is not None:
            text += f", {self.l1_misses:,.1f} L1d and {self.ll_misses:,.1f} last-level data misses"
        return text


def _mysql_root(sql: str) -> None:
    host, port = SERVER
    subprocess.run(["mysql", "-uroot", f"-h{host}", f"-P{port}", "-e", sql], check=True, capture_output=True)


def _sysbench_command(port: int, threads: int, ps_mode: str, *tail: str) -> list[str]:
    return [
        "sysbench", "oltp_point_select", "--db-driver=mysql", "--mysql-host=127.0.0.1", f"--mysql-port={port}",
        f"--mysql-user={SB_USER}", f"--mysql-password={SB_PASSWORD}", f"--mysql-db={SB_DB}", f"--tables={TABLES}",
        f"--table-size={TABLE_SIZE}", f"--threads={threads}", f"--db-ps-mode={ps_mode}", *tail,
    ]  # fmt: skip


def _sysbench(port: int, threads: int, ps_mode: str, *tail: str) -> subprocess.CompletedProcess[str]:
    command = _sysbench_command(port, threads, ps_mode, "--time=0", *tail)
    return subprocess.run(command, capture_output=True, text=True, timeout=1800)


def prepare() -> None:
    """The sbtest user, database and tables on the machine's MariaDB (kept between runs)."""
    _mysql_root(
        f"CREATE DATABASE IF NOT EXISTS {SB_DB}; CREATE USER IF NOT EXISTS '{SB_USER}'@'%' IDENTIFIED BY "
        f"'{SB_PASSWORD}'; GRANT ALL ON {SB_DB}.* TO '{SB_USER}'@'%'"
    )
    probe = subprocess.run(
        ["mysql", "-uroot", "-h127.0.0.1", "-N", "-e", f"SELECT COUNT(*) FROM {SB_DB}.sbtest{TABLES}"],
        capture_output=True,
        text=True,
    )
    if probe.returncode != 0 or probe.stdout.strip() != str(TABLE_SIZE):
        _mysql_root(f"DROP DATABASE IF EXISTS {SB_DB}; CREATE DATABASE {SB_DB}")
        done = _sysbench(SERVER[1], 2, "disable", "prepare")
        if done.returncode != 0:
            raise RuntimeError(f"sysbench prepare failed:\n{done.stdout}{done.stderr}")


def count(queries: int, threads: int, ps_mode: str, workdir: Path, cache: bool = False, pool: int = 50) -> Count:
    """Instructions (and with ``cache``, cache misses) per query of one proxy process serving ``queries`` point
    selects from ``threads`` connections on ``pool`` backend connections."""
    config = {
        "mysql_servers": [{"hostgroup_id": 0, "hostname": SERVER[0], "port": SERVER[1], "max_connections": pool}],
        "mysql_users": [{"username": SB_USER, "password": SB_PASSWORD, "default_hostgroup": 0}],
        "mysql_query_rules": [],
        "global_variables": [
            {"variable_name": "mysql-threads", "variable_value": "1"},
            {"variable_name": "mysql-max_auth_errors_until_block", "variable_value": "0"},
            # Under callgrind a connection takes far longer to open: many at once must not time out.
            {"variable_name": "mysql-connect_timeout_server", "variable_value": "20000"},
            {"variable_name": "mysql-connect_timeout_server_max", "variable_value": "60000"},
        ],
    }
    (workdir / "config.json").write_text(json.dumps(config))
    out = workdir / f"callgrind-{ps_mode}.out"
    port, admin = free_port(), free_port()
    with (workdir / "proxy.log").open("ab") as log:
        proxy = subprocess.Popen(
            [
                "valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}",
                *(("--cache-sim=yes", *CACHES) if cache else ()),
                sys.executable, "-m", "proxyapp", "run", "--config", str(workdir / "config.json"),
                "--listen", f"127.0.0.1:{port}", "--admin", f"127.0.0.1:{admin}",
            ],
            cwd=REPO, stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 300
        while _sysbench(port, 1, ps_mode, "--events=1", "run").returncode != 0:
            if proxy.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the proxy under callgrind did not come up; see {workdir / 'proxy.log'}")
            time.sleep(1)
        _sysbench(port, threads, ps_mode, f"--events={WARMUP_QUERIES}", "run")
        served = _count_steady(proxy.pid, port, admin, threads, ps_mode, queries)
        subprocess.run(["callgrind_control", "-d", str(proxy.pid)], check=True, capture_output=True)
    finally:
        proxy.terminate()
        proxy.wait(120)
    totals = max((_totals(path) for path in workdir.glob(f"callgrind-{ps_mode}.out*")), key=lambda t: t.get("Ir", 0))
    if not cache:
        return Count(totals.get("Ir", 0) / served)
    return Count(
        totals.get("Ir", 0) / served,
        (totals.get("D1mr", 0) + totals.get("D1mw", 0)) / served,
        (totals.get("DLmr", 0) + totals.get("DLmw", 0)) / served,
    )


def _count_steady(pid: int, port: int, admin: int, threads: int, ps_mode: str, queries: int) -> int:
    """Count while about ``queries`` point selects run over ``threads`` connections already logged in (as in
    ``make bench``, whose clients connect before its clock starts); the queries the proxy served meanwhile. sysbench
    is stopped (SIGSTOP) while counting is switched on and off and the proxy's Questions counter is read, so neither
    the switch's lag nor the admin request is in the count."""
    cmd = _sysbench_command(port, threads, ps_mode, "--time=3600", "--report-interval=1", "run")
    load = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert load.stdout is not None
        lines = iter(load.stdout.readline, "")
        if not any(line.startswith("Threads started!") for line in lines):
            raise RuntimeError(f"sysbench ended before its threads started (exit {load.wait()})")
        before = _paused(load, pid, admin, "on")
        reported = 0.0
        for line in lines:
            rate = re.search(r" qps: ([\d.]+)", line)
            reported += float(rate.group(1)) if rate else 0.0
            if reported >= queries:
                break
        else:
            raise RuntimeError(f"sysbench ended while counting (exit {load.wait()})")
        after = _paused(load, pid, admin, "off")
    finally:
        load.kill()
        load.wait(60)
    return after - before


def _paused(load: subprocess.Popen[str], pid: int, admin: int, counting: str) -> int:
    """With sysbench stopped and its last queries answered, switch callgrind's counting to ``counting`` ("on" or
    "off") and read the proxy's Questions counter while it is off; the counter's value."""
    load.send_signal(signal.SIGSTOP)
    try:
        time.sleep(DRAIN_S)
        if counting == "off":
            _switch(pid, "off")
        questions = _questions(admin)
        if counting == "on":
            _switch(pid, "on")
    finally:
        load.send_signal(signal.SIGCONT)
    return questions


def _switch(pid: int, state: str) -> None:
    subprocess.run(["callgrind_control", "-i", state, str(pid)], check=True, capture_output=True)


def _questions(admin: int) -> int:
    """The proxy's Questions counter (client commands received), from its admin endpoint."""
    with urllib.request.urlopen(f"http://127.0.0.1:{admin}/stats/global", timeout=120) as response:
        return int(json.loads(response.read())["Questions"])


def _totals(path: Path) -> dict[str, int]:
    """The events a callgrind output file counted, by name (``Ir``: instructions; ``D1mr``, ``DLmw``...: cache
    misses when simulated), from its ``totals:`` or ``summary:`` line, whichever counted more instructions."""
    lines = path.read_text(errors="replace").splitlines()
    names = next((line.split()[1:] for line in lines if line.startswith("events:")), ["Ir"])
    best: dict[str, int] = {}
    for line in lines:
        if line.startswith(("summary:", "totals:")):
            counted = dict(zip(names, (int(value) for value in line.split()[1:]), strict=False))
            if counted.get("Ir", 0) >= best.get("Ir", 0):
                best = counted
    return best


def main(argv: list[str] | None = None) -> int:
    """Count and print instructions per query, text protocol and prepared statements."""
    parser = argparse.ArgumentParser(prog="python -m devstack.bench.instructions", description=__doc__.split("\n")[0])
    parser.add_argument("--queries", type=int, default=2000, help="point selects counted per protocol")
    parser.add_argument("--threads", type=int, default=4, help="sysbench connections")
    parser.add_argument("--pool", type=int, default=50, help="backend connections the proxy may open")
    parser.add_argument("--cache", action="store_true", help="simulate the caches and print the misses per query")
    args = parser.parse_args(argv)
    missing = [tool for tool in ("valgrind", "callgrind_control", "sysbench", "mysql") if shutil.which(tool) is None]
    if missing:
        print(f"needs {', '.join(missing)} (make sysdeps)", file=sys.stderr)
        return 1
    prepare()
    with tempfile.TemporaryDirectory(prefix="proxyfleet-instructions-") as tmp:
        for ps_mode, label in (("disable", "text protocol"), ("auto", "prepared statements")):
            counted = count(args.queries, args.threads, ps_mode, Path(tmp), args.cache, args.pool)
            print(f"point select, {label}: {counted.describe()} "
                  f"({args.queries:,} queries over {args.threads} connections)", flush=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
