"""sysbench as a driver: its OLTP scripts run step by step like the engine's, its output parsed into the same result
form (intervals from ``--report-interval``, percentiles from ``--histogram``, totals from its final report).

sysbench 1.0 has no ``--warmup-time``: a warm-up is a separate, unrecorded run before each step. ``prepare`` creates
and fills ``sbtest1..N`` through the first target (refused when one exists already: it is not ours to drop), and
``cleanup`` drops them at the end.
"""

from __future__ import annotations

import contextlib
import re
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from fleet.bench.engine.results import IntervalPoint, Latency, RunResult, StatementResult, StepResult
from fleet.bench.engine.runner import Listener, PlanBase, PlanError
from fleet.bench.engine.targets import Target

#: sysbench's bundled OLTP scripts.
SCRIPTS = (
    "oltp_point_select",
    "oltp_read_only",
    "oltp_read_write",
    "oltp_write_only",
    "oltp_insert",
    "oltp_update_index",
    "oltp_update_non_index",
    "oltp_delete",
)
#: Seconds a sysbench step may run beyond its time before it is killed.
GRACE_S = 30

_PATTERNS: dict[str, tuple[str, type]] = {
    "transactions": (r"^\s*transactions:\s+(\d+)\s+\(([\d.]+) per sec\.\)", int),
    "queries": (r"^\s*queries:\s+(\d+)\s+\(([\d.]+) per sec\.\)", int),
    "ignored_errors": (r"^\s*ignored errors:\s+(\d+)", int),
    "reconnects": (r"^\s*reconnects:\s+(\d+)", int),
    "total_time_s": (r"^\s*total time:\s+([\d.]+)s", float),
    "lat_min_ms": (r"^\s*min:\s+([\d.]+)", float),
    "lat_avg_ms": (r"^\s*avg:\s+([\d.]+)", float),
    "lat_max_ms": (r"^\s*max:\s+([\d.]+)", float),
    "lat_p95_ms": (r"^\s*95th percentile:\s+([\d.]+)", float),
    "read": (r"^\s*read:\s+(\d+)", int),
    "write": (r"^\s*write:\s+(\d+)", int),
    "other": (r"^\s*other:\s+(\d+)", int),
}
_INTERVAL = re.compile(
    r"^\[\s*([\d.]+)s\s*\]\s+thds:\s+\d+\s+tps:\s+([\d.]+)\s+qps:\s+([\d.]+).*?"
    r"lat \(ms,\d+%\):\s+([\d.]+)\s+err/s:?\s+([\d.]+)"
)
_HISTOGRAM_ROW = re.compile(r"^\s*([\d.]+)\s+\|[*\s]*\s(\d+)\s*$")


def parse_sysbench(text: str) -> dict[str, Any]:
    """The numbers of a sysbench OLTP report: counts, rates, latency (ms), and its FATAL/error lines."""
    out: dict[str, Any] = {}
    for key, (pattern, kind) in _PATTERNS.items():
        match = re.search(pattern, text, re.MULTILINE)
        if match is None:
            continue
        out[key] = kind(match.group(1))
        if key == "transactions":
            out["tps"] = float(match.group(2))
        elif key == "queries":
            out["qps"] = float(match.group(2))
    out["fatal"] = [line.strip() for line in text.splitlines() if "FATAL" in line or "ALERT" in line][:20]
    codes: dict[str, int] = {}
    last: str | None = None  # the label of the previous line when it named an error
    for line in text.splitlines():
        repeated = re.match(r"\(last message repeated (\d+) times\)", line.strip())
        if repeated:
            if last is not None:
                codes[last] += int(repeated.group(1))
            continue
        match = re.search(r"(?:Ignoring error|error) (\d+)[:,]? ?\(?([^,;\n()]*)", line)
        last = None
        if match:
            last = f"{match.group(1)} {match.group(2).strip()[:60]}".strip()
            codes[last] = codes.get(last, 0) + 1
    out["error_codes"] = codes
    return out


def parse_interval(line: str) -> IntervalPoint | None:
    """A ``[ 10s ] thds: ... tps: ... qps: ... lat (ms,95%): ... err/s ...`` line as a progress point."""
    match = _INTERVAL.match(line.strip())
    if match is None:
        return None
    return IntervalPoint(
        t=float(match.group(1)),
        tps=float(match.group(2)),
        qps=float(match.group(3)),
        lat_avg_ms=None,
        lat_p95_ms=float(match.group(4)),
        err_per_s=float(match.group(5)),
    )


def parse_histogram(text: str) -> list[tuple[float, int]]:
    """``--histogram``'s (latency ms, count) rows."""
    start = text.find("Latency histogram")
    if start < 0:
        return []
    rows = []
    for line in text[start:].splitlines()[2:]:
        match = _HISTOGRAM_ROW.match(line)
        if match is None:
            break
        rows.append((float(match.group(1)), int(match.group(2))))
    return rows


def _percentile(rows: list[tuple[float, int]], percent: float) -> float | None:
    total = sum(count for _, count in rows)
    if not total:
        return None
    wanted = total * percent / 100
    seen = 0
    for value, count in rows:
        seen += count
        if seen >= wanted:
            return value
    return rows[-1][0]


def fill_step(step: StepResult, text: str) -> None:
    """Put a sysbench run's report (its whole output) into ``step``: totals, latency, errors, the query mix."""
    report = parse_sysbench(text)
    histogram = parse_histogram(text)
    step.driver = "sysbench"
    step.transactions = report.get("transactions", 0)
    step.queries = report.get("queries", 0)
    step.tps = report.get("tps", 0.0)
    step.qps = report.get("qps", 0.0)
    step.duration_s = report.get("total_time_s", 0.0)
    step.failed_transactions = report.get("ignored_errors", 0)
    step.latency = Latency(
        min=report.get("lat_min_ms"),
        avg=report.get("lat_avg_ms"),
        p50=_percentile(histogram, 50),
        p95=report.get("lat_p95_ms"),
        p99=_percentile(histogram, 99),
        max=report.get("lat_max_ms"),
    )
    for label, count in report["error_codes"].items():
        code, _, message = label.partition(" ")
        entry = step.errors.setdefault(code, {"count": 0, "message": message})
        entry["count"] += count
    step.statements = [
        StatementResult(name=kind, sql=f"sysbench {kind} queries", executions=report[kind])
        for kind in ("read", "write", "other")
        if report.get(kind)
    ]
    if "qps" not in report:
        step.status = "failed"
        step.error = "; ".join(report["fatal"][:3]) or "sysbench printed no report"


def connection_args(target: Target) -> list[str]:
    """sysbench's MySQL driver options for ``target``."""
    args = ["--db-driver=mysql", f"--mysql-host={target.host}", f"--mysql-port={target.port}"]
    args += [f"--mysql-user={target.user}", f"--mysql-password={target.password}"]
    return args + ([f"--mysql-db={target.database}"] if target.database else [])


@dataclass(kw_only=True)
class SysbenchPlan(PlanBase):
    """A run of one of sysbench's OLTP scripts over the sweep."""

    script: str
    tables: int = 1
    table_size: int = 10_000
    options: list[str] = field(default_factory=list)  # more sysbench options, as in --db-ps-mode=disable

    def check(self) -> None:
        """PlanError when sysbench is missing, the script unknown, or ``check_common`` refuses the plan."""
        if not self.workload:
            self.workload = f"sysbench {self.script}"
        if shutil.which("sysbench") is None:
            raise PlanError("sysbench is not installed (apt-get install sysbench)")
        if self.script not in SCRIPTS:
            raise PlanError(f"unknown sysbench script {self.script!r} (one of {', '.join(SCRIPTS)})")
        if self.tables < 1 or self.table_size < 1:
            raise PlanError("sysbench tables and table size must be 1 or more")
        for option in self.options:
            if not re.fullmatch(r"--[a-z][a-z0-9-]*=[^\s]*", option) or option.startswith("--mysql-"):
                raise PlanError(f"sysbench option {option!r}: expected --NAME=VALUE (not a connection option)")
        self.check_common(f"sysbench prepare creates and fills {self.tables} sbtest table(s)")

    def describe(self) -> dict[str, Any]:
        """The workload, for the result."""
        return {"name": self.workload, "driver": "sysbench", "script": self.script, "writes": True}

    def settings(self) -> dict[str, Any]:
        """The plan's numbers, for the result."""
        extra = {"tables": self.tables, "table_size": self.table_size, "options": self.options}
        return {**super().settings(), **extra}


class SysbenchRunner:
    """Runs a ``SysbenchPlan``: prepare, a sysbench process per step (after its warm-up run), cleanup."""

    def __init__(self, plan: SysbenchPlan, listener: Listener | None = None) -> None:
        self.plan = plan
        self.listener = listener or Listener()
        self.cancelled = False
        self._proc: subprocess.Popen[str] | None = None
        self._lock = threading.Lock()

    def cancel(self) -> None:
        """Stop the running sysbench and skip the remaining steps; the tables are still dropped."""
        with self._lock:
            self.cancelled = True
            proc = self._proc
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)

    def run(self) -> RunResult:
        """Check the plan, run it, return its result."""
        plan = self.plan
        plan.check()
        result = RunResult(
            workload=plan.describe(),
            targets=[t.describe() for t in plan.targets],
            settings=plan.settings(),
            started_at=time.time(),
        )
        deadline = result.started_at + plan.time_limit
        prepared = False
        try:
            self._prepare_check()
            self._sysbench_setup("prepare")
            prepared = True
            result.notes.append(f"sysbench prepare created {self.plan.tables} sbtest table(s)")
            for index, (round_no, target, connections) in enumerate(plan.steps()):
                if self.cancelled:
                    break
                if time.time() >= deadline:
                    raise TimeoutError(f"the run reached its time limit of {plan.time_limit:.0f} s")
                result.steps.append(self._step(index, round_no, target, connections, deadline))
            result.status = "cancelled" if self.cancelled else "done"
        except (PlanError, RuntimeError, TimeoutError, OSError) as exc:
            result.status, result.error = "failed", str(exc)
        finally:
            if prepared:
                try:
                    self._sysbench_setup("cleanup")
                    result.notes.append("sysbench cleanup dropped the sbtest tables")
                except (RuntimeError, OSError) as exc:
                    result.notes.append(f"sysbench cleanup failed: {exc}")
            result.finished_at = time.time()
        return result

    def _common(self) -> list[str]:
        return [f"--tables={self.plan.tables}", f"--table-size={self.plan.table_size}", *self.plan.options]

    def _prepare_check(self) -> None:
        """PlanError when a table sysbench would create exists already."""
        import pymysql

        target = self.plan.targets[0]
        conn = pymysql.connect(
            host=target.host,
            port=target.port,
            user=target.user,
            password=target.password,
            database=target.database or None,
            connect_timeout=10,
        )
        with conn, conn.cursor() as cur:
            names = [f"sbtest{i}" for i in range(1, self.plan.tables + 1)]
            cur.execute(
                "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME IN "
                f"({', '.join(['%s'] * len(names))})",
                names,
            )
            found = [row[0] for row in cur.fetchall()]
        if found:
            raise PlanError(f"table {found[0]} exists in {target.name}'s database: sysbench would use and drop it")

    def _sysbench_setup(self, command: str) -> None:
        target = self.plan.targets[0]
        argv = ["sysbench", self.plan.script, *connection_args(target), *self._common(), command]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=3600)
        if done.returncode != 0:
            tail = (done.stdout + done.stderr).strip().splitlines()[-3:]
            raise RuntimeError(f"sysbench {command} failed ({done.returncode}): {' / '.join(tail)}")

    def _argv(self, target: Target, connections: int, seconds: float, events: int | None) -> list[str]:
        plan = self.plan
        argv = ["sysbench", plan.script, *connection_args(target), *self._common(), f"--threads={connections}"]
        argv += [f"--time={max(1, round(seconds))}", f"--report-interval={max(1, round(plan.interval))}"]
        argv += ["--histogram=on", "--verbosity=4"]
        if events is not None:
            argv.append(f"--events={events}")
        if plan.rate:
            argv.append(f"--rate={plan.rate:g}")
        return [*argv, "run"]

    def _step(self, index: int, round_no: int, target: Target, connections: int, deadline: float) -> StepResult:
        plan = self.plan
        step = StepResult(index=index, round=round_no, target=target.name, connections=connections, driver="sysbench")
        self.listener.step_started(step)
        if plan.warmup > 0:
            for _ in self._lines(self._argv(target, connections, plan.warmup, None), deadline):
                pass
        step.started_at = time.time()
        seconds = min(plan.step_seconds, max(1.0, deadline - time.time()))
        lines: list[str] = []
        for line in self._lines(self._argv(target, connections, seconds, plan.events), deadline):
            lines.append(line)
            point = parse_interval(line)
            if point is not None:
                step.intervals.append(point)
                self.listener.interval(step, point)
        fill_step(step, "".join(lines))
        step.connections_opened = connections if step.status == "done" else 0
        if self.cancelled:
            step.status = "cancelled"
        self.listener.step_finished(step)
        return step

    def _lines(self, argv: list[str], deadline: float) -> Iterator[str]:
        """sysbench's output lines as they come; killed at the deadline (plus grace) or by ``cancel``."""
        if self.cancelled:
            return
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        with self._lock:
            self._proc = proc
        timer = threading.Timer(max(1.0, deadline - time.time()) + GRACE_S, proc.kill)
        timer.start()
        try:
            assert proc.stdout is not None
            yield from proc.stdout
        finally:
            timer.cancel()
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(GRACE_S)
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            with self._lock:
                self._proc = None
