"""What a statement changed in its session: a pure function from the statement and the server's answer to the
session's new state and pins, and to what happens to the backend connection.

``track`` touches no connection, counter or socket; it updates the ``SessionState`` it is given and answers with
flags, which the session carries out (``tests/unit/proxyapp/session/test_track.py`` walks its table case by
case).

It is the one definition of when a backend connection is bound to its session (``KEEP``): while a pin holds it
(``state.Pin``), or with multiplexing off. The pins:

- a transaction (``Pin.TRANSACTION``), known from the server's IN_TRANS flag *or* from what the session sent
  (``transaction``): BEGIN, START TRANSACTION, XA START, or with autocommit off any statement that is not
  transaction-neutral (``scan.TRANSACTION_NEUTRAL``: SET, USE, SHOW, COMMIT, ROLLBACK), until COMMIT, ROLLBACK, an
  implicit commit (DDL, LOCK TABLES, BEGIN...) or ``SET autocommit=1``. MariaDB sets no IN_TRANS after a SAVEPOINT
  with autocommit off, yet holds the savepoint on that connection;
- LOCK TABLES until UNLOCK TABLES (or BEGIN), GET_LOCK until every lock is released, temporary tables until dropped;
- user variables only when their values could not be read back (else they are replayed: ``state.bring``);
- a text-protocol PREPARE, an open cursor, SQL_CALC_FOUND_ROWS until FOUND_ROWS(), ``sql_log_bin=0``, a SET the
  scanner cannot replay, warnings until the next statement, a batch that failed part-way, a rule's multiplex=0.

Binary prepared statements do not pin: each connection prepares the session's statements it runs
(``session.prepared``).
"""

from __future__ import annotations

from typing import Final

from proxyapp.mysql.wire import Response
from proxyapp.session.state import DIRTY_PINS, Pin, SessionState
from proxyapp.sql.scan import TRANSACTION_NEUTRAL, Kind, Statement

#: The session keeps the connection (a pin holds it, or multiplexing is off).
KEEP: Final = 1
#: The connection holds state only a reset clears before another session may use it.
DIRTY: Final = 2
#: The statements changed SET-able state or the schema on the connection as in the session: record it as applied.
APPLIED: Final = 4
#: The session is in a transaction on the connection (``Pin.TRANSACTION``: the server's flag or what it sent).
IN_TRANSACTION: Final = 8

_ISOLATION = {
    "READ UNCOMMITTED": "'READ-UNCOMMITTED'",
    "READ COMMITTED": "'READ-COMMITTED'",
    "REPEATABLE READ": "'REPEATABLE-READ'",
    "SERIALIZABLE": "'SERIALIZABLE'",
}


def track(
    state: SessionState,
    statements: list[Statement],
    response: Response,
    in_transaction: bool,
    multiplex: int | None,
    user_variables_captured: bool,
    multiplexing: bool,
) -> int:
    """Update ``state`` for ``statements`` the server answered with ``response``, leaving the connection
    ``in_transaction`` or not (``multiplex``: the rules' verdict, None if they
    said nothing; ``user_variables_captured``: the values they assigned were read back; ``multiplexing``:
    ``mysql-multiplexing``); returns ``KEEP | DIRTY | APPLIED`` flags."""
    pins = state.pins  # its size tested with len(): a set's truth is a generic call in compiled code
    ok = response.error is None
    flags = 0
    opened = state.transaction_open
    for s in statements:
        if s.plain:
            if not state.autocommit:
                opened = True
            continue
        opened = transaction(s, opened, state.autocommit, ok)
        if s.kind is Kind.SET and ok:
            was_off = not state.autocommit
            _track_set(state, s)
            if was_off and state.autocommit:  # SET autocommit=1 commits
                opened = False
            flags |= APPLIED
        elif s.kind is Kind.USE and ok and s.schema:
            state.schema = s.schema
            flags |= APPLIED
        if s.user_vars_assigned and not user_variables_captured:
            pins.add(Pin.USER_VARIABLES)
        if s.temp_tables_created and ok:
            state.temp_tables.update(t.lower() for t in s.temp_tables_created)
        if s.tables_dropped and ok:
            state.temp_tables.difference_update(t.lower() for t in s.tables_dropped)
        if s.get_lock:
            state.locks_held += 1
        if s.release_lock:
            state.locks_held = max(0, state.locks_held - 1)
        if s.lock_tables:
            pins.add(Pin.LOCK_TABLES)
        elif s.unlock_tables or s.kind is Kind.BEGIN:
            pins.discard(Pin.LOCK_TABLES)
        if s.calc_found_rows:
            pins.add(Pin.FOUND_ROWS)
        elif s.found_rows:
            pins.discard(Pin.FOUND_ROWS)  # FOUND_ROWS() read: the pin has served its purpose
        if s.prepare_name:
            pins.add(Pin.TEXT_PREPARE)
        if s.unparsable_set:
            pins.add(Pin.LOCKED_SET)
    if not ok and len(statements) > 1 and not all(s.plain for s in statements):
        pins.add(Pin.FAILED_BATCH)  # which of its SETs, USEs, variables... ran before the error is unknown
    if len(pins) or len(state.temp_tables) or state.locks_held:  # else there is nothing to add or remove
        _toggle(pins, Pin.TEMPORARY_TABLES, bool(state.temp_tables))
        _toggle(pins, Pin.GET_LOCK, state.locks_held > 0)
    if multiplex is not None:
        _toggle(pins, Pin.RULE, multiplex == 0)
    if response.cursor:
        pins.add(Pin.CURSOR)
    if response.warnings and not len(pins):
        pins.add(Pin.WARNINGS)
    if opened and state.autocommit and not in_transaction:
        opened = False  # with autocommit on the server flags every transaction: this one ended (a deadlock, say)
    state.transaction_open = opened
    bound = in_transaction or opened
    if bound:
        pins.add(Pin.TRANSACTION)
        flags |= IN_TRANSACTION
    elif len(pins):
        pins.discard(Pin.TRANSACTION)
    if len(pins) and not pins.isdisjoint(DIRTY_PINS):
        flags |= DIRTY
    if len(pins) or not multiplexing:
        flags |= KEEP
    return flags


def transaction(statement: Statement, opened: bool, autocommit: bool, ok: bool) -> bool:
    """Whether the session is in a transaction of its own making after ``statement`` (run with ``autocommit`` as it
    was before it; ``ok``: it succeeded), given whether it was before (``opened``). A SET's ``autocommit=1`` is the
    caller's (``track``)."""
    kind = statement.kind
    if kind is Kind.BEGIN:
        return True
    if statement.implicit_commit:
        return False  # it commits before it runs, whether it then succeeds or not (and DDL commits after, too)
    if kind is Kind.COMMIT or kind is Kind.ROLLBACK:
        return opened and not ok  # a COMMIT that failed may not have ended it: the server's flag will tell
    if kind in TRANSACTION_NEUTRAL:
        return opened
    return opened or not autocommit


def transaction_settings(expr: str) -> list[tuple[str, str]]:
    """Session variables equivalent to ``SET SESSION TRANSACTION <expr>``."""
    upper = " ".join(expr.upper().split())
    out = []
    for level, value in _ISOLATION.items():
        if f"ISOLATION LEVEL {level}" in upper:
            out.append(("tx_isolation", value))
    if "READ ONLY" in upper:
        out.append(("tx_read_only", "1"))
    elif "READ WRITE" in upper:
        out.append(("tx_read_only", "0"))
    return out


def _track_set(state: SessionState, s: Statement) -> None:
    for name, expr in s.session_vars:
        if name == "autocommit":
            state.autocommit = expr.strip().strip("'\"").lower() in ("1", "on", "true")
        elif name in ("names", "character set"):
            state.names = expr
        elif name == "session transaction":
            for var, setting in transaction_settings(expr):
                state.variables[var] = setting
        elif name != "next transaction":
            state.variables[name] = expr
            if name == "wait_timeout":
                state.wait_timeout_s = timeout_seconds(expr)
    if s.sql_log_bin is not None:
        _toggle(state.pins, Pin.SQL_LOG_BIN, not s.sql_log_bin)


def timeout_seconds(expr: str) -> float:
    """The seconds a ``SET wait_timeout = expr`` gives the session, as the server clamps them (1 to 31,536,000);
    0 for DEFAULT or an expression only the server can work out (the global limit then applies)."""
    try:
        seconds = int(float(expr.strip().strip("'\"")))
    except ValueError:
        return 0.0
    return float(max(1, min(seconds, 31_536_000)))


def _toggle(pins: set[Pin], pin: Pin, on: bool) -> None:
    if on:
        pins.add(pin)
    else:
        pins.discard(pin)
