"""Where a statement runs: a pure function of the statement, the rules' verdict and the session's situation.

No I/O and no session object: everything ``route`` decides on is an argument, so that the whole decision table is
tested case by case (``tests/unit/proxyapp/session/test_route.py``) without a proxy.
"""

from __future__ import annotations

from proxyapp.session.state import Pin
from proxyapp.sql.scan import TRANSACTION_NEUTRAL, Kind, Statement


class Situation:
    """What routing needs to know of a session (its user's settings, its state, the connection it keeps)."""

    __slots__ = (
        "autocommit",
        "autocommit_false_is_transaction",
        "default_hostgroup",
        "held",
        "kept",
        "persistent",
        "pins",
    )

    def __init__(
        self,
        default_hostgroup: int,
        persistent: bool,
        autocommit: bool,
        autocommit_false_is_transaction: bool,
        kept: int | None,
        pins: set[Pin] | frozenset[Pin],
        held: int | None = None,
    ) -> None:
        self.default_hostgroup = default_hostgroup
        self.persistent = persistent  # mysql_users.transaction_persistent
        self.autocommit = autocommit
        self.autocommit_false_is_transaction = autocommit_false_is_transaction
        self.kept = kept  # the hostgroup of the connection the session keeps, None if it keeps none
        self.pins = pins
        self.held = held  # where a BEGIN held back until the transaction's first statement would have run, if any


def beside_transaction(statements: list[Statement], destination: int | None, at: Situation) -> bool:
    """``transaction_persistent=0``: a read a rule routes away from the open transaction runs on another
    connection, and the transaction's connection stays kept."""
    return (
        destination is not None
        and at.kept is not None
        and destination != at.kept
        and not at.persistent
        and at.pins == {Pin.TRANSACTION}
        and bool(statements)
        and all(s.is_read for s in statements)
    )


def route(
    statements: list[Statement], destination: int | None, writer_of: dict[int, int], at: Situation
) -> tuple[int, bool]:
    """The hostgroup for ``statements`` (at least one) given the rules' ``destination`` (None: no rule chose), the
    replication pairs ``writer_of`` (reader hostgroup -> writer hostgroup) and the session's situation ``at``; and
    whether a stand-in may run them (they only set session state: ``PoolManager.stand_in`` then picks the reader
    hostgroup while the writer hostgroup has no usable server)."""
    if at.held is not None:  # in a transaction held back (``BackendLink.defer``): where its BEGIN would have run
        return at.held, False
    if at.kept is not None:
        if destination is not None and beside_transaction(statements, destination, at):
            return destination, False
        return at.kept, False
    first = statements[0]
    if destination is not None:
        hostgroup = destination
        # A multi-statement batch a read rule matched by its first SELECT may still write: writer it is.
        writer = writer_of.get(hostgroup)
        if writer is not None and len(statements) > 1 and any(s.kind is Kind.WRITE for s in statements):
            return writer, False
        if first.kind is Kind.BEGIN or not at.persistent:
            return hostgroup, False
    else:
        hostgroup = at.default_hostgroup
    # Better than ProxySQL (its most frequent complaint): with autocommit=0 every statement opens a transaction,
    # so the first one goes where the transaction's writes must go, the user's default.
    if not at.autocommit and at.autocommit_false_is_transaction and first.kind not in TRANSACTION_NEUTRAL:
        return at.default_hostgroup, False
    if (first.kind is Kind.SET or first.kind is Kind.USE) and all(
        (s.kind is Kind.SET or s.kind is Kind.USE) and not s.unparsable_set for s in statements
    ):
        return hostgroup, True
    return hostgroup, False
