"""The monitor's decisions on a clock the test holds: probes go in through ``Monitor.record`` with the latency and
the answer the test chooses, so shunning for ``max_latency_ms``, for failed pings and the recovery after
``mysql-shun_recovery_time_sec`` are decided exactly, with no server and no waiting."""

from __future__ import annotations

from proxyapp.backends.monitor import Monitor, Outcome
from proxyapp.backends.topology import MonitorState
from proxyapp.config.document import parse_config

FAST = ("db1", 3306)
SLOW = ("db2", 3306)


class Clock:
    """A monotonic clock that moves only when told."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def monitor(clock: Clock, recovery_s: int = 10, max_failures: int = 3) -> tuple[Monitor, list[MonitorState]]:
    config = parse_config(
        {
            "mysql_servers": [
                {"hostgroup_id": 10, "hostname": "db1"},
                {"hostgroup_id": 20, "hostname": "db2", "max_latency_ms": 40},
            ],
            "global_variables": [
                {"variable_name": "mysql-shun_recovery_time_sec", "variable_value": str(recovery_s)},
                {"variable_name": "mysql-monitor_ping_max_failures", "variable_value": str(max_failures)},
            ],
        }
    )
    published: list[MonitorState] = []
    return Monitor(config, published.append, clock), published


def ping(m: Monitor, address: tuple[str, int], latency_ms: float) -> None:
    m.record("ping", address, 0.0, int(latency_ms * 1000), Outcome())
    m.conclude()


def refused(m: Monitor, address: tuple[str, int]) -> None:
    m.record("ping", address, 0.0, 0, Outcome(error="Connection refused"), reached=False)
    m.conclude()


def status(m: Monitor, address: tuple[str, int]) -> tuple[str, str]:
    verdict = m.state.servers[address]
    return verdict.status, verdict.reason


def test_a_ping_over_max_latency_ms_shuns_until_one_is_within_it() -> None:
    m, published = monitor(Clock())
    ping(m, SLOW, 39.9)
    ping(m, FAST, 500.0)  # no max_latency_ms on its row: any time is fine
    assert status(m, SLOW) == ("ONLINE", "") and status(m, FAST) == ("ONLINE", "")
    ping(m, SLOW, 40.1)
    assert status(m, SLOW) == ("SHUNNED", "ping took 40.1 ms > max_latency_ms 40")
    ping(m, SLOW, 100.0)  # still slow: the first reason stays
    assert status(m, SLOW) == ("SHUNNED", "ping took 40.1 ms > max_latency_ms 40")
    ping(m, SLOW, 40.0)  # exactly at the limit is within it
    assert status(m, SLOW) == ("ONLINE", "ping took 40.0 ms <= max_latency_ms 40")
    assert [state.servers[SLOW].status for state in published if SLOW in state.servers][-2:] == ["SHUNNED", "ONLINE"]


def test_failed_pings_shun_and_recovery_waits_for_shun_recovery_time() -> None:
    clock = Clock()
    m, _ = monitor(clock, recovery_s=10, max_failures=3)
    refused(m, FAST)
    refused(m, FAST)
    assert status(m, FAST)[0] == "ONLINE"  # two failures: not yet
    refused(m, FAST)
    assert status(m, FAST) == ("SHUNNED", "ping failed 3 times: Connection refused")
    clock.now += 9.9
    ping(m, FAST, 1.0)
    assert status(m, FAST)[0] == "SHUNNED"  # it answers, but has not been out for mysql-shun_recovery_time_sec
    clock.now += 0.2
    ping(m, FAST, 1.0)
    assert status(m, FAST) == ("ONLINE", "ping succeeded again after 10 s SHUNNED")


def test_a_success_between_failures_starts_the_count_again() -> None:
    m, _ = monitor(Clock(), max_failures=2)
    refused(m, FAST)
    ping(m, FAST, 1.0)
    refused(m, FAST)
    assert status(m, FAST)[0] == "ONLINE"
    refused(m, FAST)
    assert status(m, FAST)[0] == "SHUNNED"


def test_a_probe_of_a_server_no_longer_configured_is_ignored() -> None:
    m, _ = monitor(Clock())
    m.record("ping", ("gone", 3306), 0.0, 1000, Outcome())
    m.conclude()
    assert ("gone", 3306) not in m.state.servers
