"""What a client session has set, what pins it to one backend connection, and how to replay it elsewhere.

The session is the source of truth: every backend connection it borrows is brought to the session's state
(schema, character set, autocommit, multi-statement option, session variables) before the session's command
runs, with as few round trips as the differences need.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from proxyapp.backend import AppliedState
from proxyapp.protocol.constants import DEFAULT_COLLATION_ID, names_for_collation


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
    temp_tables: set[str] = field(default_factory=set)
    locks_held: int = 0
    pins: set[Pin] = field(default_factory=set)

    def matches(self, applied: AppliedState) -> bool:
        """Whether a connection already has this state (the common case: nothing to send)."""
        return (
            applied.schema == self.schema
            and applied.names == self.names
            and applied.autocommit == self.autocommit
            and applied.multi_statements == self.multi_statements
            and applied.variables == self.variables
        )

    def set_statement(self, applied: AppliedState) -> str | None:
        """One ``SET`` bringing a connection's character set, autocommit and variables to this state."""
        parts = []
        if applied.names != self.names:
            parts.append(f"NAMES {self.names}")
        for name, expr in self.variables.items():
            if applied.variables.get(name) != expr:
                parts.append(_assignment(name, expr))
        parts.extend(f"{name} = DEFAULT" for name in applied.variables if name not in self.variables)
        if applied.autocommit != self.autocommit:
            parts.append(f"autocommit = {int(self.autocommit)}")
        return "SET " + ", ".join(parts) if parts else None

    def adopt(self, applied: AppliedState) -> None:
        """Record on ``applied`` that the connection now has this state's SET-able parts."""
        applied.names = self.names
        applied.autocommit = self.autocommit
        applied.variables = dict(self.variables)


def _assignment(name: str, expr: str) -> str:
    return f"@@session.{name} = {expr}"
