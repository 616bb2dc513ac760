"""The hot-row benchmark's configs, cases, tables and verdict (no servers needed)."""

from __future__ import annotations

from devstack.bench.hot_rows import (
    DIRECT,
    PLAIN,
    QUEUE,
    cases,
    counters_text,
    dsn,
    proxy_config,
    render,
    table,
)
from fleet.bench.engine.plans import make_plan
from fleet.bench.engine.results import Latency, RunResult, StepResult
from fleet.bench.engine.targets import parse_dsn
from proxyapp.config.document import parse_config


def _step(target: str, connections: int, tps: float, p99: float, round_: int = 1, **errors: int) -> StepResult:
    return StepResult(
        index=0,
        round=round_,
        target=target,
        connections=connections,
        tps=tps,
        latency=Latency(p99=p99),
        errors={code.removeprefix("e"): {"count": n, "message": "m"} for code, n in errors.items()},
    )


def _run(steps: list[StepResult], targets: tuple[str, ...] = (DIRECT, PLAIN, QUEUE)) -> RunResult:
    return RunResult(
        workload={"name": "transfer-queued"}, targets=[{"name": t} for t in targets], settings={}, steps=steps
    )


def test_the_two_proxies_differ_only_in_the_hint_variable() -> None:
    plain, queued = proxy_config("127.0.0.1", 3306, False), proxy_config("127.0.0.1", 3306, True)
    hints = {"variable_name": "mysql-trx_queue_hints", "variable_value": "false"}
    assert hints in plain["global_variables"]
    assert {**hints, "variable_value": "true"} in queued["global_variables"]
    assert [v for v in plain["global_variables"] if v != hints] == queued["global_variables"][:-1]
    for doc in (plain, queued):
        parse_config(doc)
    assert parse_dsn(dsn(PLAIN, 6033)).name == "proxy, no queue" and parse_dsn(dsn(QUEUE, 6034)).name == "proxy+queue"


def test_the_cases_are_valid_plans_and_quick_is_shorter() -> None:
    full, quick = cases(False, 2), cases(True, 2)
    assert [c.key for c in full] == [c.key for c in quick]
    hot = full[1]
    assert hot.targets == (DIRECT, PLAIN, QUEUE) and hot.args[hot.args.index("--rows") + 1] == "10"
    assert hot.args[hot.args.index("--connections") + 1] == "1,8,32,64,128,256"
    assert full[2].targets == (PLAIN, QUEUE)  # no cost to other traffic: the two proxies only
    for case in full:
        args = dict(zip(case.args[::2], case.args[1::2], strict=True))
        targets = [parse_dsn(dsn(name, 3306 + i)) for i, name in enumerate(case.targets)]
        plan = make_plan(
            args["--workload"],
            targets,
            rows=int(args.get("--rows", 10_000)),
            connections=[int(n) for n in args["--connections"].split(",")],
            duration=float(args["--time"]),
            warmup=float(args["--warmup"]),
            rounds=int(args["--rounds"]),
        )
        plan.check()


def test_the_table_averages_rounds_counts_errors_by_kind_and_gives_the_ratios() -> None:
    case = cases(False, 2)[1]
    run = _run(
        [
            _step(DIRECT, 64, 1000, 40.0, e1213=5),
            _step(PLAIN, 64, 800, 50.0, e1213=7, e1205=1, e2013=2),
            _step(QUEUE, 64, 2000, 10.0),
            _step(DIRECT, 64, 1200, 60.0, round_=2, e1213=1),
            _step(PLAIN, 64, 1200, 70.0, round_=2),
            _step(QUEUE, 64, 2200, 20.0, round_=2, e1205=3),
        ]
    )
    head, _, row = table(case, run)
    assert head.startswith("| connections | direct tps | proxy, no queue tps | proxy+queue tps | queue / no queue |")
    assert row == (
        "| 64 | 1,100 | 1,000 | 2,100 | 2.10 | 1.91 | 50.0 / 60.0 / 15.0 | 6 / 7 / 0 | 0 / 1 / 3 | 0 / 2 / 0 |"
    )
    section = render([(case, run, "python manage.py bench run ...", "counters")], "a machine", "cmd")
    assert "The bar at 64: met." in section
    worse = _run([_step(DIRECT, 128, 1000, 1.0), _step(PLAIN, 128, 700, 1.0), _step(QUEUE, 128, 1000, 1.0, e1213=1)])
    assert "The bar at 128: not met (1.43x the proxy without the queue, 1.00x direct, 1 deadlocks)." in render(
        [(case, worse, "", "")], "", ""
    )
    light = cases(False, 2)[2]
    head, _, row = table(light, _run([_step(PLAIN, 32, 500, 2.0), _step(QUEUE, 32, 490, 2.5)], (PLAIN, QUEUE)))
    assert "queue / direct" not in head and row == "| 32 | 500 | 490 | 0.98 | 2.0 / 2.5 | 0 / 0 | 0 / 0 | 0 / 0 |"


def test_the_queue_counters_are_the_difference_over_the_case() -> None:
    before = {"transactions": 10, "waited": 4, "timeouts": 0, "refused": 0, "wait_ms_total": 40}
    after = {"transactions": 110, "waited": 54, "timeouts": 1, "refused": 0, "wait_ms_total": 540}
    assert counters_text(before, after) == (
        "proxy+queue's trx_queue counters over the case: 100 transactions queued, 50 waited (mean 10.0 ms), "
        "1 timed out, 0 refused."
    )
    assert "no trx_queue section" in counters_text(None, None)
