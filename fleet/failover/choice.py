"""Choosing the replica to promote: the one with the most advanced GTID position, compared domain by domain (the
fewest transactions missing against the most any candidate has), ties broken by the configured order; the choice
is explained in words."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fleet.failover import gtid
from fleet.failover.models import FailoverPolicy, parse_server
from fleet.failover.servers import ReplicationState
from fleet.failover.topology import Topology


@dataclass(frozen=True)
class Candidate:
    """A replica that might be promoted: its state, or why it cannot be (``problem``)."""

    server: str
    state: ReplicationState | None
    problem: str = ""


@dataclass(frozen=True)
class Choice:
    """The replica chosen (None when none can be), and why, in words and as data."""

    chosen: str | None
    explanation: str
    data: dict[str, Any]


def preference(topology: Topology, policy: FailoverPolicy) -> tuple[list[str], str]:
    """The replicas in the configured order (the policy's promotion order, then by reader weight, host and port)
    and that order's description."""
    replicas = topology.replicas
    listed = [name for name in policy.promotion_list() if name in replicas]
    rest = sorted(
        (name for name in replicas if name not in listed),
        key=lambda name: (-topology.weight(name), parse_server(name)),
    )
    if listed:
        basis = f"the promotion order ({', '.join(listed)}), then by reader weight, host and port"
    else:
        basis = "no promotion order is set: by reader weight, then host and port"
    return listed + rest, basis


def choose(candidates: list[Candidate], basis: str) -> Choice:
    """The most advanced usable candidate; ``candidates`` are in the configured order, which breaks ties."""
    usable = [c for c in candidates if c.state is not None and not c.problem]
    sentences = [f"{c.server} was not considered: {c.problem}." for c in candidates if c not in usable]
    data: dict[str, Any] = {
        "order": [c.server for c in candidates],
        "basis": basis,
        "candidates": [
            {
                "server": c.server,
                "applied": gtid.render(c.state.position) if c.state else None,
                "received": gtid.render(c.state.io_pos) if c.state else None,
                "problem": c.problem,
            }
            for c in candidates
        ],
    }
    if not usable:
        listing = " ".join(sentences) or "the reader hostgroup has no replica."
        return Choice(None, f"No replica can be promoted: {listing}", data)
    reference = gtid.latest(*(c.state.known for c in usable if c.state is not None))
    gaps = {c.server: gtid.missing(c.state.known, reference) for c in usable if c.state is not None}
    best = min(usable, key=lambda c: (sum(gaps[c.server].values()), usable.index(c)))
    assert best.state is not None
    best_gaps = gaps[best.server]
    head = f"{best.server} was chosen: it has {gtid.render(best.state.known) or 'no transactions'}"
    if not best_gaps:
        head += ", every transaction any candidate has" if len(usable) > 1 else " (the only candidate)"
    else:
        head += f", the fewest missing ({gtid.describe_gaps(best_gaps, best.state.known, reference)})"
    parts = [head + "."]
    for candidate in usable:
        if candidate is best or candidate.state is None:
            continue
        position = gtid.render(candidate.state.known) or "no transactions"
        own = gaps[candidate.server]
        if sum(own.values()) > sum(best_gaps.values()):
            parts.append(
                f"{candidate.server} is at {position}: {gtid.describe_gaps(own, candidate.state.known, reference)}."
            )
        else:
            parts.append(
                f"{candidate.server} is as advanced ({position}); {best.server} comes first in the configured "
                f"order ({basis})."
            )
    for candidate in usable:
        state = candidate.state
        if state is not None and gtid.ahead(state.io_pos, state.position):
            parts.append(
                f"{candidate.server} had received up to {gtid.render(state.io_pos)} but applied only "
                f"{gtid.render(state.position) or 'nothing'} when compared (it applies the rest before promotion)."
            )
    data["chosen"] = best.server
    data["reference"] = gtid.render(reference)
    return Choice(best.server, " ".join(parts + sentences), data)
