"""``screen`` and ``decide``, the pure decisions of the COM_QUERY pipeline, as tables: what the proxy answers itself,
what it holds back, what the query cache may answer and where the rest runs."""

from __future__ import annotations

import pytest

from proxyapp.rules.engine import RuleOutcome
from proxyapp.session.decide import Act, Verdict, decide, screen
from proxyapp.session.route import Situation
from proxyapp.session.state import Pin
from proxyapp.sql.scan import scan

DEFAULT = 10  # the user's default (writer) hostgroup
READERS = 20
WRITER_OF = {READERS: DEFAULT}


def at(kept: int | None = None, held: int | None = None, autocommit: bool = True) -> Situation:
    pins = {Pin.TRANSACTION} if kept is not None else set()
    return Situation(DEFAULT, True, autocommit, True, kept, pins, held)


SCREENED = [
    # sql, rules' verdict, LOAD DATA LOCAL allowed, act
    ("", RuleOutcome(), True, Act.EMPTY),
    ("-- only a comment", RuleOutcome(), True, Act.EMPTY),
    ("SELECT 1", RuleOutcome(error_msg="no"), True, Act.BLOCKED),
    ("SELECT 1", RuleOutcome(OK_msg="fine"), True, Act.RULE_OK),
    ("SELECT 1", RuleOutcome(error_msg="no", OK_msg="fine"), True, Act.BLOCKED),  # the error wins
    ("KILL 7", RuleOutcome(), True, Act.KILL),
    ("KILL QUERY 7", RuleOutcome(), True, Act.KILL),
    ("KILL 7", RuleOutcome(error_msg="no"), True, Act.BLOCKED),  # a rule may forbid KILL
    ("KILL 7; SELECT 1", RuleOutcome(), True, Act.RUN),  # not the proxy's KILL: the server's to refuse
    ("LOAD DATA LOCAL INFILE 'f' INTO TABLE t", RuleOutcome(), False, Act.INFILE_REFUSED),
    ("SELECT 1; LOAD DATA LOCAL INFILE 'f' INTO TABLE t", RuleOutcome(), False, Act.INFILE_REFUSED),
    ("LOAD DATA LOCAL INFILE 'f' INTO TABLE t", RuleOutcome(), True, Act.RUN),
    ("LOAD DATA INFILE 'f' INTO TABLE t", RuleOutcome(), False, Act.RUN),  # the server's own file
    ("SELECT 1", RuleOutcome(), True, Act.RUN),
]


@pytest.mark.parametrize(("sql", "outcome", "local_infile", "act"), SCREENED)
def test_screen(sql: str, outcome: RuleOutcome, local_infile: bool, act: Act) -> None:
    assert screen(scan(sql), outcome, local_infile) is act


DECIDED = [
    # sql, rules' verdict, situation, holds BEGIN, (act, hostgroup, stand-in, cacheable)
    ("SELECT LAST_INSERT_ID()", RuleOutcome(), at(), False, (Act.LAST_INSERT_ID, -1, False, False)),
    # with a connection kept, its server knows the session's value
    ("SELECT LAST_INSERT_ID()", RuleOutcome(), at(kept=DEFAULT), False, (Act.RUN, DEFAULT, False, False)),
    ("SELECT LAST_INSERT_ID(), 1", RuleOutcome(), at(), False, (Act.RUN, DEFAULT, False, False)),
    ("SELECT 1", RuleOutcome(), at(), False, (Act.RUN, DEFAULT, False, False)),
    ("SELECT 1", RuleOutcome(destination_hostgroup=READERS), at(), False, (Act.RUN, READERS, False, False)),
    ("SET NAMES utf8mb4", RuleOutcome(), at(), False, (Act.RUN, DEFAULT, True, False)),
    # the query cache: reads only, with no connection kept
    ("SELECT 1", RuleOutcome(cache_ttl=1000), at(), False, (Act.RUN, DEFAULT, False, True)),
    ("SELECT 1; SELECT 2", RuleOutcome(cache_ttl=1000), at(), False, (Act.RUN, DEFAULT, False, True)),
    ("SELECT 1; DELETE FROM t", RuleOutcome(cache_ttl=1000), at(), False, (Act.RUN, DEFAULT, False, False)),
    ("SELECT 1", RuleOutcome(cache_ttl=1000), at(kept=DEFAULT), False, (Act.RUN, DEFAULT, False, False)),
    ("SELECT 1 FOR UPDATE", RuleOutcome(cache_ttl=1000), at(), False, (Act.RUN, DEFAULT, False, False)),
    # a BEGIN held back while sharded tables or hot-row queues may apply, then run where it would have
    ("BEGIN", RuleOutcome(), at(), True, (Act.HOLD_BEGIN, DEFAULT, False, False)),
    ("START TRANSACTION", RuleOutcome(), at(), True, (Act.HOLD_BEGIN, DEFAULT, False, False)),
    ("BEGIN", RuleOutcome(destination_hostgroup=READERS), at(), True, (Act.HOLD_BEGIN, READERS, False, False)),
    ("BEGIN", RuleOutcome(), at(), False, (Act.RUN, DEFAULT, False, False)),
    ("START TRANSACTION WITH CONSISTENT SNAPSHOT", RuleOutcome(), at(), True, (Act.RUN, DEFAULT, False, False)),
    ("BEGIN", RuleOutcome(), at(kept=DEFAULT), True, (Act.RUN, DEFAULT, False, False)),
    ("BEGIN; SELECT 1", RuleOutcome(), at(), True, (Act.RUN, DEFAULT, False, False)),
    ("COMMIT", RuleOutcome(), at(held=READERS), True, (Act.END_HELD, -1, False, False)),
    ("ROLLBACK", RuleOutcome(), at(held=READERS), True, (Act.END_HELD, -1, False, False)),
    ("COMMIT", RuleOutcome(), at(), True, (Act.RUN, DEFAULT, False, False)),
    ("UPDATE t SET a = 1", RuleOutcome(), at(held=READERS), True, (Act.RUN, READERS, False, False)),
    ("SELECT 1", RuleOutcome(destination_hostgroup=DEFAULT), at(held=READERS), True, (Act.RUN, READERS, False, False)),
]


@pytest.mark.parametrize(("sql", "outcome", "situation", "holds_begin", "expected"), DECIDED)
def test_decide(
    sql: str, outcome: RuleOutcome, situation: Situation, holds_begin: bool, expected: tuple[Act, int, bool, bool]
) -> None:
    statements = scan(sql)
    assert screen(statements, outcome, True) is Act.RUN
    verdict = decide(statements, sql, outcome, situation, WRITER_OF, holds_begin, Verdict())
    assert (verdict.act, verdict.hostgroup, verdict.stand_in, verdict.cacheable) == expected


def test_decide_reads_its_arguments_only() -> None:
    """The same facts give the same verdict, and deciding changes none of them (only the verdict it fills in)."""
    statements = scan("SELECT 1")
    outcome = RuleOutcome(destination_hostgroup=READERS, cache_ttl=5)
    situation = at()
    first = decide(statements, "SELECT 1", outcome, situation, WRITER_OF, True, Verdict())
    second = decide(statements, "SELECT 1", outcome, situation, WRITER_OF, True, Verdict())
    assert (first.act, first.hostgroup, first.cacheable) == (second.act, second.hostgroup, second.cacheable)
    assert outcome == RuleOutcome(destination_hostgroup=READERS, cache_ttl=5)
    assert (situation.kept, situation.held, situation.pins) == (None, None, set())
