"""What a session tells whoever follows it, and the listener it tells: the seam between the session and the features
that watch its commands (the mirror today). Neither side imports the other: the session builds a ``QueryDone`` and
calls its ``SessionListener``; a feature subclasses the listener and keeps its own per-session state, keyed by the
session's id.

A concrete base class rather than a Protocol, so that the call compiles to a direct method call under mypyc.
"""

from __future__ import annotations

from proxyapp.mysql.backend import Credentials
from proxyapp.mysql.wire import Response
from proxyapp.rules.engine import RuleEngine, RuleOutcome
from proxyapp.session.prepared import ClientStatement
from proxyapp.session.state import SessionState
from proxyapp.sql.scan import Statement


class QueryDone:
    """A client command ran on its primary: a text query (``prepared`` None) or a prepared statement's execution.

    ``state`` is the session's live state (copy what must outlast the call); ``response`` is None when the command's
    outcome is unknown (the backend went away); ``outcome`` is the rules' verdict (for an execution: the prepare's,
    when it asked for a mirror)."""

    __slots__ = (
        "client_addr",
        "credentials",
        "default_hostgroup",
        "in_transaction",
        "outcome",
        "payload",
        "prepared",
        "proxy_addr",
        "proxy_port",
        "response",
        "rules",
        "session_id",
        "state",
        "statements",
        "username",
    )

    def __init__(
        self,
        session_id: int,
        username: str,
        credentials: Credentials,
        client_addr: str,
        proxy_addr: str,
        proxy_port: int,
        default_hostgroup: int,
        state: SessionState,
        in_transaction: bool,
        rules: RuleEngine,
        payload: bytes,
        statements: list[Statement],
        outcome: RuleOutcome | None,
        response: Response | None,
        prepared: ClientStatement | None,
    ) -> None:
        self.session_id = session_id
        self.username = username
        self.credentials = credentials
        self.client_addr = client_addr
        self.proxy_addr = proxy_addr
        self.proxy_port = proxy_port
        self.default_hostgroup = default_hostgroup
        self.state = state
        self.in_transaction = in_transaction
        self.rules = rules
        self.payload = payload
        self.statements = statements
        self.outcome = outcome
        self.response = response
        self.prepared = prepared


class SessionListener:
    """Hears sessions' commands. A session tells it a command when the command's rules ask for it (a mirror) or
    when the listener said it follows the session; the defaults hear nothing and follow nobody."""

    def query_done(self, event: QueryDone) -> bool:
        """A command ran; whether the listener follows the session from now on (hears its every command)."""
        return False

    def session_reset(self, session_id: int) -> None:
        """A followed session was reset (COM_RESET_CONNECTION, COM_CHANGE_USER): its open transaction is gone."""

    def session_ended(self, session_id: int) -> None:
        """A followed session ended."""
