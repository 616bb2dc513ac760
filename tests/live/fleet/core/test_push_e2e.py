"""Push end to end: the control plane (gunicorn, a Celery worker and beat on a file SQLite database under the test's
tmp dir), a private redis-server on a free port, two real proxy nodes with their agents, and the sandbox MariaDB.

Edits and publishes go through the REST API (``/api/v1/``); the cluster, its nodes and an operator account are
seeded with one ``manage.py shell`` (the API has no endpoint for nodes). Node ``e2e-b`` runs with
``--allowed-hostgroups 10,20``: a node-side limit the control plane does not know, so a version with a server in
hostgroup 30 is accepted by publishing and refused by that node. Reconcile runs every second here. The nodes check
the control plane's signature (``stack.running_fleet`` gives them its public key); messages pushed straight to a
node's queue stand for whoever can write to Redis.
"""

from __future__ import annotations

import dataclasses
import json
import signal
import urllib.error
import urllib.request
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pymysql
import pytest
import redis
from celery import Celery

from devstack import ports, stack
from devstack.api_client import ApiClient
from devstack.proxy import READER_HG, WRITER_HG
from devstack.sandbox import APP_PASSWORD, APP_USER, Sandbox
from proxyapp.config.document import parse_config
from proxyapp.node.agent import APPLY_TASK
from proxyapp.node.signature import SIGNATURE_FAILED, SignedConfig, new_private_key, private_key_from_text, sign
from tests.support.fleet_seed import cluster_seed

pytestmark = pytest.mark.sandbox

CLUSTER = "e2e"
OPERATOR = "e2e-operator"
OPERATOR_PASSWORD = "e2e-operator-pass"
#: How long a node may take to apply a published version (it takes about a second).
APPLY_TIMEOUT = 30
SEED = cluster_seed("E2E")


def seed_document(sandbox: Sandbox) -> dict[str, Any]:
    """Writer hostgroup 10 = the primary, reader hostgroup 20 = the replica; plain SELECTs go to the readers."""
    return {
        "mysql_servers": [
            {"hostgroup_id": WRITER_HG, "hostname": "127.0.0.1", "port": sandbox.primary().port},
            {"hostgroup_id": READER_HG, "hostname": "127.0.0.1", "port": sandbox.replicas()[0].port},
        ],
        "mysql_users": [{"username": APP_USER, "password": APP_PASSWORD, "default_hostgroup": WRITER_HG}],
        "mysql_query_rules": [
            {"rule_id": 20, "active": 1, "match_digest": "^SELECT", "destination_hostgroup": READER_HG, "apply": 1}
        ],
        "global_variables": [{"variable_name": "mysql-threads", "variable_value": "1"}],
    }


class Api(ApiClient):
    """The control plane's REST API as the operator account, on the test cluster."""

    def __init__(self, base: str) -> None:
        super().__init__(base, OPERATOR, OPERATOR_PASSWORD, CLUSTER)

    def publish(self, comment: str) -> int:
        """Publish the draft; the new version's number."""
        return self.call("POST", "/publish/", {"comment": comment})["version"]

    def node(self, name: str) -> dict[str, Any]:
        """A node as the API shows it."""
        return self.call("GET", f"/nodes/{name}/")


@dataclass
class Fleet:
    """Everything the tests drive: the sandbox, the API as the operator, and the running fleet."""

    sandbox: Sandbox
    api: Api
    running: stack.RunningFleet

    def wait_applied(self, version: int, *names: str) -> None:
        """Wait until the API shows ``names`` (default: every node) applied at ``version``."""
        for name in names or self.running.nodes:

            def applied(name: str = name) -> bool:
                node = self.api.node(name)
                return (node["state"], node["applied_version"]) == ("applied", version)

            stack.wait_until(applied, f"node {name} applied at v{version}", APPLY_TIMEOUT, self.running.nodes[name])

    def server_id(self, name: str, sql: str = "SELECT @@server_id") -> int:
        """Run ``sql`` through a node; the server id it answers."""
        mysql_port, _ = self.running.ports[name]
        conn = pymysql.connect(host="127.0.0.1", port=mysql_port, user=APP_USER, password=APP_PASSWORD, autocommit=True)
        with conn, conn.cursor() as cur:
            cur.execute(sql)
            return int(cur.fetchone()[0])

    def running_checksum(self, name: str) -> str:
        """The checksum of the config a node's proxy runs (its admin endpoint)."""
        _, admin_port = self.running.ports[name]
        with urllib.request.urlopen(f"http://127.0.0.1:{admin_port}/config", timeout=10) as response:
            return json.loads(response.read())["checksum"]

    def version_checksum(self, number: int) -> str:
        return self.api.call("GET", f"/versions/{number}/")["checksum"]


def server_ids(sandbox: Sandbox) -> tuple[int, int]:
    """(primary's, replica's) @@server_id."""
    ids = []
    for server in (sandbox.primary(), sandbox.replicas()[0]):
        with server.connect() as conn, conn.cursor() as cur:
            cur.execute("SELECT @@server_id")
            ids.append(int(cur.fetchone()[0]))
    return ids[0], ids[1]


def run_reconcile(fleet: Fleet) -> list[str]:
    """Have the control plane's Celery worker run a reconcile now; the names of the nodes it sent a version to."""
    client = Celery(broker=fleet.running.broker, backend=fleet.running.broker)
    try:
        result = client.send_task("proxyfleet.fleet.reconcile", queue="fleet", ignore_result=False)
        return list(result.get(timeout=APPLY_TIMEOUT))
    finally:
        client.close()


@pytest.fixture(scope="module")
def fleet_shape(sandbox: Sandbox) -> stack.FleetShape:
    """The operator, the cluster with the seed config and nodes ``e2e-a`` and ``e2e-b`` (which refuses hostgroup 30),
    both reporting every second; reconcile every second."""
    return stack.FleetShape(
        seed=SEED,
        seed_env={
            "E2E_OPERATOR": OPERATOR,
            "E2E_PASSWORD": OPERATOR_PASSWORD,
            "E2E_CLUSTER": CLUSTER,
            "E2E_DOCUMENT": json.dumps(seed_document(sandbox)),
        },
        env={"FLEET_RECONCILE_SECONDS": "1"},
        nodes=[
            stack.NodeShape("e2e-a", report_interval=1),
            stack.NodeShape("e2e-b", allowed_hostgroups="10,20", report_interval=1),
        ],
    )


@pytest.fixture(scope="module")
def fleet(sandbox: Sandbox, running_fleet: stack.RunningFleet) -> Fleet:
    """The control plane, a private Redis and two nodes, with the seed config published as the first version."""
    fleet = Fleet(sandbox, Api(running_fleet.url), running_fleet)
    fleet.wait_applied(fleet.api.publish("the seed config"))
    return fleet


def test_a_published_query_rule_changes_routing_on_both_nodes(fleet: Fleet) -> None:
    primary, replica = server_ids(fleet.sandbox)
    assert primary != replica
    assert [fleet.server_id(name) for name in fleet.running.nodes] == [replica, replica]  # rule 20: SELECTs to readers

    rule = {"rule_id": 5, "active": 1, "match_pattern": "@@server_id", "destination_hostgroup": WRITER_HG, "apply": 1}
    created = fleet.api.call("POST", "/query-rules/", rule)
    published_at = datetime.now(UTC)
    version = fleet.api.publish("@@server_id goes to the writer")
    fleet.wait_applied(version)
    assert [fleet.server_id(name) for name in fleet.running.nodes] == [primary, primary]
    for name in fleet.running.nodes:
        node = fleet.api.node(name)
        assert (node["applied_version"], node["applied_checksum"], node["error"]) == (
            version,
            fleet.version_checksum(version),
            "",
        )
        assert datetime.fromisoformat(node["last_ack_at"]) > published_at  # the node acknowledged it
        assert fleet.running_checksum(name) == node["applied_checksum"]

    fleet.api.call("DELETE", f"/query-rules/{created['key']}/")
    fleet.wait_applied(fleet.api.publish("back to the seed routing"))
    assert [fleet.server_id(name) for name in fleet.running.nodes] == [replica, replica]


def test_a_node_down_during_a_publish_catches_up_through_reconcile(fleet: Fleet) -> None:
    primary, replica = server_ids(fleet.sandbox)
    fleet.running.nodes["e2e-b"].signal(signal.SIGKILL)  # the proxy dies; its workers and agent follow it
    fleet.running.nodes["e2e-b"].stop()
    stack.wait_until(lambda: ports.port_free(fleet.running.ports["e2e-b"][0]), "end of e2e-b's worker processes", 10)

    rule = {"rule_id": 6, "active": 1, "match_pattern": "@@server_id", "destination_hostgroup": WRITER_HG, "apply": 1}
    created = fleet.api.call("POST", "/query-rules/", rule)
    version = fleet.api.publish("published while e2e-b is down")
    fleet.wait_applied(version, "e2e-a")
    # The message the publish sent to e2e-b is lost (deleted from Redis); only reconcile sends another one.
    broker = redis.Redis.from_url(fleet.running.broker)
    broker.delete("node.e2e-b")
    stack.wait_until(lambda: broker.llen("node.e2e-b") == 1, "message from reconcile in node.e2e-b", 10)
    assert fleet.api.node("e2e-b")["applied_version"] == version - 1

    fleet.running.start_node("e2e-b")
    fleet.wait_applied(version, "e2e-b")
    assert fleet.server_id("e2e-b") == primary
    assert fleet.running_checksum("e2e-b") == fleet.version_checksum(version)

    fleet.api.call("DELETE", f"/query-rules/{created['key']}/")
    fleet.wait_applied(fleet.api.publish("back to the seed routing"))
    assert fleet.server_id("e2e-b") == replica


def test_a_config_a_node_refuses_shows_failed_and_the_node_keeps_its_config(fleet: Fleet) -> None:
    _, replica = server_ids(fleet.sandbox)
    before = fleet.api.node("e2e-b")["applied_version"]
    server = {"hostgroup_id": 30, "hostname": "127.0.0.1", "port": fleet.sandbox.replicas()[0].port}
    created = fleet.api.call("POST", "/servers/", server)
    version = fleet.api.publish("a reporting hostgroup e2e-b may not serve")
    fleet.wait_applied(version, "e2e-a")
    stack.wait_until(lambda: fleet.api.node("e2e-b")["state"] == "failed", "refusal from e2e-b", APPLY_TIMEOUT)

    refused = fleet.api.node("e2e-b")
    assert refused["applied_version"] == before
    assert refused["error"] == (
        "mysql_servers: hostgroup 30 is not served by node e2e-b (it serves hostgroups 10, 20: --allowed-hostgroups)"
    )
    assert fleet.running_checksum("e2e-b") == fleet.version_checksum(before)  # still the old config
    assert fleet.server_id("e2e-b") == replica
    # Reconcile does not send a refused version again: three reconciles run by the control plane's worker, on
    # demand, send nothing to e2e-b.
    pushed_at = refused["last_pushed_at"]
    broker = redis.Redis.from_url(fleet.running.broker)
    for _ in range(3):
        assert "e2e-b" not in run_reconcile(fleet)
        assert broker.llen("node.e2e-b") == 0
    assert fleet.api.node("e2e-b")["last_pushed_at"] == pushed_at

    fleet.api.call("DELETE", f"/servers/{created['key']}/")
    fleet.wait_applied(fleet.api.publish("without hostgroup 30"))  # the next good version is applied everywhere


def test_a_node_restarts_with_redis_down_and_serves_its_last_applied_config(fleet: Fleet) -> None:
    primary, _ = server_ids(fleet.sandbox)
    rule = {"rule_id": 7, "active": 1, "match_pattern": "@@server_id", "destination_hostgroup": WRITER_HG, "apply": 1}
    fleet.api.call("POST", "/query-rules/", rule)
    version = fleet.api.publish("the config e2e-a must come back with")
    fleet.wait_applied(version)
    checksum = fleet.version_checksum(version)

    fleet.running.redis.stop()
    try:
        fleet.running.nodes["e2e-a"].stop()
        fleet.running.start_node("e2e-a")
        assert fleet.running_checksum("e2e-a") == checksum
        assert fleet.server_id("e2e-a") == primary
        assert (
            json.loads((fleet.running.workdir / "nodes" / "e2e-a" / "applied.json").read_text())["version"] == version
        )
    finally:
        fleet.running.redis.start()


def push_straight_to_queue(broker: str, node: str, kwargs: dict[str, Any]) -> None:
    """Put an apply message in ``node``'s queue as anyone who can write to the broker can, bypassing the control
    plane."""
    app = Celery("not-the-control-plane", broker=broker)
    try:
        app.send_task(APPLY_TASK, kwargs=kwargs, queue=f"node.{node}", ignore_result=True)
    finally:
        app.close()


def test_a_config_the_control_plane_did_not_sign_is_refused_reported_and_changes_nothing(fleet: Fleet) -> None:
    before = fleet.api.node("e2e-a")
    running = fleet.running_checksum("e2e-a")
    answered_by = fleet.server_id("e2e-a")
    assert running == fleet.version_checksum(before["applied_version"])
    node_log = fleet.running.nodes["e2e-a"].log_path
    logged_before = node_log.read_text(errors="replace").count(SIGNATURE_FAILED)

    # What an attacker wants the node to run, as the next version number: @@server_id from the other server.
    primary, _ = server_ids(fleet.sandbox)
    document = seed_document(fleet.sandbox)
    elsewhere = READER_HG if answered_by == primary else WRITER_HG
    document["mysql_query_rules"] = [
        {"rule_id": 1, "active": 1, "match_pattern": "@@server_id", "destination_hostgroup": elsewhere, "apply": 1}
    ]
    number = before["applied_version"] + 1
    config = SignedConfig(
        CLUSTER, "uid", number, parse_config(document).checksum, document, datetime.now(UTC).isoformat()
    )
    control_plane_key = private_key_from_text((fleet.running.workdir / "signing.key").read_text())
    messages = {
        # Signed by the control plane, for node e2e-b: replayed to e2e-a.
        "meant for another node": sign(control_plane_key, config, "e2e-b"),
        "forged": sign(private_key_from_text(new_private_key()), config, "e2e-a"),
        "unsigned": "",
    }
    for count, (case, signature) in enumerate(messages.items(), start=1):
        push_straight_to_queue(fleet.running.broker, "e2e-a", {**dataclasses.asdict(config), "signature": signature})
        expected = (
            f"{SIGNATURE_FAILED}: the message is not signed"
            if not signature
            else f"{SIGNATURE_FAILED}: version {number} of cluster {CLUSTER!r} is not signed by the control plane "
            "whose public key this node has (forged, altered, or meant for another node)"
        )

        def shown(expected: str = expected, count: int = count) -> bool:
            logged = node_log.read_text(errors="replace").count(SIGNATURE_FAILED) - logged_before
            node = fleet.api.node("e2e-a")
            return logged == count and (node["state"], node["error"]) == ("failed", expected)

        stack.wait_until(shown, f"e2e-a's refusal of the {case} message", APPLY_TIMEOUT, fleet.running.nodes["e2e-a"])
        refused = fleet.api.node("e2e-a")
        assert (refused["applied_version"], refused["applied_checksum"]) == (before["applied_version"], running)
        assert fleet.running_checksum("e2e-a") == running  # the proxy still runs its version
        assert fleet.server_id("e2e-a") == answered_by  # and routes by it

    # Garbage is refused in the node's log; the agent goes on and applies the next version the control plane sends.
    push_straight_to_queue(fleet.running.broker, "e2e-a", {"version": "x", "document": None})
    stack.wait_until(
        lambda: "refused a malformed proxyfleet.node.apply message" in node_log.read_text(errors="replace"),
        "e2e-a's refusal of a malformed message",
        APPLY_TIMEOUT,
        fleet.running.nodes["e2e-a"],
    )
    rule = {"rule_id": 8, "active": 1, "match_pattern": "@@server_id", "destination_hostgroup": WRITER_HG, "apply": 1}
    created = fleet.api.call("POST", "/query-rules/", rule)
    version = fleet.api.publish("signed by the control plane")
    assert version == number  # the number the forged message claimed: the refusal held nothing back
    fleet.wait_applied(version)
    assert fleet.api.node("e2e-a")["error"] == ""
    assert fleet.running_checksum("e2e-a") == fleet.version_checksum(version)
    fleet.api.call("DELETE", f"/query-rules/{created['key']}/")
    fleet.wait_applied(fleet.api.publish("back to the seed routing"))
