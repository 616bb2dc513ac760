"""Sending published versions to a cluster's proxy nodes, and recording what the nodes answer (the control plane's
half of docs/control-plane.md, "Push protocol"; the node's half is ``proxyapp/node/agent.py``).

A node is sent ``proxyfleet.node.apply`` on its own queue ``node.<name>``; the message carries the version number,
its checksum and its document, signed for that node (``fleet.core.signing``), and applying it is idempotent, so
sending it again (reconcile) is always safe.
Acks and reports are recorded with conditional UPDATEs, so messages that arrive late or twice never undo newer news.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Q
from django.utils import timezone
from kombu.exceptions import KombuError

from fleet.core import signing, stats
from fleet.core.models import Cluster, ConfigVersion, ProxyNode
from proxyapp.shown import shown_in

log = logging.getLogger("fleet.push")

APPLY_TASK = "proxyfleet.node.apply"
#: A node that has not reported for this long is marked stale (``ProxyNode.stale_since``); nodes report every 5 s.
STALE_AFTER = timedelta(seconds=30)


def push_to_node(node: ProxyNode, version: ConfigVersion) -> None:
    """Send ``version`` to ``node``, signed for it, and mark the node pending on it (unless it was already sent a
    newer one)."""
    from fleet.celery import app

    cluster = version.cluster
    app.send_task(
        APPLY_TASK,
        kwargs=signing.apply_message(
            node.name, cluster.name, str(cluster.uid), version.number, version.checksum, version.document
        ),
        queue=node.queue,
        ignore_result=True,  # else the result backend is touched too, and with Redis down it retries for 20 s
    )
    ProxyNode.objects.filter(pk=node.pk).filter(
        Q(pushed_version__isnull=True) | Q(pushed_version__lte=version.number)
    ).update(pushed_version=version.number, state=ProxyNode.State.PENDING, error="", last_pushed_at=timezone.now())


def push_version(version: ConfigVersion) -> str:
    """Send a newly published ``version`` to every node of its cluster; what kept it from them ("" if nothing).

    A broker that cannot be reached (or a signing key that cannot be read) is logged and said, not raised: the
    version is stored, and reconcile sends it to every node that does not run it once the broker is back. The nodes
    share one broker and one key, so the first failure stands for the rest.
    """
    nodes = list(ProxyNode.objects.filter(cluster=version.cluster))
    for node in nodes:
        try:
            push_to_node(node, version)
        except (KombuError, OSError, signing.SigningKeyError) as exc:
            unusable = isinstance(exc, signing.SigningKeyError)
            problem = f"the signing key is unusable ({exc})" if unusable else f"the broker is unreachable ({exc})"
            log.warning("%s v%d not sent to its nodes (reconcile will): %s", version.cluster, version.number, problem)
            return problem
    return ""


def queued_messages(queue: str) -> int:
    """How many messages wait in ``queue`` (not counting one a consumer holds)."""
    from fleet.celery import app

    with app.connection_for_read() as connection:
        try:
            return connection.default_channel.queue_declare(queue=queue, passive=True).message_count
        except connection.channel_errors:  # the queue does not exist: nothing waits in it
            return 0


def record_ack(node_name: str, version: int, checksum: str, ok: bool, error: str, at: datetime) -> str:
    """Record a node's answer to ``version``; returns what was done (for the log).

    ``ok``: the node runs ``version`` (claimed only if no newer applied version is recorded; the state becomes
    applied only if no newer version was sent since). Not ``ok``: the node refused ``version`` and runs what it ran;
    the refusal is logged whatever it names, and shown (state failed, the error) unless a newer version was sent or
    applied. A refusal never records a version as sent: a message the control plane did not send (one that failed
    the node's signature check) must not hold back the versions it does send.
    """
    nodes = ProxyNode.objects.filter(name=node_name)
    if not nodes.exists():
        return f"ack from unknown node {node_name!r} ignored"
    not_sent_newer = Q(pushed_version__isnull=True) | Q(pushed_version__lte=version)
    if ok:
        claimed = nodes.filter(Q(applied_version__isnull=True) | Q(applied_version__lte=version)).update(
            applied_version=version, applied_checksum=checksum, last_ack_at=at
        )
        if not claimed:
            return f"late ack of v{version} from {node_name} ignored (a newer version is applied)"
        nodes.filter(not_sent_newer).update(pushed_version=version, state=ProxyNode.State.APPLIED, error="")
        return f"{node_name} applied v{version}"
    log.warning("node %s refused v%d: %s", node_name, version, error)
    claimed = (
        nodes.filter(not_sent_newer)
        .exclude(applied_version__gt=version)
        .update(state=ProxyNode.State.FAILED, error=error or "refused without a reason", last_ack_at=at)
    )
    if not claimed:
        return f"late refusal of v{version} from {node_name} ignored (a newer version was sent or applied)"
    return f"{node_name} refused v{version}"


def record_report(
    node_name: str, at: datetime, applied_version: int | None, applied_checksum: str, snapshot: dict[str, Any]
) -> str:
    """Record a node's periodic report: its heartbeat and latest statistics, what it runs (unless an ack told
    something newer), and a point of its history. A report older than the last one recorded is ignored; a
    malformed snapshot raises ValueError naming what is wrong, before anything is recorded. Its texts are stored as
    they may be shown (``shown_in``: a query's bytes that are not UTF-8, lone surrogates in the JSON of a node that
    sent them so, as ``\\xff``), so that no page, API answer or database refuses them."""
    snapshot = shown_in(snapshot)
    figures = stats.figures(snapshot)
    node = ProxyNode.objects.filter(name=node_name).first()
    if node is None:
        return f"report from unknown node {node_name!r} ignored"
    previous, previous_at = node.last_report, node.last_heartbeat
    this = ProxyNode.objects.filter(pk=node.pk)
    claimed = this.filter(Q(last_heartbeat__isnull=True) | Q(last_heartbeat__lt=at)).update(
        last_report=snapshot, last_heartbeat=at, stale_since=None
    )
    if not claimed:
        return f"report of {at.isoformat()} from {node_name} ignored (a newer one is recorded)"
    this.filter(Q(last_ack_at__isnull=True) | Q(last_ack_at__lt=at)).update(
        applied_version=applied_version, applied_checksum=applied_checksum
    )
    if applied_version is not None:  # the node runs what it was sent, though its ack never came
        this.filter(state=ProxyNode.State.PENDING, pushed_version=applied_version).update(
            state=ProxyNode.State.APPLIED, error=""
        )
    stats.record(node, at, figures, previous, previous_at)
    return f"report of {at.isoformat()} from {node_name} recorded"


def reconcile(now: datetime | None = None) -> list[str]:
    """Send each cluster's latest version to every node that does not run it (version or checksum differ), unless
    the node refused that very version or a message already waits in its queue; mark nodes that stopped
    reporting stale. Returns the names of the nodes sent to."""
    now = now or timezone.now()
    cutoff = now - STALE_AFTER
    silent = ProxyNode.objects.filter(stale_since__isnull=True).filter(
        Q(last_heartbeat__lt=cutoff) | Q(last_heartbeat__isnull=True, created_at__lt=cutoff)
    )
    for node in silent:
        log.warning("node %s is stale: no report since %s", node, node.last_heartbeat or "it was added")
    silent.update(stale_since=now)
    sent = []
    for cluster in Cluster.objects.all():
        latest = cluster.latest_version()
        if latest is None:
            continue
        for node in cluster.nodes.all():
            if node.applied_version == latest.number and node.applied_checksum == latest.checksum:
                continue
            if node.state == ProxyNode.State.FAILED and node.pushed_version == latest.number:
                continue
            if queued_messages(node.queue):
                continue
            push_to_node(node, latest)
            sent.append(node.name)
    if sent:
        log.info("reconcile sent the latest version to %s", ", ".join(sent))
    return sent
