"""The monitor checks PostgreSQL servers as it checks MySQL ones: it logs in as ``pgsql-monitor_username``, pings with
an empty query, shuns a server it cannot reach (forwarding then sends no connection there) and only logs a server
that refuses the monitor's login."""

from __future__ import annotations

from typing import Any

import psycopg

from devstack.ports import free_port
from devstack.proxy import ProxyProcess
from devstack.stack import wait_until
from tests.live.proxyapp.forward.test_forwarding import HG, PG_HOST, PG_PORT, StartProxy, connect, server_rows
from tests.support.monitor_support import SEEN_WITHIN, global_variables


def monitored_config(listener_port: int, dead_port: int, monitor_user: str) -> dict[str, Any]:
    """Hostgroup 100: the machine's PostgreSQL and a port nobody listens on, weighted to be tried first."""
    return {
        "pgsql_servers": [
            {"hostgroup_id": HG, "hostname": PG_HOST, "port": PG_PORT, "weight": 1},
            {"hostgroup_id": HG, "hostname": PG_HOST, "port": dead_port, "weight": 1000},
        ],
        "pgsql_forward_listeners": [{"port": listener_port, "hostgroup_id": HG}],
        "global_variables": global_variables(
            {"mysql-threads": 1, "pgsql-monitor_username": monitor_user, "pgsql-monitor_dbname": "postgres"}
        ),
    }


def status(proxy: ProxyProcess, port: int) -> tuple[str, str]:
    row = server_rows(proxy)[(PG_HOST, port)]
    return row["status"], row["status_reason"]


def test_an_unreachable_server_is_shunned_and_gets_no_connections(start_proxy: StartProxy) -> None:
    port, dead = free_port(), free_port()
    proxy = start_proxy(monitored_config(port, dead, "postgres"))
    wait_until(lambda: status(proxy, dead)[0] == "SHUNNED", "the dead server shunned", SEEN_WITHIN)
    assert status(proxy, dead)[1].startswith("ping failed 2 times: cannot connect to 127.0.0.1:")
    assert status(proxy, PG_PORT)[0] == "ONLINE"
    errors = server_rows(proxy)[(PG_HOST, dead)]["connect_errors"]
    for _ in range(5):
        with connect(port) as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
    assert server_rows(proxy)[(PG_HOST, dead)]["connect_errors"] == errors  # never tried while shunned
    pings = [r for r in proxy.admin("GET", "/monitor/ping") if r["port"] == PG_PORT]
    assert pings and pings[-1]["ping_error"] is None


def test_a_server_that_refuses_the_monitor_stays_online(start_proxy: StartProxy) -> None:
    port, dead = free_port(), free_port()
    proxy = start_proxy(monitored_config(port, dead, "no_such_monitor_role"))
    wait_until(lambda: status(proxy, dead)[0] == "SHUNNED", "the dead server shunned", SEEN_WITHIN)

    def refused() -> bool:
        rows = [r for r in proxy.admin("GET", "/monitor/ping") if r["port"] == PG_PORT]
        return bool(rows) and 'role "no_such_monitor_role" does not exist' in (rows[-1]["ping_error"] or "")

    wait_until(refused, "the monitor's login refused", SEEN_WITHIN)
    assert status(proxy, PG_PORT)[0] == "ONLINE"
    with psycopg.connect(host="127.0.0.1", port=port, user="postgres", dbname="postgres") as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)
