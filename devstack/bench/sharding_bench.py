"""Sharding through ProxyFleet, against the same statements on one server directly (issue 14's benchmark).

``make bench-sharding`` runs ``.venv/bin/python -m devstack.bench.sharding_bench [--rounds N] [--time S] ...``. It
starts everything it measures under ``var/bench-sharding/`` and stops it again, on success, failure or Ctrl-C:

* four independent MariaDB servers (a one-primary sandbox each, ``devstack.sandbox.shard_sandboxes``);
* a tb_Shop-like table (the demo's ``devstack/demo.py`` definition) in three layouts, its rows made on the servers
  (MariaDB's sequence engine): all rows in ``shop1`` on server 0; ``shop2`` split by ``City_ID`` mod 2 over servers
  0 and 1; ``shop4`` split by ``City_ID`` mod 4 over servers 0 to 3;
* three proxies (``python -m proxyapp run``, one worker process each): **plain**, no sharding config (server 0 as
  hostgroup 0); **2 shards**, ``shop2.tb_Shop`` sharded by ``City_ID`` mod 2 (the demo's shard group ``shops``,
  shard N on hostgroup 100 + N); **4 shards**, ``shop4.tb_Shop`` by ``City_ID`` mod 4. The sharded proxies keep
  server 0 as hostgroup 0, the user's default, where unsharded tables (``shop1``) are served.

Then interleaved rounds: each round runs every workload against each of its targets, in an order that rotates by one
each round, with sysbench and ``devstack/bench/sharding_shop.lua`` (one text-protocol statement per event). Raw
results go to ``var/bench-sharding/results.json`` (sysbench logs in ``var/bench-sharding/logs/``), the report to the
``## Sharding`` section of ``docs/benchmarks.md``.
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
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

import pymysql

from devstack.bench.run_bench import CpuSnapshot, PidFile, descendants, process_uses_uvloop, write_report
from devstack.demo import SHARD_GROUP, SHARD_TABLES
from devstack.proxy import ProxyProcess
from devstack.sandbox import APP_PASSWORD, APP_USER, Sandbox, SandboxServer, shard_sandboxes
from devstack.stack import REPO
from fleet.bench.engine.sysbench import parse_histogram, parse_sysbench

BENCH_DIR = REPO / "var" / "bench-sharding"
SERVERS_DIR = "var/bench-sharding/servers"
SCRIPT = Path(__file__).with_name("sharding_shop.lua")
SECTION_TITLE = "Sharding"
SERVERS = 4
#: Shard N of a sharded proxy is hostgroup FIRST_SHARD_HOSTGROUP + N (the demo's numbering); hostgroup 0 is server 0.
FIRST_SHARD_HOSTGROUP = 100
#: Backend connections a proxy may open per hostgroup (as ``make bench``'s).
BACKEND_MAX_CONNECTIONS = 200
#: Seconds a sysbench run may take beyond its --time before it is killed and recorded as failed.
RUN_GRACE_S = 60
#: Each server's InnoDB buffer pool, set at run time (the sandbox starts with 64 MiB): every layout's rows fit.
BUFFER_POOL_BYTES = 256 * 1024 * 1024


@dataclass(frozen=True)
class Target:
    """Where a run's statements go: a server directly or a proxy (by its key), and the schema they name."""

    key: str
    label: str
    proxy: str | None  # None: server 0 directly; else "plain", "shards2" or "shards4"
    schema: str


TARGETS = {
    t.key: t
    for t in (
        Target("direct", "direct", None, "shop1"),
        Target("proxy", "proxy, unsharded", "plain", "shop1"),
        Target("shards2", "proxy, 2 shards", "shards2", "shop2"),
        Target("shards4", "proxy, 4 shards", "shards4", "shop4"),
        Target("sharded_config", "proxy with sharded tables, unsharded table", "shards4", "shop1"),
    )
}
LAYOUTS = {"shop1": 1, "shop2": 2, "shop4": 4}  # schema -> the servers its rows are split over
MAIN_TARGETS = ("direct", "proxy", "shards2", "shards4")
#: The statements (``%d``: the numbers the Lua script draws) and what the script draws for each.
STATEMENTS = {
    "point": "SELECT Shop_ID, ShopName, Address, ShopStatus FROM tb_Shop WHERE City_ID = %d",
    "orderby": "SELECT Shop_ID, City_ID, ShopName FROM tb_Shop WHERE Shop_ID > %d ORDER BY Shop_ID LIMIT 10",
    "groupby": "SELECT ShopStatus, COUNT(*), SUM(City_ID) FROM tb_Shop WHERE Shop_ID BETWEEN %d AND %d "
    "GROUP BY ShopStatus",
}
DRAWS = {"point": "key", "orderby": "after", "groupby": "range"}


@dataclass(frozen=True)
class Workload:
    """One statement shape at one concurrency, run against each of its targets every round."""

    key: str
    title: str
    statement: str  # a key of STATEMENTS
    connections: int
    targets: tuple[str, ...]


@dataclass(frozen=True)
class Settings:
    """What one invocation measures."""

    rounds: int
    seconds: int
    warmup_seconds: int
    rows: int
    cities: int
    span: int
    connections: int
    many_connections: int

    def workloads(self) -> list[Workload]:
        """The workloads, in the order each round runs them."""
        c, m = self.connections, self.many_connections
        return [
            Workload("point", f"key-routed point select, {c} connections", "point", c, MAIN_TARGETS),
            Workload("point_many", f"key-routed point select, {m:,} connections", "point", m, MAIN_TARGETS),
            Workload("orderby", f"scatter ORDER BY Shop_ID LIMIT 10, {c} connections", "orderby", c, MAIN_TARGETS),
            Workload("groupby", f"scatter GROUP BY with COUNT and SUM over {self.span:,} rows, {c} connections",
                     "groupby", c, MAIN_TARGETS),
            Workload("unsharded", f"point select on an unsharded table, {c} connections", "point", c,
                     ("proxy", "sharded_config")),
        ]  # fmt: skip


@dataclass
class RunResult:
    """One sysbench run of one workload against one target."""

    workload: str
    target: str
    round: int
    command: list[str]
    log: str
    wall_s: float
    exit_code: int | None
    tps: float | None = None
    transactions: int | None = None
    ignored_errors: int | None = None
    lat_avg_ms: float | None = None
    lat_p95_ms: float | None = None
    lat_p99_ms: float | None = None
    lat_max_ms: float | None = None
    fatal: list[str] = field(default_factory=list)
    error_codes: dict[str, int] = field(default_factory=dict)
    cpu: dict[str, float] = field(default_factory=dict)
    server_statements: list[int] = field(default_factory=list)  # each server's Questions during the run

    @property
    def ok(self) -> bool:
        """Whether sysbench finished and reported its statistics."""
        return self.exit_code == 0 and self.tps is not None

    @property
    def errors(self) -> int:
        """Statements that failed (sysbench's ignored errors), plus one for a run that did not finish."""
        return (self.ignored_errors or 0) + (0 if self.ok else 1)


def percentile(histogram: list[tuple[float, int]], percent: float) -> float | None:
    """The latency (ms) below which ``percent`` % of a sysbench histogram's events fall."""
    total = sum(count for _, count in histogram)
    if not total:
        return None
    seen = 0
    for value, count in histogram:
        seen += count
        if seen >= total * percent / 100:
            return value
    return histogram[-1][0]


# ---------------------------------------------------------------------------------------------- data and configs


def table_ddl(schema: str) -> str:
    """The demo's tb_Shop, in ``schema``."""
    return SHARD_TABLES[0].replace("shop.tb_Shop", f"{schema}.tb_Shop")


def fill_sql(schema: str, rows: int, cities: int, shards: int, shard: int) -> str:
    """Make, on the server, the rows of shard ``shard`` of ``shards`` of the table: Shop_ID 1..rows, City_ID
    (Shop_ID mod cities) + 1, so a city has rows/cities shops and neighbouring shops are in different cities."""
    city = f"(seq MOD {cities}) + 1"
    return (
        f"INSERT INTO {schema}.tb_Shop (Shop_ID, City_ID, ShopName, Address, ShopStatus) "
        f"SELECT seq, {city}, CONCAT('Shop ', seq), CONCAT(seq MOD 997 + 1, ' Nanshan Road'), seq MOD 5 "
        f"FROM {schema}.seq_1_to_{rows} WHERE ({city}) MOD {shards} = {shard}"
    )


def proxy_config(servers: list[SandboxServer], shards: int) -> dict[str, Any]:
    """One proxy's config: server 0 as hostgroup 0 (the user's default); with ``shards``, shard N of the group
    on hostgroup 100 + N (server N) and ``shopN.tb_Shop`` sharded by City_ID mod N."""

    def server(hostgroup: int, s: SandboxServer, comment: str) -> dict[str, Any]:
        return {"hostgroup_id": hostgroup, "hostname": s.host, "port": s.port,
                "max_connections": BACKEND_MAX_CONNECTIONS, "comment": comment}  # fmt: skip

    document: dict[str, Any] = {
        "mysql_servers": [server(0, servers[0], "server 0, unsharded tables")],
        "mysql_users": [{"username": APP_USER, "password": APP_PASSWORD, "default_hostgroup": 0}],
        "mysql_query_rules": [],
        "global_variables": [
            {"variable_name": "mysql-threads", "variable_value": "1"},
            {"variable_name": "mysql-max_connections", "variable_value": "5000"},
        ],
    }
    if shards:
        document["mysql_servers"] += [
            server(FIRST_SHARD_HOSTGROUP + n, servers[n], f"shard {n}") for n in range(shards)
        ]
        document["mysql_shards"] = [
            {"shard_group": SHARD_GROUP, "shard": n, "hostgroup_id": FIRST_SHARD_HOSTGROUP + n} for n in range(shards)
        ]
        document["mysql_sharded_tables"] = [
            {"schemaname": f"shop{shards}", "tablename": "tb_Shop", "shard_group": SHARD_GROUP, "algorithm": "mod",
             "shard_key": "City_ID", "comment": f"City_ID mod {shards}"},
        ]  # fmt: skip
    return document


#: The proxies by key: how many shards each config has (0: no sharding config).
PROXIES = {"plain": 0, "shards2": 2, "shards4": 4}


# ---------------------------------------------------------------------------------------------- the run


class Bench:
    """Everything one invocation starts, measures and stops."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.sandboxes: list[Sandbox] = shard_sandboxes(SERVERS, SERVERS_DIR)
        self.servers: list[SandboxServer] = []
        self.proxies: dict[str, ProxyProcess] = {}
        self.results: list[RunResult] = []
        self.machine: dict[str, Any] = {}
        self.checks: list[str] = []
        self.logs = BENCH_DIR / "logs"
        self.pids = PidFile(BENCH_DIR / "pids.json")

    # ------------------------------------------------------------------------------------------ set up / down

    def setup(self) -> None:
        """Servers, data, proxies, and a check that every target answers the statements alike."""
        BENCH_DIR.mkdir(parents=True, exist_ok=True)
        self.pids.stop_leftovers()
        if self.logs.exists():
            shutil.rmtree(self.logs)
        self.logs.mkdir(parents=True)
        s = self.settings
        print(f"starting {SERVERS} MariaDB servers under {SERVERS_DIR} ...", flush=True)
        with ThreadPoolExecutor(max_workers=SERVERS) as pool:
            list(pool.map(lambda box: box.down(), self.sandboxes))  # fresh servers: no leftovers of an earlier run
            self.servers = list(pool.map(lambda box: box.up(replicas=0)[0], self.sandboxes))
            print(f"making {s.rows:,} shops in 3 layouts (1, 2 and 4 servers) ...", flush=True)
            list(pool.map(self._load, range(SERVERS)))
        for key, shards in PROXIES.items():
            workdir = BENCH_DIR / f"proxy-{key}"
            if workdir.exists():
                shutil.rmtree(workdir)
            workdir.mkdir(parents=True)
            proxy = ProxyProcess(proxy_config(self.servers, shards), workdir)
            self.proxies[key] = proxy
            proxy.start()
            assert proxy.proc is not None
            self.pids.record(f"proxy-{key}", proxy.proc.pid, str(proxy.config_path))
        self.machine = machine_info(self.servers[0], self.proxies["plain"])
        self.checks = self.check_answers()
        for line in self.checks:
            print(f"  check: {line}", flush=True)

    def _load(self, index: int) -> None:
        """Server ``index``: a larger buffer pool, and its part of each layout's rows."""
        s = self.settings
        with self.servers[index].connect() as conn, conn.cursor() as cur:
            cur.execute(f"SET GLOBAL innodb_buffer_pool_size = {BUFFER_POOL_BYTES}")
            for schema, shards in LAYOUTS.items():
                if index >= shards:
                    continue
                cur.execute(f"CREATE DATABASE {schema} DEFAULT CHARSET utf8mb4")
                cur.execute(table_ddl(schema))
                cur.execute(fill_sql(schema, s.rows, s.cities, shards, index))
                cur.execute(f"ANALYZE TABLE {schema}.tb_Shop")
                cur.fetchall()

    def endpoint(self, target: Target) -> tuple[str, int]:
        """The host and port a target's clients connect to."""
        if target.proxy is None:
            return self.servers[0].host, self.servers[0].port
        return "127.0.0.1", self.proxies[target.proxy].port

    def check_answers(self) -> list[str]:
        """Each statement shape with fixed values through every target, compared with server 0's answer (the
        reference): a proxy that refuses one or answers otherwise is reported, not fixed."""
        s = self.settings
        probes = {
            "point": STATEMENTS["point"] % (s.cities // 3),
            "orderby": STATEMENTS["orderby"] % (s.rows // 7),
            "groupby": STATEMENTS["groupby"] % (77, 77 + s.span - 1),
            "count": "SELECT COUNT(*), SUM(Shop_ID), SUM(City_ID) FROM tb_Shop",
        }
        answers: dict[str, dict[str, Any]] = {}
        for target in TARGETS.values():
            host, port = self.endpoint(target)
            got: dict[str, Any] = {}
            try:
                with (
                    pymysql.connect(host=host, port=port, user=APP_USER, password=APP_PASSWORD,
                                    database=target.schema, autocommit=True, connect_timeout=10) as conn,
                    conn.cursor() as cur,
                ):  # fmt: skip
                    for name, sql in probes.items():
                        try:
                            cur.execute(sql)
                            got[name] = [tuple(str(v) for v in row) for row in cur.fetchall()]
                        except pymysql.MySQLError as exc:  # the proxy's refusal, recorded as the answer
                            got[name] = f"error {exc}"
            except pymysql.MySQLError as exc:
                got = {name: f"cannot connect: {exc}" for name in probes}
            answers[target.key] = got
        reference = answers["direct"]
        lines = [
            f"{TARGETS[key].label}: {name} answered {str(got[name])[:200]}, direct {str(reference[name])[:200]}"
            for key, got in answers.items()
            for name in probes
            if got[name] != reference[name]
        ]
        lines.append(
            f"{len(lines)} probe(s) answered differently from server 0"
            if lines
            else "every target answered the probes as server 0 directly"
        )
        rows = reference["count"]
        held = f"{int(rows[0][0]):,}" if isinstance(rows, list) else rows
        lines.append(f"server 0 directly counts {held} rows in the table")
        return lines

    def questions(self) -> list[int]:
        """Each server's ``Questions`` (statements its clients sent; the servers' own reading adds one each)."""
        counts = []
        for server in self.servers:
            with server.connect() as conn, conn.cursor() as cur:
                cur.execute("SHOW GLOBAL STATUS LIKE 'Questions'")
                counts.append(int(cur.fetchone()[1]))
        return counts

    def roles(self) -> dict[int, str]:
        """Our long-lived processes by pid: the servers and the proxies (with their workers)."""
        out: dict[int, str] = {}
        for n, server in enumerate(self.servers):
            if server.pid:
                out[server.pid] = f"server{n}"
        for key, proxy in self.proxies.items():
            if proxy.proc is not None:
                for pid in (proxy.proc.pid, *descendants(proxy.proc.pid)):
                    out[pid] = f"proxy-{key}"
        return out

    def teardown(self) -> None:
        """Stop everything setup started; each step runs even when an earlier one fails."""
        for proxy in self.proxies.values():
            with contextlib.suppress(Exception):
                proxy.stop()
        with ThreadPoolExecutor(max_workers=SERVERS) as pool:
            for done in [pool.submit(box.down) for box in self.sandboxes]:
                with contextlib.suppress(Exception):
                    done.result()
        with contextlib.suppress(OSError):
            (BENCH_DIR / "pids.json").unlink()

    # ------------------------------------------------------------------------------------------ sysbench

    def command(self, workload: Workload, target: Target, seconds: int) -> list[str]:
        """The sysbench command line of one run."""
        s = self.settings
        host, port = self.endpoint(target)
        return [
            "sysbench",
            str(SCRIPT),
            "--db-driver=mysql",
            f"--mysql-host={host}",
            f"--mysql-port={port}",
            f"--mysql-user={APP_USER}",
            f"--mysql-password={APP_PASSWORD}",
            f"--mysql-db={target.schema}",
            "--mysql-ignore-errors=all",  # a failing statement is counted (and named in the log), not fatal
            "--db-ps-mode=disable",
            f"--threads={workload.connections}",
            f"--time={seconds}",
            "--histogram=on",
            "--percentile=99",
            "--verbosity=5",  # debug level: names each ignored error
            f"--sql={STATEMENTS[workload.statement]}",
            f"--draw={DRAWS[workload.statement]}",
            f"--rows={s.rows}",
            f"--cities={s.cities}",
            f"--span={s.span}",
            "run",
        ]

    def run_one(self, workload: Workload, target: Target, round_no: int, seconds: int) -> RunResult:
        """One sysbench run; a crash, hang or timeout is recorded, not raised."""
        cmd = self.command(workload, target, seconds)
        log = self.logs / f"r{round_no}-{workload.key}-{target.key}.log"
        questions_before = self.questions()
        cpu_before = CpuSnapshot.take()
        t0 = time.monotonic()
        with log.open("wb") as out:
            proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
            try:
                code: int | None = proc.wait(seconds + RUN_GRACE_S)
            except subprocess.TimeoutExpired:
                code = None
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait(10)
        wall = time.monotonic() - t0
        cpu = cpu_before.until(CpuSnapshot.take(), self.roles())
        questions = [after - before for before, after in zip(questions_before, self.questions(), strict=True)]
        text = log.read_text(errors="replace")
        report = parse_sysbench(text)
        histogram = parse_histogram(text)
        result = RunResult(
            workload=workload.key,
            target=target.key,
            round=round_no,
            command=cmd,
            log=str(log.relative_to(REPO)),
            wall_s=round(wall, 2),
            exit_code=code,
            tps=report.get("tps"),
            transactions=report.get("transactions"),
            ignored_errors=report.get("ignored_errors"),
            lat_avg_ms=report.get("lat_avg_ms"),
            lat_p95_ms=percentile(histogram, 95),
            lat_p99_ms=percentile(histogram, 99),
            lat_max_ms=report.get("lat_max_ms"),
            fatal=report["fatal"],
            error_codes=report["error_codes"],
            cpu=cpu,
            server_statements=questions,
        )
        if code is None:
            result.fatal.insert(0, f"killed after {seconds + RUN_GRACE_S} s")
        if target.proxy is not None:
            self._restart_dead_proxy(target.proxy, result)
        return result

    def _restart_dead_proxy(self, key: str, result: RunResult) -> None:
        """If the proxy exited during ``result``'s run, say so in it and start the proxy again."""
        proxy = self.proxies[key]
        if proxy.proc is None or proxy.proc.poll() is None:
            return
        message = f"the proxy exited with {proxy.proc.returncode} during this run (see {proxy.log_path})"
        print(f"  {message}; restarting it", flush=True)
        result.fatal.insert(0, message)
        result.exit_code = result.exit_code or -1
        proxy.start()
        assert proxy.proc is not None
        self.pids.record(f"proxy-{key}", proxy.proc.pid, str(proxy.config_path))

    def run(self) -> None:
        """The warm-up runs (the busiest workload, every target: it fills the proxies' pools), then the interleaved
        rounds."""
        s = self.settings
        workloads = s.workloads()
        if s.warmup_seconds:
            print(f"warm-up: {s.warmup_seconds} s of {workloads[1].title} per target (not recorded)", flush=True)
            for target in TARGETS.values():
                self.run_one(workloads[1], target, 0, s.warmup_seconds)
        for round_no in range(1, s.rounds + 1):
            for workload in workloads:
                shift = (round_no - 1) % len(workload.targets)
                for key in workload.targets[shift:] + workload.targets[:shift]:
                    result = self.run_one(workload, TARGETS[key], round_no, s.seconds)
                    self.results.append(result)
                    print(f"round {round_no}/{s.rounds}  {workload.key:<10} {key:<14} {describe(result)}", flush=True)
                    self.save()

    # ------------------------------------------------------------------------------------------ output

    def document(self) -> dict[str, Any]:
        """Everything measured, for results.json."""
        return {
            "section": SECTION_TITLE,
            "settings": asdict(self.settings),
            "workloads": [asdict(w) for w in self.settings.workloads()],
            "targets": {k: asdict(t) for k, t in TARGETS.items()},
            "machine": self.machine,
            "checks": self.checks,
            "runs": [asdict(r) | {"ok": r.ok, "errors": r.errors} for r in self.results],
            "summary": summarize(self.settings.workloads(), self.results),
        }

    def save(self) -> None:
        """Write results.json (after every run, so an interrupted run keeps what it measured)."""
        (BENCH_DIR / "results.json").write_text(json.dumps(self.document(), indent=2))


def describe(r: RunResult) -> str:
    """A one-line summary of a run for the console."""
    if not r.ok:
        return f"FAILED (exit {r.exit_code}): {'; '.join(r.fatal[:2]) or 'no report'}"
    text = f"tps {r.tps:>9,.0f}  p95 {r.lat_p95_ms} ms  p99 {r.lat_p99_ms} ms  errors {r.ignored_errors}"
    if r.error_codes:
        text += f" {r.error_codes}"
    return text + f"  others' CPU {r.cpu.get('cpu_others_pct')}%"


# ---------------------------------------------------------------------------------------------- summary


def _median(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def cpu_per_statement(run: RunResult, prefix: str = "") -> float | None:
    """CPU time (µs) our processes whose role starts with ``prefix`` (all: "") spent per statement of ``run``."""
    if not run.ok or not run.tps or not run.cpu:
        return None
    cores = sum(n for key, n in run.cpu.items() if key.startswith(f"cores_{prefix}"))
    return cores / run.tps * 1_000_000


def server_statements_per_statement(run: RunResult) -> float | None:
    """Statements the servers ran per statement the clients completed in ``run``."""
    if not run.ok or not run.transactions or not run.server_statements:
        return None
    return sum(run.server_statements) / run.transactions


def summarize(workloads: list[Workload], results: list[RunResult]) -> dict[str, Any]:
    """Per workload and target: medians over the rounds, errors summed, CPU cores per role (median)."""
    summary: dict[str, Any] = {}
    for w in workloads:
        per_target: dict[str, Any] = {}
        for key in w.targets:
            runs = [r for r in results if r.workload == w.key and r.target == key]
            good = [r for r in runs if r.ok]
            codes: dict[str, int] = {}
            for r in runs:
                for label, n in r.error_codes.items():
                    codes[label] = codes.get(label, 0) + n
            per_target[key] = {
                "tps_median": _median([r.tps for r in good]),
                "tps_rounds": [r.tps if r.ok else None for r in runs],
                "lat_avg_ms_median": _median([r.lat_avg_ms for r in good]),
                "lat_p95_ms_median": _median([r.lat_p95_ms for r in good]),
                "lat_p99_ms_median": _median([r.lat_p99_ms for r in good]),
                "proxy_cpu_us_median": _median([cpu_per_statement(r, "proxy") for r in good]),
                "cpu_us_median": _median([cpu_per_statement(r) for r in good]),
                "server_statements_median": _median([server_statements_per_statement(r) for r in good]),
                "errors": sum(r.errors for r in runs),
                "failed_runs": len(runs) - len(good),
                "error_codes": codes,
                "cpu_others_pct_max": max((r.cpu["cpu_others_pct"] for r in runs if r.cpu), default=None),
                "cores": {
                    role[len("cores_") :]: statistics.median(r.cpu.get(role, 0.0) for r in runs if r.cpu)
                    for role in sorted({k for r in runs for k in r.cpu if k.startswith("cores_")})
                },
            }
        summary[w.key] = {"title": w.title, "targets": per_target}
    return summary


# ---------------------------------------------------------------------------------------------- report


def _fmt(value: float | None, spec: str = ",.0f") -> str:
    return "n/a" if value is None else format(value, spec)


def _ratio(item: dict[str, Any], a: str, b: str) -> str:
    top, bottom = item["targets"][a]["tps_median"], item["targets"][b]["tps_median"]
    return "n/a" if top is None or not bottom else f"{top / bottom:.2f}"


RATIOS = (("proxy", "direct"), ("shards2", "direct"), ("shards4", "direct"), ("shards2", "proxy"),
          ("shards4", "proxy"))  # fmt: skip
SHORT = {"direct": "direct", "proxy": "proxy", "shards2": "2 shards", "shards4": "4 shards"}


def render_markdown(doc: dict[str, Any], command: str) -> str:
    """The report section (starting with its ``## `` heading)."""
    s, m, summary = doc["settings"], doc["machine"], doc["summary"]
    others = [r["cpu"]["cpu_others_pct"] for r in doc["runs"] if r.get("cpu")]
    lines = [
        f"## {SECTION_TITLE}",
        "",
        f"Command: `{command}` (written by `devstack/bench/sharding_bench.py`; raw results in "
        "`var/bench-sharding/results.json`, sysbench logs in `var/bench-sharding/logs/`).",
        "",
        f"- Date: {m.get('date')} · revision {m.get('revision')}",
        f"- Machine: {m.get('nproc')} CPUs ({m.get('cpu_model')}), {m.get('memory')}, {m.get('kernel')}; load "
        f"average (1/5/15 min) before {m.get('loadavg_before')}, after {m.get('loadavg_after')}; during the runs "
        "other processes took "
        + (
            f"median {statistics.median(others):.0f} % (max {max(others):.0f} %; above 10 % in "
            f"{sum(o > 10 for o in others)} of {len(others)} runs)"
            if others
            else "an unknown share"
        )
        + " of the machine's CPU. Everything below (4 MariaDB servers, 3 proxies, sysbench) ran on these CPUs.",
        f"- MariaDB {m.get('mariadb')} (4 sandbox servers, `devstack/sandbox.py` settings, buffer pool "
        f"{BUFFER_POOL_BYTES // 1024 // 1024} MiB) · {m.get('sysbench')} with `devstack/bench/sharding_shop.lua`, "
        f"text protocol · Python {m.get('python')} · each proxy 1 worker process, uvloop: {m.get('uvloop')}, "
        f"{m.get('native')}",
        f"- Data: the demo's tb_Shop, {s['rows']:,} shops (Shop_ID 1..{s['rows']:,}) in {s['cities']:,} cities "
        f"(City_ID = Shop_ID mod {s['cities']:,} + 1: {s['rows'] // s['cities']} shops a city), in three layouts: "
        "all on server 0 (`shop1`), split by City_ID mod 2 over servers 0-1 (`shop2`), by City_ID mod 4 over "
        "servers 0-3 (`shop4`).",
        "- Targets: **direct** = server 0, `shop1`; **proxy** = a proxy with no sharding config, `shop1` on server "
        "0; **2 shards** / **4 shards** = a proxy whose config shards `shop2.tb_Shop` / `shop4.tb_Shop` by City_ID "
        "mod 2 / 4 (shard group `shops`, shard N on hostgroup 100 + N). Each proxy's hostgroups allow "
        f"{BACKEND_MAX_CONNECTIONS} backend connections per server.",
        f"- {s['rounds']} interleaved round(s) of {s['seconds']} s per run (each round runs every workload on each "
        "of its targets, the targets' order rotating by one each round)"
        + (f", after a {s['warmup_seconds']} s warm-up per target" if s["warmup_seconds"] else "")
        + ". tps (statements per second: one statement per sysbench event) and latencies are medians over the "
        "rounds; p95/p99 come from sysbench's histogram; ratios are ratios of the median tps; errors are failed "
        "statements plus failed runs, summed over the rounds.",
        f"- Statements, `%d` filled in by the script at random: point = `{STATEMENTS['point']}` (a City_ID from "
        f"1 to {s['cities']:,}: one shard); ORDER BY = `{STATEMENTS['orderby']}` (every shard, each returning up to "
        f"10 rows, merged); GROUP BY = `{STATEMENTS['groupby']}` (a run of {s['span']:,} Shop_IDs: every shard, up "
        "to 5 groups each, merged).",
        "- Before the runs, every target answered one statement of each shape, and a COUNT/SUM over the table: "
        + "; ".join(doc["checks"])
        + ".",
        "",
        "| workload | direct tps | proxy tps | 2 shards tps | 4 shards tps | "
        + " | ".join(f"{SHORT[a]}/{SHORT[b]}" for a, b in RATIOS)
        + " | proxy CPU µs/stmt (p/2/4) | errors (d/p/2/4) |",
        "|---|---:|---:|---:|---:|" + "---:|" * len(RATIOS) + "---|---|",
    ]
    main = [key for key, item in summary.items() if tuple(item["targets"]) == MAIN_TARGETS]
    for key in main:
        item = summary[key]
        t = item["targets"]
        lines.append(
            f"| {item['title']} | "
            + " | ".join(_fmt(t[k]["tps_median"]) for k in MAIN_TARGETS)
            + " | "
            + " | ".join(_ratio(item, a, b) for a, b in RATIOS)
            + " | "
            + "/".join(_fmt(t[k]["proxy_cpu_us_median"]) for k in MAIN_TARGETS[1:])
            + " | "
            + "/".join(str(t[k]["errors"]) for k in MAIN_TARGETS)
            + " |"
        )
    if "unsharded" in summary:
        item = summary["unsharded"]
        t = item["targets"]
        lines += [
            "",
            f"The cost on unsharded traffic ({item['title']}, `shop1.tb_Shop` on server 0 through the plain proxy "
            "and through the 4-shard proxy, whose config shards `shop4.tb_Shop`):",
            "",
            "| workload | no sharding config tps | sharded config tps | sharded/none | proxy CPU µs/stmt "
            "(none/sharded) | errors (none/sharded) |",
            "|---|---:|---:|---:|---|---|",
            f"| {item['title']} | {_fmt(t['proxy']['tps_median'])} | {_fmt(t['sharded_config']['tps_median'])} | "
            f"{_ratio(item, 'sharded_config', 'proxy')} | {_fmt(t['proxy']['proxy_cpu_us_median'])}/"
            f"{_fmt(t['sharded_config']['proxy_cpu_us_median'])} | "
            f"{t['proxy']['errors']}/{t['sharded_config']['errors']} |",
        ]
    for key, item in summary.items():
        lines += [
            "",
            f"### {item['title']}",
            "",
            "| target | tps (median) | tps per round | latency avg ms | p95 ms | p99 ms | errors "
            "| proxy CPU µs/stmt | all CPU µs/stmt | server stmts/stmt | CPUs used (median) |",
            "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---|",
        ]
        for target, t in item["targets"].items():
            rounds = ", ".join("failed" if v is None else f"{v:,.0f}" for v in t["tps_rounds"])
            cores = ", ".join(
                f"{role} {n:.2f}" for role, n in sorted(t["cores"].items(), key=lambda x: -x[1]) if n >= 0.05
            )
            lines.append(
                f"| {TARGETS[target].label} | {_fmt(t['tps_median'])} | {rounds} | "
                f"{_fmt(t['lat_avg_ms_median'], '.2f')} | {_fmt(t['lat_p95_ms_median'], '.2f')} | "
                f"{_fmt(t['lat_p99_ms_median'], '.2f')} | {t['errors']} | "
                f"{_fmt(t['proxy_cpu_us_median'], '.0f') if TARGETS[target].proxy else '—'} | "
                f"{_fmt(t['cpu_us_median'], '.0f')} | {_fmt(t['server_statements_median'], '.2f')} | "
                f"{cores or 'n/a'} |"
            )
        notes = []
        for target, t in item["targets"].items():
            if t["error_codes"]:
                named = ", ".join(f"{label} x{n}" for label, n in sorted(t["error_codes"].items()))
                notes.append(f"- {TARGETS[target].label}: errors sysbench named: {named}")
        for run in doc["runs"]:
            if run["workload"] == key and not run["ok"]:
                detail = "; ".join(run["fatal"][:3]) or "no FATAL line"
                notes.append(
                    f"- round {run['round']} {TARGETS[run['target']].label} FAILED (exit {run['exit_code']}): "
                    f"{detail} (`{run['log']}`)"
                )
        if notes:
            lines += ["", *notes]
    lines += [
        "",
        "CPUs used: the average number of CPUs each of our processes took during the run (`sysbench`; `serverN`, "
        "the MariaDB servers; `proxy-plain`, `proxy-shards2`, `proxy-shards4`, the proxies), out of "
        f"{m.get('nproc')}. CPU µs/stmt: the CPU time (user + system, `/proc`) the proxies (proxy) or all of our "
        "processes (all: servers, proxies, sysbench) spent during the run, divided by the statements it completed; "
        "unlike tps it does not depend on how busy the shared machine was. Server stmts/stmt: the statements the "
        "MariaDB servers ran (`Questions`, summed over the servers) per statement the clients completed.",
    ]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------- the machine


def _first_line(cmd: list[str]) -> str:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    text = (out.stdout or out.stderr).strip()
    return text.splitlines()[0] if text else "unknown"


def loadavg() -> str:
    """The 1, 5 and 15 minute load averages."""
    return " / ".join(f"{x:.2f}" for x in os.getloadavg())


def machine_info(server: SandboxServer, proxy: ProxyProcess) -> dict[str, Any]:
    """CPUs, CPU model, memory, kernel, versions, the revision, and whether the proxy runs on uvloop and compiled."""
    cpu_model = memory = "unknown"
    with contextlib.suppress(OSError, ValueError, IndexError):
        cpu_model = next(
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        )
    with contextlib.suppress(OSError, ValueError, IndexError, StopIteration):
        kib = next(int(line.split()[1]) for line in Path("/proc/meminfo").read_text().splitlines()
                   if line.startswith("MemTotal:"))  # fmt: skip
        memory = f"{kib / 1024 / 1024:.1f} GiB RAM"
    with server.connect() as conn, conn.cursor() as cur:
        cur.execute("SELECT VERSION()")
        mariadb = cur.fetchone()[0]
    assert proxy.proc is not None
    uvloop = process_uses_uvloop(proxy.proc.pid)
    stats = proxy.admin("GET", "/stats")
    native = stats.get("native") if isinstance(stats, dict) else None
    compiled = f"{len(native)} modules compiled with mypyc" if native else "plain Python (no fresh native build)"
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
        "python": platform.python_version(),
        "uvloop": {True: "yes", False: "no", None: "unknown"}[uvloop],
        "native": compiled,
        "revision": revision + (" with uncommitted changes" if dirty else ""),
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
    """500 client connections, and the proxies' and servers' ends of them, need more descriptors than 1024."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = 16384 if hard == resource.RLIM_INFINITY else min(hard, 16384)
    if soft < wanted:
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))


def parse_args(argv: list[str] | None) -> tuple[Settings, Path]:
    """The command line -> (settings, report path)."""
    parser = argparse.ArgumentParser(prog="python -m devstack.bench.sharding_bench", description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "benchmarks.md", help="the Markdown report")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (default 3)")
    parser.add_argument("--time", type=int, dest="seconds", default=5, help="seconds per sysbench run (default 5)")
    parser.add_argument("--warmup", type=int, default=2, help="seconds of warm-up per target (default 2; 0: none)")
    parser.add_argument("--rows", type=int, default=200_000, help="shops in the table (default 200,000)")
    parser.add_argument("--cities", type=int, default=100_000, help="distinct City_IDs (default 100,000)")
    parser.add_argument("--span", type=int, default=1000, help="Shop_IDs a GROUP BY statement covers (default 1,000)")
    parser.add_argument("--connections", type=int, default=50, help="connections of most workloads (default 50)")
    parser.add_argument("--many-connections", type=int, default=500, help="connections of the big run (default 500)")
    args = parser.parse_args(argv)
    if args.rows < max(args.span, 10) or args.cities < 4 or args.rounds < 1 or args.seconds < 1:
        parser.error("need --rows >= --span and 10, --cities >= 4, --rounds and --time >= 1")
    settings = Settings(
        rounds=args.rounds,
        seconds=args.seconds,
        warmup_seconds=args.warmup,
        rows=args.rows,
        cities=args.cities,
        span=args.span,
        connections=args.connections,
        many_connections=args.many_connections,
    )
    out = args.out if args.out.is_absolute() else Path.cwd() / args.out
    return settings, out


def main(argv: list[str] | None = None) -> int:
    """Set up, run the rounds, write the report; always tear down."""
    settings, out = parse_args(argv)
    argv_text = " ".join(sys.argv[1:] if argv is None else argv)
    command = f"make bench-sharding BENCH_ARGS='{argv_text}'" if argv_text else "make bench-sharding"
    _raise_fd_limit()
    signal.signal(signal.SIGINT, signal.default_int_handler)  # even when started with SIGINT ignored (`cmd &`)
    signal.signal(signal.SIGTERM, _raise_interrupt)
    runs = sum(len(w.targets) for w in settings.workloads())
    estimate = settings.rounds * runs * (settings.seconds + 0.5) + len(TARGETS) * (settings.warmup_seconds + 1.5) + 20
    print(f"sharding bench: about {estimate / 60:.0f} min; results in {BENCH_DIR}, report in {out}", flush=True)
    loadavg_before = loadavg()
    bench = Bench(settings)
    status = 0
    try:
        bench.setup()
        bench.machine["loadavg_before"] = loadavg_before
        bench.run()
        bench.machine["loadavg_after"] = loadavg()
        bench.save()
        write_report(out, render_markdown(bench.document(), command), SECTION_TITLE)
        print(f"\nwrote {out} and {BENCH_DIR / 'results.json'}", flush=True)
        failed = [r for r in bench.results if not r.ok]
        if failed:
            print(f"{len(failed)} run(s) failed; see the logs named in the report", file=sys.stderr)
            status = 1
    except KeyboardInterrupt:
        print("\ninterrupted; stopping everything", file=sys.stderr)
        status = 130
    except Exception as exc:
        print(f"\nbench failed: {exc!r}", file=sys.stderr)
        status = 1
    finally:
        with _cleanup_shielded():
            if bench.results:
                bench.machine.setdefault("loadavg_after", loadavg())
                with contextlib.suppress(Exception):
                    bench.save()
            bench.teardown()
    return status


if __name__ == "__main__":
    sys.exit(main())
