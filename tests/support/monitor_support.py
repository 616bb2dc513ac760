"""What the monitor tests share: fast monitor settings, a sandbox of their own (they kill servers and flip read_only),
and readers of the proxy's monitor findings."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from devstack.proxy import ProxyProcess
from devstack.sandbox import Sandbox, SandboxServer
from devstack.stack import wait_until
from tests.conftest import module_sandbox_dir

#: Checks every 200 ms (connect every second), 500 ms timeouts, shunned after 2 misses, back at once.
FAST_MONITOR = {
    "mysql-monitor_connect_interval": 1000,
    "mysql-monitor_ping_interval": 200,
    "mysql-monitor_read_only_interval": 200,
    "mysql-monitor_replication_lag_interval": 200,
    "mysql-monitor_connect_timeout": 500,
    "mysql-monitor_ping_timeout": 500,
    "mysql-monitor_read_only_timeout": 500,
    "mysql-monitor_replication_lag_timeout": 500,
    "mysql-monitor_ping_max_failures": 2,
    "mysql-monitor_read_only_max_timeout_count": 2,
    "mysql-shun_recovery_time_sec": 0,
}
#: How long a test waits for the monitor to see a change (it takes well under a second).
SEEN_WITHIN = 30


def global_variables(overrides: dict[str, object] | None = None) -> list[dict[str, str]]:
    """``global_variables`` rows: FAST_MONITOR with ``overrides`` (variable name -> value)."""
    values: dict[str, object] = {**FAST_MONITOR, **(overrides or {})}
    return [{"variable_name": name, "variable_value": str(value)} for name, value in values.items()]


@contextmanager
def own_sandbox(label: str, replicas: int, semi_sync: bool = False, tls: bool = False) -> Iterator[Sandbox]:
    """A sandbox for one test module (its module-scoped fixture holds it), taken down after it."""
    box = Sandbox(module_sandbox_dir(label))
    box.up(replicas=replicas, semi_sync=semi_sync, tls=tls)
    try:
        yield box
    finally:
        box.down()


def set_read_only(server: SandboxServer, read_only: bool) -> None:
    """SET GLOBAL read_only on a sandbox server."""
    with server.connect() as conn, conn.cursor() as cur:
        cur.execute(f"SET GLOBAL read_only = {int(read_only)}")


def monitor_rows(proxy: ProxyProcess, port: int) -> list[dict[str, Any]]:
    """The ``monitor`` rows of /stats for the server on ``port`` (one per hostgroup it is in)."""
    return [row for row in proxy.stats()["monitor"] if row["srv_port"] == port]


def placement(proxy: ProxyProcess) -> set[tuple[int, int, str]]:
    """(hostgroup, port, status) of every runtime server the proxy routes by."""
    return {(row["hostgroup_id"], row["port"], row["status"]) for row in proxy.admin("GET", "/runtime/servers")}


def transitions(proxy: ProxyProcess, port: int) -> list[dict[str, Any]]:
    """The proxy's server transitions of the server on ``port``, oldest first."""
    return [row for row in proxy.admin("GET", "/monitor/transitions") if row["srv_port"] == port]


def wait_for(check: Callable[[], bool], what: str, proxy: ProxyProcess, timeout: float = SEEN_WITHIN) -> None:
    """Wait until ``check`` holds; the error names ``what`` and quotes the proxy's log."""
    try:
        wait_until(check, what, timeout)
    except RuntimeError as exc:
        raise AssertionError(f"{exc}; the proxy's log:\n{proxy.log()[-4000:]}") from None
