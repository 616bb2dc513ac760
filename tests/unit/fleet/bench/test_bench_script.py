"""The bench engine without servers: MyCat's templates, mydbtest-style scripts and their errors, DSNs, plan checks,
and sysbench's output parsed into the result form."""

from __future__ import annotations

import os
import random
import re
import subprocess
import sys
from datetime import datetime

import pytest

from devstack.stack import REPO
from fleet.bench.engine.generators import TemplateError, declared, template
from fleet.bench.engine.plans import make_plan
from fleet.bench.engine.results import StepResult
from fleet.bench.engine.runner import PlanError
from fleet.bench.engine.script import ScriptError, parse_script, parse_sweep
from fleet.bench.engine.sysbench import fill_step, parse_histogram, parse_interval
from fleet.bench.engine.targets import TargetError, parse_dsn
from fleet.bench.engine.workloads import BUILTINS, builtin_script

RNG = random.Random(7)
DRAWS = 2000


def draws(body: str) -> list[str]:
    generate = template(body)
    return [generate(RNG) for _ in range(DRAWS)]


def test_mycat_int_templates_draw_a_range_or_one_of_the_listed_values() -> None:
    values = {int(v) for v in draws("int(15-1015)")}
    assert min(values) >= 15 and max(values) <= 1015 and len(values) > 500
    assert set(draws("int(10,999)")) == {"10", "999"}


def test_mycat_char_template_keeps_to_its_alphabet_and_lengths() -> None:
    values = draws("char([a-f,0-9]8:45)")
    assert all(re.fullmatch(r"[a-f0-9]{8,45}", v) for v in values)
    assert {len(v) for v in values} == set(range(8, 46))
    assert all(re.fullmatch(r"[0-9]{2}", v) for v in draws("char([0-9]2:2)"))


def test_mycat_date_template_formats_a_moment_within_its_years() -> None:
    for value in draws("date(yyyyMMddHHmmssSSS-[2014-2015]y)"):
        assert re.fullmatch(r"\d{17}", value)
        moment = datetime.strptime(value[:14], "%Y%m%d%H%M%S")
        assert 2014 <= moment.year <= 2015
    assert all(re.fullmatch(r"2020-\d\d-\d\d", v) for v in draws("date(yyyy-MM-dd-[2020-2020]y)"))


def test_mycat_enum_template_and_declared_variables() -> None:
    assert set(draws("enum(0000,0001,0002)")) == {"0000", "0001", "0002"}
    assert {declared("enum", ["a", "b'c"], "x")(RNG) for _ in range(200)} == {"'a'", "'b''c'"}
    ints = {int(declared("int", ["2", "5"], "x")(RNG)) for _ in range(200)}
    assert ints == {2, 3, 4, 5}
    sequence = declared("seq", ["10"], "x")
    assert [sequence(RNG) for _ in range(3)] == ["10", "11", "12"]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("int(9-1)", "${int(9-1)}: the low end 9 is above the high end 1"),
        ("int(a-b)", "${int(a-b)}: expected int(LOW-HIGH) or int(A,B,...)"),
        ("char([a-f]9:2)", "${char([a-f]9:2)}: lengths 9:2 are not a range (0 <= low <= high)"),
        ("char([abc]1:2)", "${char([abc]1:2)}: 'abc' is neither a character nor a range like a-f"),
        ("date(yyyy-[2016-2015]y)", "${date(yyyy-[2016-2015]y)}: the year 2016 is after 2015"),
        ("date(yyyyQQ-[2014-2015]y)", "${date(yyyyQQ-[2014-2015]y)}: 'QQ' is not a date field"),
        ("uuid()", "${uuid()}: unknown generator 'uuid' (int, char, date, enum)"),
        ("int", "${int}: expected NAME(ARGUMENTS)"),
    ],
)
def test_bad_templates_are_refused_naming_the_template(body: str, message: str) -> None:
    with pytest.raises(TemplateError) as refused:
        template(body)
    assert str(refused.value).startswith(message)


SCRIPT = """\
# the first note's hot-row transfer, with MyCat templates
option
  name    transfer
  loop    500           # transactions per step
  connections 1,4
declare
  id1 int 2 100
  id2 int 1 100
  row seq
prepare
  create table t_transfer (id int primary key, balance int not null default 1000, tag varchar(20));
  [repeat 2] [batch 50] insert into t_transfer (id, tag) values (:row, '${char([a-z]3:8)}');
begin
  start;
  update t_transfer set balance = balance - 1, tag = ':notvar' where id = :id1;  -- :id1 here is a comment
  update t_transfer set balance = balance + 1
    where id = :id2;
  commit
end
"""


def test_a_script_parses_into_options_variables_and_named_statements() -> None:
    script = parse_script(SCRIPT)
    assert (script.name, script.events, script.connections) == ("transfer", 500, [1, 4])
    assert [(s.name, s.line) for s in script.transaction] == [
        ("SQL01", 14),
        ("SQL02", 15),
        ("SQL03", 16),
        ("SQL04", 18),
    ]
    assert script.created_tables() == ["t_transfer"]
    assert script.first_write is not None and script.first_write.name == "prepare01"
    rng = random.Random(1)
    values = script.draw_values(rng, script.transaction)
    texts = [t for s in script.transaction for t in s.render(rng, values, script.draws)]
    assert texts[0] == "START TRANSACTION"
    assert texts[1] == f"update t_transfer set balance = balance - 1, tag = ':notvar' where id = {values['id1']}"
    assert texts[2].endswith(f"where id = {values['id2']}")
    fill = script.prepare[1].render(rng, {}, script.draws)
    assert len(fill) == 2 and fill[0].count("),(") == 49  # two INSERTs of 50 rows
    assert re.search(r"values \(1, '[a-z]{3,8}'\),\(2, ", fill[0]) and "(100, '" in fill[1]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("begin\n  select :nope\nend\n", "line 2: :nope is not declared (declared: none)"),
        ("begin\n  select 1\n", "line 1: the begin block is not closed with end"),
        ("option\n  loop many\nbegin\nselect 1\nend", "line 2: option loop: expected a whole number of 1 or more"),
        ("option\n  speed 5\nbegin\nselect 1\nend", "line 2: option speed: unknown option"),
        (
            "declare\n  id int 9 1\nbegin\nselect 1\nend",
            "line 2: declare: id int: the low end 9 is above the high end 1",
        ),
        ("declare\n  id float 1 2\nbegin\nselect 1\nend", "line 2: declare: id: unknown type 'float'"),
        ("begin\n  select 1;\n  [batch 5] update t set a = 1\nend", "line 3: [batch N] needs INSERT ... VALUES"),
        ("begin\n  [twice 2] select 1\nend", "line 2: unknown directive [twice ...]"),
        ("begin\n  select 'open\nend", "line 2: the quote ' opened here is not closed"),
        ("begin\n  select 1;\n\n  select ${int(5-1)}\nend", "line 4: ${int(5-1)}: the low end 5 is above"),
        ("select 1\n", "line 1: 'select' is outside any section"),
        ("option\n  name x\n", "no begin ... end block"),
        ("begin\nend\n", "line 1: the begin block holds no statement"),
        ("end\n", "line 1: end without begin"),
    ],
)
def test_bad_scripts_are_refused_naming_the_line(text: str, message: str) -> None:
    with pytest.raises(ScriptError) as refused:
        parse_script(text)
    assert str(refused.value).startswith(message)


def test_sweeps_and_dsns() -> None:
    assert parse_sweep("50..500/50") == list(range(50, 501, 50))
    assert parse_sweep("1, 8,64") == [1, 8, 64]
    with pytest.raises(ValueError, match=r"'5\.\.1' is not a range"):
        parse_sweep("5..1")
    target = parse_dsn("mysql://app:p%40ss@127.0.0.1:6033/app?name=proxy&safe=1")
    assert (target.name, target.host, target.port, target.user, target.password, target.database, target.safe) == (
        "proxy", "127.0.0.1", 6033, "app", "p@ss", "app", True
    )  # fmt: skip
    assert target.dsn == "mysql://app@127.0.0.1:6033/app"  # no password in reports
    mydbtest = parse_dsn("test/test@10.70.241.51:3306:test")
    assert (mydbtest.user, mydbtest.host, mydbtest.database, mydbtest.safe) == ("test", "10.70.241.51", "test", False)
    for bad, message in [
        ("http://x", "the scheme must be mysql://"),
        ("mysql://app@h:99999/x", "the port is not a number"),
        ("mysql://app@h/x?secure=1", "unknown parameter 'secure'"),
    ]:
        with pytest.raises(TargetError, match=message):
            parse_dsn(bad)


def test_a_writing_workload_is_refused_against_a_target_not_marked_safe() -> None:
    safe, unsafe = parse_dsn("mysql://a@h/x?name=safe&safe=1"), parse_dsn("mysql://a@h/x?name=prod")
    plan = make_plan("shop-insert", [safe, unsafe], duration=1)
    with pytest.raises(PlanError) as refused:
        plan.check()
    assert "workload shop-insert writes" in str(refused.value)
    assert str(refused.value).endswith("target prod is not marked safe for benchmarks")
    reads = make_plan("script", [unsafe], script_text="begin\n  select 1\nend\n", duration=1)
    reads.check()  # a read-only script may run anywhere


def test_every_run_is_bounded_in_time() -> None:
    target = parse_dsn("mysql://a@h/x?safe=1")
    plan = make_plan("point-select", [target], connections=[1, 2, 4], duration=600, time_limit=1000)
    with pytest.raises(PlanError, match=r"at least 1803 s \(3 steps\), over its time limit of 1000 s"):
        plan.check()


def test_every_builtin_workload_parses_and_names_its_own_table() -> None:
    for name in BUILTINS:
        script = builtin_script(name, rows=1234)
        (table,) = script.created_tables()
        assert table.startswith("pfbench_") and script.transaction and script.first_write is not None


def test_a_variable_in_braces_stands_anywhere_and_block_comments_take_variables() -> None:
    script = parse_script(
        "declare\n  a int 5 5\n  b int 6 6\nbegin\n"
        "  select /* q:{:a}|{:b} :a */ x::int, 'q:{:a}', :a -- :b\n"
        "    , {:b}\nend\n"
    )
    (statement,) = script.transaction
    rng = random.Random(1)
    assert statement.variables == ("a", "b")
    assert statement.render(rng, script.draw_values(rng, [statement]), script.draws) == [
        "select /* q:5|6 5 */ x::int, 'q:{:a}', 5 -- :b\n    , 6"
    ]


def test_the_queued_transfers_send_the_hot_row_hint_with_both_rows() -> None:
    script = builtin_script("transfer-queued", rows=10, table="acct")
    assert script.name == "transfer-queued"
    texts = [t for s in script.transaction for t in s.render(random.Random(1), {"id1": "7", "id2": "3"}, script.draws)]
    assert texts == [
        "START TRANSACTION",
        "update /* trx_queue=acct:7|3 */ acct set balance = balance - 1 where id = 7",
        "update acct set balance = balance + 1 where id = 3",
        "commit",
    ]
    rng = random.Random(2)
    drawn = [script.draw_values(rng, script.transaction) for _ in range(200)]
    assert {int(v["id1"]) for v in drawn} == set(range(2, 11)) and {int(v["id2"]) for v in drawn} == set(range(1, 11))
    locking = builtin_script("transfer-for-update-queued", rows=1000, table="acct")
    values = {"id1": "42", "id2": "9"}
    texts = [t for s in locking.transaction for t in s.render(random.Random(1), values, locking.draws)]
    assert texts[:3] == [
        "START TRANSACTION",
        "select /* trx_queue=acct:42|9 */ * from acct where id in (42, 9) for update",
        "update acct set balance = balance - 1 where id = 42",
    ]
    assert texts[3:] == ["update acct set balance = balance + 1 where id = 9", "commit"]
    plain = builtin_script("transfer", rows=10, table="acct")
    assert not any("trx_queue" in s.text for s in plain.transaction)


SYSBENCH_OUTPUT = """\
[ 1s ] thds: 4 tps: 2003.05 qps: 40061.00 (r/w/o: 2003.05/0.00/0.00) lat (ms,95%): 0.19 err/s: 0.50 reconn/s: 0.00
[ 1s ] queue length: 0, concurrency: 0
[ 2s ] thds: 4 tps: 2005.40 qps: 40108.00 (r/w/o: 2005.40/0.00/0.00) lat (ms,95%): 0.18 err/s: 0.00 reconn/s: 0.00
Latency histogram (values are in milliseconds)
       value  ------------- distribution ------------- count
       0.100 |****************************************  90
       0.200 |****                                      9
       5.000 |*                                         1

SQL statistics:
    queries performed:
        read:                            80000
        write:                           0
        other:                           169
        total:                           80169
    transactions:                        4011   (2000.42 per sec.)
    queries:                             80169  (40000.00 per sec.)
    ignored errors:                      1      (0.50 per sec.)
    reconnects:                          0      (0.00 per sec.)

General statistics:
    total time:                          2.0041s

Latency (ms):
         min:                                    0.02
         avg:                                    0.09
         max:                                    5.30
         95th percentile:                        0.18
"""


def test_sysbench_output_fills_the_same_result_form() -> None:
    point = parse_interval(SYSBENCH_OUTPUT.splitlines()[0])
    assert point is not None and (point.t, point.tps, point.qps, point.lat_p95_ms, point.err_per_s) == (
        1.0, 2003.05, 40061.0, 0.19, 0.5
    )  # fmt: skip
    assert parse_interval(SYSBENCH_OUTPUT.splitlines()[1]) is None
    assert parse_histogram(SYSBENCH_OUTPUT) == [(0.1, 90), (0.2, 9), (5.0, 1)]
    step = StepResult(index=0, round=1, target="direct", connections=4)
    fill_step(step, SYSBENCH_OUTPUT)
    assert (step.driver, step.status, step.transactions, step.queries, step.tps) == (
        "sysbench",
        "done",
        4011,
        80169,
        2000.42,
    )
    assert (step.latency.avg, step.latency.p50, step.latency.p95, step.latency.p99) == (0.09, 0.1, 0.18, 0.2)
    assert [(s.name, s.executions) for s in step.statements] == [("read", 80000), ("other", 169)]
    failed = StepResult(index=0, round=1, target="direct", connections=4)
    fill_step(failed, "FATAL: error 2003: Can't connect to MySQL server on '127.0.0.1' (111)\n")
    assert failed.status == "failed" and failed.error.startswith("FATAL: error 2003")


def test_the_engine_imports_and_runs_without_django() -> None:
    code = (
        "import sys, fleet.bench.engine.cli, fleet.bench.engine.shard, fleet.bench.engine.plot\n"
        "assert not [m for m in sys.modules if m.split('.')[0] == 'django'], 'django imported'\n"
        "sys.argv = ['bench', 'workloads']\n"
        "raise SystemExit(fleet.bench.engine.cli.main())\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0].startswith("point-select")
