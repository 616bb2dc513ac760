"""The control-plane skeleton: settings from the environment, /healthz, the Celery app and the demo config."""

from __future__ import annotations

from devstack.demo import READER_HOSTGROUP, WRITER_HOSTGROUP, demo_config
from devstack.sandbox import APP_PASSWORD, APP_USER, Sandbox
from proxyapp.config.document import parse_config


def test_demo_config_is_a_valid_rw_split_over_the_sandbox(sandbox: Sandbox) -> None:
    config = parse_config(demo_config(sandbox.primary(), sandbox.replicas()))
    primary, replica = sandbox.primary(), sandbox.replicas()[0]
    by_hostgroup = {(s.hostgroup_id, s.port): s.weight for s in config.mysql_servers}
    assert by_hostgroup == {
        (WRITER_HOSTGROUP, primary.port): 1,
        (READER_HOSTGROUP, primary.port): 1,
        (READER_HOSTGROUP, replica.port): 1000,
    }
    [user] = config.mysql_users
    assert (user.username, user.password, user.default_hostgroup) == (APP_USER, APP_PASSWORD, WRITER_HOSTGROUP)
    rules = [(r.rule_id, r.match_digest, r.destination_hostgroup, r.apply) for r in config.mysql_query_rules]
    assert rules == [(1, "^SELECT.*FOR UPDATE", WRITER_HOSTGROUP, True), (2, "^SELECT", READER_HOSTGROUP, True)]
