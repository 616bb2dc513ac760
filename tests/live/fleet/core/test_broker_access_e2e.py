"""The broker with credentials and TLS, end to end: a private Redis that speaks only TLS and knows only an ACL user
whose password holds URL-quoted characters (``rediss://fleet:...@127.0.0.1:PORT/0?ssl_cert_reqs=required&
ssl_ca_certs=...``), the control plane (settings from ``REDIS_URL``) and a node (``REDIS_URL`` in its environment)
given that URL unchanged. A published version reaches the node and its ack and reports come back; the password
appears in no log and on no process's command line."""

from __future__ import annotations

import json
import os
from pathlib import Path
from urllib.parse import quote, unquote, urlparse

import pytest

from devstack import stack
from devstack.api_client import ApiClient
from devstack.proxy import rw_split_config
from tests.support.fleet_seed import cluster_seed

CLUSTER = "tls"
NODE = "tls-1"
OPERATOR, OPERATOR_PASSWORD = "tls-operator", "tls-operator-pass"
SEED = cluster_seed("TLS")
HEALTH = "from fleet.core import health; print(health.control_plane().service('broker').summary)"


@pytest.fixture(scope="module")
def fleet_shape() -> stack.FleetShape:
    """One node reporting every second, a broker speaking TLS only; no beat (the publish sends the version)."""
    document = rw_split_config(
        3306, [3307], global_variables=[{"variable_name": "mysql-threads", "variable_value": "1"}]
    )
    return stack.FleetShape(
        seed=SEED,
        seed_env={
            "TLS_OPERATOR": OPERATOR,
            "TLS_PASSWORD": OPERATOR_PASSWORD,
            "TLS_CLUSTER": CLUSTER,
            "TLS_DOCUMENT": json.dumps(document),
        },
        nodes=[stack.NodeShape(NODE, report_interval=1)],
        beat=False,
        broker_tls=True,
    )


def command_lines_of(root: int) -> list[str]:
    """The command lines of process ``root`` and of every process below it."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        try:
            stat = (entry / "stat").read_text()
        except (OSError, ValueError):
            continue
        if entry.name.isdigit():
            parents[int(entry.name)] = int(stat.rpartition(")")[2].split()[1])
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        try:
            found.append((Path("/proc") / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode())
        except OSError:
            continue
        todo += [child for child, parent in parents.items() if parent == pid]
    return found


def test_a_tls_broker_with_an_acl_user_carries_configs_acks_and_reports_and_its_password_stays_hidden(
    running_fleet: stack.RunningFleet,
) -> None:
    broker = urlparse(running_fleet.broker)
    assert (broker.scheme, broker.username) == ("rediss", "fleet") and "ssl_cert_reqs=required" in broker.query
    password = unquote(broker.password or "")
    assert password and quote(password, safe="") != password  # the URL carries it quoted

    api = ApiClient(running_fleet.url, OPERATOR, OPERATOR_PASSWORD, CLUSTER)
    version = api.call("POST", "/publish/", {"comment": "over TLS"})["version"]

    def applied_and_reported() -> bool:
        node = api.call("GET", f"/nodes/{NODE}/")
        return (node["state"], node["applied_version"]) == ("applied", version) and node["last_heartbeat"] is not None

    stack.wait_until(applied_and_reported, f"{NODE} applied at v{version}", 30, running_fleet.nodes[NODE])
    assert api.call("GET", f"/stats/nodes/{NODE}/")  # a report came back through the broker
    health = stack.manage(running_fleet.env, "shell", "--verbosity", "0", "-c", HEALTH)
    assert health.startswith("answers; messages waiting:")

    secrets = (password, quote(password, safe=""))
    shown = [health, json.dumps(api.call("GET", f"/stats/nodes/{NODE}/"))]
    shown += [path.read_text(errors="replace") for path in running_fleet.workdir.glob("*.log")]
    assert len(shown) >= 5  # the health line, the report, the web, worker and node logs
    assert not [text[:200] for text in shown if any(secret in text for secret in secrets)]
    node_process = running_fleet.nodes[NODE].proc
    assert node_process is not None
    lines = command_lines_of(node_process.pid)
    assert any(" agent " in line for line in lines)  # the node and its agent (and the proxy's worker)
    assert not [line for line in lines if any(secret in line for secret in secrets)]
    assert os.environ.get("REDIS_URL") != running_fleet.broker  # the test's own environment holds no broker URL
