"""One way to turn a workload's name and the run's numbers into a plan and a runner, for the CLI and the jobs alike.

A workload is a built-in name (``point-select``, ``shop-insert``, ``transfer``, ...; see ``workloads.BUILTINS``),
``sysbench:SCRIPT`` (``sysbench:oltp_read_write``), or ``script`` with the script's text.
"""

from __future__ import annotations

from typing import Any

from fleet.bench.engine.runner import Listener, Plan, PlanBase, PlanError, Runner
from fleet.bench.engine.script import parse_script
from fleet.bench.engine.sysbench import SysbenchPlan, SysbenchRunner
from fleet.bench.engine.targets import Target
from fleet.bench.engine.workloads import BUILTINS, UnknownWorkload, builtin_script

SCRIPT = "script"
SYSBENCH_PREFIX = "sysbench:"


def make_plan(
    workload: str,
    targets: list[Target],
    *,
    script_text: str = "",
    rows: int | None = None,
    batch: int | None = None,
    tables: int | None = None,
    sysbench_options: list[str] | None = None,
    processes: int | None = None,
    seed: int | None = None,
    **numbers: Any,
) -> PlanBase:
    """The plan of ``workload`` against ``targets``; ``numbers`` are ``PlanBase``'s (connections, duration, events,
    warmup, rate, interval, rounds, time_limit), None leaving a script's own or the default. PlanError (a
    ScriptError for a script, naming the line) when the workload cannot be made."""
    numbers = {k: v for k, v in numbers.items() if v is not None}
    if workload.startswith(SYSBENCH_PREFIX):
        extra: dict[str, Any] = {"table_size": rows} if rows is not None else {}
        if tables is not None:
            extra["tables"] = tables
        return SysbenchPlan(
            script=workload.removeprefix(SYSBENCH_PREFIX),
            targets=targets,
            options=list(sysbench_options or []),
            workload=workload,
            **extra,
            **numbers,
        )
    if workload == SCRIPT:
        script = parse_script(script_text)
    else:
        try:
            script = builtin_script(workload, rows=rows, batch=batch)
        except (UnknownWorkload, ValueError) as exc:
            raise PlanError(str(exc)) from None
    return Plan.for_script(script, targets, processes=processes, seed=seed, **numbers)


def runner_for(plan: PlanBase, listener: Listener | None = None) -> Runner | SysbenchRunner:
    """The runner of ``plan``: the engine's, or sysbench's."""
    if isinstance(plan, SysbenchPlan):
        return SysbenchRunner(plan, listener)
    assert isinstance(plan, Plan)
    return Runner(plan, listener)


def workload_names() -> list[str]:
    """Every workload name a plan accepts (``script`` last)."""
    from fleet.bench.engine.sysbench import SCRIPTS

    return [*BUILTINS, *(SYSBENCH_PREFIX + s for s in SCRIPTS), SCRIPT]
