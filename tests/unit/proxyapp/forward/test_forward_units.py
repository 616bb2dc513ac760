"""The forwarding listeners' pure parts: the order servers are tried in, the report merged across workers, and the
config rows' checks."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from proxyapp.backends.choice import no_server
from proxyapp.config.document import ConfigError, parse_config
from proxyapp.config.tables import PgsqlServer
from proxyapp.forward.forwarding import Target, pick_order
from proxyapp.report.merge import merge_forward_sections


def target(host: str, weight: int = 1, status: str = "ONLINE") -> Target:
    return Target(PgsqlServer(hostname=host, hostgroup_id=1, weight=weight, status=status), "configured")


def test_only_online_servers_with_weight_and_room_are_tried() -> None:
    targets = [
        target("a"),
        target("b", status="OFFLINE_SOFT"),
        target("c", status="SHUNNED"),
        target("d", weight=0),
        target("e"),
    ]
    full = targets[4]
    order = pick_order(targets, lambda t: t is not full, random.Random(1))
    assert [t.server.hostname for t in order] == ["a"]


def test_the_first_pick_follows_the_weights_and_every_server_comes_once() -> None:
    targets = [target("heavy", weight=9), target("light", weight=1)]
    rng = random.Random(7)
    firsts = Counter(pick_order(targets, lambda t: True, rng)[0].server.hostname for _ in range(2000))
    assert 0.85 < firsts["heavy"] / 2000 < 0.95
    assert all(len(pick_order(targets, lambda t: True, rng)) == 2 for _ in range(10))


def test_the_refusal_names_the_hostgroup_and_each_servers_status() -> None:
    servers = [target("a").server, target("b", status="SHUNNED").server]
    assert no_server(1, servers) == (
        "ProxyFleet: no server of pgsql hostgroup 1 can take a connection (a:5432 ONLINE, b:5432 SHUNNED)"
    )
    assert no_server(7, []) == "ProxyFleet: pgsql hostgroup 7 has no server"


def test_workers_reports_merge_by_listener_and_server() -> None:
    listener = {
        "port": 6432,
        "interface": "127.0.0.1",
        "hostgroup_id": 1,
        "state": "listening",
        "connections_active": 1,
        "connections_total": 2,
        "connections_refused": 0,
        "connections_spliced": 1,
        "bytes_from_clients": 10,
        "bytes_to_clients": 20,
    }
    server = {
        "hostgroup_id": 1,
        "hostname": "h",
        "port": 5432,
        "status": "ONLINE",
        "status_reason": "",
        "connections_active": 1,
        "connections_total": 2,
        "connect_errors": 1,
        "bytes_sent": 10,
        "bytes_recv": 20,
    }
    failed = {**listener, "state": "error: taken", "connections_total": 0}
    merged = merge_forward_sections(
        [{"listeners": [listener], "servers": [server]}, {"listeners": [failed], "servers": [server]}, {}]
    )
    (row,) = merged["listeners"]
    assert (row["state"], row["connections_total"], row["bytes_to_clients"]) == ("error: taken", 2, 40)
    assert row["connections_spliced"] == 2
    (merged_server,) = merged["servers"]
    assert (merged_server["connect_errors"], merged_server["bytes_recv"]) == (2, 40)


def listener_doc(**row: object) -> dict[str, object]:
    return {
        "pgsql_servers": [{"hostgroup_id": 1, "hostname": "127.0.0.1"}],
        "pgsql_forward_listeners": [{"port": 6432, "hostgroup_id": 1, **row}],
    }


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ({"interface": "localhost"}, "'localhost' is not an IP address to listen on"),
        ({"port": 0}, "port: 0 is below the minimum 1"),
        ({"port": 6033}, "port: 6033 is the port of mysql-interfaces"),
        ({"port": 6070}, "port: 6070 is the port of admin-restapi_port"),
        ({"max_connections": 0}, "max_connections: 0 is below the minimum 1"),
    ],
)
def test_a_bad_listener_row_is_refused_naming_its_column(row: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError) as refused:
        parse_config(listener_doc(**row))
    assert any(message in error and "pgsql_forward_listeners[0]" in error for error in refused.value.errors), (
        refused.value.errors
    )


def test_a_listener_to_a_hostgroup_without_servers_is_warned_about() -> None:
    config = parse_config({"pgsql_forward_listeners": [{"port": 6432, "hostgroup_id": 7}]})
    assert any("pgsql_servers has no server in hostgroup 7" in w for w in config.warnings)


def test_configs_without_pgsql_tables_keep_their_checksum() -> None:
    document = parse_config({}).to_document()
    assert "pgsql_servers" not in document and "pgsql_forward_listeners" not in document
    with_rows = parse_config(listener_doc()).to_document()
    assert with_rows["pgsql_forward_listeners"][0]["interface"] == "127.0.0.1"
