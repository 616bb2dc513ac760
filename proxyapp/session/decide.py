"""What the proxy does with a COM_QUERY, decided apart from doing it: pure functions of the statement's facts, the
rules' verdict (``RuleOutcome``) and the session's situation (``route.Situation``), carried out by
``proxyapp.session.query``. No I/O and no session object, so that every case is a row of a table
(``tests/unit/proxyapp/session/test_decide.py``).

Two steps, because a transaction over shards acts on a statement between them (its COMMIT, ROLLBACK, savepoints and
implicit commits are carried out by ``sharded.transactions`` and change the session's situation):

- ``screen``: what the proxy answers whatever connection the session holds: an empty query, a rule's error or OK
  message, KILL, a LOAD DATA LOCAL that the client or the proxy does not allow;
- ``decide``: what it answers from what the session holds (LAST_INSERT_ID with no connection kept, a BEGIN held back
  and the COMMIT or ROLLBACK that ends it unused), whether the query cache may answer, and where the statement runs
  (``route``).
"""

from __future__ import annotations

import enum

from proxyapp.rules.engine import RuleOutcome
from proxyapp.session.route import Situation, route
from proxyapp.sql.scan import Kind, Statement


class Act(enum.Enum):
    """What the proxy does with a query."""

    RUN = 0  # run it on a backend of the verdict's hostgroup
    EMPTY = 1  # error 1065: the query holds no statement
    BLOCKED = 2  # a rule's error_msg
    RULE_OK = 3  # a rule's OK_msg
    KILL = 4  # KILL [CONNECTION | QUERY] n, carried to the session's worker (``session.kill``)
    INFILE_REFUSED = 5  # LOAD DATA LOCAL while the client or mysql-local_infile does not allow it (as MariaDB)
    LAST_INSERT_ID = 6  # SELECT LAST_INSERT_ID() with no connection kept: the session's own value
    HOLD_BEGIN = 7  # a BEGIN held back until the transaction's first statement (``BackendLink.defer``)
    END_HELD = 8  # COMMIT or ROLLBACK of a held-back transaction that never ran a statement


class Verdict:
    """``decide``'s answer: the act, and for ``RUN`` (and ``HOLD_BEGIN``) the hostgroup, whether a stand-in may run
    it (``PoolManager.stand_in``) and whether the query cache may answer it. A session keeps one and ``decide``
    fills it in for each query (a new one per query cost an allocation on the hot path)."""

    __slots__ = ("act", "cacheable", "hostgroup", "stand_in")

    def __init__(self) -> None:
        self.act = Act.RUN
        self.hostgroup = -1
        self.stand_in = False
        self.cacheable = False

    def say(self, act: Act, hostgroup: int = -1, stand_in: bool = False, cacheable: bool = False) -> Verdict:
        """This verdict, saying ``act`` (and where)."""
        self.act = act
        self.hostgroup = hostgroup
        self.stand_in = stand_in
        self.cacheable = cacheable
        return self


def screen(statements: list[Statement], outcome: RuleOutcome, local_infile: bool) -> Act:
    """The answer the proxy gives ``statements`` (as the rules' ``outcome`` rewrote them) whatever the session holds,
    or ``RUN`` for none (``local_infile``: the client and ``mysql-local_infile`` both allow LOAD DATA LOCAL)."""
    if not statements:
        return Act.EMPTY
    if outcome.error_msg is not None:
        return Act.BLOCKED
    if outcome.OK_msg is not None:
        return Act.RULE_OK
    if statements[0].keyword == "KILL" and len(statements) == 1:
        return Act.KILL
    if not local_infile:
        for statement in statements:
            if statement.load_local:
                return Act.INFILE_REFUSED
    return Act.RUN


def decide(
    statements: list[Statement],
    sql: str,
    outcome: RuleOutcome,
    at: Situation,
    writer_of: dict[int, int],
    holds_begin: bool,
    verdict: Verdict,
) -> Verdict:
    """What to do with ``statements`` (``sql``, at least one statement) that ``screen`` let run, in situation ``at``
    (``writer_of``: the replication pairs; ``holds_begin``: a BEGIN is held back, for sharded tables or hot-row
    queues), said in ``verdict`` (the only thing it writes to)."""
    first = statements[0]
    single = len(statements) == 1
    if single and first.last_insert_id_only and at.kept is None:
        return verdict.say(Act.LAST_INSERT_ID)
    hostgroup, stand_in = route(statements, outcome.destination_hostgroup, writer_of, at)
    if holds_begin and single:
        kind = first.kind
        if at.held is not None and (kind is Kind.COMMIT or kind is Kind.ROLLBACK):
            return verdict.say(Act.END_HELD)
        if (
            kind is Kind.BEGIN
            and first.keyword in ("BEGIN", "START")
            and at.kept is None
            and "SNAPSHOT" not in sql.upper()  # WITH CONSISTENT SNAPSHOT: its snapshot is taken now
        ):
            return verdict.say(Act.HOLD_BEGIN, hostgroup)
    cacheable = False
    if outcome.cache_ttl and at.kept is None:
        cacheable = True
        for statement in statements:
            if not statement.is_read:
                cacheable = False
                break
    return verdict.say(Act.RUN, hostgroup, stand_in, cacheable)
