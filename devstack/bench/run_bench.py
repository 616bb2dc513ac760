"""sysbench through three targets: the MariaDB primary directly, haproxy (TCP mode) and ProxyFleet.

``make bench`` runs ``.venv/bin/python -m devstack.bench.run_bench [--quick] [--out docs/benchmarks.md]``. It starts
everything it measures and stops it again, on success, failure or Ctrl-C:

* a MariaDB sandbox (primary only) under ``var/bench-sandbox`` with an ``sbtest`` user and database, filled by
  ``sysbench oltp_read_write prepare``;
* haproxy in TCP mode (config under ``var/bench/``): one loopback frontend, one backend server, the primary;
* a ProxyFleet proxy (``python -m proxyapp run``) routing the ``sbtest`` user to the primary, with no query
  rules, so every target sends every statement to the same server and the comparison is fair.

Then it runs interleaved rounds (direct, haproxy, ProxyFleet, direct, haproxy, ProxyFleet, ...) of each
workload, parses sysbench's report, writes the raw results to ``var/bench/results.json`` and a Markdown
report (medians of the rounds, and the ratios between targets) into a section of ``docs/benchmarks.md``.
The machine is shared and noisy: the report records the load average before and after, and the spread of the
rounds, so a rerun on a quiet machine can be compared with it.

Why one file of this size: one program (``make bench``) whose set-up, interleaved runs, CPU sampling and report
share the processes they start; its pieces are read together when a number looks wrong.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import platform
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

import pymysql

from devstack.bench.pinning import Layout, PinningError, pin_processes, pinned_start
from devstack.ports import free_port
from devstack.proxy import ProxyProcess
from devstack.sandbox import Sandbox, SandboxServer, pid_alive
from devstack.stack import REPO, terminate
from fleet.bench.engine.sysbench import parse_sysbench
from proxyapp.config.variables import VARIABLES

BENCH_DIR = REPO / "var" / "bench"
SANDBOX_DIR = "var/bench-sandbox"
SB_USER = "sbtest"
SB_PASSWORD = "sbtest-pass"
SB_DB = "sbtest"
SECTION_TITLE = "Proxy worker: sysbench, direct vs haproxy vs ProxyFleet"
TARGETS = ("direct", "haproxy", "proxyfleet")
TARGET_LABELS = {"direct": "direct", "haproxy": "haproxy", "proxyfleet": "ProxyFleet"}
#: Backend connections the proxy may open to the primary (the 1,000-connection run is pooled onto these).
PROXY_BACKEND_MAX_CONNECTIONS = 200
#: Seconds a sysbench run may take beyond its --time before it is killed and recorded as failed.
RUN_GRACE_S = 90


@dataclass(frozen=True)
class Workload:
    """One sysbench workload, run against every target."""

    key: str
    title: str
    script: str
    threads: int
    ps_mode: str
    many_connections: bool = False
    single: bool = False  # one connection: its latency, not the machine's throughput, is what it measures
    bar: bool = True  # one of the rows the bar is set on (ProxyFleet at haproxy's qps or better)

    def args(self) -> list[str]:
        """The workload's own sysbench options."""
        return [self.script, f"--threads={self.threads}", f"--db-ps-mode={self.ps_mode}"]


@dataclass(frozen=True)
class Settings:
    """What one invocation measures."""

    quick: bool
    rounds: int
    seconds: int
    warmup_seconds: int
    tables: int
    table_size: int
    threads: int
    many_threads: int
    many_ps_mode: str
    proxy_threads: int | None
    pin: bool = False

    def workloads(self) -> list[Workload]:
        """The workloads, in the order each round runs them."""
        t, m = self.threads, self.many_threads
        return [
            Workload("point_select_ps_disable", f"oltp_point_select, {t} threads, --db-ps-mode=disable",
                     "oltp_point_select", t, "disable"),
            Workload("point_select_ps_auto", f"oltp_point_select, {t} threads, --db-ps-mode=auto",
                     "oltp_point_select", t, "auto"),
            Workload("read_write_ps_auto", f"oltp_read_write, {t} threads, --db-ps-mode=auto",
                     "oltp_read_write", t, "auto"),
            Workload("point_select_many", f"oltp_point_select, {m:,} connections, --db-ps-mode={self.many_ps_mode}",
                     "oltp_point_select", m, self.many_ps_mode, many_connections=True),
            Workload("point_select_single", "oltp_point_select, 1 connection, --db-ps-mode=disable",
                     "oltp_point_select", 1, "disable", single=True, bar=False),
        ]  # fmt: skip


@dataclass
class RunResult:
    """One sysbench run against one target, as parsed from its report."""

    workload: str
    target: str
    round: int
    command: list[str]
    log: str
    started_at: float
    wall_s: float
    exit_code: int | None
    tps: float | None = None
    qps: float | None = None
    transactions: int | None = None
    queries: int | None = None
    ignored_errors: int | None = None
    reconnects: int | None = None
    total_time_s: float | None = None
    lat_min_ms: float | None = None
    lat_avg_ms: float | None = None
    lat_p95_ms: float | None = None
    lat_max_ms: float | None = None
    fatal: list[str] = field(default_factory=list)
    error_codes: dict[str, int] = field(default_factory=dict)
    cpu: dict[str, float] = field(default_factory=dict)
    backend: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """Whether sysbench finished and reported its statistics."""
        return self.exit_code == 0 and self.qps is not None

    @property
    def errors(self) -> int:
        """Errors sysbench ignored, plus one for a run that did not finish."""
        return (self.ignored_errors or 0) + (0 if self.ok else 1)


# ---------------------------------------------------------------------------------------------- sysbench output
# One parser for sysbench's report: the bench engine's (fleet.bench.engine.sysbench), which jobs use too.


def sysbench_connection_args(host: str, port: int) -> list[str]:
    """sysbench's MySQL driver options for one target."""
    return [
        "--db-driver=mysql",
        f"--mysql-host={host}",
        f"--mysql-port={port}",
        f"--mysql-user={SB_USER}",
        f"--mysql-password={SB_PASSWORD}",
        f"--mysql-db={SB_DB}",
    ]


# ---------------------------------------------------------------------------------------------- processes


class Haproxy:
    """haproxy in TCP mode in front of one server, in its own process group."""

    def __init__(self, backend: tuple[str, int], workdir: Path, cpus: frozenset[int] | None = None) -> None:
        self.backend = backend
        self.workdir = workdir
        self.cpus = cpus  # started on these CPUs (it then runs one thread per CPU it may use)
        self.port = free_port()
        self.config_path = workdir / "haproxy.cfg"
        self.log_path = workdir / "haproxy.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def config_text(self) -> str:
        """One TCP frontend on loopback, one backend with the one server; nothing else."""
        host, port = self.backend
        return (
            "# generated by devstack/bench/run_bench.py\n"
            "global\n"
            "    maxconn 4096\n"
            "defaults\n"
            "    mode tcp\n"
            "    timeout connect 5s\n"
            "    timeout client 1h\n"
            "    timeout server 1h\n"
            "frontend bench\n"
            f"    bind 127.0.0.1:{self.port}\n"
            "    default_backend primary\n"
            "backend primary\n"
            f"    server primary {host}:{port}\n"
        )

    def start(self, timeout: float = 10) -> Haproxy:
        """Write the config, check it, start haproxy in the foreground and wait until it accepts."""
        self.config_path.write_text(self.config_text())
        binary = shutil.which("haproxy") or "/usr/sbin/haproxy"
        check = subprocess.run([binary, "-c", "-f", str(self.config_path)], capture_output=True, text=True, timeout=30)
        if check.returncode != 0:
            raise RuntimeError(f"haproxy refused {self.config_path}:\n{check.stdout}{check.stderr}")
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                [binary, "-db", "-f", str(self.config_path)], stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True, preexec_fn=pinned_start(self.cpus),
            )  # fmt: skip
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"haproxy exited with {self.proc.returncode}:\n{self.log_path.read_text()}")
            try:
                conn = pymysql.connect(
                    host="127.0.0.1", port=self.port, user=SB_USER, password=SB_PASSWORD, connect_timeout=2
                )
                conn.close()
                return self
            except pymysql.err.OperationalError:
                time.sleep(0.05)
        raise RuntimeError(f"haproxy did not accept connections within {timeout} s")

    def stop(self) -> None:
        """Stop haproxy (SIGTERM, then SIGKILL)."""
        terminate(self.proc)

    def version(self) -> str:
        """haproxy's version line."""
        out = subprocess.run([shutil.which("haproxy") or "/usr/sbin/haproxy", "-v"], capture_output=True, text=True)
        return out.stdout.splitlines()[0].strip() if out.stdout else "unknown"


def proxy_config(primary: SandboxServer, threads: int | None = None) -> dict[str, Any]:
    """ProxyFleet config: the sbtest user to hostgroup 0, the primary alone; no query rules.

    ``threads`` sets ``mysql-threads`` (worker processes); None takes the variable's default (one worker per
    CPU up to it), written out because the test harness otherwise runs a single worker.
    """
    if threads is None:
        threads = int(VARIABLES["mysql-threads"].default)
    variables = [
        {"variable_name": "mysql-max_connections", "variable_value": "5000"},
        {"variable_name": "mysql-threads", "variable_value": str(threads)},
    ]
    return {
        "mysql_servers": [
            {
                "hostgroup_id": 0,
                "hostname": primary.host,
                "port": primary.port,
                "max_connections": PROXY_BACKEND_MAX_CONNECTIONS,
                "comment": "bench primary",
            }
        ],
        "mysql_users": [{"username": SB_USER, "password": SB_PASSWORD, "default_hostgroup": 0}],
        "mysql_query_rules": [],
        "global_variables": variables,
    }


def process_uses_uvloop(pid: int) -> bool | None:
    """Whether a running process has uvloop's extension mapped (None when that cannot be read)."""
    try:
        return "uvloop" in Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return None


def _stat_fields(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (field 3, the state, comes first)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return None


def descendants(root: int) -> list[int]:
    """The pids of every living descendant of ``root``."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            fields = _stat_fields(int(entry.name))
            if fields is not None:
                children.setdefault(int(fields[1]), []).append(int(entry.name))
    out: list[int] = []
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


_CLK_TCK = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class CpuSnapshot:
    """CPU time so far (seconds): the whole machine's busy and steal time, and this harness's process tree."""

    at: float
    machine_busy: float
    machine_irq: float
    machine_steal: float
    ours_alive: dict[int, float]
    kernel_alive: dict[int, float]
    harness: float
    reaped: float

    @classmethod
    def take(cls) -> CpuSnapshot:
        """Read /proc/stat, our descendants' /proc/PID/stat, our own and our reaped children's times."""
        with open("/proc/stat") as f:
            values = [int(v) for v in f.readline().split()[1:]]
        user, nice, system, _idle, _iowait, irq, softirq, steal = (values + [0] * 8)[:8]
        alive: dict[int, float] = {}
        kernel: dict[int, float] = {}
        for pid in descendants(os.getpid()):
            fields = _stat_fields(pid)
            if fields is not None:
                alive[pid] = (int(fields[11]) + int(fields[12])) / _CLK_TCK  # utime, stime
                kernel[pid] = int(fields[12]) / _CLK_TCK
        me = os.times()
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        return cls(
            at=time.monotonic(),
            machine_busy=(user + nice + system) / _CLK_TCK,
            machine_irq=(irq + softirq) / _CLK_TCK,
            machine_steal=steal / _CLK_TCK,
            ours_alive=alive,
            kernel_alive=kernel,
            harness=me.user + me.system,
            reaped=children.ru_utime + children.ru_stime,
        )

    def until(self, later: CpuSnapshot, roles: dict[int, str], client: str = "sysbench") -> dict[str, float]:
        """Shares of the machine's capacity (percent of all CPUs) between two snapshots, and cores per role.

        ``ours``: this harness's processes (the servers, haproxy, the proxy, sysbench); ``others``: every other
        process that ran meanwhile (other people's tests: noise); ``irq``: interrupt and softirq time (mostly
        the loopback traffic of the run itself; the kernel charges it to no process); ``steal``: time the
        hypervisor gave to other guests. ``cores_ROLE``: the average number of CPUs each of our processes used
        (``roles`` maps pids to role names; children reaped in between, the load generator, are ``client``);
        ``kernel_cores_ROLE``: how much of it was system time, for the processes alive at both snapshots.
        """
        elapsed = later.at - self.at
        capacity = elapsed * len(os.sched_getaffinity(0))
        if capacity <= 0:
            return {}
        per_role = {client: later.reaped - self.reaped, "harness": later.harness - self.harness}
        kernel_per_role: dict[str, float] = {}
        for pid, t in later.ours_alive.items():
            role = roles.get(pid, "other")
            per_role[role] = per_role.get(role, 0.0) + t - self.ours_alive.get(pid, 0.0)
            kernel = later.kernel_alive.get(pid, 0.0) - self.kernel_alive.get(pid, 0.0)
            kernel_per_role[role] = kernel_per_role.get(role, 0.0) + kernel
        ours = sum(per_role.values())
        busy = later.machine_busy - self.machine_busy
        out = {
            "cpu_ours_pct": round(100 * ours / capacity, 1),
            "cpu_others_pct": round(100 * max(busy - ours, 0.0) / capacity, 1),
            "cpu_irq_pct": round(100 * (later.machine_irq - self.machine_irq) / capacity, 1),
            "cpu_steal_pct": round(100 * (later.machine_steal - self.machine_steal) / capacity, 1),
        }
        out.update({f"cores_{role}": round(t / elapsed, 2) for role, t in sorted(per_role.items())})
        out.update({f"kernel_cores_{role}": round(t / elapsed, 2) for role, t in sorted(kernel_per_role.items())})
        return out


class PidFile:
    """The pids this harness started, so a rerun after a SIGKILL can stop the leftovers (only those)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def record(self, name: str, pid: int, marker: str) -> None:
        """Remember ``pid``; ``marker`` must appear in its command line for it to be stopped later."""
        rows = self._load()
        rows[name] = {"pid": pid, "marker": marker}
        self.path.write_text(json.dumps(rows))

    def _load(self) -> dict[str, Any]:
        try:
            return json.loads(self.path.read_text())
        except (OSError, ValueError):
            return {}

    def stop_leftovers(self) -> None:
        """SIGTERM recorded processes that still run with the recorded command line."""
        for row in self._load().values():
            pid, marker = row.get("pid"), row.get("marker", "")
            if not pid_alive(pid):
                continue
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if marker and marker in cmdline:
                print(f"stopping leftover process {pid} from an earlier run: {cmdline[:120]}", flush=True)
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGTERM)
        with contextlib.suppress(OSError):
            self.path.unlink()


# ---------------------------------------------------------------------------------------------- the run


class Bench:
    """Everything one ``run_bench`` invocation starts, measures and stops."""

    def __init__(self, settings: Settings, out: Path) -> None:
        self.settings = settings
        self.out = out
        self.sandbox = Sandbox(SANDBOX_DIR)
        self.haproxy: Haproxy | None = None
        self.proxy: ProxyProcess | None = None
        self.targets: dict[str, tuple[str, int]] = {}
        self.results: list[RunResult] = []
        self.machine: dict[str, Any] = {}
        self.logs = BENCH_DIR / "logs"
        self.pids = PidFile(BENCH_DIR / "pids.json")
        self.layout = Layout.split(settings.proxy_threads or 1) if settings.pin else None

    # ------------------------------------------------------------------------------------------ set up / down

    def setup(self) -> None:
        """Sandbox, sbtest user and tables, haproxy, ProxyFleet."""
        self.pids.stop_leftovers()
        if self.logs.exists():
            shutil.rmtree(self.logs)
        self.logs.mkdir(parents=True)
        s = self.settings
        print("starting the MariaDB sandbox (primary only) under var/bench-sandbox ...", flush=True)
        self.sandbox.down()  # a clean server every time: no leftovers of an interrupted run
        self.sandbox.up(replicas=0)
        primary = self.sandbox.primary()
        if self.layout is not None and primary.pid:
            pin_processes((primary.pid, *descendants(primary.pid)), self.layout.rest)
        with primary.connect() as conn, conn.cursor() as cur:
            cur.execute(f"CREATE USER IF NOT EXISTS '{SB_USER}'@'%' IDENTIFIED BY '{SB_PASSWORD}'")
            cur.execute(f"GRANT ALL ON *.* TO '{SB_USER}'@'%'")
            cur.execute(f"CREATE DATABASE IF NOT EXISTS {SB_DB}")
        self.targets["direct"] = (primary.host, primary.port)
        print(f"sysbench prepare: {s.tables} tables x {s.table_size:,} rows ...", flush=True)
        self._sysbench_plain(["oltp_read_write", "--threads=2", "prepare"], "prepare", timeout=600)

        workdir = BENCH_DIR / "haproxy"
        workdir.mkdir(parents=True, exist_ok=True)
        self.haproxy = Haproxy((primary.host, primary.port), workdir, self.layout.proxy if self.layout else None)
        self.haproxy.start()
        assert self.haproxy.proc is not None
        self.pids.record("haproxy", self.haproxy.proc.pid, str(self.haproxy.config_path))
        self.targets["haproxy"] = ("127.0.0.1", self.haproxy.port)

        workdir = BENCH_DIR / "proxy"
        if workdir.exists():
            shutil.rmtree(workdir)
        workdir.mkdir(parents=True)
        self.proxy = ProxyProcess(proxy_config(primary, s.proxy_threads), workdir, own_session=True)
        self.proxy.start()
        assert self.proxy.proc is not None
        self.pids.record("proxyfleet", self.proxy.proc.pid, str(self.proxy.config_path))
        self._pin_proxy()
        self.targets["proxyfleet"] = ("127.0.0.1", self.proxy.port)
        self.machine = machine_info(primary, self.haproxy, self.proxy)
        if self.layout is not None:
            self.machine["pinning"] = self.layout.describe()

    def _pin_proxy(self) -> None:
        """With ``--pin``: the proxy and its workers on the proxy's CPUs."""
        if self.layout is not None and self.proxy is not None and self.proxy.proc is not None:
            pid = self.proxy.proc.pid
            pin_processes((pid, *descendants(pid)), self.layout.proxy)

    def roles(self) -> dict[int, str]:
        """Our long-lived processes by pid: mariadbd, haproxy, proxy (with its workers)."""
        out: dict[int, str] = {}
        with contextlib.suppress(Exception):
            pid = self.sandbox.primary().pid
            if pid:
                out[pid] = "mariadbd"
        if self.haproxy is not None and self.haproxy.proc is not None:
            out[self.haproxy.proc.pid] = "haproxy"
        if self.proxy is not None and self.proxy.proc is not None:
            for pid in (self.proxy.proc.pid, *descendants(self.proxy.proc.pid)):
                out[pid] = "proxy"
        return out

    def teardown(self) -> None:
        """Stop everything setup started; each step runs even when an earlier one fails."""
        if self.proxy is not None:
            with contextlib.suppress(Exception):
                self.proxy.stop()
        if self.haproxy is not None:
            with contextlib.suppress(Exception):
                self.haproxy.stop()
        with contextlib.suppress(Exception):
            self.sandbox.down()
        with contextlib.suppress(OSError):
            (BENCH_DIR / "pids.json").unlink()

    # ------------------------------------------------------------------------------------------ sysbench

    def _common_args(self) -> list[str]:
        s = self.settings
        return [f"--tables={s.tables}", f"--table-size={s.table_size}"]

    def _sysbench_plain(self, args: list[str], name: str, timeout: float) -> str:
        """Run sysbench directly against the primary (prepare/cleanup); raises on failure."""
        host, port = self.targets["direct"]
        cmd = ["sysbench", *args[:-1], *sysbench_connection_args(host, port), *self._common_args(), args[-1]]
        result = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        (self.logs / f"{name}.log").write_text(result.stdout + result.stderr)
        if result.returncode != 0:
            raise RuntimeError(f"sysbench {name} failed ({result.returncode}):\n{result.stdout}{result.stderr}")
        return result.stdout

    def sysbench_command(self, workload: Workload, target: str, *options: str) -> list[str]:
        """The sysbench command that runs ``workload`` through ``target``, with ``options`` (its time, its reports)."""
        host, port = self.targets[target]
        return [
            "sysbench", *workload.args(), *sysbench_connection_args(host, port), *self._common_args(), *options, "run",
        ]  # fmt: skip

    def run_one(self, workload: Workload, target: str, round_no: int, seconds: int) -> RunResult:
        """One sysbench run; a crash, hang or timeout is recorded, not raised."""
        cmd = self.sysbench_command(
            workload,
            target,
            f"--time={seconds}",
            "--verbosity=5",  # debug level: names each ignored error ("Ignoring error 1213 Deadlock ...")
        )
        log = self.logs / f"r{round_no}-{workload.key}-{target}.log"
        sampler = _BackendSampler(self, target) if workload.many_connections else None
        if sampler is not None:
            sampler.before()
        started = time.time()
        cpu_before = CpuSnapshot.take()
        t0 = time.monotonic()
        with log.open("wb") as out:
            proc = subprocess.Popen(
                cmd, stdout=out, stderr=subprocess.STDOUT, preexec_fn=pinned_start(self.layout and self.layout.rest)
            )
            try:
                code: int | None = proc.wait(seconds + RUN_GRACE_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
                code = None
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait(10)
        wall = time.monotonic() - t0
        cpu = cpu_before.until(CpuSnapshot.take(), self.roles())
        text = log.read_text(errors="replace")
        result = RunResult(
            workload=workload.key,
            target=target,
            round=round_no,
            command=cmd,
            log=str(log.relative_to(REPO)),
            started_at=started,
            wall_s=round(wall, 2),
            exit_code=code,
            cpu=cpu,
        )
        fields = RunResult.__dataclass_fields__
        for key, value in parse_sysbench(text).items():
            if key in fields:
                setattr(result, key, value)
        if code is None:
            result.fatal.insert(0, f"killed after {seconds + RUN_GRACE_S} s")
        if sampler is not None:
            result.backend = sampler.after()
        if target == "proxyfleet":
            self._restart_dead_proxy(result)
        return result

    def _restart_dead_proxy(self, result: RunResult) -> None:
        """If the proxy exited during ``result``'s run, say so in it and start the proxy again."""
        proxy = self.proxy
        if proxy is None or proxy.proc is None or proxy.proc.poll() is None:
            return
        message = f"the proxy exited with {proxy.proc.returncode} during this run (see {proxy.log_path})"
        print(f"  {message}; restarting it", flush=True)
        result.fatal.insert(0, message)
        result.exit_code = result.exit_code or -1
        proxy.start()
        assert proxy.proc is not None
        self.pids.record("proxyfleet", proxy.proc.pid, str(proxy.config_path))
        self._pin_proxy()

    def run(self) -> None:
        """The warm-up runs, then the interleaved rounds."""
        s = self.settings
        workloads = s.workloads()
        if s.warmup_seconds:
            print(f"warm-up: {s.warmup_seconds} s of point selects per target (not recorded)", flush=True)
            for target in TARGETS:
                self.run_one(workloads[0], target, 0, s.warmup_seconds)
        for round_no in range(1, s.rounds + 1):
            for workload in workloads:
                for target in TARGETS:
                    result = self.run_one(workload, target, round_no, s.seconds)
                    self.results.append(result)
                    print(
                        f"round {round_no}/{s.rounds}  {workload.key:<24} {target:<10} {describe(result)}", flush=True
                    )
                    self.save()

    # ------------------------------------------------------------------------------------------ output

    def document(self) -> dict[str, Any]:
        """Everything measured, for results.json."""
        return {
            "section": SECTION_TITLE,
            "settings": asdict(self.settings),
            "workloads": [asdict(w) for w in self.settings.workloads()],
            "machine": self.machine,
            "targets": {k: list(v) for k, v in self.targets.items()},
            "runs": [asdict(r) | {"ok": r.ok, "errors": r.errors} for r in self.results],
            "summary": summarize(self.settings.workloads(), self.results),
        }

    def save(self) -> None:
        """Write var/bench/results.json (after every run, so an interrupted run keeps what it measured)."""
        BENCH_DIR.mkdir(parents=True, exist_ok=True)
        (BENCH_DIR / "results.json").write_text(json.dumps(self.document(), indent=2))


class _BackendSampler:
    """For the many-connection runs: how many connections reached the server, and the proxy's pool use."""

    def __init__(self, bench: Bench, target: str) -> None:
        self.bench = bench
        self.target = target
        self.peak_pool = 0
        self.peak_pool_used = 0
        self.peak_threads_connected = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def before(self) -> None:
        """Reset the server's Max_used_connections (FLUSH STATUS) and start sampling."""
        with self.bench.sandbox.primary().connect() as conn, conn.cursor() as cur:
            cur.execute("FLUSH STATUS")
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        conn = self.bench.sandbox.primary().connect()
        try:
            while not self._stop.wait(0.5):
                with conn.cursor() as cur:
                    cur.execute("SHOW GLOBAL STATUS LIKE 'Threads_connected'")
                    self.peak_threads_connected = max(self.peak_threads_connected, int(cur.fetchone()[1]) - 1)
                if self.target == "proxyfleet" and self.bench.proxy is not None:
                    with contextlib.suppress(OSError, ValueError):
                        rows = self.bench.proxy.admin("GET", "/stats/connection_pool")
                        self.peak_pool_used = max(self.peak_pool_used, sum(r["ConnUsed"] for r in rows))
                        self.peak_pool = max(self.peak_pool, sum(r["ConnUsed"] + r["ConnFree"] for r in rows))
        finally:
            conn.close()

    def after(self) -> dict[str, Any]:
        """Stop sampling; the server's and (for ProxyFleet) the pool's connection counts."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
        out: dict[str, Any] = {"server_threads_connected_peak": self.peak_threads_connected}
        with self.bench.sandbox.primary().connect() as conn, conn.cursor() as cur:
            cur.execute("SHOW GLOBAL STATUS LIKE 'Max_used_connections'")
            out["server_max_used_connections"] = int(cur.fetchone()[1])
        if self.target == "proxyfleet" and self.bench.proxy is not None:
            try:
                rows = self.bench.proxy.admin("GET", "/stats/connection_pool")
            except (OSError, ValueError) as exc:
                out["proxy_stats_error"] = str(exc)
            else:
                out["proxy_max_conn_used"] = sum(r["MaxConnUsed"] for r in rows)
                out["proxy_conn_err"] = sum(r["ConnERR"] for r in rows)
                out["proxy_pool_peak_used_sampled"] = self.peak_pool_used
                out["proxy_pool_peak_open_sampled"] = self.peak_pool
        return out


def describe(r: RunResult) -> str:
    """A one-line summary of a run for the console."""
    if not r.ok:
        return f"FAILED (exit {r.exit_code}): {'; '.join(r.fatal[:2]) or 'no report'}"
    text = f"qps {r.qps:>10,.0f}  tps {r.tps:>9,.1f}  avg {r.lat_avg_ms} ms  p95 {r.lat_p95_ms} ms"
    text += f"  errors {r.ignored_errors}"
    if r.error_codes:
        text += f" {r.error_codes}"
    if r.cpu:
        text += f"  others' CPU {r.cpu.get('cpu_others_pct')}%"
    if r.backend:
        text += f"  backend {r.backend}"
    return text


# ---------------------------------------------------------------------------------------------- summary


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def summarize(workloads: list[Workload], results: list[RunResult]) -> dict[str, Any]:
    """Per workload and target: medians over the rounds; per workload: the ratios of the medians."""
    summary: dict[str, Any] = {}
    for w in workloads:
        per_target: dict[str, Any] = {}
        good_runs: dict[str, list[RunResult]] = {}
        for target in TARGETS:
            runs = [r for r in results if r.workload == w.key and r.target == target]
            good = good_runs[target] = [r for r in runs if r.ok]
            per_target[target] = {
                "runs": len(runs),
                "failed_runs": len(runs) - len(good),
                "qps_median": _median([r.qps for r in good if r.qps is not None]),
                "qps_rounds": [r.qps for r in runs],
                "tps_median": _median([r.tps for r in good if r.tps is not None]),
                "lat_avg_ms_median": _median([r.lat_avg_ms for r in good if r.lat_avg_ms is not None]),
                "lat_p95_ms_median": _median([r.lat_p95_ms for r in good if r.lat_p95_ms is not None]),
                "errors": sum(r.errors for r in runs),
                "error_codes": _merge_codes(r.error_codes for r in runs),
                "cpu_others_pct_max": max((r.cpu["cpu_others_pct"] for r in runs if r.cpu), default=None),
                "cores": {
                    key[len("cores_") :]: statistics.median(r.cpu[key] for r in runs if key in r.cpu)
                    for key in sorted({k for r in runs for k in r.cpu if k.startswith("cores_")})
                },
                "backend": [r.backend for r in runs if r.backend],
                "qps_spread_pct": _spread([r.qps for r in good if r.qps is not None]),
                "cpu_us_per_query": _median(
                    [_cpu_per_query(r, ROLE_OF_TARGET[target]) for r in good if ROLE_OF_TARGET[target]]
                ),
                "kernel_us_per_query": _median(
                    [_cpu_per_query(r, ROLE_OF_TARGET[target], "kernel_cores") for r in good if ROLE_OF_TARGET[target]]
                ),
            }
        q = {t: per_target[t]["qps_median"] for t in TARGETS}
        haproxy_by_round = {r.round: r.qps for r in good_runs["haproxy"]}
        round_ratios = [
            _ratio(r.qps, haproxy_by_round[r.round]) for r in good_runs["proxyfleet"] if r.round in haproxy_by_round
        ]
        summary[w.key] = {
            "title": w.title,
            "targets": per_target,
            "ratios": {
                "proxyfleet/direct": _ratio(q["proxyfleet"], q["direct"]),
                "proxyfleet/haproxy": _ratio(q["proxyfleet"], q["haproxy"]),
                "haproxy/direct": _ratio(q["haproxy"], q["direct"]),
            },
            "proxyfleet/haproxy_rounds": round_ratios,
            "bar": _bar(w, _ratio(q["proxyfleet"], q["haproxy"]), _ratio(q["proxyfleet"], q["direct"])),
        }
    return summary


#: Whose CPU a target's runs are charged to, for the CPU per query (direct has no proxy).
ROLE_OF_TARGET = {"direct": "", "haproxy": "haproxy", "proxyfleet": "proxy"}


def _cpu_per_query(run: RunResult, role: str, kind: str = "cores") -> float | None:
    """µs of CPU ``role``'s processes spent per query during ``run`` (user and system time, so the kernel's work for
    its sockets counts; ``kind`` "kernel_cores": the system time alone), or None."""
    cores = run.cpu.get(f"{kind}_{role}")
    return None if cores is None or not run.qps else round(cores * 1_000_000 / run.qps, 1)


def _spread(values: list[float]) -> float | None:
    """(max - min) / median of the rounds, in percent; None for fewer than two rounds."""
    if len(values) < 2:
        return None
    return round(100 * (max(values) - min(values)) / statistics.median(values), 1)


def _bar(workload: Workload, to_haproxy: float | None, to_direct: float | None) -> dict[str, Any]:
    """Whether ``workload``'s row reached the bar: ProxyFleet at 1.0x haproxy's qps or better, and on the
    many-connection row also ahead of direct (pooling holds the server at a fraction of the connections)."""
    if not workload.bar:
        return {"applies": False, "reached": None, "needs": ""}
    needs = "ProxyFleet/haproxy >= 1.00" + (" and ProxyFleet/direct >= 1.00" if workload.many_connections else "")
    checks = [to_haproxy] + ([to_direct] if workload.many_connections else [])
    reached = None if None in checks else all(c is not None and c >= 1.0 for c in checks)
    return {"applies": True, "reached": reached, "needs": needs}


def _merge_codes(dicts: Iterable[dict[str, int]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for codes in dicts:
        for label, n in codes.items():
            out[label] = out.get(label, 0) + n
    return out


def _noise(runs: list[dict[str, Any]]) -> str:
    """'median X % (max Y %), steal Z %' over the recorded runs."""
    others = [r["cpu"]["cpu_others_pct"] for r in runs if r.get("cpu")]
    steal = [r["cpu"]["cpu_steal_pct"] for r in runs if r.get("cpu")]
    if not others:
        return "an unknown share"
    return (
        f"median {statistics.median(others):.0f} % (max {max(others):.0f} %; hypervisor steal median "
        f"{statistics.median(steal):.0f} %)"
    )


def _ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 3) if a is not None and b else None


def _fmt(value: float | None, spec: str = ",.0f") -> str:
    return "n/a" if value is None else format(value, spec)


def render_markdown(doc: dict[str, Any], command: str) -> str:
    """The report section (starting with its ``## `` heading)."""
    s, m = doc["settings"], doc["machine"]
    lines = [
        f"## {SECTION_TITLE}",
        "",
        f"Command: `{command}` (written by `devstack/bench/run_bench.py`; raw results in `var/bench/results.json`, "
        "sysbench logs in `var/bench/logs/`).",
        "",
        f"- Date: {m.get('date')}",
        f"- Machine: {m.get('nproc')} CPUs ({m.get('cpu_model')}), {m.get('memory')}, {m.get('kernel')}",
        f"- Noise: during the runs other processes used {_noise(doc['runs'])} of the machine's CPU (100 % = "
        f"every CPU busy; a quiet machine shows ~0 %); load average {m.get('loadavg_before')} (1/5/15 min) "
        "before the bench (it counts runnable threads, a just-finished bench's 1,000 sysbench threads too)",
        f"- MariaDB {m.get('mariadb')} (sandbox primary, `devstack/sandbox.py` settings) · {m.get('sysbench')} · "
        f"{m.get('haproxy')} (defaults: one thread per CPU) · Python {m.get('python')} · ProxyFleet "
        f"{m.get('revision')}, {m.get('proxy_processes')}, uvloop: {m.get('uvloop')}; MariaDB, haproxy and "
        "ProxyFleet each run in a session of their own, as daemons do (with the kernel's autogroup scheduling, CPU "
        "time is shared between sessions first)",
        f"- Data: {s['tables']} tables x {s['table_size']:,} rows; {s['rounds']} interleaved round(s) "
        f"(direct, haproxy, ProxyFleet, direct, ...) of {s['seconds']} s per run"
        + (", after a warm-up run per target" if s["warmup_seconds"] else "")
        + ("; `--quick`" if s["quick"] else "")
        + (f"; pinned ({m.get('pinning')})" if s.get("pin") else "; not pinned to CPUs"),
        "- Targets: **direct** = the primary; **haproxy** = `mode tcp`, one frontend, one server "
        f"(the primary); **ProxyFleet** = `python -m proxyapp run`, the sbtest user to one hostgroup holding the "
        f"primary (max_connections {PROXY_BACKEND_MAX_CONNECTIONS}), no query rules. Every statement reaches "
        "the same server through each target.",
        "- qps and latency are medians over the rounds; ratios are ratios of the median qps; errors are "
        "sysbench's ignored errors plus failed runs, summed over the rounds (deadlocks, 1213, happen direct too); "
        "others' CPU is the largest share other processes took during that target's runs.",
        "",
        "| workload | direct qps | haproxy qps | ProxyFleet qps | ProxyFleet/direct | ProxyFleet/haproxy "
        "| haproxy/direct | errors (d/h/P) |",
        "|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    summary = doc["summary"]
    for item in summary.values():
        t, r = item["targets"], item["ratios"]
        lines.append(
            f"| {item['title']} | {_fmt(t['direct']['qps_median'])} | {_fmt(t['haproxy']['qps_median'])} "
            f"| {_fmt(t['proxyfleet']['qps_median'])} | {_fmt(r['proxyfleet/direct'], '.2f')} "
            f"| {_fmt(r['proxyfleet/haproxy'], '.2f')} | {_fmt(r['haproxy/direct'], '.2f')} "
            f"| {t['direct']['errors']}/{t['haproxy']['errors']}/{t['proxyfleet']['errors']} |"
        )
    lines += _bar_lines(doc)
    for key, item in summary.items():
        lines += ["", f"### {item['title']}", ""]
        many = any(w["key"] == key and w["many_connections"] for w in doc["workloads"])
        header = (
            "| target | qps (median) | qps per round | spread | tps | latency avg ms | latency p95 ms | errors "
            "| others' CPU |"
        )
        rule = "|---|---:|---|---:|---:|---:|---:|---:|---:|"
        if many:
            header += " server Max_used_connections | ProxyFleet MaxConnUsed |"
            rule += "---:|---:|"
        lines += [header, rule]
        for target in TARGETS:
            t = item["targets"][target]
            rounds = ", ".join("failed" if q is None else f"{q:,.0f}" for q in t["qps_rounds"])
            row = (
                f"| {TARGET_LABELS[target]} | {_fmt(t['qps_median'])} | {rounds} "
                f"| {_fmt(t.get('qps_spread_pct'), '.1f')} % | {_fmt(t['tps_median'], ',.1f')} "
                f"| {_fmt(t['lat_avg_ms_median'], '.2f')} | {_fmt(t['lat_p95_ms_median'], '.2f')} | {t['errors']} "
                f"| {_fmt(t['cpu_others_pct_max'], '.0f')} % |"
            )
            if many:
                server = [b.get("server_max_used_connections") for b in t["backend"]]
                pool = [b.get("proxy_max_conn_used") for b in t["backend"] if "proxy_max_conn_used" in b]
                row += f" {_fmt(max(server) if server else None)} | {_fmt(max(pool)) if pool else '—'} |"
            lines.append(row)
        r = item["ratios"]
        cores = []
        for target in TARGETS:
            used = item["targets"][target]["cores"]
            named = ", ".join(f"{role} {n:.2f}" for role, n in sorted(used.items(), key=lambda x: -x[1]) if n >= 0.05)
            cores.append(f"{TARGET_LABELS[target]}: {named or 'n/a'}")
        lines += [
            "",
            f"Ratios: ProxyFleet/direct {_fmt(r['proxyfleet/direct'], '.2f')} · ProxyFleet/haproxy "
            f"{_fmt(r['proxyfleet/haproxy'], '.2f')} · haproxy/direct {_fmt(r['haproxy/direct'], '.2f')}",
            "",
            f"CPUs used during the runs (median; of {doc['machine'].get('nproc')}): " + " · ".join(cores),
        ]
        if many:
            lines += [
                "",
                "Server Max_used_connections is read after each run (FLUSH STATUS before it); it includes the "
                "harness's monitoring connection and, for direct and haproxy, the idle backend connections "
                "ProxyFleet keeps open between its runs. ProxyFleet MaxConnUsed is the pool's high-water mark "
                "since the proxy started (stats_mysql_connection_pool, summed over the proxy's workers).",
            ]
        notes = []
        for target in TARGETS:
            codes = item["targets"][target]["error_codes"]
            if codes:
                named = ", ".join(f"{label} x{n}" for label, n in sorted(codes.items()))
                notes.append(f"- {TARGET_LABELS[target]}: errors sysbench named: {named}")
        for run in doc["runs"]:
            if run["workload"] == key and not run["ok"]:
                detail = "; ".join(run["fatal"][:3]) or "no FATAL line"
                notes.append(
                    f"- round {run['round']} {TARGET_LABELS[run['target']]} FAILED (exit {run['exit_code']}): "
                    f"{detail} (`{run['log']}`)"
                )
        if notes:
            lines += ["", *notes]
    return "\n".join(lines) + "\n"


def _bar_lines(doc: dict[str, Any]) -> list[str]:
    """The bar (issue 17), row by row; the CPU each proxy spent per query; one connection's latency."""
    summary = doc["summary"]
    lines = [
        "",
        "**The bar**: ProxyFleet at 1.0x haproxy's qps or better on every row, and ahead of direct at 1,000 "
        "connections. Per round, ProxyFleet/haproxy compares the two runs of the same round (adjacent in time).",
        "",
        "| row | ProxyFleet/haproxy | per round | ProxyFleet/direct | reached |",
        "|---|---:|---|---:|---|",
    ]
    for item in summary.values():
        bar = item.get("bar", {})
        if not bar.get("applies"):
            continue
        r = item["ratios"]
        rounds = ", ".join(_fmt(x, ".2f") for x in item.get("proxyfleet/haproxy_rounds", []))
        reached = {True: "**yes**", False: "no", None: "n/a"}[bar["reached"]]
        lines.append(
            f"| {item['title']} | {_fmt(r['proxyfleet/haproxy'], '.2f')} | {rounds} "
            f"| {_fmt(r['proxyfleet/direct'], '.2f')} | {reached} ({bar['needs']}) |"
        )
    lines += [
        "",
        "**CPU per query** (µs): the CPU time (user + system, so the kernel's socket work counts) the proxy's "
        "processes used during a run, from /proc/PID/stat, divided by the queries sysbench completed; the median "
        "over the rounds. *kernel*: the system time alone (the socket calls); the rest is the proxy's own code.",
        "",
        "| row | haproxy | haproxy kernel | ProxyFleet | ProxyFleet kernel | ProxyFleet/haproxy |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for item in summary.values():
        h = item["targets"]["haproxy"].get("cpu_us_per_query")
        p = item["targets"]["proxyfleet"].get("cpu_us_per_query")
        hk = item["targets"]["haproxy"].get("kernel_us_per_query")
        pk = item["targets"]["proxyfleet"].get("kernel_us_per_query")
        lines.append(
            f"| {item['title']} | {_fmt(h, '.1f')} | {_fmt(hk, '.1f')} | {_fmt(p, '.1f')} | {_fmt(pk, '.1f')} "
            f"| {_fmt(_ratio(p, h), '.2f')} |"
        )
    single = [item for key, item in summary.items() if any(w["key"] == key and w["single"] for w in doc["workloads"])]
    for item in single:
        t = item["targets"]
        latency = {
            target: (1_000_000 / t[target]["qps_median"]) if t[target]["qps_median"] else None for target in TARGETS
        }
        lines += [
            "",
            "**One connection's latency** (µs per point select: 1 s / the qps of one sysbench thread, whose queries "
            "run one after another, so this is the round trip through each target, not a throughput):",
            "",
            "| direct | haproxy | ProxyFleet | ProxyFleet - haproxy |",
            "|---:|---:|---:|---:|",
            "| "
            + " | ".join(_fmt(latency[target], ".0f") for target in TARGETS)
            + f" | {_fmt(_difference(latency['proxyfleet'], latency['haproxy']), '+.0f')} |",
        ]
    return lines


def _difference(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a - b


def write_report(path: Path, section: str, title: str = SECTION_TITLE) -> None:
    """Put ``section`` (headed ``## title``) into the Markdown file at ``path``, replacing an earlier copy of it."""
    heading = f"## {title}"
    text = path.read_text() if path.exists() else "# ProxyFleet benchmarks\n"
    start = text.find(heading + "\n")
    if start < 0:
        text = text.rstrip("\n") + "\n\n" + section
    else:
        following = text.find("\n## ", start + len(heading))
        rest = text[following + 1 :] if following >= 0 else ""
        text = text[:start] + section + ("\n" + rest if rest else "")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


# ---------------------------------------------------------------------------------------------- the machine


def _first_line(cmd: list[str]) -> str:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    text = (out.stdout or out.stderr).strip()
    return text.splitlines()[0] if text else "unknown"


def _loadavg() -> str:
    return " / ".join(f"{x:.2f}" for x in os.getloadavg())


def machine_info(primary: SandboxServer, haproxy: Haproxy, proxy: ProxyProcess) -> dict[str, Any]:
    """nproc, CPU model, memory, kernel, versions, and whether the proxy runs on uvloop."""
    cpu_model = "unknown"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu_model = line.split(":", 1)[1].strip()
                break
    memory = "unknown"
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                memory = f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB RAM"
                break
    with primary.connect() as conn, conn.cursor() as cur:
        cur.execute("SELECT VERSION()")
        mariadb = cur.fetchone()[0]
    proxy_pids = [proxy.proc.pid, *descendants(proxy.proc.pid)] if proxy.proc is not None else []
    workers = [pid for pid in proxy_pids if " worker " in f" {_cmdline(pid)} "]
    flags = [process_uses_uvloop(pid) for pid in (workers or proxy_pids[:1])]
    uvloop = None if not flags or None in flags else all(flags)
    revision = _first_line(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"])
    dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True).stdout.strip()  # fmt: skip
    return {
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "nproc": len(os.sched_getaffinity(0)),
        "cpu_model": cpu_model,
        "memory": memory,
        "kernel": f"{platform.system()} {platform.release()}",
        "mariadb": mariadb,
        "sysbench": _first_line(["sysbench", "--version"]),
        "haproxy": haproxy.version(),
        "python": platform.python_version(),
        "python_executable": sys.executable,
        "uvloop": {True: "yes", False: "no", None: "unknown"}[uvloop],
        "proxy_processes": f"{len(workers)} worker processes" if workers else "1 process",
        "revision": revision + (" with uncommitted changes" if dirty else ""),
        "loadavg_before": _loadavg(),
    }


# ---------------------------------------------------------------------------------------------- main


def _raise_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


@contextlib.contextmanager
def _cleanup_shielded() -> Iterator[None]:
    """While cleaning up, a second Ctrl-C or SIGTERM must not leave servers behind."""
    previous = {sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _raise_fd_limit() -> None:
    """1,000 client connections need more descriptors than a default soft limit of 1024 (children inherit)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = 16384 if hard == resource.RLIM_INFINITY else min(hard, 16384)
    if soft < wanted:
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))


def parse_args(argv: list[str] | None) -> tuple[Settings, Path]:
    """The command line -> (settings, report path)."""
    parser = argparse.ArgumentParser(prog="python -m devstack.bench.run_bench", description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="1 round of 5 s runs on a smaller data set")
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "benchmarks.md", help="the Markdown report")
    parser.add_argument("--rounds", type=int, help="interleaved rounds (default 3, --quick 1)")
    parser.add_argument("--time", type=int, dest="seconds", help="seconds per sysbench run (default 15, --quick 5)")
    parser.add_argument("--threads", type=int, default=16, help="threads of the ordinary workloads")
    parser.add_argument("--many-threads", type=int, default=1000, help="threads (connections) of the big run")
    parser.add_argument(
        "--many-ps-mode",
        choices=("auto", "disable"),
        default="disable",
        help="--db-ps-mode of the many-connection run (default disable: text protocol)",
    )
    parser.add_argument(
        "--proxy-threads",
        type=int,
        default=1,
        help="the proxy's mysql-threads (default 1: on a 2-CPU machine that also runs MariaDB and sysbench, a "
        "second worker process costs more CPU per query than it adds; 0 takes the variable's own default)",
    )
    parser.add_argument(
        "--pin",
        action="store_true",
        help="pin the proxy under test (ProxyFleet's workers, or haproxy) to the last CPU(s) and the server and "
        "sysbench to the others, for steadier rounds (needs more CPUs than the proxy's workers)",
    )
    args = parser.parse_args(argv)
    quick = args.quick
    settings = Settings(
        quick=quick,
        rounds=args.rounds or (1 if quick else 3),
        seconds=args.seconds or (5 if quick else 15),
        warmup_seconds=1 if quick else 3,
        tables=2 if quick else 4,
        table_size=5000 if quick else 10000,
        threads=args.threads,
        many_threads=args.many_threads,
        many_ps_mode=args.many_ps_mode,
        proxy_threads=args.proxy_threads or None,
        pin=args.pin,
    )
    if args.pin:
        try:
            Layout.split(settings.proxy_threads or 1)
        except PinningError as refused:
            parser.error(str(refused))
    out = args.out if args.out.is_absolute() else Path.cwd() / args.out
    return settings, out


def main(argv: list[str] | None = None) -> int:
    """Set up, run the rounds, write the report; always tear down."""
    settings, out = parse_args(argv)
    argv_text = " ".join(sys.argv[1:] if argv is None else argv)
    command = f".venv/bin/python -m devstack.bench.run_bench {argv_text}" if argv_text else "make bench"
    _raise_fd_limit()
    signal.signal(signal.SIGINT, signal.default_int_handler)  # even when started with SIGINT ignored (`cmd &`)
    signal.signal(signal.SIGTERM, _raise_interrupt)
    per_run = settings.seconds + 3
    estimate = settings.rounds * len(settings.workloads()) * len(TARGETS) * per_run + 60
    print(f"ProxyFleet bench: about {estimate // 60 + 1} min; results in var/bench/, report in {out}", flush=True)
    bench = Bench(settings, out)
    status = 0
    try:
        bench.setup()
        bench.run()
        bench.machine["loadavg_after"] = _loadavg()
        bench.save()
        write_report(out, render_markdown(bench.document(), command))
        print(f"\nwrote {out} and {BENCH_DIR / 'results.json'}", flush=True)
        failed = [r for r in bench.results if not r.ok]
        if failed:
            print(f"{len(failed)} run(s) failed; see the logs named in the report", file=sys.stderr)
            status = 1
    except KeyboardInterrupt:
        print("\ninterrupted; stopping everything", file=sys.stderr)
        status = 130
    except Exception as exc:
        print(f"\nbench failed: {exc}", file=sys.stderr)
        status = 1
    finally:
        with _cleanup_shielded():
            if bench.results:
                bench.machine.setdefault("loadavg_after", _loadavg())
                with contextlib.suppress(Exception):
                    bench.save()
            bench.teardown()
    return status


if __name__ == "__main__":
    sys.exit(main())
