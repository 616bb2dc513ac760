"""The PostgreSQL benchmark's pure parts: pgbench's report and per-transaction log read into numbers, the table of
tps, ratios, latencies, errors and CPU per 1,000 transactions, and the bar."""

from __future__ import annotations

from devstack.bench.pgsql_bench import (
    Run,
    bar,
    cells,
    log_histogram_ms,
    parse_args,
    parse_pgbench,
    per_cpu,
    pool_bar,
    ratio,
    step_seconds,
    table,
)
from devstack.bench.sharding_bench import percentile

REPORT = """pgbench (15.20 (Debian 15.20-0+deb12u1))
starting vacuum...end.
transaction type: <builtin: select only>
scaling factor: 10
query mode: prepared
number of clients: 16
number of threads: 2
maximum number of tries: 1
duration: 20 s
number of transactions actually processed: 396326
number of failed transactions: 0 (0.000%)
latency average = 0.811 ms
initial connection time = 21.074 ms
tps = 19816.300355 (without initial connection time)
"""

ABORTED = """pgbench (15.20 (Debian 15.20-0+deb12u1))
starting vacuum...end.
pgbench: error: ERROR:  prepared statement "P_0" already exists
pgbench: error: ERROR:  prepared statement "P_0" already exists
pgbench: error: client 9 script 0 aborted in command 4 query 0: ERROR:  bind message supplies 0 parameters, but \
prepared statement "P_0" requires 1
pgbench: error: client 11 script 0 aborted in command 4 query 0: ERROR:  bind message supplies 0 parameters, but \
prepared statement "P_0" requires 1
transaction type: <builtin: TPC-B (sort of)>
number of transactions actually processed: 3592
number of failed transactions: 2 (0.056%)
latency average = 8.302 ms
initial connection time = 139.595 ms
tps = 1927.154421 (without initial connection time)
pgbench: error: Run was aborted; the above results are incomplete.
"""


def test_parse_a_clean_report() -> None:
    assert parse_pgbench(REPORT) == {
        "tps": 19816.300355,
        "transactions": 396326,
        "failed": 0,
        "lat_avg_ms": 0.811,
        "connect_ms": 21.074,
        "aborted": 0,
        "errors": [],
    }


def test_parse_aborted_clients_and_distinct_errors() -> None:
    parsed = parse_pgbench(ABORTED)
    assert (parsed["tps"], parsed["transactions"], parsed["failed"], parsed["aborted"]) == (1927.154421, 3592, 2, 2)
    assert parsed["errors"] == [
        'ERROR:  prepared statement "P_0" already exists',
        "client N script 0 aborted in command 4 query 0: ERROR:  bind message supplies 0 parameters, but prepared "
        'statement "P_0" requires 1',
        "Run was aborted; the above results are incomplete.",
    ]


def test_parse_a_run_that_never_started() -> None:
    text = 'pgbench: error: connection to server at "127.0.0.1", port 1 failed: Connection refused\n'
    parsed = parse_pgbench(text)
    assert (parsed["tps"], parsed["transactions"], parsed["lat_avg_ms"], parsed["aborted"]) == (None, None, None, 0)
    assert Run("select-only/simple", "direct", 16, 1, 1, "log", 0.1, **_numbers(parsed)).error_count == 1


def _numbers(parsed: dict[str, object]) -> dict[str, object]:
    return {k: v for k, v in parsed.items() if k != "connect_ms"}


def test_log_histogram_leaves_out_failed_and_skipped_transactions() -> None:
    lines = ["0 1 812 0 1796409533 454194", "1 7 failed 0 1796409533 454403", "2 3 skipped 0 1796409533 1", ""]
    lines += ["3 4 90 0 1 2", "3 5 812 0 1 2"]
    histogram = log_histogram_ms(lines)
    assert histogram == [(0.09, 1), (0.812, 2)]
    assert percentile(histogram, 99) == 0.812  # the p99 the bench reports, read as sharding_bench reads one
    assert percentile(log_histogram_ms([]), 99) is None


def _run(target: str, tps: float | None, *, workload: str = "select-only/simple", clients: int = 16, rnd: int = 1,
         aborted: int = 0, cores: dict[str, float] | None = None) -> Run:  # fmt: skip
    transactions = None if tps is None else int(tps * 10)
    cpu = {f"cores_{role}": n for role, n in (cores or {}).items()}
    numbers = {"tps": tps, "transactions": transactions, "failed": 0, "aborted": aborted, "lat_avg_ms": 0.8}
    numbers |= {"lat_p99_ms": 3.0, "server_backends_peak": clients, "cpu": cpu}
    return Run(workload, target, clients, rnd, 0 if tps else 1, "log", 10.0, **numbers)


def test_cells_take_the_median_over_rounds_and_sum_errors() -> None:
    runs = [_run("direct", 100.0, rnd=1), _run("direct", 300.0, rnd=2, aborted=2), _run("direct", 200.0, rnd=3)]
    cell = cells(runs)[("select-only/simple", 16)]["direct"]
    assert (cell.tps, cell.errors, cell.backends) == (200.0, 2, 16)


def test_ratio() -> None:
    assert ratio(150.0, 100.0) == 1.5
    assert ratio(None, 100.0) is None
    assert ratio(150.0, 0.0) is None


def test_table_ratios_errors_and_cpu_per_thousand() -> None:
    runs = [
        _run("direct", 20000.0),
        _run("pgbouncer", 16000.0, aborted=3, cores={"pgbouncer": 0.4}),
        _run("proxyfleet", 18000.0, cores={"proxy": 0.36}),
        _run("direct", 2000.0, clients=1000),
        _run("pgbouncer", 1000.0, clients=1000, cores={"pgbouncer": 0.5}),
    ]
    lines = table(runs, ("direct", "pgbouncer", "proxyfleet"))
    assert lines[0].startswith(
        "| workload | clients | direct tps | PgBouncer tps | ProxyFleet forward tps | ProxyFleet forward/direct"
    )
    assert "ProxyFleet forward/PgBouncer | PgBouncer/direct" in lines[0]
    assert lines[0].endswith("| PgBouncer CPU s per 1k tx | ProxyFleet forward CPU s per 1k tx |")
    assert lines[1].count("|") == lines[0].count("|")
    first = [c.strip() for c in lines[2].strip("|").split("|")]
    # 0.4 cores x 10 s over 160,000 transactions = 0.025 s per 1,000; the proxy's 3.6 s over 180,000 = 0.020.
    assert first[:8] == ["select-only/simple", "16", "20,000", "16,000 †", "18,000", "0.90", "1.12", "0.80"]
    assert first[8:] == ["0.80 / 0.80 / 0.80", "3.00 / 3.00 / 3.00", "0 / 3 / 0", "16 / 16 / 16", "0.025", "0.020"]
    second = [c.strip() for c in lines[3].strip("|").split("|")]
    assert second[:8] == ["select-only/simple", "1,000", "2,000", "1,000", "-", "-", "-", "0.50"]
    assert second[-2:] == ["0.500", "-"]


def test_table_without_proxyfleet_has_no_column_for_it() -> None:
    lines = table([_run("direct", 100.0), _run("pgbouncer", 50.0)], ("direct", "pgbouncer"))
    assert "ProxyFleet" not in lines[0]
    assert "errors (d/b)" in lines[0]


def test_bar_and_tps_per_busy_cpu() -> None:
    runs = [
        _run("pgbouncer", 16000.0, cores={"pgbouncer": 0.4}),
        _run("proxyfleet", 18000.0, cores={"proxy": 0.36}),
        _run("pgbouncer", 2000.0, workload="select-only/prepared", cores={"pgbouncer": 0.1}),
        _run("proxyfleet", 1000.0, workload="select-only/prepared", cores={"proxy": 0.1}),
        _run("proxyfleet", 1000.0, workload="tpcb-like/simple", cores={"proxy": 0.1}),
    ]
    assert bar(runs).endswith(
        "select-only/simple: 1.12x PgBouncer, met; select-only/prepared: 0.50x PgBouncer, not met"
    )
    assert (
        per_cpu(runs, "proxyfleet") == "select-only/simple 50,000, select-only/prepared 10,000, tpcb-like/simple 10,000"
    )


def test_quick_settings_and_targets() -> None:
    quick = parse_args(["--quick", "--targets", "direct,pgbouncer"])
    assert (quick.rounds, quick.seconds, quick.clients, quick.targets) == (1, 4, (16, 1000), ("direct", "pgbouncer"))
    full = parse_args([])
    assert (full.rounds, full.seconds, full.targets) == (
        2,
        20,
        ("direct", "pgbouncer", "proxyfleet", "proxyfleet-pool"),
    )


def test_step_seconds_leave_time_for_the_clients_to_connect() -> None:
    assert step_seconds(20, 16) == 21
    assert step_seconds(20, 1000) == 40


def test_the_pooler_has_its_ratios_and_its_bar() -> None:
    runs = [
        _run("direct", 2000.0, clients=1000),
        _run("pgbouncer", 1000.0, clients=1000),
        _run("proxyfleet-pool", 1500.0, clients=1000, cores={"proxy": 0.3}),
        _run("proxyfleet-pool", 900.0, workload="tpcb-like/simple", clients=1000, aborted=4),
    ]
    runs[2].server_backends_peak = 20
    runs[3].server_backends_peak = 20
    lines = table(runs, ("direct", "pgbouncer", "proxyfleet-pool"))
    assert "| ProxyFleet pool/direct | ProxyFleet pool/PgBouncer | PgBouncer/direct |" in lines[0]
    row = [c.strip() for c in lines[2].strip("|").split("|")]
    assert row[:8] == ["select-only/simple", "1,000", "2,000", "1,000", "1,500", "0.75", "1.50", "0.50"]
    assert pool_bar(runs).endswith(
        "select-only/simple: 20 server connections, 0 errors, met; "
        "tpcb-like/simple: 20 server connections, 4 errors, not met"
    )
