"""A pooled connection from the proxy to a backend server, and the session state applied on it."""

from __future__ import annotations

import asyncio
import contextlib
import os
import ssl
from dataclasses import dataclass, field
from typing import Final

from proxyapp.mysql import auth
from proxyapp.mysql.constants import (
    DEFAULT_COLLATION_ID,
    DEFAULT_SESSION_FLAGS,
    PROXY_CAPABILITIES,
    SESSION_CAPABILITIES,
    Cap,
    Command,
    ErrorCode,
    names_for_collation,
)
from proxyapp.mysql.handshake import ClientLogin, ServerGreeting, parse_auth_switch, ssl_request
from proxyapp.mysql.packets import ErrPacket, ProtocolError, parse_err, parse_ok
from proxyapp.mysql.resultset import read_named_result, read_text_result
from proxyapp.mysql.stream import open_wire
from proxyapp.mysql.wire import CONNECTION_LOST, STATUS_UNKNOWN, Response, Wire, read_response

_IN_TRANS: Final = 0x0001  # Status.IN_TRANS
_PING = bytes((Command.PING,))
_RESET = bytes((Command.RESET_CONNECTION,))

#: The session variables whose value at login depends on the client's flags (``login_default``).
FLAG_VARIABLES = ("sql_mode", "wait_timeout")


def login_default(name: str, flags: int) -> str:
    """What session variable ``name`` is at the login of a client with session ``flags``, as SQL: ``DEFAULT`` (the
    global value) but where a flag changes it. ``SET x = DEFAULT`` and COM_RESET_CONNECTION both give the global
    value, which loses IGNORE_SPACE's sql_mode and INTERACTIVE's wait_timeout."""
    if name == "sql_mode" and flags & Cap.IGNORE_SPACE:
        return "CONCAT_WS(',', NULLIF(@@global.sql_mode, ''), 'IGNORE_SPACE')"
    if name == "wait_timeout" and flags & Cap.INTERACTIVE:
        return "@@global.interactive_timeout"
    return "DEFAULT"


class BackendError(Exception):
    """A backend could not be reached or refused us; ``code`` is the MySQL error number to report."""

    def __init__(self, message: str, code: int = 2003) -> None:
        super().__init__(message)
        self.code = code


@dataclass(slots=True)
class Credentials:
    """How the proxy logs in to backends for one user: the clear password or only SHA1(password), and the session's
    own flags among ``SESSION_CAPABILITIES`` (a client session's, as it asked them of the proxy)."""

    username: str
    password: str = ""
    stage1: bytes | None = None
    flags: int = DEFAULT_SESSION_FLAGS

    def native(self, scramble: bytes) -> bytes:
        """The mysql_native_password reply for ``scramble``."""
        if self.stage1 is not None:
            return auth.native_token_from_stage1(self.stage1, scramble)
        return auth.native_token(self.password, scramble)


@dataclass(slots=True)
class PreparedOnBackend:
    """A statement prepared on one backend connection."""

    stmt_id: int
    num_params: int
    num_columns: int


@dataclass(slots=True)
class AppliedState:
    """The session state a backend connection currently has (what was last set on it)."""

    schema: str | None = None
    names: str = field(default_factory=lambda: names_for_collation(DEFAULT_COLLATION_ID))
    autocommit: bool = True
    multi_statements: bool = True
    variables: dict[str, str] = field(default_factory=dict)
    user_variables: dict[str, str] = field(default_factory=dict)  # name -> SQL literal


class BackendConnection:
    """One authenticated connection to a backend server."""

    __slots__ = (
        "busy_at",
        "created_at",
        "dirty",
        "flags",
        "handshake_names",
        "last_used",
        "pool",
        "prepared",
        "server_version",
        "state",
        "status",
        "thread_id",
        "username",
        "wire",
        "xa",
    )

    def __init__(
        self,
        wire: Wire,
        greeting: ServerGreeting,
        username: str,
        schema: str | None,
        charset: int = DEFAULT_COLLATION_ID,
        flags: int = DEFAULT_SESSION_FLAGS,
    ) -> None:
        self.wire = wire
        self.thread_id = greeting.connection_id
        self.server_version = greeting.server_version
        self.username = username
        self.flags = flags  # the session flags it logged in with (``Credentials.flags``): it serves only those
        self.handshake_names = names_for_collation(charset)  # what COM_RESET_CONNECTION brings the charset back to
        self.state = AppliedState(schema=schema, names=self.handshake_names)
        self.status = greeting.status
        self.prepared: dict[str, PreparedOnBackend] = {}
        self.created_at = 0.0  # when it was opened and last given back, stamped by its pool on the proxy's clock
        self.last_used = 0.0
        self.dirty = False  # holds state no SET can undo (user variables, temp tables...): reset before reuse
        self.pool: object | None = None
        self.busy_at = -1  # its place in its pool's list of connections handed out (``ServerPool.busy``); -1: none
        # The gtrid of the XA branch the proxy opened on it and has not yet seen committed or rolled back, else "":
        # a branch the server rolled back (a deadlock) leaves no transaction in the status flags, but the
        # connection stays in the branch (every statement refused with 1399) until XA ROLLBACK.
        self.xa = ""

    def serves(self, credentials: Credentials) -> bool:
        """Whether this connection logged in as ``credentials`` would (its user, its session flags)."""
        return self.username == credentials.username and self.flags == credentials.flags

    @property
    def in_transaction(self) -> bool:
        """Whether the server said a transaction is open on this connection (or has not said it is not), or it is
        in an XA branch (``xa``)."""
        return bool(self.status & _IN_TRANS) or bool(self.xa)

    async def settle(self, response: Response) -> None:
        """Take the connection's status from ``response``; when it told none (an error), ask the server.

        A COM_PING's OK carries the status flags and changes nothing. If the server cannot be asked, the
        connection is closed and its status stays unknown: it will never be reused as it is.
        """
        if response.status != STATUS_UNKNOWN:
            self.status = response.status
            return
        self.status = STATUS_UNKNOWN
        try:
            refused = await self.simple_command(_PING)
        except CONNECTION_LOST:
            refused = None
        if refused is not None or self.status == STATUS_UNKNOWN:
            self.wire.close()
        response.status = self.status

    async def reset(self) -> bool:
        """COM_RESET_CONNECTION, then what the login's flags had set that the reset undid (``login_default``):
        whether the connection may serve another session now. Its state is recorded as a fresh login's."""
        err = await self.simple_command(_RESET)
        if err is not None or self.in_transaction:
            return False
        self.state = AppliedState(
            schema=self.state.schema, names=self.handshake_names, multi_statements=self.state.multi_statements
        )
        self.prepared.clear()
        self.dirty = False
        restore = [
            f"@@session.{name} = {login_default(name, self.flags)}"
            for name in FLAG_VARIABLES
            if login_default(name, self.flags) != "DEFAULT"
        ]
        return not restore or (await self.query("SET " + ", ".join(restore))).error is None

    @classmethod
    async def connect(
        cls,
        host: str,
        port: int,
        credentials: Credentials,
        schema: str | None,
        *,
        timeout: float,
        charset: int = DEFAULT_COLLATION_ID,
        max_packet: int = 1 << 30,
        tls: ssl.SSLContext | None = None,
    ) -> BackendConnection:
        """Open and authenticate a connection within ``timeout`` seconds, over TLS with ``tls`` (a server with
        ``use_ssl=1``); raises BackendError. Pools, the monitor, the mirror and KILL all connect through here."""
        try:
            return await asyncio.wait_for(
                cls._connect(host, port, credentials, schema, charset, max_packet, tls), timeout
            )
        except TimeoutError:
            raise BackendError(f"connect to {host}:{port} timed out after {timeout * 1000:.0f} ms") from None
        except ssl.SSLError as failed:  # before OSError, its base class
            raise BackendError(
                f"TLS with {host}:{port} failed: {failed.reason or failed}", ErrorCode.SSL_CONNECTION
            ) from None
        except OSError as refused:
            reason = os.strerror(refused.errno) if refused.errno else str(refused)  # "Connection refused"
            raise BackendError(f"cannot connect to {host}:{port}: {reason}") from None
        except ProtocolError as malformed:
            raise BackendError(f"bad handshake from {host}:{port}: {malformed}") from None

    @classmethod
    async def _connect(
        cls,
        host: str,
        port: int,
        credentials: Credentials,
        schema: str | None,
        charset: int,
        max_packet: int,
        tls: ssl.SSLContext | None,
    ) -> BackendConnection:
        wire = await open_wire(host, port)
        wire.max_packet = max_packet
        try:
            first = await wire.read_payload()
            if first[:1] == b"\xff":
                err = parse_err(first)
                raise BackendError(f"{host}:{port} refused the connection: {err.message}", err.code)
            greeting = ServerGreeting.decode(first)
            asked = PROXY_CAPABILITIES & ~SESSION_CAPABILITIES | credentials.flags & SESSION_CAPABILITIES
            caps = asked & greeting.capabilities | Cap.PROTOCOL_41
            if not schema:
                caps &= ~Cap.CONNECT_WITH_DB
            plugin = greeting.plugin if greeting.plugin in auth.SUPPORTED_PLUGINS else auth.NATIVE
            login = ClientLogin(
                capabilities=caps,
                username=credentials.username,
                auth_response=_token(plugin, credentials, greeting.scramble),
                charset=charset,
                database=schema,
                plugin=plugin,
                attributes={"_client_name": "proxyfleet", "program_name": "proxyfleet"},
                max_packet=max_packet,
            )
            seq = 1
            if tls is not None:
                if not greeting.capabilities & Cap.SSL:
                    raise BackendError(
                        f"{host}:{port} does not offer TLS, which its use_ssl=1 requires", ErrorCode.SSL_CONNECTION
                    )
                login.capabilities |= Cap.SSL
                wire.send(ssl_request(login.capabilities, max_packet, charset), seq)
                await wire.start_tls(tls, False, host)
                seq += 1
            wire.send(login.encode(), seq)
            await _finish_auth(wire, plugin, credentials, greeting.scramble, f"{host}:{port}")
        except BaseException:
            wire.close()
            raise
        return cls(wire, greeting, credentials.username, schema, charset, credentials.flags)

    async def query(self, sql: str) -> Response:
        """Run an internal statement and discard its result; the status is tracked. A statement made of a client's
        text (a SET replayed, a user variable read back) goes out in the bytes the client sent, UTF-8 or not."""
        self.wire.send(bytes((Command.QUERY,)) + sql.encode("utf-8", "surrogateescape"), 0)
        response = await read_response(self.wire, None)
        await self.settle(response)
        return response

    async def fetch_row(self, sql: str) -> tuple[list[tuple[int, int]], list[bytes | None]] | ErrPacket:
        """Run a one-row SELECT; returns ([(column type, charset id)], [raw text values]) or the error."""
        self.wire.send(bytes((Command.QUERY,)) + sql.encode("utf-8", "surrogateescape"), 0)
        columns, rows, status, err = await read_text_result(self.wire)
        if err is not None:
            return err
        self.status = status
        return columns, rows[0] if rows else [None] * len(columns)

    async def fetch_named(self, sql: str) -> tuple[list[str], list[list[bytes | None]]] | ErrPacket:
        """Run a small query; returns ([column names], rows of raw text values) or the error."""
        self.wire.send(bytes((Command.QUERY,)) + sql.encode("utf-8", "surrogateescape"), 0)
        names, rows, err = await read_named_result(self.wire)
        if err is not None:
            return err
        return names, rows

    async def simple_command(self, payload: bytes) -> ErrPacket | None:
        """Send a command answered by a single OK/EOF/ERR packet; returns the error, if any."""
        self.wire.send(payload, 0)
        reply = await self.wire.read_payload()
        if reply[:1] == b"\xff":
            return parse_err(reply)
        if reply[:1] == b"\x00":
            self.status = parse_ok(reply).status
        return None

    def close(self) -> None:
        """Send COM_QUIT and close the socket."""
        with contextlib.suppress(Exception):
            self.wire.send(bytes((Command.QUIT,)), 0)
        self.wire.close()


def _token(plugin: str, credentials: Credentials, scramble: bytes) -> bytes:
    if plugin == auth.CACHING_SHA2:
        return auth.sha2_token(credentials.password, scramble)
    return credentials.native(scramble)


async def _finish_auth(wire: Wire, plugin: str, credentials: Credentials, scramble: bytes, where: str) -> None:
    """Follow the server's auth exchange after the login packet until OK, or raise BackendError."""
    while True:
        reply = await wire.read_payload()
        kind = reply[:1]
        if kind == b"\x00":
            return
        if kind == b"\xff":
            err = parse_err(reply)
            raise BackendError(f"{where} refused the login of '{credentials.username}': {err.message}", err.code)
        if kind == b"\xfe":
            plugin, scramble = parse_auth_switch(reply)
            if plugin not in auth.SUPPORTED_PLUGINS:
                raise BackendError(f"{where} asks for unsupported auth plugin {plugin}", 1251)
            wire.send(_token(plugin, credentials, scramble), wire.seq + 1)
            continue
        if kind == b"\x01" and plugin == auth.CACHING_SHA2:
            if reply[1:2] == auth.SHA2_FAST_AUTH_OK:
                continue
            if reply[1:2] == auth.SHA2_FULL_AUTH:
                if not credentials.password:
                    raise BackendError(f"{where} needs the clear password of '{credentials.username}'", 1045)
                if wire.tls is not None:  # the channel is private: the password goes as it is
                    wire.send(credentials.password.encode() + b"\x00", wire.seq + 1)
                    continue
                wire.send(auth.SHA2_REQUEST_PUBLIC_KEY, wire.seq + 1)
                key = await wire.read_payload()
                wire.send(auth.rsa_encrypt_password(credentials.password, scramble, key[1:]), wire.seq + 1)
                continue
        raise BackendError(f"{where} sent an unexpected auth packet 0x{reply[:1].hex()}", 2027)
