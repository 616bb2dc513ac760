"""Hot rows in the control plane (docs/hot-rows.md): each node's hot-row queues as its last report has them, the
fleet's per queue, their history as chart series, and the queues the nodes propose for hot keys, which an operator
accepts into the draft as a query rule (then publishes as usual). The Hot rows page and the API read them here."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.db import transaction
from django.utils import timezone

from fleet.core.drafts import Actor, save_row
from fleet.core.hotreport import ProposalRow, QueueRow, TrxQueueSection, read_trx_queue
from fleet.core.models import Cluster, HotQueueSample, ProxyNode, QueryRule, Resolution
from fleet.core.stats import queue_series, queues_seen, read_section

#: How a chart adds up a metric over the nodes at one moment: counts and rates are summed, the longest wait is the
#: longest anywhere.
FLEET_COMBINE: dict[str, Callable[[Iterable[float]], float]] = {"longest_wait_ms": max}
#: Raw points of the nodes that fall in one slot of this many seconds are added up for the fleet's series.
FLEET_SLOT = timedelta(seconds=10)


@dataclass(frozen=True)
class QueueLine:
    """A queue as one node (``node``) or the whole fleet (``node`` "") reports it now, with its latest rates."""

    node: str
    row: QueueRow
    transactions_per_s: float | None = None
    timeouts_per_s: float | None = None
    refused_per_s: float | None = None


@dataclass
class Proposal:
    """A queue the nodes propose for a hot key column, merged over the nodes that report it (by ``id``), and the
    draft's rules that queue its digests (digest -> rule_id)."""

    row: ProposalRow
    nodes: list[str] = field(default_factory=list)
    rules: dict[str, int] = field(default_factory=dict)

    @property
    def accepted(self) -> bool:
        """Whether the draft has a rule queueing each of this proposal's digests."""
        return bool(self.row.digests) and not self.pending

    @property
    def pending(self) -> list[tuple[str, str]]:
        """The proposal's digests (with their text) no rule of the draft queues yet."""
        return [(digest, text) for digest, text in self.row.digests if digest not in self.rules]

    @property
    def rule_ids(self) -> list[int]:
        """The draft's rules that queue the proposal's digests."""
        return sorted(set(self.rules.values()))

    @property
    def applied(self) -> bool:
        """Whether a node applied it by itself (``mysql-trx_queue_auto_apply``)."""
        return self.row.state == "applied"

    def comment(self) -> str:
        """The accepted rule's comment: the proposal and its evidence."""
        evidence = ", ".join(f"{name} {count}" for name, count in sorted(self.row.evidence.items()))
        return f"hot rows: proposal {self.row.id} (evidence: {evidence or 'none'})"


class ProposalError(ValueError):
    """A proposal that cannot be accepted: none of that id is reported, it names no digest, or the draft already
    queues it."""


def sections(cluster: Cluster | None, problems: list[str]) -> list[tuple[str, TrxQueueSection]]:
    """Each node's ``trx_queue`` section from its last report, by node name; a node without one is left out, one
    whose section does not read too, named in ``problems``."""
    found = []
    for name, report in ProxyNode.objects.filter(cluster=cluster).order_by("name").values_list("name", "last_report"):
        section = read_section(read_trx_queue, report, None, problems, name)
        if section is not None:
            found.append((name, section))
    return found


def _latest_rates(cluster: Cluster | None) -> dict[tuple[str, str], HotQueueSample]:
    """Each (node, queue)'s latest raw history point with its rates, in the last 10 minutes."""
    recent = HotQueueSample.objects.filter(
        node__cluster=cluster, resolution=Resolution.RAW, at__gte=timezone.now() - timedelta(minutes=10)
    ).select_related("node")
    latest: dict[tuple[str, str], HotQueueSample] = {}
    for sample in recent.order_by("at"):
        latest[(sample.node.name, sample.queue)] = sample
    return latest


def queue_lines(cluster: Cluster | None, problems: list[str]) -> tuple[list[QueueLine], list[QueueLine]]:
    """(each node's queues, the fleet's per queue): counts and counters summed over the nodes, the longest wait the
    longest anywhere, the rates the sum of each node's latest."""
    rates = _latest_rates(cluster)
    lines = []
    for name, section in sections(cluster, problems):
        for row in section.queues:
            sample = rates.get((name, row.queue))
            lines.append(
                QueueLine(
                    name,
                    row,
                    sample.transactions_per_s if sample else None,
                    sample.timeouts_per_s if sample else None,
                    sample.refused_per_s if sample else None,
                )
            )
    fleet = []
    for queue in sorted({line.row.queue for line in lines}):
        same = [line for line in lines if line.row.queue == queue]
        fleet.append(
            QueueLine(
                "",
                QueueRow(
                    queue=queue,
                    keys_active=sum(line.row.keys_active for line in same),
                    waiters=sum(line.row.waiters for line in same),
                    longest_wait_ms=max(line.row.longest_wait_ms for line in same),
                    transactions=sum(line.row.transactions for line in same),
                    timeouts=sum(line.row.timeouts for line in same),
                    refused=sum(line.row.refused for line in same),
                    waited=sum(line.row.waited for line in same),
                    wait_ms_total=sum(line.row.wait_ms_total for line in same),
                ),
                _sum(line.transactions_per_s for line in same),
                _sum(line.timeouts_per_s for line in same),
                _sum(line.refused_per_s for line in same),
            )
        )
    return lines, fleet


def _sum(values: Iterable[float | None]) -> float | None:
    known = [value for value in values if value is not None]
    return sum(known) if known else None


def _digest_value(digest: str | None) -> int | None:
    """A digest as a number ('0x' and hex digits, any case), None when it is not one."""
    try:
        return int(digest, 16) if digest else None
    except ValueError:
        return None


def queueing_rules(cluster: Cluster | None) -> dict[int, int]:
    """The draft's rules that queue a digest: the digest (as a number) -> the first such rule's id."""
    rules = QueryRule.objects.filter(cluster=cluster, trx_queue__isnull=False).exclude(trx_queue="")
    by_digest: dict[int, int] = {}
    for rule_id, digest in rules.order_by("rule_id").values_list("rule_id", "digest"):
        value = _digest_value(digest)
        if value is not None:
            by_digest.setdefault(value, rule_id)
    return by_digest


def proposals(cluster: Cluster | None, problems: list[str]) -> list[Proposal]:
    """The proposals the cluster's nodes report, one per id (the first node's row, the evidence summed, the hottest
    keys of all), the ones not accepted yet first, then by id."""
    merged: dict[str, Proposal] = {}
    for name, section in sections(cluster, problems):
        for row in section.proposals:
            known = merged.get(row.id)
            if known is None:
                merged[row.id] = Proposal(row, [name])
                continue
            evidence = dict(known.row.evidence)
            for reason, count in row.evidence.items():
                evidence[reason] = evidence.get(reason, 0) + count
            keys = known.row.keys + tuple(key for key in row.keys if key not in known.row.keys)
            digests = known.row.digests + tuple(d for d in row.digests if d not in known.row.digests)
            state = "applied" if "applied" in (known.row.state, row.state) else known.row.state
            since = min((at for at in (known.row.since, row.since) if at is not None), default=None)
            known.row = dataclasses.replace(
                known.row, evidence=evidence, keys=keys, digests=digests, state=state, since=since
            )
            known.nodes.append(name)
    rules = queueing_rules(cluster)
    for proposal in merged.values():
        for digest, _ in proposal.row.digests:
            value = _digest_value(digest)
            if value is not None and value in rules:
                proposal.rules[digest] = rules[value]
    return sorted(merged.values(), key=lambda p: (p.accepted, p.row.id))


def accept(cluster: Cluster, proposal_id: str, user: Actor) -> list[QueryRule]:
    """Add the query rules that proposal ``proposal_id`` describes to the cluster's draft, one per digest of it no
    rule queues yet, all or none (each audited and checked as every rule is): the next free rule_ids, active, the
    digest, the proposal's queue and key column, apply=0, a comment with the evidence. ProposalError when no node
    reports it, it names no digest (a rule without one would queue every statement) or the draft already queues each
    of its digests; ValidationError when a rule is refused."""
    found = {p.row.id: p for p in proposals(cluster, [])}
    proposal = found.get(proposal_id)
    if proposal is None:
        raise ProposalError(f"no node of {cluster} reports a proposal {proposal_id!r}")
    if proposal.accepted:
        numbers = ", ".join(str(rule_id) for rule_id in proposal.rule_ids)
        raise ProposalError(f"proposal {proposal_id} is accepted already: rule {numbers} queues its digests")
    digests = [digest for digest, _ in proposal.pending if _digest_value(digest) is not None]
    if not digests:
        raise ProposalError(f"proposal {proposal_id} names no digest: write its rule by hand")
    last = QueryRule.objects.filter(cluster=cluster).order_by("-rule_id").values_list("rule_id", flat=True).first()
    with transaction.atomic():
        return [
            save_row(
                QueryRule(
                    cluster=cluster,
                    rule_id=(last or 0) + number,
                    active=True,
                    digest=digest,
                    trx_queue=proposal.row.queue,
                    trx_queue_key=proposal.row.column,
                    apply=False,
                    comment=proposal.comment(),
                ),
                user,
            )
            for number, digest in enumerate(digests, 1)
        ]


def chart_series(cluster: Cluster | None, metric: str, since: datetime, node: str = "") -> list[dict[str, object]]:
    """``metric`` of each hot-row queue from ``since``: of ``node``'s queues, a series each; of the fleet's (no
    ``node``), a series per queue adding up the nodes' points in ``FLEET_SLOT`` slots (``FLEET_COMBINE``). Each
    series is ``{"label", "points": [[ms since the epoch, value], ...]}``."""
    nodes = ProxyNode.objects.filter(cluster=cluster).only("name").order_by("name")
    if node:
        nodes = nodes.filter(name=node)
    by_queue: dict[str, list[list[tuple[datetime, float]]]] = {}
    labelled = []
    for each in nodes:
        for queue in queues_seen(each, since):
            points = queue_series(each, queue, metric, since)
            by_queue.setdefault(queue, []).append(points)
            labelled.append((f"{each.name} · {queue}", points))
    if node:
        return [{"label": label, "points": _ms(points)} for label, points in labelled]
    combine = FLEET_COMBINE.get(metric, sum)
    return [
        {"label": f"fleet · {queue}", "points": _ms(_slotted(series, combine))}
        for queue, series in sorted(by_queue.items())
    ]


def _slotted(
    series: list[list[tuple[datetime, float]]], combine: Callable[[Iterable[float]], float]
) -> list[tuple[datetime, float]]:
    """The nodes' ``series`` as one: per slot (``FLEET_SLOT``, or the coarser resolution of the points), each node's
    last value in it, combined."""
    slots: dict[datetime, dict[int, float]] = {}
    slot = FLEET_SLOT.total_seconds()
    for index, points in enumerate(series):
        for at, value in points:
            start = datetime.fromtimestamp(at.timestamp() // slot * slot, tz=at.tzinfo)
            slots.setdefault(start, {})[index] = value
    return [(at, combine(values.values())) for at, values in sorted(slots.items())]


def _ms(points: list[tuple[datetime, float]]) -> list[list[float]]:
    return [[at.timestamp() * 1000, value] for at, value in points]
