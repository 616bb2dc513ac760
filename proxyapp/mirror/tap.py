"""An ordered mirror's tap on one client session (``proxyapp.mirror.mirror``): the open transaction's statements
held until it ends (a commit hands them over as one unit, a rollback drops them, savepoints roll part of them back),
the session's replayable state as a snapshot per statement, and the session's lanes; and what the mirror reads of a
statement to decide whether and how it is replayed."""

from __future__ import annotations

from typing import Protocol

from proxyapp.mirror.lanes import Lane
from proxyapp.mirror.units import MirrorOp
from proxyapp.mysql.backend import Credentials
from proxyapp.mysql.wire import Response
from proxyapp.session.events import QueryDone
from proxyapp.session.state import SessionState
from proxyapp.sql.lex import tokenize, unquote
from proxyapp.sql.scan import Kind, Statement

_SAVEPOINT_WORDS = ("SAVEPOINT", "ROLLBACK", "RELEASE")
_NO_CONTEXT_KINDS = frozenset({Kind.BEGIN, Kind.COMMIT, Kind.ROLLBACK, Kind.SAVEPOINT, Kind.USE})


class LaneOwner(Protocol):
    """What a tap asks of the mirror: lanes, and units handed over or dropped."""

    def new_lane(self, suffix: str, hostgroup: int) -> Lane:
        """A lane for a session's statements on ``hostgroup``."""
        ...

    def close_lane(self, lane: Lane) -> None:
        """The session is gone: the lane ends once its units ran."""
        ...

    def push(self, lane: Lane, ops: list[MirrorOp], transaction: bool, credentials: Credentials) -> None:
        """Hand ``ops`` to ``lane`` as one unit (a transaction when ``transaction``)."""
        ...

    def drop(self, reason: str, count: int, *, handed: bool) -> None:
        """Count ``count`` statements dropped for ``reason``."""
        ...


class MirrorTap:
    """A session's ordered-mode state: its open transaction's statements, savepoints and lanes."""

    __slots__ = ("ctx", "lanes", "mirror", "pending", "savepoints", "session_id")

    def __init__(self, mirror: LaneOwner, session_id: int) -> None:
        self.mirror = mirror
        self.session_id = session_id
        self.lanes: dict[int, Lane] = {}
        self.pending: list[MirrorOp] | None = None  # the open transaction's statements; None: nothing buffered
        self.savepoints: list[tuple[str, int]] = []  # name, how many pending statements it keeps
        self.ctx: SessionState | None = None

    def context(self, state: SessionState) -> SessionState:
        """The session's replayable state as a snapshot, the previous one while nothing changed."""
        ctx = self.ctx
        if (
            ctx is not None
            and ctx.schema == state.schema
            and ctx.names == state.names
            and ctx.multi_statements == state.multi_statements
            and ctx.variables == state.variables
            and ctx.user_variables == state.user_variables
        ):
            return ctx
        ctx = SessionState(
            schema=state.schema,
            names=state.names,
            multi_statements=state.multi_statements,
            variables=dict(state.variables),
            user_variables=dict(state.user_variables),
        )
        self.ctx = ctx
        return ctx

    def after(self, done: QueryDone, payload: bytes, op: MirrorOp | None) -> None:
        """Follow one command of the session: its transaction's end, savepoints, and ``op`` (its mirror, if any)."""
        statements = done.statements
        response = done.response
        ok = response is not None and response.error is None
        in_trans = done.in_transaction
        first = statements[0] if len(statements) == 1 else None
        if first is not None and ok and in_trans and payload and is_savepoint_command(first):
            self._savepoint(first, payload)
            return
        pending = self.pending
        if pending is not None and (not in_trans or (first is not None and first.kind is Kind.BEGIN)):
            self.pending = None
            self.savepoints.clear()
            if ok and not rolls_back(statements):
                if pending:
                    self._emit(pending, done.credentials, True)
            elif response is None and first is not None and first.kind is Kind.COMMIT and pending:
                self.mirror.drop("commit_outcome_unknown", len(pending), handed=True)
        if op is None or not ok:
            return
        if in_trans:
            if self.pending is None:
                self.pending = [op]
            else:
                self.pending.append(op)
        else:
            self._emit([op], done.credentials, False)

    def _savepoint(self, statement: Statement, payload: bytes) -> None:
        """SAVEPOINT, ROLLBACK TO and RELEASE SAVEPOINT inside a transaction, applied to the buffered statements."""
        tokens = tokenize(payload[1:].decode("utf-8", "surrogateescape"))
        name = unquote(tokens.text(len(tokens) - 1)).lower()
        pending = self.pending
        if pending is None:
            pending = self.pending = []
        marks = self.savepoints
        index = next((i for i in range(len(marks) - 1, -1, -1) if marks[i][0] == name), -1)
        if statement.kind is Kind.SAVEPOINT:
            if index >= 0:
                del marks[index]
            marks.append((name, len(pending)))
        elif statement.keyword == "ROLLBACK":
            # A savepoint set before this session buffered anything keeps none of the buffered statements.
            keep = marks[index][1] if index >= 0 else 0
            del pending[keep:]
            del marks[index + 1 :]
        elif index >= 0:  # RELEASE: it and the savepoints after it are gone
            del marks[index:]

    def _emit(self, ops: list[MirrorOp], credentials: Credentials, transaction: bool) -> None:
        """Queue committed statements: a unit per mirror hostgroup, a transaction when there are several."""
        hostgroup = ops[0].hostgroup
        if all(op.hostgroup == hostgroup for op in ops):
            self.mirror.push(self._lane(hostgroup), ops, transaction and len(ops) > 1, credentials)
            return
        groups: dict[int, list[MirrorOp]] = {}
        for op in ops:
            groups.setdefault(op.hostgroup, []).append(op)
        for hg, group in groups.items():
            self.mirror.push(self._lane(hg), group, transaction and len(group) > 1, credentials)

    def _lane(self, hostgroup: int) -> Lane:
        lane = self.lanes.get(hostgroup)
        if lane is None:
            lane = self.lanes[hostgroup] = self.mirror.new_lane(f"{self.session_id}.{hostgroup}", hostgroup)
        return lane

    def reset(self) -> None:
        """The session was reset (COM_RESET_CONNECTION, COM_CHANGE_USER): its open transaction rolled back."""
        self.pending = None
        self.savepoints.clear()
        self.ctx = None

    def close(self) -> None:
        """The session ended: an open transaction rolled back; the lanes end once their units ran."""
        self.reset()
        for lane in self.lanes.values():
            self.mirror.close_lane(lane)
        self.lanes.clear()


def is_savepoint_command(statement: Statement) -> bool:
    """SAVEPOINT, ROLLBACK [WORK] TO [SAVEPOINT] and RELEASE SAVEPOINT."""
    return statement.kind is Kind.SAVEPOINT or (statement.kind is Kind.OTHER and statement.keyword in _SAVEPOINT_WORDS)


def rolls_back(statements: list[Statement]) -> bool:
    """Whether a command ends its transaction with a rollback (ROLLBACK, ROLLBACK AND CHAIN; not ROLLBACK TO)."""
    return any(s.keyword == "ROLLBACK" and s.kind is not Kind.OTHER for s in statements)


def replayable(statements: list[Statement]) -> bool:
    """Whether a command is mirrored as a statement in ordered mode: not transaction control (followed by the
    lane itself), nor a SET or USE the session's context carries (a global or untrackable SET is replayed)."""
    if len(statements) != 1:
        return True
    first = statements[0]
    if first.kind is Kind.SET:
        return first.global_set or first.unparsable_set
    return first.kind not in _NO_CONTEXT_KINDS and not is_savepoint_command(first)


def insert_id(statements: list[Statement], response: Response) -> int:
    """The AUTO_INCREMENT value a single INSERT or REPLACE generated on the primary, to replay (0: none)."""
    if response.last_insert_id and len(statements) <= 1 and (not statements or statements[0].kind is Kind.WRITE):
        return response.last_insert_id
    return 0
