"""A burst of sessions that each need a new backend connection (issue 42, item 19: 1,000 clients logging in at once
through a one-worker node timed out their own connects under the loop's lag, shunned a healthy server and served
nothing): a worker has at most ``mysql-max_connects_in_flight`` connects under way to a server; the other sessions
wait in line and are served by the connections those connects open, or by the next connects, and none fails.

The server's replies pass through a relay that holds them (``tests.support.relay.SlowRelay``), so that the connects
stay under way as long as the test wants: no time has to pass."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pymysql
import pytest

from devstack.proxy import WRITER_HG
from devstack.sandbox import APP_PASSWORD, APP_USER, Sandbox
from devstack.stack import wait_until
from tests.support.harness import StartProxy
from tests.support.relay import SlowRelay

SESSIONS = 40
IN_FLIGHT = 4


@pytest.fixture
def relay(sandbox: Sandbox) -> Iterator[SlowRelay]:
    relay = SlowRelay(sandbox.primary().port)
    yield relay
    relay.close()


def burst_config(relay: SlowRelay) -> dict[str, Any]:
    """One worker, the primary behind the relay with room for every session, no monitor (its connects would pass
    the relay too), waits long enough that only the relay decides."""
    variables = {
        "mysql-threads": 1,
        "mysql-max_connects_in_flight": IN_FLIGHT,
        "mysql-monitor_enabled": "false",
        "mysql-connect_timeout_server": 120_000,
        "mysql-connect_timeout_server_max": 240_000,
        "mysql-connection_wait_timeout": 240_000,
    }
    port = relay.listener.getsockname()[1]
    return {
        "mysql_servers": [{"hostgroup_id": WRITER_HG, "hostname": "127.0.0.1", "port": port, "max_connections": 1000}],
        "mysql_users": [{"username": APP_USER, "password": APP_PASSWORD, "default_hostgroup": WRITER_HG}],
        "global_variables": [{"variable_name": k, "variable_value": str(v)} for k, v in variables.items()],
    }


def test_a_burst_of_sessions_opens_at_most_the_bound_of_connects_at_once_and_every_session_is_served(
    relay: SlowRelay, start_proxy: StartProxy
) -> None:
    proxy = start_proxy(burst_config(relay))
    relay.hold()  # the server's greetings wait: every connect stays under way
    answers: list[Any] = []
    errors: list[BaseException] = []

    def session(n: int) -> None:
        try:
            with pymysql.connect(host="127.0.0.1", port=proxy.port, user=APP_USER, password=APP_PASSWORD,
                                 read_timeout=600) as conn, conn.cursor() as cur:  # fmt: skip
                cur.execute(f"SELECT {n}")
                answers.append(cur.fetchone())
        except BaseException as exc:  # told to the test, not lost in the thread
            errors.append(exc)

    threads = [threading.Thread(target=session, args=(n,), daemon=True) for n in range(SESSIONS)]
    for thread in threads:
        thread.start()
    waited = SESSIONS - IN_FLIGHT

    def all_waiting() -> bool:
        return proxy.stats()["global"]["Server_Connects_waited"] >= waited

    wait_until(all_waiting, f"{waited} sessions waiting in line", 60)
    assert len(relay.sockets) // 2 == IN_FLIGHT  # the connects the server was asked for, each still under way
    assert proxy.stats()["global"]["Server_Connects_waited"] == waited
    relay.release()
    for thread in threads:
        thread.join(300)
    assert errors == []
    assert sorted(answers) == [(n,) for n in range(SESSIONS)]
    stats = proxy.stats()
    assert [row["status"] for row in stats["connection_pool"]] == ["ONLINE"]
    assert stats["connection_pool"][0]["ConnERR"] == 0
    assert stats["global"]["Server_Connections_created"] <= SESSIONS
