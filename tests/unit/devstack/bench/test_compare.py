"""The side-by-side comparison's rounds, its reading of sysbench and /proc, and its means (no servers needed)."""

from __future__ import annotations

import pytest

from devstack.bench.compare import OTHER, THIS, Sample, cpu_between, order, queries_done, summary
from devstack.bench.run_bench import CpuSnapshot

SYSBENCH = """\
    transactions:                        104016 (13001.32 per sec.)
    queries:                             104016 (13001.32 per sec.)
"""


def test_the_order_alternates_so_neither_proxy_always_runs_second() -> None:
    assert [order(n) for n in range(4)] == [(THIS, OTHER), (OTHER, THIS), (THIS, OTHER), (OTHER, THIS)]


def test_the_queries_are_read_from_sysbench_s_final_report() -> None:
    assert queries_done(SYSBENCH) == 104016
    with pytest.raises(RuntimeError, match="no query count"):
        queries_done("FATAL: unable to connect to MySQL server")


def _snapshot(alive: dict[int, float], kernel: dict[int, float]) -> CpuSnapshot:
    return CpuSnapshot(0.0, 0.0, 0.0, 0.0, alive, kernel, 0.0, 0.0)


def test_cpu_between_splits_user_and_system_time_over_the_proxy_s_processes() -> None:
    before = _snapshot({10: 1.0, 11: 2.0, 99: 5.0}, {10: 0.5, 11: 1.0, 99: 1.0})
    after = _snapshot({10: 1.6, 11: 2.5, 99: 9.0}, {10: 0.9, 11: 1.2, 99: 3.0})
    user, system = cpu_between(before, after, (10, 11))  # 99 is another process: not counted
    assert system == pytest.approx(0.6)
    assert user == pytest.approx(1.1 - 0.6)


def test_the_summary_is_each_proxy_s_mean() -> None:
    samples = [
        Sample(THIS, 0, 1000.0, 10.0, 30.0),
        Sample(OTHER, 0, 900.0, 12.0, 31.0),
        Sample(OTHER, 1, 1100.0, 14.0, 29.0),
        Sample(THIS, 1, 1200.0, 12.0, 32.0),
    ]
    assert summary(samples) == {
        THIS: {"qps": 1100.0, "user_us": 11.0, "system_us": 31.0},
        OTHER: {"qps": 1000.0, "user_us": 13.0, "system_us": 30.0},
    }
