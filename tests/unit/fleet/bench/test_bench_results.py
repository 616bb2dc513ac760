"""What a report says of a run that did not finish (``RunResult.unfinished``): nothing when every step ran, else the
run's status and error and each step not done."""

from __future__ import annotations

from fleet.bench.engine.results import RunResult, StepResult


def run(status: str, *steps: tuple[str, int, str], error: str = "") -> RunResult:
    result = RunResult(workload={}, targets=[], settings={}, status=status, error=error)
    result.steps = [StepResult(n, 1, target, conns, status=state) for n, (target, conns, state) in enumerate(steps)]
    return result


def test_a_finished_run_says_nothing_an_unfinished_one_names_its_steps() -> None:
    assert run("done", ("direct", 8, "done"), ("proxy", 8, "done")).unfinished() == ""
    assert run("done", ("direct", 8, "done"), ("proxy", 8, "failed")).unfinished() == (
        "Run done; steps not done: proxy@8 failed"
    )
    assert run("cancelled", error="stopped by the user").unfinished() == (
        "Run cancelled: stopped by the user; steps not done: none"
    )
