"""The demo proxy config for a sandbox: ProxySQL's classic read/write split over its primary and replicas."""

from __future__ import annotations

from typing import Any

from devstack.sandbox import APP_PASSWORD, APP_USER, Sandbox

WRITER_HOSTGROUP = 10
READER_HOSTGROUP = 20
# Reads go to the replicas; the primary is a reader too, with a weight low enough to take reads only when
# no replica is available.
REPLICA_READ_WEIGHT = 1000
PRIMARY_READ_WEIGHT = 1


def demo_config(sandbox: Sandbox) -> dict[str, Any]:
    """A ProxySQL-style config document: writer hostgroup 10 (the primary), reader hostgroup 20 (the replicas
    and, lightly weighted, the primary), the user ``app`` writing by default, and two routing rules that send
    plain SELECTs to the readers and SELECT ... FOR UPDATE to the writer."""
    primary = sandbox.primary()
    servers: list[dict[str, Any]] = [
        {"hostgroup_id": WRITER_HOSTGROUP, "hostname": primary.host, "port": primary.port, "comment": primary.name},
        {
            "hostgroup_id": READER_HOSTGROUP,
            "hostname": primary.host,
            "port": primary.port,
            "weight": PRIMARY_READ_WEIGHT,
            "comment": primary.name,
        },
    ]
    servers += [
        {
            "hostgroup_id": READER_HOSTGROUP,
            "hostname": replica.host,
            "port": replica.port,
            "weight": REPLICA_READ_WEIGHT,
            "comment": replica.name,
        }
        for replica in sandbox.replicas()
    ]
    return {
        "mysql_servers": servers,
        "mysql_users": [{"username": APP_USER, "password": APP_PASSWORD, "default_hostgroup": WRITER_HOSTGROUP}],
        "mysql_query_rules": [
            {
                "rule_id": 1,
                "active": 1,
                "match_digest": r"^SELECT.*FOR UPDATE",
                "destination_hostgroup": WRITER_HOSTGROUP,
                "apply": 1,
            },
            {
                "rule_id": 2,
                "active": 1,
                "match_digest": r"^SELECT",
                "destination_hostgroup": READER_HOSTGROUP,
                "apply": 1,
            },
        ],
        "mysql_replication_hostgroups": [
            {"writer_hostgroup": WRITER_HOSTGROUP, "reader_hostgroup": READER_HOSTGROUP, "comment": "sandbox"}
        ],
    }
