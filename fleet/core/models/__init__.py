"""The control plane's models: ProxySQL's tables per cluster, nodes, published versions and the audit log."""

from fleet.core.models.audit import AuditEntry
from fleet.core.models.nodes import Cluster, ProxyNode
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
    "ProxyNode",
    "QueryRule",
    "ReplicationHostgroup",
    "Server",
    "User",
    "Variable",
]
