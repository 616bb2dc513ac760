"""The node agent's apply and report logic against a real proxy process (the Celery wiring is covered end to end in
test_push_e2e.py): atomic reloads, idempotency, refusals that keep the running config, the state on disk."""

from __future__ import annotations

import pytest

from proxyapp.node.node import check_node_name, parse_hostgroups


def test_node_names_and_hostgroup_lists_are_checked() -> None:
    assert check_node_name("node-1.a_b") == "node-1.a_b"
    with pytest.raises(ValueError, match=r"--node: 'bad/name' is not a node name"):
        check_node_name("bad/name")
    assert parse_hostgroups("10, 20") == {10, 20}
    with pytest.raises(ValueError, match=r"--allowed-hostgroups: 'x' is not a hostgroup number"):
        parse_hostgroups("10,x")
