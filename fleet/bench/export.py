"""A run's results for export and charts: the step summary and the per-interval series as CSV, the result as JSON,
and the chart series the UI draws (over time, against connections, against the first target, across versions)."""

from __future__ import annotations

import csv
import io
from typing import Any

from fleet.bench.models import BenchJob, BenchRun, RunPoint, RunStep

STEP_COLUMNS = (
    "index",
    "round",
    "target",
    "connections",
    "status",
    "duration_s",
    "transactions",
    "failed_transactions",
    "queries",
    "errors",
    "tps",
    "qps",
    "lat_min_ms",
    "lat_avg_ms",
    "lat_p50_ms",
    "lat_p95_ms",
    "lat_p99_ms",
    "lat_max_ms",
)
POINT_COLUMNS = ("step", "target", "connections", "t", "tps", "qps", "lat_avg_ms", "lat_p95_ms", "errors", "lag_ms")
#: How many of a job's latest finished runs the across-versions chart shows.
HISTORY_RUNS = 50


def _csv(columns: tuple[str, ...], rows: list[dict[str, Any]]) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(columns), extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue()


def steps_csv(run: BenchRun) -> str:
    """A line per step: its totals and latency percentiles."""
    return _csv(STEP_COLUMNS, list(run.steps.order_by("index").values(*STEP_COLUMNS)))


def series_csv(run: BenchRun) -> str:
    """A line per progress interval of every step."""
    return _csv(POINT_COLUMNS, list(run.points.order_by("step", "t").values(*POINT_COLUMNS)))


def result_document(run: BenchRun) -> dict[str, Any]:
    """The run as JSON: what ran, where, the config version, and the engine's result (or what is known so far)."""
    return {
        "run": run.pk,
        "job": run.job.name,
        "status": run.status,
        "trigger": run.trigger,
        "created_at": run.created_at.isoformat(),
        "started_at": run.started_at.isoformat() if run.started_at else None,
        "finished_at": run.finished_at.isoformat() if run.finished_at else None,
        "cluster": run.cluster.name if run.cluster else None,
        "config_version": run.config_version,
        "config_note": run.config_note,
        "error": run.error,
        "result": run.result,
        "steps": list(run.steps.order_by("index").values(*STEP_COLUMNS, "statements", "error_codes")),
    }


def timeline(run: BenchRun, after_id: int = 0) -> dict[str, Any]:
    """tps and p95 latency over time, a series per step: ``{"series": [{"step", "label", "target", "points":
    [[t, tps, p95], ...]}], "last": id}``; only points after ``after_id`` when given (live polling)."""
    series: dict[int, dict[str, Any]] = {}
    last = after_id
    points = RunPoint.objects.filter(run=run, pk__gt=after_id).order_by("step", "t")
    for point in points.values("id", "step", "target", "connections", "t", "tps", "lat_p95_ms"):
        entry = series.setdefault(
            point["step"],
            {
                "step": point["step"],
                "target": point["target"],
                "label": f"{point['target']} · {point['connections']} conns",
                "points": [],
            },
        )
        entry["points"].append([point["t"], point["tps"], point["lat_p95_ms"]])
        last = max(last, point["id"])
    return {"series": list(series.values()), "last": last}


def sweep(run: BenchRun) -> dict[str, Any]:
    """tps and p95 against connections, a series per target (the mean over rounds), and each target's tps over
    the first target's at each count: ``{"connections": [...], "targets": [{"target", "tps": [...], "p95": [...],
    "ratio": [...]}]}``."""
    order = [t["name"] for t in run.targets] or sorted(set(run.steps.values_list("target", flat=True)))
    done = run.steps.filter(status="done")
    counts = sorted(set(done.values_list("connections", flat=True)))
    cells: dict[tuple[str, int], list[RunStep]] = {}
    for step in done:
        cells.setdefault((step.target, step.connections), []).append(step)

    def mean(target: str, connections: int, attribute: str) -> float | None:
        values = [getattr(s, attribute) for s in cells.get((target, connections), [])]
        values = [v for v in values if v is not None]
        return round(sum(values) / len(values), 3) if values else None

    base = order[0] if order else ""
    targets = []
    for target in order:
        tps = [mean(target, c, "tps") for c in counts]
        base_tps = [mean(base, c, "tps") for c in counts]
        targets.append(
            {
                "target": target,
                "tps": tps,
                "p95": [mean(target, c, "lat_p95_ms") for c in counts],
                "ratio": [round(t / b, 3) if t is not None and b else None for t, b in zip(tps, base_tps, strict=True)],
            }
        )
    return {"connections": counts, "baseline": base, "targets": targets}


def across_versions(job: BenchJob) -> dict[str, Any]:
    """The job's latest finished runs in time order, each target's mean tps over the run's steps, with the config
    version each run went against: ``{"runs": [{"run", "at", "version"}], "targets": [{"target", "tps": [...]}]}``."""
    runs = list(
        job.runs.filter(status=BenchRun.Status.DONE).order_by("-finished_at")[:HISTORY_RUNS].prefetch_related("steps")
    )
    runs.reverse()
    names: list[str] = []
    for run in runs:
        for target in run.targets:
            if target["name"] not in names:
                names.append(target["name"])
    series = []
    for name in names:
        values = []
        for run in runs:
            tps = [s.tps for s in run.steps.all() if s.target == name and s.status == "done"]
            values.append(round(sum(tps) / len(tps), 2) if tps else None)
        series.append({"target": name, "tps": values})
    return {
        "runs": [
            {"run": r.pk, "at": r.finished_at.isoformat() if r.finished_at else None, "version": r.config_version}
            for r in runs
        ],
        "targets": series,
    }
