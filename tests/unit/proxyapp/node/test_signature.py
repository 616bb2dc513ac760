"""Signed configs (``proxyapp.node.signature``): what the control plane signs is checked by the node's public key
alone, and any change to what the node would apply, or to whom it is for, fails the check; the agent refuses such a
message before it reaches the proxy (its version checks against a real proxy: tests/live/proxyapp/node)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from proxyapp.node.agent import Agent, AgentSettings
from proxyapp.node.signature import (
    SIGNATURE_FAILED,
    SignatureError,
    SignedConfig,
    new_private_key,
    private_key_from_text,
    public_key_text,
    public_keys_from_text,
    sign,
    verify,
)

KEY = private_key_from_text(new_private_key())
PUBLIC = public_keys_from_text(public_key_text(KEY))
NODE = "node-a"
DOCUMENT: dict[str, Any] = {
    "mysql_servers": [{"hostgroup_id": 10, "hostname": "db1", "port": 3306}],
    "mysql_users": [{"username": "app", "password": "pw", "default_hostgroup": 10}],
}
CONFIG = SignedConfig("main", "uid-1", 7, "c" * 64, DOCUMENT, "2026-12-04T01:00:00+00:00")


def refusal(config: SignedConfig, signature: object, node: str = NODE) -> str:
    with pytest.raises(SignatureError) as refused:
        verify(PUBLIC, config, node, signature)
    return str(refused.value)


def test_a_signed_config_checks_and_any_change_to_it_does_not() -> None:
    good = sign(KEY, CONFIG, NODE)
    verify(PUBLIC, CONFIG, NODE, good)
    # Keys in another order (as a broker may deliver them) are the same document.
    verify(PUBLIC, dataclasses.replace(CONFIG, document=dict(reversed(DOCUMENT.items()))), NODE, good)

    tampered = {**DOCUMENT, "mysql_users": [{"username": "app", "password": "evil", "default_hostgroup": 10}]}
    changes = {
        "document": tampered,
        "version": 8,
        "checksum": "d" * 64,
        "cluster": "other",
        "cluster_uid": "uid-2",
        "signed_at": "2026-12-04T01:00:01+00:00",
    }
    for field, value in changes.items():
        message = refusal(dataclasses.replace(CONFIG, **{field: value}), good)
        assert message.startswith(f"{SIGNATURE_FAILED}: version "), field
    assert "meant for another node" in refusal(CONFIG, good, node="node-b")  # signed for node-a only


def test_while_the_key_changes_a_node_holding_both_public_keys_takes_either_signature() -> None:
    new = private_key_from_text(new_private_key())
    both = public_keys_from_text(f"{public_key_text(new)},{public_key_text(KEY)}")
    verify(both, CONFIG, NODE, sign(KEY, CONFIG, NODE))
    verify(both, CONFIG, NODE, sign(new, CONFIG, NODE))
    assert refusal(CONFIG, sign(new, CONFIG, NODE)).startswith(SIGNATURE_FAILED)  # not with the old key alone


def test_a_wrong_key_a_missing_or_a_garbled_signature_fails() -> None:
    other = private_key_from_text(new_private_key())
    assert refusal(CONFIG, sign(other, CONFIG, NODE)).startswith(f"{SIGNATURE_FAILED}: version 7 of cluster 'main'")
    assert refusal(CONFIG, "") == f"{SIGNATURE_FAILED}: the message is not signed"
    assert refusal(CONFIG, None) == f"{SIGNATURE_FAILED}: the message is not signed"
    assert refusal(CONFIG, "not base64!") == f"{SIGNATURE_FAILED}: the signature is not base64"
    assert refusal(CONFIG, "AAAA").startswith(f"{SIGNATURE_FAILED}: version 7")  # base64, not 64 bytes
    unsignable = dataclasses.replace(CONFIG, document={"x": {1, 2}})  # no JSON for a set: refused, not a crash
    assert refusal(unsignable, sign(KEY, CONFIG, NODE)).startswith(f"{SIGNATURE_FAILED}: version 7")


def test_keys_are_one_line_of_base64_and_bad_ones_are_named() -> None:
    text = new_private_key()
    assert len(text) == 44 and public_key_text(private_key_from_text(text + "\n")) != text
    with pytest.raises(ValueError, match=r"^the signing key is not an Ed25519 key \(the base64 of 32 bytes\)$"):
        private_key_from_text("c2hvcnQ=")
    with pytest.raises(ValueError, match=r"^the signing public key 'not a key' is not an Ed25519 key"):
        public_keys_from_text(f"{public_key_text(KEY)}, not a key")


def agent(tmp_path: Path) -> Agent:
    """An agent holding the public key, whose proxy cannot be reached: a refusal must come before the proxy."""
    settings = AgentSettings(
        node=NODE,
        broker="redis://127.0.0.1:1/0",
        admin=("127.0.0.1", 1),
        state_dir=tmp_path / "state",
        signing_public_keys=PUBLIC,
    )
    return Agent(settings)


def test_the_agent_refuses_a_forged_or_unsigned_message_with_an_ack_saying_why(tmp_path: Path) -> None:
    node = agent(tmp_path)
    fields = dataclasses.asdict(CONFIG)
    forged = sign(private_key_from_text(new_private_key()), CONFIG, NODE)
    for signature in (forged, ""):
        ack = node.apply(**fields, signature=signature)
        assert (ack["node"], ack["version"], ack["checksum"], ack["ok"]) == (NODE, 7, "c" * 64, False)
        assert ack["error"].startswith(SIGNATURE_FAILED)
    assert not (tmp_path / "state").exists()  # nothing applied, nothing recorded
    with pytest.raises(ValueError, match=r"apply: signature must be text, not 5"):
        node.apply(**fields, signature=5)
