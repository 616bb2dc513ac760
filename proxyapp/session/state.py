"""What a client session has set, what pins it to one backend connection, and how to replay it elsewhere.

The session is the source of truth: every backend connection it borrows is brought to the session's state
(schema, character set, autocommit, multi-statement option, session variables) before the session's command
runs, with as few round trips as the differences need.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from proxyapp.mysql.backend import AppliedState, BackendConnection, login_default
from proxyapp.mysql.constants import (
    COLLATIONS,
    DEFAULT_COLLATION_ID,
    DEFAULT_SESSION_FLAGS,
    Command,
    FieldType,
    names_for_collation,
)
from proxyapp.mysql.packets import ErrPacket
from proxyapp.mysql.wire import CONNECTION_LOST


class Pin(enum.Enum):
    """Why a session must keep its backend connection (ProxySQL's multiplexing rules, made releasable)."""

    TRANSACTION = "transaction"
    USER_VARIABLES = "user variables"
    TEMPORARY_TABLES = "temporary tables"
    GET_LOCK = "GET_LOCK"
    LOCK_TABLES = "LOCK TABLES"
    FOUND_ROWS = "SQL_CALC_FOUND_ROWS"
    TEXT_PREPARE = "text-protocol PREPARE"
    SQL_LOG_BIN = "sql_log_bin=0"
    CURSOR = "open cursor"
    RULE = "query rule multiplex=0"
    LOCKED_SET = "unparsable SET"
    WARNINGS = "warnings to read"
    FAILED_BATCH = "multi-statement batch that failed part-way"

    # A member equals only itself, so its identity is its hash: Enum's own hashes the name in Python code, which cost
    # 900 instructions on every query (``Pin.WARNINGS in pins``).
    __hash__ = object.__hash__


#: Pins that leave state on the connection which only a reset can clear before another session may use it.
DIRTY_PINS = frozenset(
    {
        Pin.USER_VARIABLES,
        Pin.TEMPORARY_TABLES,
        Pin.GET_LOCK,
        Pin.LOCK_TABLES,
        Pin.TEXT_PREPARE,
        Pin.SQL_LOG_BIN,
        Pin.CURSOR,
        Pin.LOCKED_SET,
        Pin.FAILED_BATCH,
    }
)


@dataclass(slots=True)
class SessionState:
    """The state a client session has established."""

    schema: str | None = None
    names: str = field(default_factory=lambda: names_for_collation(DEFAULT_COLLATION_ID))
    autocommit: bool = True
    multi_statements: bool = True
    variables: dict[str, str] = field(default_factory=dict)
    user_variables: dict[str, str] = field(default_factory=dict)  # name -> SQL literal, captured after each SET
    temp_tables: set[str] = field(default_factory=set)
    locks_held: int = 0
    pins: set[Pin] = field(default_factory=set)
    #: A transaction the session opened by what it sent (``track``): BEGIN, or with autocommit off any statement
    #: that is not transaction-neutral, until COMMIT, ROLLBACK or an implicit commit. The server's IN_TRANS flag misses
    #: some of these (MariaDB sets none after a SAVEPOINT with autocommit off, yet holds the savepoint), so the
    #: session keeps its connection on either.
    transaction_open: bool = False
    #: The wait_timeout the session set itself, in seconds (0: none; ``mysql-wait_timeout`` applies): the proxy ends
    #: it idle past that, as the server would (``limits.overstay``).
    wait_timeout_s: float = 0.0

    def matches(self, applied: AppliedState, schema: str | None = None) -> bool:
        """Whether a connection already has this state (the common case: nothing to send), in default schema
        ``schema`` instead of the session's when given (a shard's physical schema, ``proxyapp.sharding.physical``)."""
        return (
            applied.schema == (schema or self.schema)
            and applied.names == self.names
            and applied.autocommit == self.autocommit
            and applied.multi_statements == self.multi_statements
            and _same(applied.variables, self.variables)
            and _same(applied.user_variables, self.user_variables)
        )

    def set_statement(self, applied: AppliedState, flags: int = DEFAULT_SESSION_FLAGS) -> str | None:
        """One ``SET`` bringing the character set, autocommit and variables of a connection logged in with session
        ``flags`` (``Credentials.flags``) to this state."""
        parts = []
        if applied.names != self.names:
            parts.append(f"NAMES {self.names}")
        for name, expr in self.variables.items():
            if applied.variables.get(name) != expr:
                parts.append(_assignment(name, expr))
        parts.extend(
            _assignment(name, login_default(name, flags)) for name in applied.variables if name not in self.variables
        )
        for name, literal in self.user_variables.items():
            if applied.user_variables.get(name) != literal:
                parts.append(f"{user_variable(name)} = {literal}")
        # Another session's user variables on this connection read as NULL, as if never set.
        parts.extend(
            f"{user_variable(name)} = NULL" for name in applied.user_variables if name not in self.user_variables
        )
        if applied.autocommit != self.autocommit:
            parts.append(f"autocommit = {int(self.autocommit)}")
        return "SET " + ", ".join(parts) if parts else None

    def reset(self, names: str) -> None:
        """Back to a new session's state in character set ``names`` (COM_RESET_CONNECTION, COM_CHANGE_USER); the
        schema and the multi-statement option stay."""
        self.names = names
        self.autocommit = True
        self.variables = {}
        self.user_variables = {}
        self.temp_tables = set()
        self.locks_held = 0
        self.pins = set()
        self.transaction_open = False
        self.wait_timeout_s = 0.0

    def adopt(self, applied: AppliedState) -> None:
        """Record on ``applied`` that the connection now has this state's SET-able parts."""
        applied.names = self.names
        applied.autocommit = self.autocommit
        applied.variables = dict(self.variables)
        applied.user_variables = dict(self.user_variables)


async def bring(conn: BackendConnection, state: SessionState, schema: str | None = None) -> ErrPacket | None:
    """Bring ``conn`` to ``state``, the one way the session and the mirror both replay a session: one ``SET`` (the
    character set first, so that the server reads the schema's name in it), the schema (the bytes the client sent,
    valid UTF-8 or not; ``schema`` instead when given: a shard's physical schema), the multi-statement option; the
    backend's error if it refused a step (``conn`` then has the steps before it)."""
    applied = conn.state
    if state.matches(applied, schema):
        return None
    statement = state.set_statement(applied, conn.flags)
    if statement is not None and applied.names != state.names and not statement.isascii():
        err = await _names_apart(conn, state)
        if err is not None:
            return err
        statement = state.set_statement(applied, conn.flags)
    if statement is not None:
        response = await conn.query(statement)
        if response.error is not None:
            return response.error
        state.adopt(applied)
    wanted = schema or state.schema
    if wanted and applied.schema != wanted:
        err = await conn.simple_command(bytes((Command.INIT_DB,)) + wanted.encode("utf-8", "surrogateescape"))
        if err is not None:
            return err
        applied.schema = wanted
    if applied.multi_statements != state.multi_statements:
        err = await conn.simple_command(bytes((Command.SET_OPTION, 0 if state.multi_statements else 1, 0)))
        if err is not None:
            return err
        applied.multi_statements = state.multi_statements
    return None


async def _names_apart(conn: BackendConnection, state: SessionState) -> ErrPacket | None:
    """The character set changed apart, for a SET naming user variables that are not ASCII (``ÿ`` in latin1, the
    byte 0xff): the server reads a statement in the connection's character set, before a SET NAMES in it takes
    effect. So another session's variables are cleared in the connection's set (the one they were named in), then
    the session's set is made the connection's, in which the caller's SET names the session's variables."""
    applied = conn.state
    stale = [name for name in applied.user_variables if name not in state.user_variables]
    if stale:
        response = await conn.query("SET " + ", ".join(f"{user_variable(name)} = NULL" for name in stale))
        if response.error is not None:
            return response.error
        for name in stale:
            del applied.user_variables[name]
    response = await conn.query("SET NAMES " + state.names)
    if response.error is not None:
        return response.error
    applied.names = state.names
    return None


def _same(ours: dict[str, str], theirs: dict[str, str]) -> bool:
    """Whether two variable maps are equal; compiled, two empty ones (the common case) are told apart by their sizes
    alone, where ``==`` is a generic comparison."""
    if len(ours) == 0 and len(theirs) == 0:
        return True
    return ours == theirs


def user_variable(name: str) -> str:
    """``@name`` quoted for SQL."""
    return "@`" + name.replace("`", "``") + "`"


_NUMERIC_TYPES = frozenset(
    {
        FieldType.DECIMAL,
        FieldType.TINY,
        FieldType.SHORT,
        FieldType.LONG,
        FieldType.FLOAT,
        FieldType.DOUBLE,
        FieldType.LONGLONG,
        FieldType.INT24,
        FieldType.YEAR,
        FieldType.NEWDECIMAL,
    }
)


def value_literal(value: bytes | None, field_type: int, charset_id: int) -> str:
    """A SQL literal that recreates a user variable's value (type and character set included)."""
    if value is None:
        return "NULL"
    if field_type in _NUMERIC_TYPES:
        return value.decode("ascii")
    hexed = f"X'{value.hex()}'"
    if charset_id == 63:  # binary
        return hexed
    charset = COLLATIONS.get(charset_id, COLLATIONS[DEFAULT_COLLATION_ID])[0]
    if charset.startswith("utf8") and b"\\" not in value and not _is_utf8(value):
        # Bytes that are not UTF-8 in a UTF-8 value, as a client's literal set them: the server keeps them, and
        # CONVERT would make each a '?'. A literal of the set holds them as they are (without a backslash, which
        # reads as sql_mode says).
        return f"_{charset}'" + value.decode("utf-8", "surrogateescape").replace("'", "''") + "'"
    return f"CONVERT({hexed} USING {charset})"


def _is_utf8(value: bytes) -> bool:
    try:
        value.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _assignment(name: str, expr: str) -> str:
    return f"@@session.{name} = {expr}"


async def capture_user_variables(conn: BackendConnection, state: SessionState, names: list[str]) -> bool:
    """Read back the user variables ``names`` a statement assigned on ``conn`` into ``state`` (and the connection's
    applied state), so they follow the session to any connection.

    ProxySQL pins a session for good once it touches a user variable (its issue #1250); we replay the values
    instead. Returns False when they could not be read (the session is then pinned).
    """
    unique = list(dict.fromkeys(names))
    try:
        result = await conn.fetch_row("SELECT " + ", ".join(user_variable(n) for n in unique))
    except CONNECTION_LOST:
        return False
    if isinstance(result, ErrPacket):
        return False
    columns, values = result
    for name, (field_type, charset), value in zip(unique, columns, values, strict=True):
        literal = value_literal(value, field_type, charset)
        state.user_variables[name] = conn.state.user_variables[name] = literal
    return True


async def read_last_insert_id(conn: BackendConnection) -> int | None:
    """After ``LAST_INSERT_ID(expr)`` (no OK packet tells it), the session's insert id read back from ``conn``; None
    when it could not be read."""
    try:
        result = await conn.fetch_row("SELECT LAST_INSERT_ID()")
    except CONNECTION_LOST:
        return None
    if not isinstance(result, ErrPacket) and result[1] and result[1][0] is not None:
        return int(result[1][0])
    return None
