"""The result form every bench run produces, whichever driver ran it (the engine or sysbench): per step (one target
at one connection count in one round) the per-interval series, the totals, the latency percentiles and the
per-statement report; the progress lines and the final report as text; JSON in and out.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from typing import Any

FORMAT = 1
TOOL = "proxyfleet-bench"


@dataclass
class Latency:
    """Latency in milliseconds (None where the driver does not say)."""

    min: float | None = None
    avg: float | None = None
    p50: float | None = None
    p95: float | None = None
    p99: float | None = None
    max: float | None = None


@dataclass
class StatementResult:
    """One statement of the transaction over a step, as mydbtest reports it."""

    name: str
    sql: str
    executions: int = 0
    failures: int = 0
    rows: int = 0
    latency: Latency = field(default_factory=Latency)


@dataclass
class IntervalPoint:
    """One progress interval of a step: ``t`` is the seconds since the measured part began (at the interval's end)."""

    t: float
    tps: float
    qps: float
    lat_avg_ms: float | None
    lat_p95_ms: float | None
    errors: int = 0
    err_per_s: float = 0.0
    lag_ms: float | None = None


@dataclass
class StepResult:
    """One target at one connection count in one round."""

    index: int
    round: int
    target: str
    connections: int
    driver: str = "engine"
    status: str = "done"  # done, failed, cancelled
    error: str = ""
    started_at: float = 0.0
    duration_s: float = 0.0
    connections_opened: int = 0
    transactions: int = 0
    failed_transactions: int = 0
    queries: int = 0
    tps: float = 0.0
    qps: float = 0.0
    latency: Latency = field(default_factory=Latency)
    errors: dict[str, dict[str, Any]] = field(default_factory=dict)  # code -> {"count", "message"}
    statements: list[StatementResult] = field(default_factory=list)
    intervals: list[IntervalPoint] = field(default_factory=list)

    @property
    def error_count(self) -> int:
        """Errors of every code."""
        return sum(int(e["count"]) for e in self.errors.values())


@dataclass
class RunResult:
    """A whole run: what ran, against what, with which settings, and its steps."""

    workload: dict[str, Any]
    targets: list[dict[str, Any]]
    settings: dict[str, Any]
    status: str = "running"  # running, done, failed, cancelled
    error: str = ""
    started_at: float = 0.0
    finished_at: float = 0.0
    notes: list[str] = field(default_factory=list)
    steps: list[StepResult] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """The JSON document (``tool`` and ``format`` first)."""
        return {"tool": TOOL, "format": FORMAT, **asdict(self)}

    def unfinished(self) -> str:
        """A line saying the run, or which of its steps, did not finish ("" when everything did): a report's
        warning that its table lacks figures."""
        failed = [s for s in self.steps if s.status != "done"]
        if self.status == "done" and not failed:
            return ""
        undone = ", ".join(f"{s.target}@{s.connections} {s.status}" for s in failed) or "none"
        return f"Run {self.status}{': ' + self.error if self.error else ''}; steps not done: {undone}"

    def to_json(self) -> str:
        """The JSON document as text."""
        return json.dumps(self.to_dict(), indent=2)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunResult:
        """A result from its JSON document; ValueError when it is not one."""
        if data.get("tool") != TOOL:
            raise ValueError(f"not a {TOOL} result (tool: {data.get('tool')!r})")
        names = {f.name for f in fields(cls)}
        run = cls(**{k: v for k, v in data.items() if k in names and k != "steps"})
        run.steps = [step_from_dict(step) for step in data.get("steps", [])]
        return run


def step_from_dict(data: dict[str, Any]) -> StepResult:
    """A step from its JSON form."""
    step = StepResult(**{k: v for k, v in data.items() if k not in ("latency", "statements", "intervals")})
    step.latency = Latency(**data.get("latency", {}))
    step.statements = [
        StatementResult(**{**s, "latency": Latency(**s.get("latency", {}))}) for s in data.get("statements", [])
    ]
    step.intervals = [IntervalPoint(**p) for p in data.get("intervals", [])]
    return step


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def progress_line(step: StepResult, point: IntervalPoint) -> str:
    """A sysbench-like progress line: time, target, connections, tps, qps, latency avg and p95, errors/s."""
    line = (
        f"[ {point.t:g}s ] {step.target} conns: {step.connections} tps: {point.tps:.2f} qps: {point.qps:.2f} "
        f"lat (ms) avg: {_ms(point.lat_avg_ms)} p95: {_ms(point.lat_p95_ms)} err/s: {point.err_per_s:.2f}"
    )
    return line + (f" lag (ms): {point.lag_ms:.2f}" if point.lag_ms is not None else "")


def step_report(step: StepResult) -> str:
    """The final report of a step: totals, then mydbtest's per-statement lines with latency percentiles."""
    lat = step.latency
    lines = [
        f"== step {step.index + 1}: {step.target}, {step.connections} connections, round {step.round} "
        f"({step.driver}, {step.status}{': ' + step.error if step.error else ''})",
        f"   transactions: {step.transactions} ({step.tps:.2f}/s), failed {step.failed_transactions}; "
        f"queries: {step.queries} ({step.qps:.2f}/s); {step.duration_s:.2f} s; "
        f"{step.connections_opened}/{step.connections} connections opened",
        f"   latency (ms): min {_ms(lat.min)} avg {_ms(lat.avg)} p50 {_ms(lat.p50)} p95 {_ms(lat.p95)} "
        f"p99 {_ms(lat.p99)} max {_ms(lat.max)}",
    ]
    for code, error in sorted(step.errors.items()):
        lines.append(f"   error {code} x{error['count']}: {error['message']}")
    if step.statements:
        lines.append(
            f"   {'statement':<10} {'executions':>10} {'failures':>8} {'rows':>10} {'avg ms':>8} {'p50':>8} "
            f"{'p95':>8} {'p99':>8} {'max':>8}  sql"
        )
        for s in step.statements:
            sql = " ".join(s.sql.split())
            lines.append(
                f"   {s.name:<10} {s.executions:>10} {s.failures:>8} {s.rows:>10} {_ms(s.latency.avg):>8} "
                f"{_ms(s.latency.p50):>8} {_ms(s.latency.p95):>8} {_ms(s.latency.p99):>8} {_ms(s.latency.max):>8}  "
                f"{sql[:70]}{'...' if len(sql) > 70 else ''}"
            )
    return "\n".join(lines)


def run_report(run: RunResult, steps: bool = True) -> str:
    """Every step's report (unless ``steps`` is false: progress printed them already), then the run's status, its
    notes and a line per step (tps by target and connections)."""
    lines = [step_report(step) for step in run.steps] if steps else []
    lines.append(f"== run {run.status}{': ' + run.error if run.error else ''}: {run.workload.get('name')}")
    lines.extend(f"   {note}" for note in run.notes)
    for step in run.steps:
        lines.append(
            f"   {step.target:<16} {step.connections:>5} conns  round {step.round}  tps {step.tps:>10.2f}  "
            f"qps {step.qps:>10.2f}  p95 {_ms(step.latency.p95):>8} ms  errors {step.error_count}"
        )
    return "\n".join(lines)


def sweep_table(run: RunResult) -> list[dict[str, Any]]:
    """tps by connection count and target (the mean over rounds), with each target's ratio to the first target:
    ``[{"connections": n, "tps": {target: tps}, "p95": {target: ms}, "ratio": {target: tps / first's}}]``."""
    order = [t["name"] for t in run.targets]
    rows: dict[int, dict[str, list[StepResult]]] = {}
    for step in run.steps:
        if step.status == "done":
            rows.setdefault(step.connections, {}).setdefault(step.target, []).append(step)
    table = []
    for connections in sorted(rows):
        by_target = rows[connections]
        tps = {t: sum(s.tps for s in steps) / len(steps) for t, steps in by_target.items()}
        p95 = {t: _mean([s.latency.p95 for s in steps if s.latency.p95 is not None]) for t, steps in by_target.items()}
        base = tps.get(order[0]) if order else None
        ratio = {t: (v / base if base else None) for t, v in tps.items()}
        ordered = [t for t in order if t in tps]
        table.append(
            {
                "connections": connections,
                "tps": {t: tps[t] for t in ordered},
                "p95": {t: p95[t] for t in ordered},
                "ratio": {t: ratio[t] for t in ordered},
            }
        )
    return table


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None
