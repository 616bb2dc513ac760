"""The seed script a test fleet's control plane runs at start (``devstack.stack.FleetShape.seed``): accounts, the
cluster with its config, its nodes, optionally a first published version. Written once for the end-to-end tests."""

from __future__ import annotations


def cluster_seed(prefix: str, *, viewer: bool = False, publish: str | None = None) -> str:
    """A seed reading ``{prefix}_OPERATOR``, ``{prefix}_PASSWORD``, ``{prefix}_CLUSTER`` and ``{prefix}_DOCUMENT``
    (and ``{prefix}_VIEWER`` with ``viewer``) from its environment: an operator (and a viewer), the cluster with the
    document imported, the fleet's nodes (``FLEET_NODES``), and a published version commented ``publish`` if given."""
    lines = [
        "import json, os",
        "from django.contrib.auth.models import User",
        "from fleet.core import publishing, roles",
        "from fleet.core.models import Cluster, ProxyNode",
        f'password = os.environ["{prefix}_PASSWORD"]',
        f'roles.grant(User.objects.create_user(os.environ["{prefix}_OPERATOR"], password=password), roles.OPERATOR)',
    ]
    if viewer:
        lines.append(
            f'roles.grant(User.objects.create_user(os.environ["{prefix}_VIEWER"], password=password), roles.VIEWER)'
        )
    lines += [
        f'cluster = Cluster.objects.create(name=os.environ["{prefix}_CLUSTER"])',
        f'publishing.import_document(cluster, json.loads(os.environ["{prefix}_DOCUMENT"]), None)',
        'for name, address in json.loads(os.environ["FLEET_NODES"]).items():',
        "    ProxyNode.objects.create(cluster=cluster, name=name, mysql_address=address)",
    ]
    if publish is not None:
        lines.append(f"publishing.publish(cluster, None, {publish!r})")
    return "\n".join(lines) + "\n"
