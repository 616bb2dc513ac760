"""The control plane's models: ProxySQL's tables per cluster, nodes, published versions, the audit log and the
nodes' report history (their mirrors' and hot-row queues' too)."""

from fleet.core.models.audit import AuditEntry
from fleet.core.models.health import ServiceHeartbeat
from fleet.core.models.nodes import Cluster, ProxyNode
from fleet.core.models.stats import HotQueueSample, MirrorSample, NodeSample, Resolution, ServerSample
from fleet.core.models.tables import (
    TABLE_MODELS,
    ClusterRow,
    FastRoutingRule,
    Hostgroup,
    PgsqlForwardListener,
    PgsqlServer,
    PgsqlUser,
    QueryRule,
    ReplicationHostgroup,
    Server,
    Shard,
    ShardedTable,
    User,
    Variable,
)
from fleet.core.models.versions import ConfigVersion

__all__ = [
    "TABLE_MODELS",
    "AuditEntry",
    "Cluster",
    "ClusterRow",
    "ConfigVersion",
    "FastRoutingRule",
    "Hostgroup",
    "HotQueueSample",
    "MirrorSample",
    "NodeSample",
    "PgsqlForwardListener",
    "PgsqlServer",
    "PgsqlUser",
    "ProxyNode",
    "QueryRule",
    "ReplicationHostgroup",
    "Resolution",
    "Server",
    "ServerSample",
    "ServiceHeartbeat",
    "Shard",
    "ShardedTable",
    "User",
    "Variable",
]
