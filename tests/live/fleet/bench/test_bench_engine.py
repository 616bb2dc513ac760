"""The bench engine against the sandbox MariaDB, directly and through a real proxy: counts match the rows written,
generated values stay in their ranges, targets interleave, several processes share a step, a cancelled run stops,
and the tables a run made are dropped whatever happens."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from devstack.proxy import ProxyProcess
from devstack.sandbox import APP_PASSWORD, APP_USER, Sandbox
from fleet.bench.engine.plans import make_plan, runner_for
from fleet.bench.engine.results import IntervalPoint, StepResult
from fleet.bench.engine.runner import Listener
from fleet.bench.engine.targets import Target

pytestmark = pytest.mark.sandbox

VALUES_TABLE = "bench_values"
INSERT_SCRIPT = f"""\
option
  name values
declare
  n seq 1
  small int 5 9
  word char 3 6
  day date 2014 2015
  color enum red green blue
begin
  insert into {VALUES_TABLE} (id, small, word, day, color, amount, code, tag)
    values (:n, :small, :word, :day, :color, '${{int(15-1015)}}', '${{char([a-f,0-9]8:45)}}', '${{enum(0000,0001)}}');
end
"""


def direct(sandbox: Sandbox, name: str = "direct") -> Target:
    primary = sandbox.primary()
    return Target(name, primary.host, primary.port, APP_USER, APP_PASSWORD, "test", safe=True)


def query(sandbox: Sandbox, sql: str) -> list[tuple[Any, ...]]:
    with sandbox.primary().connect(database="test") as conn, conn.cursor() as cur:
        cur.execute(sql)
        return list(cur.fetchall())


def pfbench_tables(sandbox: Sandbox) -> list[str]:
    rows = query(sandbox, "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_NAME LIKE 'pfbench%'")
    return [row[0] for row in rows]


@pytest.fixture
def values_table(sandbox: Sandbox) -> Iterator[str]:
    """A table the test makes (so the run must not drop it), dropped afterwards."""
    query(sandbox, f"DROP TABLE IF EXISTS {VALUES_TABLE}")
    query(
        sandbox,
        f"CREATE TABLE {VALUES_TABLE} (id int primary key, small int, word varchar(10), day datetime, "
        "color varchar(8), amount int, code varchar(50), tag varchar(4))",
    )
    yield VALUES_TABLE
    query(sandbox, f"DROP TABLE IF EXISTS {VALUES_TABLE}")


@pytest.fixture(scope="module")
def proxy(sandbox: Sandbox, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    """A real proxy in front of the primary (one hostgroup, no rules), as a target marked safe."""
    primary = sandbox.primary()
    config = {
        "mysql_servers": [{"hostgroup_id": 10, "hostname": primary.host, "port": primary.port}],
        "mysql_users": [{"username": APP_USER, "password": APP_PASSWORD, "default_hostgroup": 10}],
    }
    process = ProxyProcess(config, tmp_path_factory.mktemp("bench-proxy")).start()
    yield Target("proxy", "127.0.0.1", process.port, APP_USER, APP_PASSWORD, "test", safe=True)
    process.stop()


class Recording(Listener):
    """Keeps what a run tells."""

    def __init__(self, on_interval: Callable[[], None] | None = None) -> None:
        self.started: list[tuple[str, int]] = []
        self.points: list[IntervalPoint] = []
        self.on_interval = on_interval

    def step_started(self, step: StepResult) -> None:
        self.started.append((step.target, step.connections))

    def interval(self, step: StepResult, point: IntervalPoint) -> None:
        self.points.append(point)
        if self.on_interval is not None:
            self.on_interval()


@pytest.mark.parametrize("processes", [1, 2])
def test_executions_equal_rows_written_and_values_stay_in_range(
    sandbox: Sandbox, values_table: str, processes: int
) -> None:
    plan = make_plan(
        "script", [direct(sandbox)], script_text=INSERT_SCRIPT, connections=[3, 5], events=150, processes=processes
    )
    result = runner_for(plan).run()

    assert result.status == "done", result.error
    assert [(s.connections, s.status, s.transactions, s.failed_transactions) for s in result.steps] == [
        (3, "done", 150, 0),
        (5, "done", 150, 0),
    ]
    (statement,) = result.steps[0].statements
    assert (statement.name, statement.executions, statement.failures, statement.rows) == ("SQL01", 150, 0, 150)
    executed = sum(s.statements[0].executions for s in result.steps)
    ((count, low, high),) = query(sandbox, f"SELECT COUNT(*), MIN(id), MAX(id) FROM {values_table}")
    assert (count, low) == (executed, 1)  # every row written once (the seq ids are the primary key)
    if processes == 1:
        assert high == executed  # one process counts without a gap; several count in residue classes
    ((small_min, small_max, word_min, word_max, first_day, last_day),) = query(
        sandbox,
        f"SELECT MIN(small), MAX(small), MIN(LENGTH(word)), MAX(LENGTH(word)), MIN(day), MAX(day) FROM {values_table}",
    )
    assert 5 <= small_min <= small_max <= 9 and 3 <= word_min <= word_max <= 6
    assert first_day.year >= 2014 and last_day.year <= 2015
    ((amount_min, amount_max, code_min, code_max),) = query(
        sandbox, f"SELECT MIN(amount), MAX(amount), MIN(LENGTH(code)), MAX(LENGTH(code)) FROM {values_table}"
    )
    assert 15 <= amount_min <= amount_max <= 1015 and 8 <= code_min <= code_max <= 45
    assert query(sandbox, f"SELECT COUNT(*) FROM {values_table} WHERE code NOT REGEXP '^[a-f0-9]+$'") == [(0,)]
    assert {c for (c,) in query(sandbox, f"SELECT DISTINCT color FROM {values_table}")} <= {"red", "green", "blue"}
    assert {t for (t,) in query(sandbox, f"SELECT DISTINCT tag FROM {values_table}")} <= {"0000", "0001"}
    assert query(sandbox, f"SHOW TABLES LIKE '{values_table}'") == [(values_table,)]  # not the run's to drop


def test_targets_interleave_and_a_builtin_cleans_up_its_table(sandbox: Sandbox, proxy: Target) -> None:
    listener = Recording()
    plan = make_plan("transfer", [direct(sandbox), proxy], rows=50, connections=[1, 4], events=120)
    result = runner_for(plan, listener).run()

    assert result.status == "done", result.error
    assert listener.started == [("direct", 1), ("proxy", 1), ("direct", 4), ("proxy", 4)]
    for step in result.steps:
        assert (step.status, step.transactions, step.connections_opened) == ("done", 120, step.connections)
        begin, down, up, commit = step.statements
        assert [s.name for s in step.statements] == ["SQL01", "SQL02", "SQL03", "SQL04"]
        deadlocks = step.errors.get("1213", {}).get("count", 0)
        assert begin.executions == 120 and down.failures + up.failures == deadlocks == step.failed_transactions
        assert down.rows == down.executions - down.failures  # each UPDATE changed one row
        assert commit.executions == 120 - step.failed_transactions
        assert step.latency.p50 is not None and step.latency.p50 <= step.latency.p95 <= step.latency.max
    (table,) = [note.removeprefix("prepare created ") for note in result.notes if note.startswith("prepare created")]
    assert f"cleanup dropped {table}" in result.notes
    assert pfbench_tables(sandbox) == []
    assert listener.points and all(p.tps >= 0 for p in listener.points)


def test_a_cancelled_run_stops_and_drops_its_table(sandbox: Sandbox) -> None:
    holder: dict[str, Any] = {}
    cancelled = threading.Event()

    def cancel_once() -> None:
        if not cancelled.is_set():
            cancelled.set()
            holder["runner"].cancel()

    plan = make_plan("point-select", [direct(sandbox)], rows=100, connections=[2, 4], duration=120, interval=0.2)
    holder["runner"] = runner = runner_for(plan, Recording(on_interval=cancel_once))
    result = runner.run()

    assert result.status == "cancelled"
    assert len(result.steps) == 1 and result.steps[0].status == "cancelled"  # the second step never ran
    assert result.steps[0].duration_s < 120
    assert pfbench_tables(sandbox) == []


def test_a_failing_prepare_fails_the_run_naming_the_line_and_drops_what_it_made(sandbox: Sandbox) -> None:
    script = (
        "prepare\n"
        "  create table pfbench_broken (id int primary key);\n"
        "  insert into pfbench_broken values (1), (1);\n"
        "begin\n  select 1\nend\n"
    )
    result = runner_for(make_plan("script", [direct(sandbox)], script_text=script, duration=1)).run()

    assert result.status == "failed" and result.steps == []
    assert result.error == "prepare line 3: error 1062: Duplicate entry '1' for key 'PRIMARY'"
    assert result.notes == ["prepare created pfbench_broken", "cleanup dropped pfbench_broken"]
    assert pfbench_tables(sandbox) == []


def test_a_target_that_refuses_connections_fails_its_step(sandbox: Sandbox) -> None:
    wrong = Target("wrong", "127.0.0.1", sandbox.primary().port, APP_USER, "not-the-password", "test")
    result = runner_for(make_plan("script", [wrong], script_text="begin\n select 1\nend\n", duration=1)).run()
    (step,) = result.steps
    assert (step.status, step.connections_opened) == ("failed", 0)
    assert step.error.startswith("no connection could be opened:") and "1045" in step.errors


def test_sysbench_runs_into_the_same_result_form_and_cleans_up(sandbox: Sandbox) -> None:
    plan = make_plan("sysbench:oltp_point_select", [direct(sandbox)], rows=100, connections=[2], duration=2)
    result = runner_for(plan).run()

    assert result.status == "done", result.error
    (step,) = result.steps
    assert (step.driver, step.status, step.connections) == ("sysbench", "done", 2)
    assert step.transactions > 0 and step.intervals and step.latency.p99 is not None
    assert query(sandbox, "SHOW TABLES LIKE 'sbtest%'") == []
    assert result.notes[-1] == "sysbench cleanup dropped the sbtest tables"


def test_a_proxy_refusing_a_statement_counts_it_as_a_failure(sandbox: Sandbox, proxy: Target) -> None:
    script = "begin\n  select 1;\n  select * from no_such_table_here;\nend\n"
    result = runner_for(make_plan("script", [proxy], script_text=script, events=20, connections=[2])).run()
    (step,) = result.steps
    ok, missing = step.statements
    assert (ok.executions, missing.executions, missing.failures) == (20, 20, 20)
    assert (step.transactions, step.failed_transactions, step.errors["1146"]["count"]) == (20, 20, 20)
