"""The benchmark harness's parsing and report writing (no servers needed)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from devstack.bench.pinning import Layout, PinningError
from devstack.bench.run_bench import (
    SECTION_TITLE,
    Bench,
    CpuSnapshot,
    RunResult,
    Settings,
    parse_args,
    parse_sysbench,
    render_markdown,
    summarize,
    sysbench_connection_args,
    write_report,
)

REPORT = """\
sysbench 1.0.20 (using system LuaJIT 2.1.0-beta3)
Threads started!

DEBUG: Ignoring error 1213 Deadlock found when trying to get lock; try restarting transaction,
(last message repeated 6 times)
Time limit exceeded, exiting...
(last message repeated 15 times)
Done.

SQL statistics:
    queries performed:
        read:                            131208
        write:                           37469
        other:                           18737
        total:                           187414
    transactions:                        9365   (1868.45 per sec.)
    queries:                             187414 (37391.73 per sec.)
    ignored errors:                      7      (1.40 per sec.)
    reconnects:                          0      (0.00 per sec.)

General statistics:
    total time:                          5.0114s
    total number of events:              9365

Latency (ms):
         min:                                    1.02
         avg:                                    8.55
         max:                                   61.30
         95th percentile:                       13.70
         sum:                                80012.14
"""


def test_parse_sysbench_reads_rates_latency_and_named_errors() -> None:
    parsed = parse_sysbench(REPORT)
    assert parsed["tps"] == 1868.45 and parsed["qps"] == 37391.73
    assert parsed["transactions"] == 9365 and parsed["queries"] == 187414
    assert parsed["ignored_errors"] == 7 and parsed["reconnects"] == 0
    assert (parsed["lat_avg_ms"], parsed["lat_p95_ms"], parsed["lat_max_ms"]) == (8.55, 13.70, 61.30)
    assert parsed["total_time_s"] == 5.0114
    assert parsed["error_codes"] == {"1213 Deadlock found when trying to get lock": 7}
    assert parsed["fatal"] == []


def test_parse_sysbench_names_fatal_errors() -> None:
    parsed = parse_sysbench(
        "FATAL: mysql_stmt_execute() returned error 1062 (Duplicate entry '5' for key 'PRIMARY') for query 'X'\n"
        "FATAL: error 2002: Can't connect to server on '127.0.0.1' (115)\n"
    )
    assert "qps" not in parsed and len(parsed["fatal"]) == 2
    assert parsed["error_codes"] == {
        "1062 Duplicate entry '5' for key 'PRIMARY'": 1,
        "2002 Can't connect to server on '127.0.0.1'": 1,
    }


def _settings() -> Settings:
    return Settings(
        quick=True,
        rounds=1,
        seconds=5,
        warmup_seconds=0,
        tables=2,
        table_size=100,
        threads=16,
        many_threads=1000,
        many_ps_mode="disable",
        proxy_threads=None,
    )


def _report(settings: Settings, summary: dict[str, Any]) -> str:
    doc = {
        "settings": settings.__dict__,
        "workloads": [w.__dict__ for w in settings.workloads()],
        "machine": {"nproc": 2},
        "runs": [],
        "summary": summary,
    }
    return render_markdown(doc, "make bench")


def test_summary_and_report_give_medians_and_ratios(tmp_path: Path) -> None:
    settings = _settings()
    workload = settings.workloads()[0]
    results = []
    for target, qps in (("direct", 1000.0), ("haproxy", 800.0), ("proxyfleet", 400.0)):
        result = RunResult(workload.key, target, 1, ["sysbench"], "var/bench/logs/x.log", 0.0, 5.0, 0)
        result.qps, result.tps, result.ignored_errors = qps, qps, 0
        results.append(result)
    summary = summarize(settings.workloads(), results)
    assert summary[workload.key]["ratios"] == {
        "proxyfleet/direct": 0.4,
        "proxyfleet/haproxy": 0.5,
        "haproxy/direct": 0.8,
    }
    section = _report(settings, summary)
    assert section.startswith(f"## {SECTION_TITLE}\n")
    assert f"| {workload.title} | 1,000 | 800 | 400 | 0.40 | 0.50 | 0.80 | 0/0/0 |" in section

    report = tmp_path / "benchmarks.md"
    report.write_text(
        f"# ProxyFleet benchmarks\n\n## Before\n\nkept\n\n## {SECTION_TITLE}\n\nstale text\n\n## After\n\nkept\n"
    )
    write_report(report, section)
    text = report.read_text()
    assert text.count(f"## {SECTION_TITLE}") == 1 and "stale text" not in text
    assert text.index("## Before") < text.index(SECTION_TITLE) < text.index("## After")


def _run(
    workload: str, target: str, round_no: int, qps: float, cores: dict[str, float], kernel: float = 0.0
) -> RunResult:
    """A run whose roles used ``cores`` CPUs, ``kernel`` of each in system time."""
    result = RunResult(workload, target, round_no, ["sysbench"], "var/bench/logs/x.log", 0.0, 5.0, 0)
    result.qps, result.tps, result.ignored_errors = qps, qps, 0
    result.cpu = {
        "cpu_others_pct": 0.0,
        **{f"cores_{role}": n for role, n in cores.items()},
        **{f"kernel_cores_{role}": kernel for role in cores},
    }
    return result


def test_the_report_says_which_rows_reached_the_bar_with_cpu_per_query_spread_and_latency() -> None:
    settings = _settings()
    point, many, single = (w for w in settings.workloads() if w.key in ("point_select_ps_disable",
                           "point_select_many", "point_select_single"))  # fmt: skip
    results = []
    for round_no, (haproxy, proxy) in enumerate(((1000.0, 1100.0), (1000.0, 900.0), (1000.0, 1050.0)), start=1):
        results += [
            _run(point.key, "direct", round_no, 2000.0, {}),
            _run(point.key, "haproxy", round_no, haproxy, {"haproxy": 0.04}, kernel=0.036),
            _run(point.key, "proxyfleet", round_no, proxy, {"proxy": 0.066}, kernel=0.033),
            # At 1,000 connections ProxyFleet passes haproxy but not direct: the row misses the bar.
            _run(many.key, "direct", round_no, 1200.0, {}),
            _run(many.key, "haproxy", round_no, 800.0, {"haproxy": 0.04}),
            _run(many.key, "proxyfleet", round_no, 1000.0, {"proxy": 0.05}),
            _run(single.key, "direct", round_no, 10_000.0, {}),
            _run(single.key, "haproxy", round_no, 5_000.0, {"haproxy": 0.2}),
            _run(single.key, "proxyfleet", round_no, 4_000.0, {"proxy": 0.3}),
        ]
    summary = summarize(settings.workloads(), results)
    assert summary[point.key]["bar"]["reached"] is True  # the median of 1.10, 0.90, 1.05
    assert summary[point.key]["proxyfleet/haproxy_rounds"] == [1.1, 0.9, 1.05]
    assert summary[point.key]["targets"]["proxyfleet"]["qps_spread_pct"] == 19.0  # (1100 - 900) / 1050
    assert summary[point.key]["targets"]["haproxy"]["cpu_us_per_query"] == 40.0
    assert summary[point.key]["targets"]["proxyfleet"]["cpu_us_per_query"] == 62.9  # 0.066 s / 1,050 queries
    assert summary[point.key]["targets"]["haproxy"]["kernel_us_per_query"] == 36.0
    assert summary[point.key]["targets"]["proxyfleet"]["kernel_us_per_query"] == 31.4  # 0.033 s / 1,050 queries
    assert summary[many.key]["bar"]["reached"] is False
    assert summary[single.key]["bar"]["applies"] is False
    section = _report(settings, summary)
    assert f"| {point.title} | 1.05 | 1.10, 0.90, 1.05 | 0.53 | **yes** (ProxyFleet/haproxy >= 1.00) |" in section
    assert f"| {many.title} | 1.25 | 1.25, 1.25, 1.25 | 0.83 | no (ProxyFleet/haproxy >= 1.00 and " in section
    assert f"| {point.title} | 40.0 | 36.0 | 62.9 | 31.4 | 1.57 |" in section
    assert "| 100 | 200 | 250 | +50 |" in section  # µs per query over one connection
    assert single.title not in section.split("**CPU per query**")[0].split("**The bar**")[1]


def test_pinning_gives_the_proxy_the_last_cpus_and_refuses_a_machine_too_small() -> None:
    layout = Layout.split(1, {0, 1, 2, 3})
    assert layout.proxy == {3} and layout.rest == {0, 1, 2}
    assert layout.describe() == "proxy on CPU 3; server and sysbench on CPU 0,1,2"
    assert Layout.split(2, {0, 1, 2, 3}).proxy == {2, 3}
    with pytest.raises(PinningError, match="only 2 CPU"):
        Layout.split(2, {0, 1})


def test_the_cpu_snapshots_split_each_roles_time_into_all_and_kernel() -> None:
    before = CpuSnapshot(0.0, 0.0, 0.0, 0.0, {10: 1.0, 11: 2.0}, {10: 0.5, 11: 1.0}, 0.0, 0.0)
    after = CpuSnapshot(2.0, 4.0, 0.0, 0.0, {10: 2.0, 11: 2.5, 12: 0.4}, {10: 0.8, 11: 1.2, 12: 0.1}, 0.0, 0.0)
    shares = before.until(after, {10: "proxy", 11: "proxy", 12: "mariadbd"})
    assert shares["cores_proxy"] == 0.75 and shares["kernel_cores_proxy"] == 0.25  # 1.5 s and 0.5 s over 2 s
    assert shares["cores_mariadbd"] == 0.2 and shares["kernel_cores_mariadbd"] == 0.05  # started in between


def test_a_sysbench_command_names_the_workload_the_target_the_data_and_its_options(tmp_path: Path) -> None:
    settings, _ = parse_args(["--quick"])
    bench = Bench(settings, tmp_path / "report.md")
    bench.targets["haproxy"] = ("127.0.0.1", 4321)
    point = settings.workloads()[0]
    command = bench.sysbench_command(point, "haproxy", "--time=5", "--report-interval=1")
    assert command == [
        "sysbench", "oltp_point_select", f"--threads={settings.threads}", "--db-ps-mode=disable",
        *sysbench_connection_args("127.0.0.1", 4321), "--tables=2", "--table-size=5000",
        "--time=5", "--report-interval=1", "run",
    ]  # fmt: skip
