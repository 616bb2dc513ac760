"""``track``, the pure state-tracking decision, case by case: a table of what each statement does to the session's
state and pins, then every statement of a corpus under every answer, checked against the rules tracking must keep."""

from __future__ import annotations

import itertools

import pytest

from proxyapp.mysql.packets import ErrPacket
from proxyapp.mysql.wire import Response
from proxyapp.session.state import DIRTY_PINS, Pin, SessionState
from proxyapp.session.track import APPLIED, DIRTY, IN_TRANSACTION, KEEP, track, transaction_settings
from proxyapp.sql.scan import scan


def answer(ok: bool = True, cursor: bool = False, warnings: int = 0) -> Response:
    response = Response(error=None if ok else ErrPacket(1064, "42000", "syntax"))
    response.cursor = cursor
    response.warnings = warnings
    return response


def run(
    sql: str,
    state: SessionState | None = None,
    ok: bool = True,
    in_transaction: bool = False,
    cursor: bool = False,
    warnings: int = 0,
    multiplex: int | None = None,
    captured: bool = True,
    multiplexing: bool = True,
) -> tuple[SessionState, int]:
    state = state if state is not None else SessionState()
    flags = track(state, scan(sql), answer(ok, cursor, warnings), in_transaction, multiplex, captured, multiplexing)
    return state, flags


PIN_CASES = [
    # sql, keyword arguments of run, the pins afterwards
    ("SELECT 1", {}, set()),
    ("BEGIN", {"in_transaction": True}, {Pin.TRANSACTION}),
    ("COMMIT", {}, set()),
    ("SELECT 1", {"warnings": 2}, {Pin.WARNINGS}),
    ("SELECT 1", {"cursor": True}, {Pin.CURSOR}),
    ("SELECT 1", {"multiplex": 0}, {Pin.RULE}),
    ("SELECT 1", {"multiplex": 1}, set()),
    ("SET @a = 1", {}, set()),  # captured: the value follows the session
    ("SET @a = 1", {"captured": False}, {Pin.USER_VARIABLES}),
    ("CREATE TEMPORARY TABLE tt (a INT)", {}, {Pin.TEMPORARY_TABLES}),
    ("CREATE TEMPORARY TABLE tt (a INT)", {"ok": False}, set()),
    ("SELECT GET_LOCK('x', 1)", {}, {Pin.GET_LOCK}),
    ("LOCK TABLES t WRITE", {}, {Pin.LOCK_TABLES}),
    ("SELECT SQL_CALC_FOUND_ROWS * FROM t", {}, {Pin.FOUND_ROWS}),
    ("PREPARE s FROM 'SELECT 1'", {}, {Pin.TEXT_PREPARE}),
    ("SET sql_log_bin = 0", {}, {Pin.SQL_LOG_BIN}),
    ("SET @@session.x = (SELECT 1)", {}, {Pin.LOCKED_SET}),
    ("SET NAMES utf8mb4; SELECT * FROM missing", {"ok": False}, {Pin.FAILED_BATCH}),
    # the scanner marks no statement of a batch plain: any batch that failed part-way pins, to be safe
    ("SELECT 1; SELECT * FROM missing", {"ok": False}, {Pin.FAILED_BATCH}),
    ("SELECT * FROM missing", {"ok": False}, set()),
    ("SET autocommit = 0", {"in_transaction": False}, set()),
    ("INSERT INTO t VALUES (1)", {"in_transaction": True}, {Pin.TRANSACTION}),
    ("INSERT INTO t VALUES (1)", {"in_transaction": True, "warnings": 1}, {Pin.TRANSACTION, Pin.WARNINGS}),
    ("SELECT GET_LOCK('x', 1)", {"warnings": 1}, {Pin.GET_LOCK}),  # pinned anyway: SHOW WARNINGS will find them
]


@pytest.mark.parametrize(("sql", "kwargs", "pins"), PIN_CASES)
def test_pins_table(sql: str, kwargs: dict, pins: set[Pin]) -> None:
    state, flags = run(sql, **kwargs)
    assert state.pins == pins
    assert bool(flags & KEEP) == bool(pins)
    assert bool(flags & DIRTY) == bool(pins & DIRTY_PINS)


@pytest.mark.parametrize(
    ("sql", "field", "value"),
    [
        ("SET autocommit = 0", "autocommit", False),
        ("SET autocommit = 'ON'", "autocommit", True),
        ("SET NAMES latin1", "names", "latin1"),
        ("SET CHARACTER SET utf8mb4", "names", "utf8mb4"),
        ("USE db1", "schema", "db1"),
        ("SET SESSION sql_mode = 'ANSI'", "variables", {"sql_mode": "'ANSI'"}),
        (
            "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED, READ ONLY",
            "variables",
            {"tx_isolation": "'READ-COMMITTED'", "tx_read_only": "1"},
        ),
        ("SET TRANSACTION ISOLATION LEVEL SERIALIZABLE", "variables", {}),  # the next transaction only
    ],
)
def test_state_table(sql: str, field: str, value: object) -> None:
    state, flags = run(sql)
    assert getattr(state, field) == value
    assert flags & APPLIED
    failed, failed_flags = run(sql, ok=False)
    assert getattr(failed, field) == getattr(SessionState(), field)  # a statement that failed changed nothing
    assert not failed_flags & APPLIED


def test_locks_and_temporary_tables_are_counted_until_the_last_goes() -> None:
    state, _ = run("SELECT GET_LOCK('a', 1)")
    run("SELECT GET_LOCK('b', 1)", state)
    state, flags = run("SELECT RELEASE_LOCK('a')", state)
    assert state.pins == {Pin.GET_LOCK} and flags & KEEP
    state, flags = run("SELECT RELEASE_LOCK('b')", state)
    assert state.pins == set() and not flags & KEEP
    state, _ = run("CREATE TEMPORARY TABLE T1 (a INT)")
    state, _ = run("DROP TEMPORARY TABLE t1", state)
    assert state.temp_tables == set() and state.pins == set()
    state, _ = run("LOCK TABLES t WRITE")
    state, _ = run("UNLOCK TABLES", state)
    assert state.pins == set()
    state, _ = run("SELECT SQL_CALC_FOUND_ROWS * FROM t")
    state, _ = run("SELECT FOUND_ROWS()", state)
    assert state.pins == set()


def test_multiplexing_off_keeps_every_connection() -> None:
    _, flags = run("SELECT 1", multiplexing=False)
    assert flags & KEEP and not flags & DIRTY


def test_transaction_settings() -> None:
    assert transaction_settings("isolation level  repeatable read") == [("tx_isolation", "'REPEATABLE-READ'")]
    assert transaction_settings("READ WRITE") == [("tx_read_only", "0")]
    assert transaction_settings("WITH CONSISTENT SNAPSHOT") == []


CORPUS = [
    "SELECT 1",
    "INSERT INTO t VALUES (1)",
    "BEGIN",
    "COMMIT",
    "ROLLBACK",
    "SAVEPOINT s",
    "SET NAMES utf8mb4",
    "SET autocommit = 0",
    "SET @a = 1",
    "SELECT @a := 2",
    "USE db1",
    "SET sql_log_bin = 0",
    "CREATE TEMPORARY TABLE tt (a INT)",
    "DROP TABLE tt",
    "SELECT GET_LOCK('x', 1)",
    "LOCK TABLES t READ",
    "UNLOCK TABLES",
    "SELECT SQL_CALC_FOUND_ROWS * FROM t",
    "PREPARE s FROM 'SELECT 1'",
    "SET @@session.x = (SELECT 1)",
    "SET NAMES utf8mb4; SELECT 1",
    "SELECT 1; SELECT 2",
]
ANSWERS = list(
    itertools.product(
        (True, False),  # ok
        (True, False),  # in a transaction afterwards
        (False, True),  # a cursor opened
        (0, 3),  # warnings
        (None, 0, 1),  # the rules' multiplex
        (True, False),  # user variables read back
        (True, False),  # mysql-multiplexing
    )
)


@pytest.mark.parametrize("sql", CORPUS)
def test_every_answer_keeps_the_rules_of_tracking(sql: str) -> None:
    for ok, in_transaction, cursor, warnings, multiplex, captured, multiplexing in ANSWERS:
        case = (sql, ok, in_transaction, cursor, warnings, multiplex, captured, multiplexing)
        state, flags = run(sql, None, ok, in_transaction, cursor, warnings, multiplex, captured, multiplexing)
        pins = state.pins
        assert (Pin.TRANSACTION in pins) == in_transaction, case  # the server's word on the transaction
        assert bool(flags & KEEP) == (bool(pins) or not multiplexing), case  # kept exactly while pinned
        assert bool(flags & DIRTY) == bool(pins & DIRTY_PINS), case  # a reset before anyone else uses it
        assert (Pin.CURSOR in pins) == cursor, case
        assert (Pin.RULE in pins) == (multiplex == 0), case
        if not ok:
            # A failed statement set nothing: the session's state is a new session's, but for its pins.
            assert not flags & APPLIED, case
            fresh = SessionState()
            assert (state.schema, state.names, state.autocommit, state.variables) == (
                fresh.schema,
                fresh.names,
                fresh.autocommit,
                fresh.variables,
            ), case
        if Pin.WARNINGS in pins:
            # only a connection nothing but its transaction pins waits for them
            assert warnings and pins - {Pin.TRANSACTION} == {Pin.WARNINGS}, case
    assert len(ANSWERS) == 192


def walk(steps: list[tuple[str, bool]], state: SessionState | None = None) -> list[bool]:
    """Run ``steps`` (sql, whether the server's IN_TRANS flag is set after it) in one session; whether the session
    keeps its connection after each."""
    state = state if state is not None else SessionState()
    kept = []
    for sql, server_in_transaction in steps:
        _, flags = run(sql, state, in_transaction=server_in_transaction)
        assert bool(flags & IN_TRANSACTION) == (Pin.TRANSACTION in state.pins)
        kept.append(bool(flags & KEEP))
    return kept


# Each walk: statements, MariaDB's IN_TRANS flag after each as the server really sets it (read off MariaDB 10.11),
# and whether the session must keep its connection after each.
BINDING_WALKS = {
    # Django: SET autocommit=0, then a nested atomic's SAVEPOINT first. MariaDB flags nothing, yet holds s1.
    "autocommit off, savepoint first": [
        ("SET autocommit = 0", False, False),
        ("SAVEPOINT s1", False, True),
        ("INSERT INTO t VALUES (1)", True, True),
        ("ROLLBACK TO SAVEPOINT s1", True, True),
        ("COMMIT", False, False),
        ("SET autocommit = 1", False, False),
    ],
    # A read with autocommit off opens the read view the next reads must see, with no IN_TRANS.
    "autocommit off, read first": [
        ("SET autocommit = 0", False, False),
        ("SELECT * FROM t", False, True),
        ("SELECT * FROM t WHERE id = 2", False, True),
        ("ROLLBACK", False, False),
    ],
    "autocommit off, session statements only": [
        ("SET autocommit = 0", False, False),
        ("SET NAMES utf8mb4", False, False),
        ("USE db1", False, False),
        ("SHOW TABLES", False, False),
        ("COMMIT", False, False),
    ],
    "autocommit off, DDL commits": [
        ("SET autocommit = 0", False, False),
        ("SAVEPOINT s1", False, True),
        ("CREATE TABLE t2 (a INT)", False, False),
        ("SELECT 1", False, True),
    ],
    "autocommit off, SET autocommit=1 commits": [
        ("SET autocommit = 0", False, False),
        ("SAVEPOINT s1", False, True),
        ("SET autocommit = 1", False, False),
        ("SAVEPOINT s2", False, False),  # outside a transaction with autocommit on: nothing to keep
    ],
    "autocommit off in one batch with the savepoint": [
        ("SET autocommit = 0; SAVEPOINT s1", False, True),
        ("COMMIT", False, False),
    ],
    "BEGIN, then a deadlock the server rolled back": [
        ("BEGIN", True, True),
        ("UPDATE t SET a = 1", False, False),  # autocommit on: the server's flag tells every transaction
    ],
    "XA": [
        ("XA START 'x'", True, True),
        ("INSERT INTO t VALUES (1)", True, True),
        ("XA END 'x'", True, True),
        ("XA PREPARE 'x'", True, True),
        ("XA COMMIT 'x'", False, False),
    ],
    "autocommit off, LOCK TABLES": [
        ("SET autocommit = 0", False, False),
        ("LOCK TABLES t WRITE", True, True),
        ("UNLOCK TABLES", False, True),  # a transaction may have begun under the lock: kept until COMMIT
        ("COMMIT", False, False),
    ],
    "autocommit off, GET_LOCK and a temporary table": [
        ("SET autocommit = 0", False, False),
        ("COMMIT", False, False),
        ("SELECT GET_LOCK('a', 1)", False, True),
        ("COMMIT", False, True),  # the lock outlives the transaction
        ("SELECT RELEASE_LOCK('a')", False, True),
        ("COMMIT", False, False),
        ("CREATE TEMPORARY TABLE tt (a INT)", False, True),
        ("COMMIT", False, True),
    ],
}


@pytest.mark.parametrize("name", BINDING_WALKS)
def test_binding_walks(name: str) -> None:
    steps = BINDING_WALKS[name]
    assert walk([(sql, server) for sql, server, _ in steps]) == [keep for _, _, keep in steps]


def test_a_failed_commit_keeps_the_transaction_until_one_succeeds() -> None:
    state = SessionState()
    walk([("SET autocommit = 0", False), ("INSERT INTO t VALUES (1)", True)], state)
    _, flags = run("COMMIT", state, ok=False, in_transaction=False)
    assert flags & KEEP and state.transaction_open
    _, flags = run("ROLLBACK", state)
    assert not flags & KEEP and not state.transaction_open


def test_reset_forgets_the_transaction() -> None:
    state = SessionState()
    walk([("SET autocommit = 0", False), ("SAVEPOINT s1", False)], state)
    state.reset("utf8mb4")
    assert not state.transaction_open and state.autocommit


@pytest.mark.parametrize(
    "sql", ["SELECT 1", "INSERT INTO t VALUES (1)", "SAVEPOINT s", "DO 1", "CALL p()", "XA END 'x'"]
)
def test_with_autocommit_off_every_statement_but_the_neutral_ones_binds(sql: str) -> None:
    state = SessionState(autocommit=False)
    _, flags = run(sql, state)
    assert flags & KEEP and state.transaction_open
