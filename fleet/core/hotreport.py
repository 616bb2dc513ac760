"""Reading a report's ``trx_queue`` section (a proxy's ``/stats``, docs/hot-rows.md): each hot-row queue's figures
(``QueueRow``) and the queues the proxy proposes for hot keys it found (``ProposalRow``). A malformed section is
refused with ``ReportError`` naming the bad path (``stats.trx_queue.queues[0].waiters: ...``), as
``proxyapp.report.reader`` refuses the other sections."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from proxyapp.report.reader import ReportError, read_moment


@dataclass(frozen=True, slots=True)
class QueueRow:
    """A hot-row queue of one node: what it holds now and its counters since the proxy started."""

    queue: str
    keys_active: int
    waiters: int
    longest_wait_ms: float
    transactions: int
    timeouts: int
    refused: int
    waited: int
    wait_ms_total: float


@dataclass(frozen=True, slots=True)
class ProposalRow:
    """A queue the proxy proposes (or applied itself: ``state`` "applied") for a hot key column, for the statements
    of its digests, with its evidence."""

    id: str
    schema: str
    table: str
    column: str
    queue: str
    digest: str
    digest_text: str
    digests: tuple[tuple[str, str], ...]  # every digest that bore the heat, with its text (the first is ``digest``)
    keys: tuple[str, ...]
    evidence: dict[str, int]
    state: str
    since: datetime | None


@dataclass(frozen=True, slots=True)
class TrxQueueSection:
    """A report's ``trx_queue`` section."""

    queues: tuple[QueueRow, ...]
    proposals: tuple[ProposalRow, ...]


def read_trx_queue(stats: object) -> TrxQueueSection | None:
    """The ``trx_queue`` section; None when the report has none (a proxy from before hot rows)."""
    if not isinstance(stats, Mapping):
        raise ReportError(f"stats: expected an object, not {type(stats).__name__}")
    section = stats.get("trx_queue")
    if section is None:
        return None
    if not isinstance(section, Mapping):
        raise ReportError(f"stats.trx_queue: expected an object, not {section!r}")
    return TrxQueueSection(
        queues=tuple(_queue(row, where) for where, row in _rows(section, "queues")),
        proposals=tuple(_proposal(row, where) for where, row in _rows(section, "proposals")),
    )


def _rows(section: Mapping[str, Any], key: str) -> list[tuple[str, Mapping[str, Any]]]:
    rows = section.get(key, [])
    if not isinstance(rows, list):
        raise ReportError(f"stats.trx_queue.{key}: expected a list of rows, not {rows!r}")
    found = []
    for index, row in enumerate(rows):
        where = f"stats.trx_queue.{key}[{index}]"
        if not isinstance(row, Mapping):
            raise ReportError(f"{where}: expected an object, not {row!r}")
        found.append((where, row))
    return found


def _queue(row: Mapping[str, Any], where: str) -> QueueRow:
    return QueueRow(
        queue=_text(row, "queue", where),
        keys_active=_whole(row, "keys_active", where),
        waiters=_whole(row, "waiters", where),
        longest_wait_ms=_number(row, "longest_wait_ms", where),
        transactions=_whole(row, "transactions", where),
        timeouts=_whole(row, "timeouts", where),
        refused=_whole(row, "refused", where),
        waited=_whole(row, "waited", where),
        wait_ms_total=_number(row, "wait_ms_total", where),
    )


def _proposal(row: Mapping[str, Any], where: str) -> ProposalRow:
    keys = row.get("keys", [])
    if not isinstance(keys, list):
        raise ReportError(f"{where}.keys: expected a list of key values, not {keys!r}")
    evidence = row.get("evidence", {})
    if not isinstance(evidence, Mapping):
        raise ReportError(f"{where}.evidence: expected an object of counts, not {evidence!r}")
    digest, digest_text = _text(row, "digest", where, empty=True), _text(row, "digest_text", where, empty=True)
    digests = [(digest, digest_text)] if digest else []
    if "digests" in row:
        digests = []
        listed = row["digests"]
        if not isinstance(listed, list):
            raise ReportError(f"{where}.digests: expected a list of digests, not {listed!r}")
        for index, item in enumerate(listed):
            if not isinstance(item, Mapping):
                raise ReportError(f"{where}.digests[{index}]: expected an object, not {item!r}")
            found = f"{where}.digests[{index}]"
            digests.append((_text(item, "digest", found), _text(item, "digest_text", found, empty=True)))
    return ProposalRow(
        id=_text(row, "id", where),
        schema=_text(row, "schema", where, empty=True),
        table=_text(row, "table", where),
        column=_text(row, "column", where),
        queue=_text(row, "queue", where),
        digest=digest,
        digest_text=digest_text,
        digests=tuple(digests),
        keys=tuple(str(key) for key in keys),
        evidence={str(name): _whole(evidence, name, f"{where}.evidence") for name in evidence},
        state=_text(row, "state", where),
        since=read_moment(row.get("since"), f"{where}.since"),
    )


def _text(row: Mapping[str, Any], key: str, where: str, empty: bool = False) -> str:
    value = row.get(key)
    if not isinstance(value, str) or (not empty and not value):
        raise ReportError(f"{where}.{key}: expected text, not {value!r}")
    return value


def _whole(row: Mapping[str, Any], key: str, where: str) -> int:
    value = row.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ReportError(f"{where}.{key}: expected a whole number of 0 or more, not {value!r}")
    return value


def _number(row: Mapping[str, Any], key: str, where: str) -> float:
    value = row.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise ReportError(f"{where}.{key}: expected a number of 0 or more, not {value!r}")
    return float(value)
