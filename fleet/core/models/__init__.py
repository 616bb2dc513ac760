"""The control plane's models: ProxySQL's tables per cluster, nodes, published versions, the audit log and the
nodes' report history."""

from fleet.core.models.audit import AuditEntry
from fleet.core.models.nodes import Cluster, ProxyNode
from fleet.core.models.stats import NodeSample, Resolution, ServerSample
from fleet.core.models.tables import (
    TABLE_MODELS,
    ClusterRow,
    Hostgroup,
    QueryRule,
    ReplicationHostgroup,
    Server,
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
    "Hostgroup",
    "NodeSample",
    "ProxyNode",
    "QueryRule",
    "ReplicationHostgroup",
    "Resolution",
    "Server",
    "ServerSample",
    "User",
    "Variable",
]
