"""The client side of a session: its connection, who it logged in as, and how the proxy answers it itself."""

from __future__ import annotations

import contextlib

from proxyapp.mysql import auth
from proxyapp.mysql.backend import Credentials
from proxyapp.mysql.constants import SESSION_CAPABILITIES, Status
from proxyapp.mysql.packets import err_packet, ok_packet
from proxyapp.mysql.wire import Wire
from proxyapp.report.stats import GlobalCounters
from proxyapp.rules.runtime import Runtime
from proxyapp.session.state import SessionState


class SessionEnd(Exception):
    """The session is over (the client quit, or must be disconnected)."""


class Client:
    """A client connection and the user it logged in as (set by the login, changed by COM_CHANGE_USER)."""

    def __init__(self, wire: Wire, counters: GlobalCounters) -> None:
        self.wire = wire
        self.counters = counters
        peer = wire.peer()
        sock = wire.local()
        self.addr: str = peer[0]
        self.port: int = peer[1]
        self.proxy_addr: str = sock[0]
        self.proxy_port: int = sock[1]
        self.username = ""
        self.credentials = Credentials("")  # what the proxy logs in to backends with, for this user
        self.default_hostgroup = 0
        self.transaction_persistent = True
        self.fast_forward = False
        self.capabilities = 0
        self.local_files = False  # the client can send LOAD DATA LOCAL files (a plain bool: read per query)
        self.collation = 45
        self.scramble = auth.new_scramble()

    def become(self, runtime: Runtime, username: str, stage1: bytes | None) -> None:
        """Take on the settings of ``username`` (a user of ``runtime``, just authenticated; ``stage1``: the
        client's proof, for a backend user whose password the proxy has only as a hash)."""
        user = runtime.frontend_users[username]
        backend_user = runtime.backend_users.get(username, user)
        self.username = username
        password = backend_user.password if not backend_user.password.startswith("*") else ""
        flags = self.capabilities & SESSION_CAPABILITIES
        self.credentials = Credentials(username, password, stage1 if not password else None, flags)
        self.default_hostgroup = user.default_hostgroup
        self.transaction_persistent = user.transaction_persistent
        self.fast_forward = user.fast_forward

    def send_error(self, code: int, message: str, seq: int = 1, sqlstate: str | None = None) -> None:
        """An error packet the proxy itself answers with (counted); a client already gone is no error."""
        self.counters.generated_error_packets += 1
        with contextlib.suppress(ConnectionError, RuntimeError, AttributeError):
            self.wire.send(err_packet(code, message, sqlstate), seq)

    def send_ok(self, status: int, info: bytes = b"", affected: int = 0) -> None:
        """An OK packet the proxy itself answers with."""
        self.wire.send(ok_packet(affected, 0, status, 0, info), 1)


def server_status(state: SessionState, in_transaction: bool) -> int:
    """The status flags the proxy reports in its own OK and EOF packets."""
    status = Status.AUTOCOMMIT if state.autocommit else 0
    if in_transaction:
        status |= Status.IN_TRANS
    return status
