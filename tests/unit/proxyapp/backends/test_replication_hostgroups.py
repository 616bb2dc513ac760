"""mysql_replication_hostgroups: the runtime view (``proxyapp.backends.topology``) and the writer the monitor keeps,
then real proxies against a sandbox of their own whose servers' read_only the tests flip: servers move between the
writer and reader hostgroups live, a second writer is refused, and a write waits for a writer (or fails naming the
hostgroup)."""

from __future__ import annotations

import re
from typing import Any

import pymysql
import pytest

from proxyapp.backends.monitor import Monitor
from proxyapp.backends.topology import MonitorState, ServerVerdict, runtime_view
from proxyapp.config.document import parse_config

P, R1, R2 = ("db1", 3306), ("db2", 3306), ("db3", 3306)


def pair_config(*, also_reader: bool = True, **server_columns: Any) -> Any:
    """Writer hostgroup 10 = db1, reader hostgroup 20 = db2 and db3 (``server_columns`` apply to db2's row)."""
    return parse_config(
        {
            "mysql_servers": [
                {"hostgroup_id": 10, "hostname": "db1"},
                {"hostgroup_id": 20, "hostname": "db2", **server_columns},
                {"hostgroup_id": 20, "hostname": "db3"},
            ],
            "mysql_replication_hostgroups": [{"writer_hostgroup": 10, "reader_hostgroup": 20}],
            "global_variables": [
                {"variable_name": "mysql-monitor_writer_is_also_reader", "variable_value": str(also_reader).lower()}
            ],
        }
    )


def online(read_only: bool | None, reason: str = "") -> ServerVerdict:
    return ServerVerdict("ONLINE", reason, read_only)


def hostgroups(view: Any) -> set[tuple[int, str, str]]:
    """(hostgroup, host, status) of a runtime view."""
    return {(s.hostgroup_id, s.hostname, s.status) for s in view.servers}


# --- the runtime view -------------------------------------------------------------------------------------------


def test_without_findings_the_view_is_the_config() -> None:
    view = runtime_view(pair_config(), MonitorState())
    assert hostgroups(view) == {(10, "db1", "ONLINE"), (20, "db2", "ONLINE"), (20, "db3", "ONLINE")}
    assert view.reader_of == {10: 20} and view.placement == {}


def test_a_promoted_replica_moves_into_the_writer_hostgroup_and_the_old_writer_into_the_readers() -> None:
    state = MonitorState(1, {P: online(True), R1: online(False), R2: online(True)}, {10: R1})
    view = runtime_view(pair_config(), state)
    assert hostgroups(view) == {
        (10, "db2", "ONLINE"),
        (20, "db2", "ONLINE"),
        (20, "db1", "ONLINE"),
        (20, "db3", "ONLINE"),
    }
    assert view.placement[(10, "db2", 3306)] == "read_only=0: the writer of hostgroup 10"
    assert view.placement[(10, "db1", 3306)] == "read_only=1: not a writer of hostgroup 10"
    assert view.placement[(20, "db1", 3306)] == "read_only=1: a reader of hostgroup 20"
    alone = runtime_view(pair_config(also_reader=False), state)  # the writer leaves the readers
    assert hostgroups(alone) == {(10, "db2", "ONLINE"), (20, "db1", "ONLINE"), (20, "db3", "ONLINE")}
    assert "writer_is_also_reader=0" in alone.placement[(20, "db2", 3306)]


def test_a_configured_writer_is_not_copied_into_the_reader_hostgroup() -> None:
    view = runtime_view(pair_config(), MonitorState(1, {P: online(False), R1: online(True)}, {10: P}))
    assert hostgroups(view) == {(10, "db1", "ONLINE"), (20, "db2", "ONLINE"), (20, "db3", "ONLINE")}


def test_a_second_writer_is_kept_out_of_the_writer_hostgroup() -> None:
    view = runtime_view(pair_config(), MonitorState(1, {P: online(False), R1: online(False)}, {10: P}))
    assert hostgroups(view) == {(10, "db1", "ONLINE"), (20, "db2", "ONLINE"), (20, "db3", "ONLINE")}
    assert view.placement[(20, "db2", 3306)] == (
        "read_only=0, but db1:3306 is the writer of hostgroup 10: a second writer is refused"
    )


def test_a_server_of_unknown_read_only_leaves_the_writer_hostgroup_once_it_has_a_writer() -> None:
    view = runtime_view(pair_config(), MonitorState(1, {R1: online(False)}, {10: R1}))
    assert (10, "db1", "ONLINE") not in hostgroups(view)
    assert view.placement[(10, "db1", 3306)] == "read_only not known; db2:3306 is the writer of hostgroup 10"


def test_a_shunned_server_is_shunned_in_every_hostgroup_but_an_operator_status_stays() -> None:
    shunned = ServerVerdict("SHUNNED", "ping failed 3 times: Connection refused", False)
    state = MonitorState(1, {P: shunned, R1: ServerVerdict("SHUNNED", "lag", True)}, {10: P})
    view = runtime_view(pair_config(status="OFFLINE_SOFT"), state)
    assert hostgroups(view) == {(10, "db1", "SHUNNED"), (20, "db2", "OFFLINE_SOFT"), (20, "db3", "ONLINE")}
    assert view.status_reasons[(10, "db1", 3306)] == "ping failed 3 times: Connection refused"


def test_the_monitor_state_travels_as_json_and_bad_documents_name_the_field() -> None:
    state = MonitorState(7, {P: online(False, "ping succeeded again"), R1: ServerVerdict("SHUNNED", "x")}, {10: P})
    assert MonitorState.from_json(state.to_json()) == state
    for document, field in (
        ({"seq": -1}, "seq"),
        ({"seq": 1, "servers": [{"host": "db1", "port": 1, "status": "DOWN", "reason": ""}]}, "servers[0].status"),
        ({"seq": 1, "servers": [{"host": "db1", "port": 70000, "status": "ONLINE", "reason": ""}]}, "servers[0].port"),
        ({"seq": 1, "writers": [{"writer_hostgroup": "10", "host": "db1", "port": 1}]}, "writers[0].writer_hostgroup"),
        ({"seq": 1, "writers": {}}, "writers"),
    ):
        with pytest.raises(ValueError, match=re.escape(field)):
            MonitorState.from_json(document)


# --- the writer the monitor keeps (its findings set by hand, no servers) ----------------------------------------


def decide(
    monitor: Monitor, read_only: dict[tuple[str, int], bool], down: frozenset[tuple[str, int]] = frozenset()
) -> tuple[str, int] | None:
    """Give the monitor these read_only findings (``down``: shunned for being unreachable), let it conclude."""
    for address, value in read_only.items():
        server = monitor._servers[address]
        server.read_only = value
        server.shun_reason = "ping failed 3 times: Connection refused" if address in down else None
    monitor.conclude()
    return monitor.state.writers.get(10)


def test_the_writer_stays_while_it_claims_so_and_a_second_one_is_refused(caplog: pytest.LogCaptureFixture) -> None:
    monitor = Monitor(pair_config(), lambda state: None)
    assert decide(monitor, {P: False, R1: False, R2: True}) == P  # after a restart: the config's writer
    assert "TWO WRITERS in hostgroup 10: db2:3306 reports read_only=0 while db1:3306 is the writer" in caplog.text
    assert decide(monitor, {P: False, R1: False}, down=frozenset({P})) == R1  # the writer died: the live claimant
    assert decide(monitor, {P: False, R1: False}) == R1  # the old writer is back writable: refused, R1 stays
    assert decide(monitor, {R1: True}) == P  # R1 steps down: the one still claiming takes over
    assert decide(monitor, {P: True}) is None  # nobody claims: no writer
    assert monitor.state.seq >= 4


# --- live ---------------------------------------------------------------------------------------------------------


def server_id(conn: pymysql.Connection) -> int:
    """The server id of the server answering a statement routed to the writer hostgroup (the default one)."""
    with conn.cursor() as cur:
        cur.execute("SHOW VARIABLES LIKE 'server_id'")
        return int(cur.fetchone()[1])
