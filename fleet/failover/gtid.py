"""MariaDB GTID positions (``@@gtid_slave_pos``, ``@@gtid_current_pos``, ``Gtid_IO_Pos``): parsed, merged and
compared per replication domain.

A position is one GTID ``domain-server_id-seq_no`` per domain. Within a domain sequence numbers grow (strict mode),
so two servers compare by ``seq_no`` domain by domain; across domains there is no order, only a count of the
transactions one server lacks against another.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True, order=True)
class Gtid:
    """One MariaDB GTID."""

    domain: int
    server_id: int
    seq: int

    def __str__(self) -> str:
        return f"{self.domain}-{self.server_id}-{self.seq}"


#: A GTID position: domain -> the last GTID of that domain.
Position = Mapping[int, Gtid]


def parse(text: str | None) -> dict[int, Gtid]:
    """``"0-1-100,1-2-7"`` as a position (empty or None: no transactions); ValueError naming the bad part."""
    position: dict[int, Gtid] = {}
    for part in (text or "").replace("\n", "").split(","):
        part = part.strip()
        if not part:
            continue
        pieces = part.split("-")
        if len(pieces) != 3 or not all(p.isdigit() for p in pieces):
            raise ValueError(f"{part!r} is not a GTID (domain-server_id-seq_no)")
        gtid = Gtid(*(int(p) for p in pieces))
        if gtid.domain in position:
            raise ValueError(f"{text!r} names domain {gtid.domain} twice")
        position[gtid.domain] = gtid
    return position


def render(position: Position) -> str:
    """A position as MariaDB writes it, domains in order (``""`` for no transactions)."""
    return ",".join(str(position[domain]) for domain in sorted(position))


def latest(*positions: Position) -> dict[int, Gtid]:
    """Per domain, the GTID with the highest sequence number among ``positions``."""
    merged: dict[int, Gtid] = {}
    for position in positions:
        for domain, gtid in position.items():
            if domain not in merged or gtid.seq > merged[domain].seq:
                merged[domain] = gtid
    return merged


def missing(position: Position, reference: Position) -> dict[int, int]:
    """Per domain, how many transactions ``position`` lacks against ``reference`` (domains it lacks none of are
    left out)."""
    gaps = {}
    for domain, gtid in reference.items():
        own = position[domain].seq if domain in position else 0
        if gtid.seq > own:
            gaps[domain] = gtid.seq - own
    return gaps


def ahead(position: Position, reference: Position) -> dict[int, tuple[Gtid, Gtid | None]]:
    """Per domain where ``position`` is past ``reference``: (its GTID, the reference's GTID or None)."""
    return {
        domain: (gtid, reference.get(domain))
        for domain, gtid in position.items()
        if domain not in reference or gtid.seq > reference[domain].seq
    }


def conflicts(position: Position, reference: Position) -> dict[int, tuple[Gtid, Gtid]]:
    """Per domain where both are at the same sequence number from different servers (two different transactions):
    (``position``'s GTID, ``reference``'s)."""
    return {
        domain: (gtid, reference[domain])
        for domain, gtid in position.items()
        if domain in reference and gtid.seq == reference[domain].seq and gtid.server_id != reference[domain].server_id
    }


def describe_gaps(gaps: Mapping[int, int], position: Position, reference: Position) -> str:
    """``gaps`` (from ``missing``) in words: "2 transactions behind in domain 0 (at 0-1-8 of 0-1-10)"."""
    parts = []
    for domain, count in sorted(gaps.items()):
        own = str(position[domain]) if domain in position else "nothing"
        noun = "transaction" if count == 1 else "transactions"
        parts.append(f"{count} {noun} behind in domain {domain} (at {own} of {reference[domain]})")
    return "; ".join(parts)
