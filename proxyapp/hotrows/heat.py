"""Finding hot keys by itself: the proxy watches for the marks of a hot row on statements that were not queued (a
write or a locking read that waited long, or ended in a lock wait timeout, 1205, or a deadlock, 1213), reads the table
and the key each one reached (the first ``column = value`` of its WHERE clause), and when one table's column gathers
``mysql-trx_queue_heat_threshold`` such marks within a minute with one key among them at least three times, proposes a
queue for it: every statement of those digests waits in line for the key it names. With
``mysql-trx_queue_auto_apply`` it applies the proposal itself; after ``mysql-trx_queue_heat_cooldown_ms`` without a
mark it withdraws it. Every decision is logged with its evidence.

Reading a statement costs a tokenization, so only the statements that bear a mark are read; the others cost one
comparison of their time. A node of several workers finds heat once: each worker reads its statements' marks and
hands them to the supervisor's one ``HeatMap`` (``proxyapp.hotrows.broker``), which hands every worker the queues it
applied.
"""

from __future__ import annotations

import logging
import re
from collections import deque
from collections.abc import Callable
from typing import Any

from mypy_extensions import mypyc_attr

from proxyapp.config.rulecompile import QUEUE_CHARS
from proxyapp.hotrows.service import HotRowSettings
from proxyapp.sharding.plan import table_names
from proxyapp.shown import shown
from proxyapp.sql.lex import TokenKind, unquote
from proxyapp.sql.where import first_statement, literal, where_parts

log = logging.getLogger("proxyapp.hotrows.heat")

#: Marks older than this no longer count towards a proposal.
WINDOW_S = 60.0
#: A key seen this many times among the marks is hot.
HOT_KEY_SEEN = 3
#: Columns tracked at most (the coldest go first), keys and digests kept per column.
MAX_TRACKED = 256
MAX_KEYS_KEPT = 64
MAX_DIGESTS = 8
#: The marks: the error codes that are one, and the evidence field each counts in.
DEADLOCK = 1213
LOCK_WAIT_TIMEOUT = 1205
_NOT_A_QUEUE_NAME = re.compile(f"[^{QUEUE_CHARS}]")


class _Heat:
    """The marks on one table's column."""

    def __init__(self, schema: str, table: str, column: str) -> None:
        self.schema = schema
        self.table = table
        self.column = column
        self.marks: deque[float] = deque()  # when, within the window
        self.keys: dict[str, int] = {}
        self.digests: dict[str, str] = {}  # hash -> text
        self.evidence = {"deadlocks": 0, "lock_wait_timeouts": 0, "slow": 0}
        self.last = 0.0
        self.proposed = False
        self.since = 0.0  # proposed since (wall time)
        self.applied = False

    @property
    def id(self) -> str:
        return f"{self.schema}.{self.table}.{self.column}"

    @property
    def queue(self) -> str:
        return _NOT_A_QUEUE_NAME.sub("_", f"{self.schema}.{self.table}")[:64]

    def hottest(self) -> list[str]:
        return [k for k, _ in sorted(self.keys.items(), key=lambda kv: -kv[1])[:5]]


@mypyc_attr(allow_interpreted_subclasses=True)  # a worker's map forwards its marks (``broker.ForwardedHeat``)
class HeatMap:
    """The marks of hot rows by table column, the proposals they led to, and the queues applied from them."""

    def __init__(
        self,
        clock: Callable[[], float],
        wall: Callable[[], float],
        settings: HotRowSettings,
        on_applied: Callable[[dict[str, tuple[str, str]]], None] | None = None,
    ) -> None:
        self.clock = clock
        self.wall = wall  # a proposal's ``since`` is shown as a time of day
        self.settings = settings
        self.on_applied = on_applied  # told each change of ``applied`` (the broker hands it to the workers)
        self._heat: dict[tuple[str, str, str], _Heat] = {}
        #: digest hash -> (queue, column): the proposals applied (``mysql-trx_queue_auto_apply``).
        self.applied: dict[str, tuple[str, str]] = {}

    def configure(self, settings: HotRowSettings) -> None:
        """Follow new settings (a reload); applied proposals are withdrawn when auto apply is turned off."""
        self.settings = settings
        if not settings.auto_apply:
            for heat in self._heat.values():
                if heat.applied:
                    self._unapply(heat, "mysql-trx_queue_auto_apply is off")

    def observe(self, sql: str, schema: str, digest: str, digest_text: str, error: int) -> None:
        """A statement that was not queued bore a mark: ``error`` 1213 or 1205, or 0 (it took at least
        ``mysql-trx_queue_heat_slow_ms``)."""
        reached = where_key(sql, schema)
        if reached is not None:
            self.record(reached, digest, digest_text, error)

    def record(self, reached: tuple[str, str, str, str], digest: str, digest_text: str, error: int) -> None:
        """A mark on the key ``reached`` (schema, table, column, value: ``where_key``) by a statement of ``digest``
        (``error`` as ``observe`` has it)."""
        table_schema, table, column, value = reached
        where = (table_schema, table, column)
        heat = self._heat.get(where)
        if heat is None:
            if len(self._heat) >= MAX_TRACKED:
                coldest = min(self._heat, key=lambda w: self._heat[w].last)
                if self._heat[coldest].proposed:
                    self._withdraw(self._heat[coldest], "too many columns tracked")
                del self._heat[coldest]
            heat = self._heat[where] = _Heat(table_schema, table, column)
        now = self.clock()
        heat.last = now
        heat.marks.append(now)
        while heat.marks and heat.marks[0] < now - WINDOW_S:
            heat.marks.popleft()
        heat.evidence["deadlocks" if error == DEADLOCK else "lock_wait_timeouts" if error else "slow"] += 1
        heat.keys[value] = heat.keys.get(value, 0) + 1
        if len(heat.keys) > MAX_KEYS_KEPT:
            del heat.keys[min(heat.keys, key=heat.keys.__getitem__)]
        if digest not in heat.digests and len(heat.digests) < MAX_DIGESTS:
            heat.digests[digest] = digest_text
            if heat.applied:
                self.applied[digest] = (heat.queue, heat.column)
                self._applied_changed()
        if not heat.proposed and len(heat.marks) >= self.settings.threshold and max(heat.keys.values()) >= HOT_KEY_SEEN:
            self._propose(heat)

    def sweep(self) -> None:
        """Withdraw the proposals without a mark for ``mysql-trx_queue_heat_cooldown_ms`` (the housekeeping asks
        once a second), and forget the columns that went cold."""
        now = self.clock()
        cold = now - self.settings.cooldown_ms / 1000
        for where, heat in list(self._heat.items()):
            if heat.last < cold:
                if heat.proposed:
                    self._withdraw(heat, f"no mark for {self.settings.cooldown_ms} ms")
                del self._heat[where]

    def proposals(self) -> list[dict[str, Any]]:
        """The proposals standing now (the ``trx_queue.proposals`` rows of the stats)."""
        rows = []
        for heat in self._heat.values():
            if not heat.proposed:
                continue
            digest, text = next(iter(heat.digests.items()))
            rows.append(
                {
                    "id": shown(heat.id),
                    "schema": shown(heat.schema),
                    "table": shown(heat.table),
                    "column": shown(heat.column),
                    "queue": heat.queue,
                    "digest": digest,
                    "digest_text": shown(text),
                    "digests": [{"digest": d, "digest_text": shown(t)} for d, t in heat.digests.items()],
                    "keys": [shown(key) for key in heat.hottest()],
                    "evidence": {**heat.evidence, "marks_last_minute": len(heat.marks)},
                    "state": "applied" if heat.applied else "proposed",
                    "since": heat.since,
                }
            )
        return sorted(rows, key=lambda row: row["id"])

    def _propose(self, heat: _Heat) -> None:
        heat.proposed = True
        heat.since = self.wall()
        log.warning(
            "hot rows: proposing queue %s on %s (keys %s; %d marks in the last minute: %s; digests %s)",
            heat.queue,
            shown(heat.id),
            shown(", ".join(heat.hottest())),
            len(heat.marks),
            heat.evidence,
            ", ".join(heat.digests),
        )
        if self.settings.auto_apply:
            heat.applied = True
            for digest in heat.digests:
                self.applied[digest] = (heat.queue, heat.column)
            self._applied_changed()
            log.warning("hot rows: applied queue %s on %s (mysql-trx_queue_auto_apply)", heat.queue, shown(heat.id))

    def _withdraw(self, heat: _Heat, why: str) -> None:
        if heat.applied:
            self._unapply(heat, why)
        heat.proposed = False
        log.warning("hot rows: withdrew the proposal of queue %s on %s: %s", heat.queue, shown(heat.id), why)

    def _unapply(self, heat: _Heat, why: str) -> None:
        heat.applied = False
        for digest in heat.digests:
            self.applied.pop(digest, None)
        self._applied_changed()
        log.warning("hot rows: no longer queueing %s on %s: %s", heat.queue, shown(heat.id), why)

    def _applied_changed(self) -> None:
        if self.on_applied is not None:
            self.on_applied(self.applied)


def where_key(sql: str, schema: str) -> tuple[str, str, str, str] | None:
    """The table ``sql``'s first statement reaches first, and the first ``column = value`` of its WHERE clause:
    (schema, table, column, value); None when it has no such comparison."""
    found = first_statement(sql)
    if found is None:
        return None
    tokens, lo, hi = found
    table = next(table_names(tokens, lo, hi, schema or None), None)
    conditions = where_parts(tokens, lo, hi) if table is not None else None
    if table is None or conditions is None:
        return None
    for a, b in conditions:
        i = a + 2 if tokens.text(a + 1) == "." else a
        if tokens.kinds[i] not in (TokenKind.WORD, TokenKind.QUOTED_IDENT) or tokens.text(i + 1) != "=":
            continue
        value = literal(tokens, i + 2, b)
        if value is not None and value[1] == b:
            return table.schema or "", table.table, unquote(tokens.texts[i]).lower(), str(value[0])
    return None
