"""The node agent's apply and report logic against a real proxy process (the Celery wiring is covered end to end in
test_push_e2e.py): atomic reloads, idempotency, refusals that keep the running config, the state on disk, and a
signed node that never goes back to an older version."""

from __future__ import annotations

import dataclasses
import json
import resource
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from devstack.proxy import ProxyProcess, rw_split_config
from proxyapp.config.document import parse_config
from proxyapp.node.agent import TOP_DIGESTS, Agent, AgentSettings
from proxyapp.node.node import NodeStore, parse_hostgroups
from proxyapp.node.signature import SignedConfig, new_private_key, private_key_from_text, sign


def document(**variables: str) -> dict[str, Any]:
    """A read/write split over servers nobody needs to reach, with these global variables."""
    rows = [{"variable_name": name.replace("_", "-", 1), "variable_value": value} for name, value in variables.items()]
    rows.append({"variable_name": "mysql-threads", "variable_value": "1"})
    return rw_split_config(3306, [3307], global_variables=rows)


def checksum(doc: dict[str, Any]) -> str:
    return parse_config(doc).checksum


@pytest.fixture
def proxy(start_proxy: Callable[[dict[str, Any]], ProxyProcess]) -> ProxyProcess:
    """A proxy running ``document()``."""
    return start_proxy(document())


def make_agent(
    proxy: ProxyProcess, state_dir: Path, allowed: str | None = None, signing_keys: tuple[Ed25519PublicKey, ...] = ()
) -> Agent:
    """An agent of ``proxy`` with its state in ``state_dir``, where the proxy's admin token is put, as a node's is."""
    state_dir.mkdir(parents=True, exist_ok=True)
    token = NodeStore(state_dir).token_path
    token.write_text(proxy.token_path.read_text())
    token.chmod(0o600)
    settings = AgentSettings(
        node="agent-test",
        broker="redis://127.0.0.1:1/0",  # never used: these tests call the agent's methods directly
        admin=("127.0.0.1", proxy.admin_port),
        state_dir=state_dir,
        allowed_hostgroups=parse_hostgroups(allowed) if allowed else None,
        signing_public_keys=signing_keys,
    )
    return Agent(settings)


def test_apply_reloads_the_proxy_saves_the_document_and_is_idempotent(proxy: ProxyProcess, tmp_path: Path) -> None:
    agent = make_agent(proxy, tmp_path / "state")
    v2 = document(mysql_max_connections="500")
    ack = agent.apply("main", 2, checksum(v2), v2)
    assert (ack["node"], ack["version"], ack["checksum"], ack["ok"], ack["error"]) == (
        "agent-test",
        2,
        checksum(v2),
        True,
        "",
    )
    running = proxy.admin("GET", "/config")
    assert (running["checksum"], running["source"]) == (checksum(v2), "admin")
    store = NodeStore(tmp_path / "state")
    assert json.loads(store.config_path.read_text()) == v2
    assert store.config_path.stat().st_mode & 0o777 == 0o600  # it holds the backends' passwords
    assert store.directory.stat().st_mode & 0o777 == 0o700
    assert (store.applied().cluster, store.applied().version, store.applied().checksum) == ("main", 2, checksum(v2))

    # The same version again (a redelivery) and an older one (a late message): acknowledged, nothing reloaded.
    assert agent.apply("main", 2, checksum(v2), v2)["ok"]
    v1 = document()
    late = agent.apply("main", 1, checksum(v1), v1)
    assert (late["version"], late["checksum"], late["ok"]) == (2, checksum(v2), True)
    assert proxy.admin("GET", "/config")["loaded_at"] == running["loaded_at"]

    # A rollback: a new number for a config the node already runs is recorded without a reload.
    assert agent.apply("main", 3, checksum(v2), v2)["ok"]
    assert store.applied().version == 3
    assert proxy.admin("GET", "/config")["loaded_at"] == running["loaded_at"]

    # A control plane made anew (another cluster identity, numbering from 1 again): its version 1 is applied.
    fresh = agent.apply("main", 1, checksum(v1), v1, "another-cluster-uid")
    assert (fresh["version"], fresh["checksum"], fresh["ok"]) == (1, checksum(v1), True)
    assert proxy.admin("GET", "/config")["checksum"] == checksum(v1)
    assert (store.applied().version, store.applied().cluster_uid) == (1, "another-cluster-uid")


def test_a_refused_config_is_acked_with_the_reason_and_the_node_keeps_its_config(
    proxy: ProxyProcess, tmp_path: Path
) -> None:
    agent = make_agent(proxy, tmp_path / "state", allowed="10,20")
    before = proxy.admin("GET", "/config")["checksum"]
    outside = document()
    outside["mysql_servers"].append({"hostgroup_id": 30, "hostname": "10.9.9.9", "port": 3306})
    ack = agent.apply("main", 2, checksum(outside), outside)
    assert ack["ok"] is False
    assert ack["error"] == (
        "mysql_servers: hostgroup 30 is not served by node agent-test "
        "(it serves hostgroups 10, 20: --allowed-hostgroups)"
    )

    broken = document()
    broken["mysql_servers"][0]["port"] = 70000
    ack = agent.apply("main", 3, "0" * 64, broken)
    assert not ack["ok"] and "mysql_servers[0]" in ack["error"] and "port: 70000 is above" in ack["error"]

    good = document(mysql_max_connections="900")
    ack = agent.apply("main", 4, "f" * 64, good)
    assert ack["error"] == f"checksum mismatch: the document's is {checksum(good)}, the message says {'f' * 64}"

    assert proxy.admin("GET", "/config")["checksum"] == before
    assert NodeStore(tmp_path / "state").applied() is None  # nothing recorded on disk
    with pytest.raises(ValueError, match="version must be a positive whole number"):
        agent.apply("main", "5", checksum(good), good)


def test_report_carries_the_running_version_and_the_busiest_digests(proxy: ProxyProcess, tmp_path: Path) -> None:
    agent = make_agent(proxy, tmp_path / "state")
    first = agent.report()
    assert (first["node"], first["applied_version"]) == ("agent-test", None)  # nothing applied through the agent
    assert first["applied_checksum"] == checksum(json.loads(proxy.config_path.read_text()))  # the file it runs
    assert {"global", "connection_pool", "query_digest", "sharding_digest", "config"} <= set(first["stats"])

    v2 = document(mysql_max_connections="700")
    agent.apply("main", 2, checksum(v2), v2)
    report = agent.report()
    assert (report["applied_version"], report["applied_checksum"]) == (2, checksum(v2))
    assert len(report["stats"]["query_digest"]) <= TOP_DIGESTS

    # The proxy runs something else (a config file reloaded by hand): no version is claimed for it.
    proxy.admin("POST", "/reload", document())
    assert agent.report()["applied_version"] is None


SIGNING_KEY = private_key_from_text(new_private_key())


def signed(version: int, doc: dict[str, Any], signed_at: str, cluster_uid: str = "uid-1") -> dict[str, Any]:
    """The kwargs of an apply message for node ``agent-test``, signed by the control plane's key."""
    config = SignedConfig("main", cluster_uid, version, checksum(doc), doc, signed_at)
    return {**dataclasses.asdict(config), "signature": sign(SIGNING_KEY, config, "agent-test")}


def test_a_replayed_older_signed_version_never_rolls_the_node_back(proxy: ProxyProcess, tmp_path: Path) -> None:
    agent = make_agent(proxy, tmp_path / "state", signing_keys=(SIGNING_KEY.public_key(),))
    v1, v2 = document(mysql_max_connections="100"), document(mysql_max_connections="200")
    old = signed(1, v1, "2026-12-04T01:00:00+00:00")
    assert agent.apply(**old)["ok"]
    assert agent.apply(**signed(2, v2, "2026-12-04T01:01:00+00:00"))["ok"]

    # The old message again (captured from the broker and pushed back): the node stays on version 2.
    replay = agent.apply(**old)
    assert (replay["version"], replay["checksum"], replay["ok"]) == (2, checksum(v2), True)
    assert proxy.admin("GET", "/config")["checksum"] == checksum(v2)

    # Its config reloaded by hand (drift: reconcile will send version 2 again), the old one is refused all the same.
    by_hand = document(mysql_max_connections="300")
    proxy.admin("POST", "/reload", by_hand)
    refused = agent.apply(**old)
    assert (refused["ok"], refused["error"]) == (
        False,
        "version 1 is older than version 2 this node applied: not rolled back",
    )
    assert proxy.admin("GET", "/config")["checksum"] == checksum(by_hand)

    # Another identity of the cluster (a control plane made anew) is obeyed from its version 1, when it signed it
    # after the config the node runs; a message of another identity signed before that is a replay.
    earlier = agent.apply(**signed(5, v1, "2026-12-04T00:59:00+00:00", cluster_uid="uid-0"))
    assert earlier["ok"] is False and earlier["error"] == (
        "signed at 2026-12-04T00:59:00+00:00, before version 2 of cluster main this node applied "
        "(signed at 2026-12-04T01:01:00+00:00): not rolled back"
    )
    assert proxy.admin("GET", "/config")["checksum"] == checksum(by_hand)
    assert agent.apply(**signed(1, v1, "2026-12-04T01:02:00+00:00", cluster_uid="uid-2"))["ok"]
    assert proxy.admin("GET", "/config")["checksum"] == checksum(v1)
    applied = NodeStore(tmp_path / "state").applied()
    assert applied is not None and (applied.cluster_uid, applied.version, applied.signed_at) == (
        "uid-2",
        1,
        "2026-12-04T01:02:00+00:00",
    )


def test_a_version_the_node_cannot_save_is_not_run_and_the_ack_says_why(proxy: ProxyProcess, tmp_path: Path) -> None:
    """A full state directory (here: files capped at 64 bytes for this process) fails the save before the switch:
    the proxy keeps its config, the ack names the cause, nothing is left half written; with room again it applies."""
    agent = make_agent(proxy, tmp_path / "state")
    before = proxy.admin("GET", "/config")["checksum"]
    v2 = document(mysql_max_connections="700")
    limits = resource.getrlimit(resource.RLIMIT_FSIZE)
    handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the cap fails with EFBIG, not a signal
    resource.setrlimit(resource.RLIMIT_FSIZE, (64, limits[1]))
    try:
        ack = agent.apply("main", 2, checksum(v2), v2)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, limits)
        signal.signal(signal.SIGXFSZ, handler)
    assert ack["ok"] is False
    assert ack["error"].startswith(f"cannot save version 2 in {tmp_path / 'state'}: [Errno 27] File too large")
    assert proxy.admin("GET", "/config")["checksum"] == before
    assert sorted(p.name for p in (tmp_path / "state").iterdir()) == ["admin.token"]
    assert agent.apply("main", 2, checksum(v2), v2)["ok"]
    assert proxy.admin("GET", "/config")["checksum"] == checksum(v2)
