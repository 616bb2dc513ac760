"""pgbench through four targets: a PostgreSQL sandbox primary directly, Debian's PgBouncer (transaction pooling),
ProxyFleet's forwarding listener and ProxyFleet's pooling proxy (transaction pooling), into ``docs/benchmarks.md``
(its section "PostgreSQL: pgbench, direct vs PgBouncer vs ProxyFleet").

``make bench-pgsql`` runs ``.venv/bin/python -m devstack.bench.pgsql_bench [--quick]``. It builds the proxy (it runs
compiled) and starts everything it measures, and stops it again on success, failure or Ctrl-C:

* a PostgreSQL sandbox (``devstack/pgsandbox.py``, primary only, ``max_connections=1100`` so that 1,000 clients reach
  it directly) under ``var/bench-pgsql-sandbox``, its ``app`` database initialized once by ``pgbench -i`` as ``app``;
* PgBouncer in transaction pooling mode (``default_pool_size`` 20) on a free loopback port, its ini and userlist in
  ``var/bench-pgsql/pgbouncer``, clients and the server both authenticated by SCRAM as ``app``;
* a ProxyFleet proxy (``python -m proxyapp run``) serving two targets: a ``pgsql_forward_listeners`` port to a
  hostgroup holding the primary (the forwarding listener, docs/postgresql.md), and its pooling proxy
  (``pgsql-interfaces``) with ``app`` in ``pgsql_users`` in transaction pooling mode, to another hostgroup holding the
  primary with 20 connections, as PgBouncer has.

Then pgbench's built-in ``select-only`` (``-S``) and ``tpcb-like`` (the default) scripts, each with ``-M simple``
and ``-M prepared``, at 16 clients and at 1,000 clients (``-j 2``), run against every target, the targets interleaved
step by step as the bench engine orders them (``fleet.bench.engine.runner.PlanBase.steps``: reversed every other
round). Per step: tps (pgbench's, without the initial connection time), the average latency pgbench prints, p99 from a
sample of pgbench's per-transaction log (``-l --sampling-rate``), errors (failed transactions, aborted clients, failed
runs), the most client backends the server had at once (``pg_stat_activity``, sampled) and the CPU each of our
processes used (``/proc``): the proxy's and PgBouncer's seconds per 1,000 transactions compare with the field note's
~22,000 tps per busy CPU. Raw results go to ``var/bench-pgsql/results.json``, pgbench's output to
``var/bench-pgsql/logs/``. ``--quick`` (one round of a few seconds per step) tries the harness: its section goes to
``var/bench-pgsql/section.md``, not the docs.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import math
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from functools import partial
from typing import Any

import psycopg

from devstack import pgbouncer
from devstack.bench.run_bench import CpuSnapshot, descendants, write_report
from devstack.bench.sharding_bench import percentile
from devstack.pgbouncer import PgBouncer
from devstack.pgsandbox import APP_PASSWORD, APP_USER, PgSandbox, PgServer, bin_dir
from devstack.ports import free_port
from devstack.proxy import ProxyProcess
from devstack.stack import REPO, wait_until
from fleet.bench.engine.runner import PlanBase, raise_file_limit
from fleet.bench.engine.targets import Target

OUT = REPO / "var" / "bench-pgsql"
SANDBOX_DIR = "var/bench-pgsql-sandbox"
DOC = REPO / "docs" / "benchmarks.md"
SECTION_TITLE = "PostgreSQL: pgbench, direct vs PgBouncer vs ProxyFleet"
DIRECT, PGBOUNCER, PROXYFLEET, POOLER = "direct", "pgbouncer", "proxyfleet", "proxyfleet-pool"
TARGETS = (DIRECT, PGBOUNCER, PROXYFLEET, POOLER)
LABELS = {DIRECT: "direct", PGBOUNCER: "PgBouncer", PROXYFLEET: "ProxyFleet forward", POOLER: "ProxyFleet pool"}
SHORT = {DIRECT: "d", PGBOUNCER: "b", PROXYFLEET: "f", POOLER: "p"}
DATABASE = "app"
#: The sandbox server's settings: room for 1,000 clients directly, and the whole data set in shared buffers.
SERVER_SETTINGS = {"max_connections": "1100", "shared_buffers": "256MB"}
#: PgBouncer's server connections per user and database (transaction pooling).
POOL_SIZE = 20
#: The pgsql hostgroups of the proxy's one server: the forwarding listener's (room for every client) and the
#: pooler's (``POOL_SIZE`` server connections, as PgBouncer has).
HOSTGROUP, POOL_HOSTGROUP = 100, 101
#: Seconds a pgbench run may take beyond its -T before it is killed and recorded as failed.
RUN_GRACE_S = 120
#: pgbench's -T counts from before its clients connect (1,000 SCRAM logins took 6 s directly on the 2-CPU machine), so
#: a step's -T is its measured time plus this much per client; pgbench's tps leaves the connecting time out.
CONNECT_S_PER_CLIENT = 0.02
#: The field note's oneproxy-monitor: ~340,000 tps with the proxy at 16 CPUs.
NOTE_TPS_PER_CPU = 22_000


@dataclass(frozen=True)
class Workload:
    """One of pgbench's built-in scripts with one query mode."""

    script: str  # "select-only" or "tpcb-like"
    mode: str  # "simple" or "prepared"

    @property
    def key(self) -> str:
        """A short name: ``select-only/prepared``."""
        return f"{self.script}/{self.mode}"

    @property
    def title(self) -> str:
        """How the docs name it."""
        return f"{'pgbench -S' if self.script == 'select-only' else 'TPC-B-like'}, -M {self.mode}"


WORKLOADS = [Workload(script, mode) for script in ("select-only", "tpcb-like") for mode in ("simple", "prepared")]


@dataclass(frozen=True)
class Settings:
    """What one invocation measures."""

    quick: bool
    rounds: int
    seconds: int
    clients: tuple[int, ...]
    threads: int
    scale: int
    sampling_rate: float
    proxy_threads: int
    targets: tuple[str, ...]


# ---------------------------------------------------------------------------------------------- pgbench's output

_TPS = re.compile(r"^tps = ([\d.]+) \(without initial connection time\)", re.M)
_PROCESSED = re.compile(r"^number of transactions actually processed: (\d+)", re.M)
_FAILED = re.compile(r"^number of failed transactions: (\d+)", re.M)
_LATENCY = re.compile(r"^latency average = ([\d.]+) ms", re.M)
_CONNECTING = re.compile(r"^initial connection time = ([\d.]+) ms", re.M)
_ABORTED = re.compile(r"client \d+ (?:script \d+ )?aborted")
_ERROR = re.compile(r"^pgbench: error: (.*)$", re.M)


def parse_pgbench(text: str) -> dict[str, Any]:
    """pgbench's report (stdout and stderr together) as numbers: ``tps``, ``transactions``, ``failed``,
    ``lat_avg_ms``, ``connect_ms``, ``aborted`` (clients pgbench aborted on an error) and ``errors`` (its first
    distinct error lines, client numbers left out). A number pgbench did not print is None."""

    def number(pattern: re.Pattern[str], kind: type) -> Any:
        found = pattern.search(text)
        return kind(found.group(1)) if found else None

    messages = list(dict.fromkeys(re.sub(r"client \d+", "client N", line) for line in _ERROR.findall(text)))
    return {
        "tps": number(_TPS, float),
        "transactions": number(_PROCESSED, int),
        "failed": number(_FAILED, int),
        "lat_avg_ms": number(_LATENCY, float),
        "connect_ms": number(_CONNECTING, float),
        "aborted": len(_ABORTED.findall(text)),
        "errors": messages[:5],
    }


def log_histogram_ms(lines: Iterable[str]) -> list[tuple[float, int]]:
    """The latencies of pgbench's per-transaction log lines (``client_id transaction_no time_us script_no time_epoch
    time_us``) as a histogram, (milliseconds, count) in ascending order, leaving out the transactions it logged as
    ``failed`` or ``skipped``."""
    counts: Counter[int] = Counter()
    for line in lines:
        fields = line.split()
        if len(fields) >= 3 and fields[2].isdigit():
            counts[int(fields[2])] += 1
    return [(us / 1000, n) for us, n in sorted(counts.items())]


# ---------------------------------------------------------------------------------------------- results


@dataclass
class Run:
    """One pgbench run against one target."""

    workload: str
    target: str
    clients: int
    round: int
    exit_code: int | None
    log: str
    wall_s: float
    tps: float | None = None
    transactions: int | None = None
    failed: int | None = None
    aborted: int = 0
    lat_avg_ms: float | None = None
    lat_p99_ms: float | None = None
    connect_ms: float | None = None
    errors: list[str] = field(default_factory=list)
    server_backends_peak: int | None = None
    cpu: dict[str, float] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """Whether pgbench ran to the end with every client (it exits 0) and reported its tps."""
        return self.exit_code == 0 and self.tps is not None

    @property
    def error_count(self) -> int:
        """Failed transactions and aborted clients, plus one for a run that printed no tps (it did not start or was
        killed)."""
        return (self.failed or 0) + self.aborted + (1 if self.tps is None else 0)

    def cpu_s(self, role: str) -> float | None:
        """CPU seconds the processes of ``role`` used during the run."""
        cores = self.cpu.get(f"cores_{role}")
        return None if cores is None else cores * self.wall_s


@dataclass
class Cell:
    """One workload at one client count on one target, over the rounds."""

    runs: list[Run] = field(default_factory=list)

    def _median(self, values: list[float | None]) -> float | None:
        present = [v for v in values if v is not None]
        return statistics.median(present) if present else None

    @property
    def tps(self) -> float | None:
        """The median tps over the rounds (a failed run's tps is still pgbench's count of what it did)."""
        return self._median([r.tps for r in self.runs])

    @property
    def lat_avg_ms(self) -> float | None:
        """The median of pgbench's average latencies."""
        return self._median([r.lat_avg_ms for r in self.runs])

    @property
    def lat_p99_ms(self) -> float | None:
        """The median p99 latency."""
        return self._median([r.lat_p99_ms for r in self.runs])

    @property
    def aborted(self) -> bool:
        """Whether pgbench aborted clients in a round (its tps then counts only what they did before)."""
        return any(r.aborted for r in self.runs)

    @property
    def errors(self) -> int:
        """Errors summed over the rounds."""
        return sum(r.error_count for r in self.runs)

    @property
    def backends(self) -> int | None:
        """The most client backends the server had at once during any round."""
        peaks = [r.server_backends_peak for r in self.runs if r.server_backends_peak is not None]
        return max(peaks) if peaks else None

    def cpu_per_1000(self, role: str) -> float | None:
        """CPU seconds ``role`` spent per 1,000 transactions, over the rounds together."""
        seconds = [r.cpu_s(role) for r in self.runs]
        done = sum(r.transactions or 0 for r in self.runs)
        if not done or any(s is None for s in seconds):
            return None
        return 1000 * sum(s for s in seconds if s is not None) / done


def cells(runs: list[Run]) -> dict[tuple[str, int], dict[str, Cell]]:
    """The runs by (workload, clients) and target, in the order they first ran."""
    out: dict[tuple[str, int], dict[str, Cell]] = {}
    for run in runs:
        out.setdefault((run.workload, run.clients), {}).setdefault(run.target, Cell()).runs.append(run)
    return out


def ratio(top: float | None, bottom: float | None) -> float | None:
    """``top / bottom``; None when either is missing or the bottom is 0."""
    return top / bottom if top is not None and bottom else None


#: After a tps whose run lost clients: pgbench aborted them on an error and counted only what they did before.
ABORTED_MARK = " †"
#: The roles whose CPU per 1,000 transactions the table shows: the pooler and the proxy.
MIDDLE = {PGBOUNCER: "pgbouncer", PROXYFLEET: "proxy", POOLER: "proxy"}


def _fmt(value: float | None, spec: str = ",.0f") -> str:
    return "-" if value is None else format(value, spec)


def table(runs: list[Run], targets: tuple[str, ...]) -> list[str]:
    """The Markdown table: per workload and client count, tps per target, ProxyFleet's ratios to direct and to
    PgBouncer (and PgBouncer's to direct), latencies, errors, the server's client backends and the middle's CPU."""
    short = "/".join(SHORT[t] for t in targets)
    ratios = [(PROXYFLEET, DIRECT), (PROXYFLEET, PGBOUNCER), (POOLER, DIRECT), (POOLER, PGBOUNCER), (PGBOUNCER, DIRECT)]
    ratios = [(top, bottom) for top, bottom in ratios if top in targets and bottom in targets]
    middles = [t for t in targets if t in MIDDLE]
    head = ["workload", "clients", *(f"{LABELS[t]} tps" for t in targets)]
    head += [f"{LABELS[top]}/{LABELS[bottom]}" for top, bottom in ratios]
    head += [f"latency avg ms ({short})", f"p99 ms ({short})", f"errors ({short})", f"server backends ({short})"]
    head += [f"{LABELS[t]} CPU s per 1k tx" for t in middles]
    numeric = 2 + len(targets) + len(ratios)
    lines = ["| " + " | ".join(head) + " |", "|---|" + "---:|" * (numeric - 1) + "---|" * (len(head) - numeric)]
    for (workload, clients), by_target in cells(runs).items():
        got = [by_target.get(t) for t in targets]
        row = [
            workload,
            f"{clients:,}",
            *(_fmt(c.tps if c else None) + (ABORTED_MARK if c and c.aborted else "") for c in got),
        ]
        for top, bottom in ratios:
            high, low = by_target.get(top), by_target.get(bottom)
            row.append(_fmt(ratio(high.tps if high else None, low.tps if low else None), ".2f"))
        row.append(" / ".join(_fmt(c.lat_avg_ms if c else None, ".2f") for c in got))
        row.append(" / ".join(_fmt(c.lat_p99_ms if c else None, ".2f") for c in got))
        row.append(" / ".join(str(c.errors) if c else "-" for c in got))
        row.append(" / ".join(_fmt(c.backends if c else None) for c in got))
        for target in middles:
            cell = by_target.get(target)
            row.append(_fmt(cell.cpu_per_1000(MIDDLE[target]) if cell else None, ".3f"))
        lines.append("| " + " | ".join(row) + " |")
    return lines


def per_cpu(runs: list[Run], target: str) -> str:
    """The target's transactions per second of its middle's CPU (1,000 / its CPU s per 1k tx), per workload at the
    smallest client count."""
    by_cell = cells(runs)
    fewest = min((clients for _, clients in by_cell), default=0)
    parts = []
    for (workload, clients), by_target in by_cell.items():
        cell = by_target.get(target)
        cost = cell.cpu_per_1000(MIDDLE[target]) if cell and clients == fewest else None
        if cost:
            parts.append(f"{workload} {1000 / cost:,.0f}")
    return ", ".join(parts) or "not measured"


def pool_bar(runs: list[Run]) -> str:
    """The issue's bar for the pooler: 1,000 clients held on ``POOL_SIZE`` server connections with no errors."""
    verdicts = []
    for (workload, clients), by_target in cells(runs).items():
        cell = by_target.get(POOLER)
        if cell is None or clients < 1000:
            continue
        held = cell.backends is not None and cell.backends <= POOL_SIZE
        verdicts.append(
            f"{workload}: {_fmt(cell.backends)} server connections, {cell.errors} errors, "
            f"{'met' if held and not cell.errors else 'not met'}"
        )
    measured = "; ".join(verdicts) or "not measured"
    return f"The bar (the pooler holding 1,000 clients on {POOL_SIZE} server connections with no errors): {measured}"


def bar(runs: list[Run]) -> str:
    """The issue's bar for the forwarding listener: at least PgBouncer's tps on ``pgbench -S`` with 16 clients."""
    verdicts = []
    for (workload, clients), by_target in cells(runs).items():
        if not workload.startswith("select-only") or clients != 16:
            continue
        forward, pooler = by_target.get(PROXYFLEET), by_target.get(PGBOUNCER)
        share = ratio(forward.tps if forward else None, pooler.tps if pooler else None)
        if share is not None:
            verdicts.append(f"{workload}: {share:.2f}x PgBouncer, {'met' if share >= 1.0 else 'not met'}")
    if not verdicts:
        return "The bar (the forwarding listener at PgBouncer's tps on pgbench -S, 16 clients): not measured."
    return "The bar (the forwarding listener at least at PgBouncer's tps on pgbench -S, 16 clients): " + "; ".join(
        verdicts
    )


def connect(port: int) -> psycopg.Connection[Any]:
    """``app`` to its database on a loopback port, by SCRAM."""
    return psycopg.connect(
        host="127.0.0.1", port=port, user=APP_USER, password=APP_PASSWORD, dbname=DATABASE, connect_timeout=5
    )


def proxy_config(server: PgServer, threads: int) -> dict[str, Any]:
    """The proxy under test, both of its PostgreSQL targets on free ports: a forwarding listener to a hostgroup
    holding the primary, and the pooling proxy (``pgsql-interfaces``) with ``app`` in transaction pooling mode on
    another hostgroup holding the primary with ``POOL_SIZE`` connections; ``threads`` worker processes
    (``mysql-threads``), which serve both."""
    servers = [
        (HOSTGROUP, int(SERVER_SETTINGS["max_connections"]), "the forwarding listener's"),
        (POOL_HOSTGROUP, POOL_SIZE, "the pooler's"),
    ]
    return {
        "pgsql_servers": [
            {"hostgroup_id": hg, "hostname": server.host, "port": server.port, "max_connections": n, "comment": text}
            for hg, n, text in servers
        ],
        "pgsql_forward_listeners": [
            {"port": free_port(), "hostgroup_id": HOSTGROUP, "max_connections": 5000, "comment": "bench"}
        ],
        "pgsql_users": [
            {
                "username": APP_USER,
                "password": APP_PASSWORD,
                "default_hostgroup": POOL_HOSTGROUP,
                "pool_mode": "transaction",
            }
        ],
        "global_variables": [
            {"variable_name": "mysql-threads", "variable_value": str(threads)},
            {"variable_name": "pgsql-interfaces", "variable_value": f"127.0.0.1:{free_port()}"},
        ],
    }


def proxy_ports(proxy: ProxyProcess) -> dict[str, int]:
    """The ports of the proxy's forwarding listener and of its pooler, from its config."""
    doc = json.loads(proxy.config_path.read_text())
    interfaces = next(v["variable_value"] for v in doc["global_variables"] if v["variable_name"] == "pgsql-interfaces")
    return {PROXYFLEET: int(doc["pgsql_forward_listeners"][0]["port"]), POOLER: int(interfaces.rpartition(":")[2])}


# ---------------------------------------------------------------------------------------------- the run


class Bench:
    """Everything one invocation starts, measures and stops."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.sandbox = PgSandbox(SANDBOX_DIR)
        self.pgbouncer: PgBouncer | None = None
        self.proxy: ProxyProcess | None = None
        self.ports: dict[str, int] = {}
        self.runs: list[Run] = []
        self.notes: list[str] = []
        self.logs = OUT / "logs"

    def setup(self) -> None:
        """The sandbox and its pgbench tables, PgBouncer, the proxy; a target that cannot start is left out with a
        note saying why."""
        if self.logs.exists():
            shutil.rmtree(self.logs)
        self.logs.mkdir(parents=True)
        print(f"starting the PostgreSQL sandbox (primary only) under {SANDBOX_DIR} ...", flush=True)
        self.sandbox.down()
        self.sandbox.up(replicas=0, settings=SERVER_SETTINGS)
        primary = self.sandbox.primary()
        self.ports[DIRECT] = primary.port
        print(f"pgbench -i -s {self.settings.scale} ...", flush=True)
        init = self._pgbench(["-i", "-s", str(self.settings.scale), "-q"], primary.port, "init")
        if init.returncode != 0:
            raise RuntimeError(f"pgbench -i failed ({init.returncode}):\n{init.stdout}")
        if PGBOUNCER in self.settings.targets:
            databases = [f"{DATABASE} = host={primary.host} port={primary.port} dbname={DATABASE}"]
            bouncer = PgBouncer(OUT / "pgbouncer", databases, APP_USER, APP_PASSWORD, POOL_SIZE, DATABASE)
            self.pgbouncer = bouncer.start()
            self.ports[PGBOUNCER] = self.pgbouncer.port
        wanted = [t for t in (PROXYFLEET, POOLER) if t in self.settings.targets]
        if wanted:
            workdir = OUT / "proxy"
            shutil.rmtree(workdir, ignore_errors=True)
            workdir.mkdir(parents=True)
            self.proxy = ProxyProcess(
                proxy_config(primary, self.settings.proxy_threads), workdir, own_session=True
            ).start()
            for target, port in proxy_ports(self.proxy).items():
                if target not in wanted:
                    continue
                try:
                    wait_until(partial(_logs_in, port), f"a login through {LABELS[target]}", 10, interval=0.05)
                except RuntimeError as exc:
                    self.notes.append(f"{LABELS[target]} left out: {exc} (see {self.proxy.log_path}).")
                    print(self.notes[-1], flush=True)
                else:
                    self.ports[target] = port

    def teardown(self) -> None:
        """Stop everything setup started; each step runs even when an earlier one fails."""
        for stop in (self.proxy.stop if self.proxy else None, self.pgbouncer.stop if self.pgbouncer else None):
            if stop is not None:
                with contextlib.suppress(Exception):
                    stop()
        with contextlib.suppress(Exception):
            self.sandbox.down()

    def targets(self) -> list[str]:
        """The targets that started, in their usual order."""
        return [t for t in TARGETS if t in self.ports]

    def roles(self) -> dict[int, str]:
        """Our long-lived processes by pid: postgres (the postmaster and its backends), pgbouncer, proxy."""
        out: dict[int, str] = {}
        primary = self.sandbox.primary()
        if primary.pid:
            out.update(dict.fromkeys((primary.pid, *descendants(primary.pid)), "postgres"))
        if self.pgbouncer is not None and self.pgbouncer.proc is not None:
            out[self.pgbouncer.proc.pid] = "pgbouncer"
        if self.proxy is not None and self.proxy.proc is not None:
            out.update(dict.fromkeys((self.proxy.proc.pid, *descendants(self.proxy.proc.pid)), "proxy"))
        return out

    def _pgbench(self, args: list[str], port: int, name: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
        """pgbench as ``app`` on a loopback port, its connections named ``name`` (their ``application_name``)."""
        command = [str(bin_dir() / "pgbench"), *args, "-h", "127.0.0.1", "-p", str(port), "-U", APP_USER, DATABASE]
        env = dict(os.environ, PGPASSWORD=APP_PASSWORD, PGCONNECT_TIMEOUT="10", PGAPPNAME=name)
        return subprocess.run(command, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              timeout=timeout, cwd=OUT)  # fmt: skip

    def run_one(self, workload: Workload, target: str, clients: int, round_no: int) -> Run:
        """One pgbench run; a crash, an abort or a timeout is recorded, not raised."""
        s = self.settings
        name = f"r{round_no}-{workload.script}-{workload.mode}-{clients}-{target}"
        prefix = self.logs / "tx" / name
        prefix.parent.mkdir(exist_ok=True)
        args = ["-b", workload.script, "-M", workload.mode, "-c", str(clients), "-j", str(s.threads)]
        duration = step_seconds(s.seconds, clients)
        args += ["-T", str(duration), "-l", f"--sampling-rate={s.sampling_rate}", f"--log-prefix={prefix}"]
        sampler = _BackendSampler(self.sandbox.primary(), name)
        roles = self.roles()
        before = CpuSnapshot.take()
        started = time.monotonic()
        try:
            done = self._pgbench(args, self.ports[target], name, timeout=duration + RUN_GRACE_S)
            code, text = done.returncode, done.stdout
        except subprocess.TimeoutExpired as exc:
            partial = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else exc.stdout or ""
            code, text = None, f"killed after {duration + RUN_GRACE_S} s\n{partial}"
        wall = time.monotonic() - started
        cpu = before.until(CpuSnapshot.take(), roles, client="pgbench")
        log = self.logs / f"{name}.log"
        log.write_text(text)
        run = Run(workload.key, target, clients, round_no, code, str(log.relative_to(REPO)), round(wall, 2), cpu=cpu)
        for key, value in parse_pgbench(text).items():
            setattr(run, key, value)
        histogram: Counter[float] = Counter()
        for path in sorted(prefix.parent.glob(f"{prefix.name}.*")):
            with path.open() as lines:
                histogram.update(dict(log_histogram_ms(lines)))
            path.unlink()
        run.lat_p99_ms = percentile(sorted(histogram.items()), 99)
        run.server_backends_peak = sampler.stop()
        return run

    def run(self) -> None:
        """The interleaved rounds: per round, per workload, the engine's order of client counts and targets."""
        s = self.settings
        order = PlanBase(
            targets=[Target(name=t, host="127.0.0.1", port=self.ports[t]) for t in self.targets()],
            connections=list(s.clients),
            rounds=s.rounds,
        ).steps()
        for round_no in range(1, s.rounds + 1):
            for workload in WORKLOADS:
                for _, target, clients in (step for step in order if step[0] == round_no):
                    run = self.run_one(workload, target.name, clients, round_no)
                    self.runs.append(run)
                    print(f"round {round_no}/{s.rounds}  {workload.key:<20} {clients:>5}  {target.name:<10} "
                          f"{describe(run)}", flush=True)  # fmt: skip
                    self.save()

    def document(self) -> dict[str, Any]:
        """Everything measured, for results.json."""
        return {
            "section": SECTION_TITLE,
            "settings": asdict(self.settings),
            "ports": self.ports,
            "notes": self.notes,
            "runs": [asdict(r) | {"ok": r.ok, "error_count": r.error_count} for r in self.runs],
        }

    def save(self) -> None:
        """Write results.json (after every run, so an interrupted run keeps what it measured)."""
        (OUT / "results.json").write_text(json.dumps(self.document(), indent=2))


def step_seconds(seconds: int, clients: int) -> int:
    """A step's -T: its measured ``seconds`` and the time its ``clients`` may take to connect."""
    return seconds + math.ceil(clients * CONNECT_S_PER_CLIENT)


def _logs_in(port: int) -> bool:
    try:
        connect(port).close()
    except psycopg.OperationalError:
        return False
    return True


class _BackendSampler:
    """The most backends the server had at once for one run's clients (the run's ``application_name``, which
    PgBouncer sets on the server connections it lends them: its idle pool from an earlier run does not count),
    sampled twice a second."""

    _SQL = "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend' AND application_name = %s"

    def __init__(self, server: PgServer, name: str) -> None:
        self.name = name
        self.peak: int | None = None
        self._done = threading.Event()
        self._conn = server.connect()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        while True:
            with contextlib.suppress(psycopg.Error):
                row = self._conn.execute(self._SQL, (self.name,)).fetchone()
                if row is not None:
                    self.peak = max(self.peak or 0, int(row[0]))
            if self._done.wait(0.5):
                return

    def stop(self) -> int | None:
        """Stop sampling; the peak."""
        self._done.set()
        self._thread.join(5)
        self._conn.close()
        return self.peak


def describe(run: Run) -> str:
    """A one-line summary of a run for the console."""
    text = f"tps {_fmt(run.tps):>9}  avg {_fmt(run.lat_avg_ms, '.2f')} ms  p99 {_fmt(run.lat_p99_ms, '.2f')} ms"
    text += f"  errors {run.error_count}  backends {_fmt(run.server_backends_peak)}"
    text += "".join(f"  {role} {run.cpu[f'cores_{role}']:.2f} cores" for role in ("proxy", "pgbouncer")
                    if f"cores_{role}" in run.cpu)  # fmt: skip
    if not run.ok:
        text += f"  (exit {run.exit_code}: {'; '.join(run.errors[:2]) or 'no report'})"
    return text


# ---------------------------------------------------------------------------------------------- the report


def machine(bench: Bench) -> str:
    """One line about the machine, the server, PgBouncer and the proxy."""
    with bench.sandbox.primary().connect() as conn:
        row = conn.execute("SHOW server_version").fetchone()
    version = str(row[0]) if row else "?"
    revision = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True)
    native = bench.proxy.stats().get("native", []) if bench.proxy is not None else []
    return (
        f"{datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC · {len(os.sched_getaffinity(0))} CPUs, "
        f"{platform.system()} {platform.release()} · PostgreSQL {version} (sandbox primary, "
        f"max_connections {SERVER_SETTINGS['max_connections']}, shared_buffers {SERVER_SETTINGS['shared_buffers']}, "
        f"fsync and synchronous_commit off) · {pgbouncer.version_line()} (pool_mode transaction, default_pool_size "
        f"{POOL_SIZE}) · ProxyFleet {revision.stdout.strip()}, {len(native)} compiled modules, "
        f"mysql-threads {bench.settings.proxy_threads} · Python {platform.python_version()}"
    )


def prepared_note() -> str:
    """What the PgBouncer that ran does with prepared statements (``max_prepared_statements`` came in 1.21)."""
    line = pgbouncer.version_line()
    if pgbouncer.version() >= (1, 21):
        return (
            f"- {line} ran with `max_prepared_statements = {pgbouncer.MAX_PREPARED_STATEMENTS}`: it keeps each "
            "client's prepared statements across the server connections of transaction pooling, as ProxyFleet's "
            "pooler does."
        )
    return (
        f"- {line} keeps no prepared statements across the server connections of transaction pooling "
        "(`max_prepared_statements` came in 1.21; `PGBOUNCER=/path/to/pgbouncer` runs a newer one): with "
        "`-M prepared` its clients meet statements another client prepared, or miss their own, and pgbench aborts "
        "them. The forwarding listener gives each client its own server connection, so prepared statements work as "
        "they do directly; ProxyFleet's pooler keeps each client's and prepares them on whichever server connection "
        "a transaction gets."
    )


def render(bench: Bench, machine_line: str, command: str, loads: tuple[str, str]) -> str:
    """The docs section."""
    s = bench.settings
    targets = tuple(bench.targets())
    lines = [
        f"## {SECTION_TITLE}",
        "",
        f"Written by `{command}` (`devstack/bench/pgsql_bench.py`; raw results in `var/bench-pgsql/results.json`, "
        "pgbench's output in `var/bench-pgsql/logs/`): a PostgreSQL sandbox primary with pgbench's tables at scale "
        f"{s.scale}; pgbench (`-j {s.threads}`, as `app` with SCRAM; `-T` is {s.seconds} s plus "
        f"{CONNECT_S_PER_CLIENT * 1000:.0f} s per 1,000 clients for them to connect) against it directly, through "
        f"PgBouncer (transaction pooling, {POOL_SIZE} server connections), through ProxyFleet's forwarding "
        "listener (docs/postgresql.md: whole connections passed to the server) and through ProxyFleet's pooling proxy "
        f"(`pgsql-interfaces`, `app` in transaction pooling mode on {POOL_SIZE} server connections), the two "
        f"ProxyFleet targets served by one proxy; {s.rounds} round(s), the targets interleaved step by step and "
        "reversed every other round.",
        "",
        f"- Machine: {machine_line}",
        f"- Load average (1 min) before / after: {loads[0]} / {loads[1]}. pgbench, the server, PgBouncer and the "
        "proxy share the cores, so the ratios say more than the absolute numbers. The server, PgBouncer and the "
        "proxy each run in a session of their own, as daemons do (with the kernel's autogroup scheduling, CPU time "
        "is shared between sessions first).",
        "- tps is pgbench's (without the initial connection time), the median over the rounds; latency avg is the "
        f"average pgbench prints, p99 comes from a {s.sampling_rate:.0%} sample of pgbench's per-transaction log; "
        "errors are failed transactions, clients pgbench aborted and failed runs, summed over the rounds; server "
        "backends is the most server backends the step's clients had at once (by their application_name, sampled "
        "twice a second: PgBouncer's idle pool from an earlier step is not counted); CPU s per 1k tx is the CPU time "
        "of the PgBouncer process or of the proxy's processes per 1,000 transactions (at 1,000 clients it includes "
        "their logins: PgBouncer checks each client's SCRAM proof itself, the forwarding listener only passes the "
        "bytes).",
        prepared_note(),
        "",
        *table(bench.runs, targets),
        "",
        f"{ABORTED_MARK.strip()} pgbench aborted clients of that run on an error: its tps counts what they did before.",
        "",
    ]
    if PROXYFLEET in targets:
        lines += [
            f"{bar(bench.runs)}. ProxyFleet's forwarding listener per busy CPU of the proxy ({min(s.clients)} "
            f"clients): {per_cpu(bench.runs, PROXYFLEET)} tps; the field note's oneproxy-monitor: "
            f"~{NOTE_TPS_PER_CPU:,} tps per busy CPU.",
            "",
        ]
    if POOLER in targets:
        lines += [
            f"{pool_bar(bench.runs)}. ProxyFleet's pooler per busy CPU of the proxy ({min(s.clients)} clients): "
            f"{per_cpu(bench.runs, POOLER)} tps.",
            "",
        ]
    if PGBOUNCER in targets:
        lines += [f"PgBouncer per busy CPU ({min(s.clients)} clients): {per_cpu(bench.runs, PGBOUNCER)} tps.", ""]
    errors = sorted({(LABELS[r.target], r.workload, e) for r in bench.runs for e in r.errors})
    if errors:
        lines += ["pgbench's errors (the first of each kind):", ""]
        lines += [f"- {target}, {workload}: `{message}`" for target, workload, message in errors[:12]]
        lines.append("")
    lines += [f"{note}" for note in bench.notes]
    return "\n".join(lines).rstrip() + "\n"


def parse_args(argv: list[str] | None) -> Settings:
    """The command line -> settings."""
    parser = argparse.ArgumentParser(prog="python -m devstack.bench.pgsql_bench", description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="one round of 4 s steps; the section goes to var/")
    parser.add_argument("--rounds", type=int, help="interleaved rounds (default 2, --quick 1)")
    parser.add_argument("--time", type=int, dest="seconds", help="seconds per pgbench run (default 20, --quick 4)")
    parser.add_argument("--clients", default="16,1000", help="client counts, comma-separated (default 16,1000)")
    parser.add_argument("--threads", type=int, default=2, help="pgbench's -j (default 2)")
    parser.add_argument("--scale", type=int, default=10, help="pgbench -i's scale (default 10)")
    parser.add_argument("--proxy-threads", type=int, default=1, help="the proxy's mysql-threads (default 1)")
    parser.add_argument("--targets", default=",".join(TARGETS), help=f"some of {','.join(TARGETS)} (default all)")
    args = parser.parse_args(argv)
    targets = tuple(t for t in TARGETS if t in args.targets.split(","))
    if DIRECT not in targets:
        parser.error("the targets must include direct (the ratios' base)")
    return Settings(
        quick=args.quick,
        rounds=args.rounds or (1 if args.quick else 2),
        seconds=args.seconds or (4 if args.quick else 20),
        clients=tuple(int(c) for c in args.clients.split(",")),
        threads=args.threads,
        scale=args.scale,
        sampling_rate=0.05,
        proxy_threads=args.proxy_threads,
        targets=targets,
    )


def _load() -> str:
    return f"{os.getloadavg()[0]:.1f}"


def main(argv: list[str] | None = None) -> int:
    """Build, set up, run the rounds, write the section; always tear down."""
    settings = parse_args(argv)
    shown = " ".join(sys.argv[1:] if argv is None else argv)
    command = f".venv/bin/python -m devstack.bench.pgsql_bench {shown}".rstrip() if shown else "make bench-pgsql"
    OUT.mkdir(parents=True, exist_ok=True)
    build = subprocess.run([sys.executable, "-m", "proxyapp", "build"], cwd=REPO, text=True, capture_output=True)
    if build.returncode != 0:
        print(f"make build failed: the proxy would run uncompiled\n{build.stderr[-3000:]}", file=sys.stderr)
        return 1
    raise_file_limit()  # 1,000 clients: pgbench, PgBouncer and the proxy inherit it
    bench = Bench(settings)
    before = _load()
    try:
        bench.setup()
        bench.run()
        section = render(bench, machine(bench), command, (before, _load()))
        if settings.quick:
            (OUT / "section.md").write_text(section)
            print(f"wrote {(OUT / 'section.md').relative_to(REPO)} (not the docs: a quick run)", flush=True)
        else:
            write_report(DOC, section, SECTION_TITLE)
            print(f"wrote {DOC.relative_to(REPO)}", flush=True)
        print(section, flush=True)
        return 1 if any(not r.ok for r in bench.runs if r.target != PGBOUNCER) else 0
    finally:
        bench.teardown()


if __name__ == "__main__":
    sys.exit(main())
