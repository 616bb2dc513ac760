"""The kernel-calls probe's reading of perf's and sysbench's output (no perf or sysbench needed)."""

from __future__ import annotations

from devstack.bench.kernel_calls import parse_perf_csv, perf_events, queries_in_window

PERF = """\
180246,,syscalls:sys_enter_recvfrom,3001234567,100.00,,
0,,syscalls:sys_enter_read,3001234567,100.00,,
<not supported>,,syscalls:sys_enter_writev,0,100.00,,
65800,,syscalls:sys_enter_epoll_pwait,3001234567,100.00,,
378410,,raw_syscalls:sys_enter,3001234567,100.00,,
39012,,context-switches,3001234567,100.00,,
"""

SYSBENCH = """\
Threads started!

[ 1s ] thds: 16 tps: 25000.00 qps: 25000.00 (r/w/o: 25000.00/0.00/0.00) lat (ms,95%): 1.01 err/s: 0.00
[ 2s ] thds: 16 tps: 26000.00 qps: 26000.00 (r/w/o: 26000.00/0.00/0.00) lat (ms,95%): 1.01 err/s: 0.00
[ 3s ] thds: 16 tps: 27000.50 qps: 27000.50 (r/w/o: 27000.50/0.00/0.00) lat (ms,95%): 1.01 err/s: 0.00
[ 4s ] thds: 16 tps: 28000.00 qps: 28000.00 (r/w/o: 28000.00/0.00/0.00) lat (ms,95%): 1.01 err/s: 0.00
[ 5s ] thds: 16 tps: 29000.00 qps: 29000.00 (r/w/o: 29000.00/0.00/0.00) lat (ms,95%): 1.01 err/s: 0.00
SQL statistics:
    queries performed:
"""


def test_perf_counts_are_read_by_event_and_what_it_could_not_count_is_left_out() -> None:
    counts = parse_perf_csv(PERF)
    assert counts == {
        "syscalls:sys_enter_recvfrom": 180246.0,
        "syscalls:sys_enter_read": 0.0,
        "syscalls:sys_enter_epoll_pwait": 65800.0,
        "raw_syscalls:sys_enter": 378410.0,
        "context-switches": 39012.0,
    }


def test_the_window_counts_the_seconds_after_it_opened() -> None:
    assert queries_in_window(SYSBENCH, 2, 2) == 27000.5 + 28000.0
    assert queries_in_window(SYSBENCH, 0, 5) == 25000 + 26000 + 27000.5 + 28000 + 29000
    assert queries_in_window(SYSBENCH, 5, 3) == 0.0


def test_each_named_system_call_and_the_totals_are_counted() -> None:
    events = perf_events()
    assert "syscalls:sys_enter_sendmsg" in events and "syscalls:sys_enter_epoll_wait" in events
    assert events[-2:] == ["raw_syscalls:sys_enter", "context-switches"]
