"""``route``, the pure routing decision, case by case: a table of the cases that matter, then every combination of
statement, rule destination and session situation checked against the rules routing must keep."""

from __future__ import annotations

import itertools

import pytest

from proxyapp.session.route import Situation, beside_transaction, route
from proxyapp.session.state import Pin
from proxyapp.sql.scan import TRANSACTION_NEUTRAL, Kind, scan

DEFAULT = 10  # the user's default (writer) hostgroup
READERS = 20  # its readers (mysql_replication_hostgroups: 10 -> 20)
OTHER = 30
WRITER_OF = {READERS: DEFAULT}


def at(
    kept: int | None = None,
    persistent: bool = True,
    autocommit: bool = True,
    autocommit_is_transaction: bool = True,
    pins: frozenset[Pin] = frozenset(),
) -> Situation:
    return Situation(DEFAULT, persistent, autocommit, autocommit_is_transaction, kept, set(pins))


IN_TRANSACTION = frozenset({Pin.TRANSACTION})

CASES = [
    # sql, rule destination, situation, (hostgroup, stand-in)
    ("SELECT 1", None, at(), (DEFAULT, False)),
    ("SELECT 1", READERS, at(), (READERS, False)),
    ("SELECT 1", OTHER, at(), (OTHER, False)),
    ("INSERT INTO t VALUES (1)", None, at(), (DEFAULT, False)),
    ("INSERT INTO t VALUES (1)", READERS, at(), (READERS, False)),  # a rule's word is final for one statement
    # a batch a read rule matched by its first SELECT still writes: the readers' writer runs it
    ("SELECT 1; INSERT INTO t VALUES (1)", READERS, at(), (DEFAULT, False)),
    ("SELECT 1; SELECT 2", READERS, at(), (READERS, False)),
    ("SELECT 1; INSERT INTO t VALUES (1)", OTHER, at(), (OTHER, False)),  # no writer known for 30
    # a kept connection keeps the session
    ("SELECT 1", READERS, at(kept=DEFAULT, pins=IN_TRANSACTION), (DEFAULT, False)),
    ("SELECT 1", None, at(kept=OTHER, pins=IN_TRANSACTION), (OTHER, False)),
    ("SET NAMES utf8mb4", None, at(kept=DEFAULT, pins=IN_TRANSACTION), (DEFAULT, False)),
    # transaction_persistent=0: a read a rule sends elsewhere runs beside the transaction
    ("SELECT 1", READERS, at(kept=DEFAULT, persistent=False, pins=IN_TRANSACTION), (READERS, False)),
    ("SELECT 1", DEFAULT, at(kept=DEFAULT, persistent=False, pins=IN_TRANSACTION), (DEFAULT, False)),
    ("UPDATE t SET a = 1", READERS, at(kept=DEFAULT, persistent=False, pins=IN_TRANSACTION), (DEFAULT, False)),
    ("SELECT 1", None, at(kept=DEFAULT, persistent=False, pins=IN_TRANSACTION), (DEFAULT, False)),
    # ... but not when something else pins the connection (the read may need it: a temporary table, a lock)
    (
        "SELECT 1",
        READERS,
        at(kept=DEFAULT, persistent=False, pins=frozenset({Pin.TRANSACTION, Pin.TEMPORARY_TABLES})),
        (DEFAULT, False),
    ),
    ("SELECT 1", READERS, at(kept=DEFAULT, persistent=False, pins=frozenset({Pin.GET_LOCK})), (DEFAULT, False)),
    # a rule with transaction_persistent=1 still routes BEGIN, and persistent=0 routes everything by rule
    ("BEGIN", READERS, at(), (READERS, False)),
    ("SELECT 1", READERS, at(persistent=False), (READERS, False)),
    # autocommit=0: every statement opens a transaction, so it goes where the writes go
    ("SELECT 1", READERS, at(autocommit=False), (DEFAULT, False)),
    ("SELECT 1", None, at(autocommit=False), (DEFAULT, False)),
    ("SELECT 1", READERS, at(autocommit=False, autocommit_is_transaction=False), (READERS, False)),
    ("SELECT 1", READERS, at(autocommit=False, persistent=False), (READERS, False)),
    ("SHOW TABLES", READERS, at(autocommit=False), (READERS, False)),  # neutral: opens nothing
    ("COMMIT", READERS, at(autocommit=False), (READERS, False)),
    ("BEGIN", READERS, at(autocommit=False), (READERS, False)),
    # statements that only set session state may run on a stand-in
    ("SET NAMES utf8mb4", None, at(), (DEFAULT, True)),
    ("SET autocommit = 0", READERS, at(), (READERS, True)),
    ("USE db1", None, at(), (DEFAULT, True)),
    ("SET NAMES utf8mb4; USE db1", None, at(), (DEFAULT, True)),
    ("SET NAMES utf8mb4; SELECT 1", None, at(), (DEFAULT, False)),
    ("SET @@session.x = (SELECT 1)", None, at(), (DEFAULT, False)),  # unparsable SET: a real server runs it
    ("SET autocommit = 0", None, at(autocommit=False), (DEFAULT, True)),
    ("SET NAMES utf8mb4", None, at(kept=DEFAULT, pins=IN_TRANSACTION), (DEFAULT, False)),
]


@pytest.mark.parametrize(("sql", "destination", "situation", "expected"), CASES)
def test_route_table(sql: str, destination: int | None, situation: Situation, expected: tuple[int, bool]) -> None:
    assert route(scan(sql), destination, WRITER_OF, situation) == expected


CORPUS = [
    "SELECT 1",
    "SELECT * FROM t FOR UPDATE",
    "INSERT INTO t VALUES (1)",
    "UPDATE t SET a = 1",
    "BEGIN",
    "START TRANSACTION READ ONLY",
    "COMMIT",
    "ROLLBACK",
    "SAVEPOINT s1",
    "SET NAMES utf8mb4",
    "SET autocommit = 0",
    "SET @a = 1",
    "USE db1",
    "SHOW TABLES",
    "CALL p()",
    "LOCK TABLES t WRITE",
    "SELECT 1; SELECT 2",
    "SELECT 1; DELETE FROM t",
    "SET NAMES utf8mb4; USE db1",
    "CREATE TEMPORARY TABLE tt (a INT)",
]
PIN_SETS = [frozenset(), IN_TRANSACTION, frozenset({Pin.TRANSACTION, Pin.USER_VARIABLES}), frozenset({Pin.GET_LOCK})]
COMBINATIONS = list(
    itertools.product(
        CORPUS,
        (None, DEFAULT, READERS, OTHER),  # the rule's destination
        (None, DEFAULT, OTHER),  # the hostgroup of the kept connection
        (True, False),  # transaction_persistent
        (True, False),  # autocommit
        (True, False),  # mysql-autocommit_false_is_transaction
        PIN_SETS,
    )
)


@pytest.mark.parametrize("sql", CORPUS)
def test_every_combination_keeps_the_rules_of_routing(sql: str) -> None:
    statements = scan(sql)
    checked = 0
    for _, destination, kept, persistent, autocommit, flag, pins in (c for c in COMBINATIONS if c[0] == sql):
        if kept is None and pins:
            continue  # a pin always comes with a kept connection
        situation = at(kept, persistent, autocommit, flag, pins)
        hostgroup, stand_in = route(statements, destination, WRITER_OF, situation)
        case = (sql, destination, kept, persistent, autocommit, flag, sorted(p.value for p in pins))
        checked += 1
        # It is always one of the hostgroups in play.
        assert hostgroup in {DEFAULT, READERS, OTHER} & {kept, destination, DEFAULT, WRITER_OF.get(destination)}, case
        if kept is not None:
            # A kept connection is left only for a read beside a plain transaction, to where a rule says.
            beside = beside_transaction(statements, destination, situation)
            assert hostgroup == (destination if beside else kept), case
            assert not stand_in, case
            if beside:
                assert all(s.is_read for s in statements) and not persistent and pins == IN_TRANSACTION, case
            continue
        writes = any(s.kind is Kind.WRITE for s in statements)
        if writes and len(statements) > 1 and destination in WRITER_OF:
            assert hostgroup == WRITER_OF[destination], case  # never a write on a reader
        if destination is None:
            assert hostgroup == DEFAULT, case
        if not autocommit and flag and statements[0].kind not in TRANSACTION_NEUTRAL and hostgroup != DEFAULT:
            # autocommit=0 opens a transaction: it leaves the default only where a rule's word is final
            assert destination is not None and (statements[0].kind is Kind.BEGIN or not persistent), case
        # A stand-in only for statements that set nothing but session state, and not where a rule's word is final.
        final = destination is not None and (statements[0].kind is Kind.BEGIN or not persistent)
        assert stand_in == (
            not final
            and hostgroup == (destination if destination is not None else DEFAULT)
            and all(s.kind in (Kind.SET, Kind.USE) and not s.unparsable_set for s in statements)
            and not (not autocommit and flag and statements[0].kind not in TRANSACTION_NEUTRAL)
        ), case
    # without a kept connection: 4 destinations x 8 situations; with one: x 2 hostgroups x the pin sets
    assert checked == 4 * 8 + 4 * 8 * 2 * len(PIN_SETS)
