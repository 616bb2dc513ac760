"""PNG charts of a run's result (matplotlib, drawn off-screen): tps and latency over time, tps against connections,
and each target's throughput against the first target's."""

from __future__ import annotations

from pathlib import Path

from fleet.bench.engine.results import RunResult, sweep_table

CHARTS = ("timeline", "sweep", "overhead")


def _pyplot():  # type: ignore[no-untyped-def]
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def draw(run: RunResult, chart: str, path: Path, title: str = "") -> Path:
    """Draw ``chart`` (one of ``CHARTS``) of ``run`` into the PNG ``path``."""
    if chart not in CHARTS:
        raise ValueError(f"unknown chart {chart!r} (one of {', '.join(CHARTS)})")
    plt = _pyplot()
    title = title or f"{run.workload.get('name')}"
    if chart == "timeline":
        figure, (tps_axis, lat_axis) = plt.subplots(2, 1, figsize=(9, 6), sharex=True)
        offset = 0.0
        for target in [t["name"] for t in run.targets]:
            offset = 0.0
            xs: list[float] = []
            tps: list[float] = []
            p95: list[float | None] = []
            for step in run.steps:
                if step.target == target:
                    xs += [offset + p.t for p in step.intervals]
                    tps += [p.tps for p in step.intervals]
                    p95 += [p.lat_p95_ms for p in step.intervals]
                offset += max((p.t for p in step.intervals), default=0.0) if step.target == target else 0.0
            tps_axis.plot(xs, tps, label=target, linewidth=1.2)
            lat_axis.plot(xs, [v if v is not None else float("nan") for v in p95], label=target, linewidth=1.2)
        tps_axis.set_ylabel("transactions/s")
        lat_axis.set_ylabel("latency p95 (ms)")
        lat_axis.set_xlabel("seconds measured (steps of each target one after another)")
        tps_axis.legend()
        tps_axis.set_title(title)
        tps_axis.set_ylim(bottom=0)
        lat_axis.set_ylim(bottom=0)
    else:
        table = sweep_table(run)
        figure, axis = plt.subplots(figsize=(9, 4.8))
        targets = [t["name"] for t in run.targets]
        xs = [row["connections"] for row in table]
        key = "tps" if chart == "sweep" else "ratio"
        shown = targets if chart == "sweep" else targets[1:]
        for target in shown:
            axis.plot(xs, [row[key].get(target) for row in table], marker="o", label=target, linewidth=1.5)
        if chart == "overhead":
            axis.axhline(1.0, color="grey", linewidth=0.8, linestyle="--")
            axis.set_ylabel(f"tps relative to {targets[0]}")
        else:
            axis.set_ylabel("transactions/s")
            axis.set_ylim(bottom=0)
        axis.set_xlabel("connections")
        axis.set_title(title)
        axis.legend()
        axis.grid(alpha=0.3)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return path
