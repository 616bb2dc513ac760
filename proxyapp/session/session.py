"""A client session: handshake and authentication, command dispatch, routing, pinning and state tracking.

The query path is a pipeline of plain steps, each a method: analyze (scan + digest), apply the query rules,
answer from the proxy when it can (rule errors and OK messages, LAST_INSERT_ID, the cache), route to a
hostgroup, borrow a backend connection and bring it to the session's state, run and relay, then track what the
statement changed and decide whether the session keeps the connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import struct
import time
from collections.abc import Awaitable, Callable

from proxyapp.backends.pool import Hostgroup, PoolError, ServerPool
from proxyapp.mysql import auth
from proxyapp.mysql.backend import BackendConnection, BackendError, Credentials
from proxyapp.mysql.constants import (
    PROXY_CAPABILITIES,
    Cap,
    Command,
    ErrorCode,
    FieldType,
    Status,
    names_for_collation,
)
from proxyapp.mysql.handshake import ClientLogin, ServerGreeting, auth_switch_request
from proxyapp.mysql.packets import (
    ErrPacket,
    PacketTooLarge,
    ProtocolError,
    eof_packet,
    err_packet,
    frame,
    ok_packet,
    parse_err,
    parse_ok,
    read_nul_str,
)
from proxyapp.mysql.resultset import result_set
from proxyapp.mysql.wire import STATUS_UNKNOWN, PeerClosed, Response, Sink, Wire, read_response
from proxyapp.report.eventslog import query_event
from proxyapp.rules.engine import QueryContext, RuleOutcome
from proxyapp.session.events import QueryDone
from proxyapp.session.kill import KillRefused, KillRequest, parse_kill
from proxyapp.session.prepared import (
    MAX_STATEMENTS_PER_CONNECTION,
    ClientStatement,
    ensure_prepared,
    read_prepare_response,
    rewrite_execute,
    with_client_id,
)
from proxyapp.session.services import SessionServices
from proxyapp.session.state import DIRTY_PINS, Pin, SessionState, bring, user_variable, value_literal
from proxyapp.sql.digest import Digest, compute_digest
from proxyapp.sql.scan import Kind, Statement, scan

log = logging.getLogger("proxyapp.session.session")

_NO_TIMEOUT_MS = 86_400_000
_DEFAULT_VERSION = "5.5.5-10.11.0-MariaDB-ProxyFleet"  # until a backend has told its own
_TRANSACTION_NEUTRAL = frozenset({Kind.SET, Kind.USE, Kind.SHOW, Kind.COMMIT, Kind.ROLLBACK})
_WARNING_QUERIES = ("SHOW WARNINGS", "SHOW ERRORS", "SHOW COUNT")
#: The processlist's ``info`` shows at most this many bytes of a statement.
_PROCESSLIST_INFO_MAX = 1000
#: The processlist's ``command`` column, as the server's SHOW PROCESSLIST names the commands.
_COMMAND_NAMES: dict[int, str] = {
    Command.QUERY: "Query",
    Command.INIT_DB: "Init DB",
    Command.FIELD_LIST: "Field List",
    Command.STATISTICS: "Statistics",
    Command.PROCESS_KILL: "Kill",
    Command.PING: "Ping",
    Command.CHANGE_USER: "Change user",
    Command.STMT_PREPARE: "Prepare",
    Command.STMT_EXECUTE: "Execute",
    Command.STMT_SEND_LONG_DATA: "Long Data",
    Command.STMT_CLOSE: "Close stmt",
    Command.STMT_RESET: "Reset stmt",
    Command.SET_OPTION: "Set option",
    Command.STMT_FETCH: "Fetch",
    Command.RESET_CONNECTION: "Reset connection",
}
_ISOLATION = {
    "READ UNCOMMITTED": "'READ-UNCOMMITTED'",
    "READ COMMITTED": "'READ-COMMITTED'",
    "REPEATABLE READ": "'REPEATABLE-READ'",
    "SERIALIZABLE": "'SERIALIZABLE'",
}


class SessionEnd(Exception):
    """The session is over (the client quit, or must be disconnected)."""


class InfileAbandoned(Exception):
    """During a LOAD DATA LOCAL the client sent a packet out of the file's sequence (``seq``): it gave up."""

    def __init__(self, seq: int) -> None:
        super().__init__(f"packet {seq} out of order during LOAD DATA LOCAL")
        self.seq = seq


class _Sink:
    """Collects what a response relay writes, for the query cache, and passes it on to the client."""

    __slots__ = ("capture", "client", "parts", "written")

    def __init__(self, client: Wire, capture: bool = False) -> None:
        self.client = client
        self.capture = capture
        self.parts: list[bytes] = []
        self.written = 0

    def write(self, raw: bytes) -> None:
        """Relay ``raw`` to the client (and keep a copy when capturing)."""
        if self.capture:
            self.parts.append(raw)
        self.written += len(raw)
        self.client.write(raw)

    async def drain(self) -> None:
        """Wait for the client to take what was written."""
        await self.client.drain()


Runner = Callable[[BackendConnection, _Sink], Awaitable[Response]]


class Session:
    """One client connection to the proxy."""

    def __init__(self, services: SessionServices, wire: Wire, session_id: int) -> None:
        self.services = services
        self.id = session_id
        self.client = wire
        wire.max_packet = services.runtime.settings.max_allowed_packet
        peer = wire.peer()
        sock = wire.local()
        self.client_addr: str = peer[0]
        self.client_port: int = peer[1]
        self.proxy_addr: str = sock[0]
        self.proxy_port: int = sock[1]
        self.username = ""
        self.credentials = Credentials("")
        self.default_hostgroup = 0
        self.transaction_persistent = True
        self.capabilities = 0
        self.local_files = False  # the client can send LOAD DATA LOCAL files (a plain bool: read per query)
        self.collation = 45
        self.state = SessionState()
        self.conn: BackendConnection | None = None  # the connection the session keeps while pinned
        self.conn_hostgroup = 0
        self.last_insert_id = 0
        self.flag_in = 0
        self.statements: dict[int, ClientStatement] = {}
        self.next_stmt_id = 1
        self.scramble = auth.new_scramble()
        self.in_transaction = False
        self.last_pool: ServerPool | None = None  # the server the last command ran on
        self.fast_forward = False
        self.idle_since = 0.0  # loop time since the session waits for a command; 0 while one runs
        self.busy_since = 0.0  # loop time the current (or last) command arrived
        self.command = b""  # the current (or last) command packet, for the processlist
        self.running: BackendConnection | None = None  # the backend connection a command runs on right now
        self.killed = False  # a KILL ended the session: a command still waiting for a connection must not run
        self.transaction_since = 0.0  # loop time the command that opened the current transaction arrived
        self.followed = False  # the listener hears every command of this session (it said so)

    # ----------------------------------------------------------------------------------------------- lifecycle

    async def run(self) -> None:
        """Serve the client until it quits or breaks; never raises."""
        counters = self.services.counters
        counters.Client_Connections_created += 1
        counters.Client_Connections_connected += 1
        clean = False
        try:
            try:
                logged_in = await asyncio.wait_for(
                    self._handshake(), self.services.runtime.settings.connect_timeout_client_ms / 1000
                )
            except TimeoutError:
                log.info("session %d: %s did not log in within mysql-connect_timeout_client", self.id, self.client_addr)
                logged_in = False
            if logged_in:
                if self.fast_forward:
                    await self._forward_raw()
                else:
                    await self._command_loop()
            clean = True
        except SessionEnd:
            clean = True
        except (PeerClosed, asyncio.IncompleteReadError, ConnectionError):
            pass
        except PacketTooLarge as too_large:
            self._send_error(ErrorCode.NET_PACKET_TOO_LARGE, str(too_large), self.client.seq + 1)
        except ProtocolError as malformed:
            log.info("session %d: malformed packet from %s: %s", self.id, self.client_addr, malformed)
            self._send_error(ErrorCode.HANDSHAKE, f"Malformed packet: {malformed}", self.client.seq + 1)
        except Exception:
            log.exception("session %d: internal error", self.id)
            self._send_error(ErrorCode.PROXY_ERROR, "ProxyFleet internal error; see the proxy log", 1)
        finally:
            if not clean:
                counters.Client_Connections_aborted += 1
            counters.Client_Connections_connected -= 1
            if self.in_transaction:
                counters.Active_Transactions -= 1
                self.in_transaction = False
            if self.followed:
                self.followed = False
                self.services.listener.session_ended(self.id)
            await self._drop_connection(reset=True)
            self.client.close()

    async def _drop_connection(self, reset: bool) -> None:
        """Give up the kept backend connection, resetting it first when the session left state on it."""
        conn = self.conn
        if conn is None:
            return
        self.conn = None
        pool = conn.pool
        assert isinstance(pool, ServerPool)
        reusable = True
        if reset and (conn.dirty or conn.in_transaction or self.state.pins & DIRTY_PINS):
            try:
                err = await asyncio.wait_for(conn.simple_command(bytes((Command.RESET_CONNECTION,))), 2)
                reusable = err is None and not conn.in_transaction
                conn.reset_state()
            except (PeerClosed, ProtocolError, TimeoutError, OSError):
                reusable = False
        pool.hostgroup.release(conn, pool, reusable)

    # ----------------------------------------------------------------------------------------------- handshake

    async def _handshake(self) -> bool:
        rt = self.services.runtime
        plugin = rt.settings.auth_plugin
        greeting = ServerGreeting(
            server_version=rt.settings.server_version or self.services.pools.backend_version or _DEFAULT_VERSION,
            connection_id=self.id,
            scramble=self.scramble,
            capabilities=PROXY_CAPABILITIES | Cap.COMPRESS if rt.settings.have_compress else PROXY_CAPABILITIES,
            charset=45,
            plugin=plugin,
        )
        self.client.send(greeting.encode(), 0)
        payload = await self.client.read_payload()
        if len(payload) == 32 and struct.unpack_from("<I", payload)[0] & Cap.SSL:
            self._send_error(ErrorCode.HANDSHAKE, "SSL is not enabled on this ProxyFleet listener", 2)
            return False
        login = ClientLogin.decode(payload)
        if login.capabilities & Cap.COMPRESS and not rt.settings.have_compress:
            # Its next packets would come in frames this listener does not read: refuse now rather than misread.
            self._send_error(ErrorCode.HANDSHAKE, "Compression is not enabled on this ProxyFleet listener", 2)
            return False
        self.capabilities = login.capabilities
        self.local_files = bool(login.capabilities & Cap.LOCAL_FILES)
        seq = self.client.seq + 1
        user = rt.frontend_users.get(login.username)
        addr = self.client_addr
        using = "YES" if login.auth_response else "NO"
        denied = f"Access denied for user '{login.username}'@'{addr}' (using password: {using})"
        if user is None:
            self.services.counters.Access_Denied_Wrong_Password += 1
            self._send_error(ErrorCode.ACCESS_DENIED, denied, seq)
            return False
        client_plugin = login.plugin or auth.NATIVE
        token = login.auth_response
        wanted = client_plugin
        if client_plugin not in auth.SUPPORTED_PLUGINS or (
            client_plugin == auth.CACHING_SHA2 and user.password.startswith("*")
        ):
            wanted = auth.NATIVE
        if wanted != client_plugin and self.capabilities & Cap.PLUGIN_AUTH:
            self.client.send(auth_switch_request(wanted, self.scramble), seq)
            token = await self.client.read_payload()
            seq = self.client.seq + 1
        verdict = auth.verify(wanted, user.password, self.scramble, token)
        if not verdict.ok:
            self.services.counters.Access_Denied_Wrong_Password += 1
            self._send_error(ErrorCode.ACCESS_DENIED, denied, seq)
            return False
        if self.services.counters.Client_Connections_connected > rt.settings.max_connections:
            self.services.counters.Access_Denied_Max_Connections += 1
            self._send_error(ErrorCode.CON_COUNT, "Too many connections", seq)
            return False
        if wanted == auth.CACHING_SHA2 and user.password:
            self.client.send(b"\x01" + auth.SHA2_FAST_AUTH_OK, seq)
            seq += 1
        self._become(user.username, user.password, verdict.stage1, login.database or user.default_schema)
        self.collation = login.charset
        self.state.names = names_for_collation(login.charset)
        self.state.multi_statements = bool(self.capabilities & Cap.MULTI_STATEMENTS)
        self.client.send(ok_packet(), seq)
        if self.capabilities & Cap.COMPRESS:
            self.client.compress()
        return True

    def _become(self, username: str, password: str, stage1: bytes | None, schema: str | None) -> None:
        user = self.services.runtime.frontend_users[username]
        backend_user = self.services.runtime.backend_users.get(username, user)
        self.username = username
        password = backend_user.password if not backend_user.password.startswith("*") else ""
        self.credentials = Credentials(username, password, stage1 if not password else None)
        self.default_hostgroup = user.default_hostgroup
        self.transaction_persistent = user.transaction_persistent
        self.fast_forward = user.fast_forward
        self.state.schema = schema

    async def _forward_raw(self) -> None:
        """A ``fast_forward`` user: one backend connection of its own, bytes relayed both ways, no rules."""
        conn = await self._borrow(self.default_hostgroup)
        if conn is None:
            return
        pool = conn.pool
        assert isinstance(pool, ServerPool)

        async def pipe(source: Wire, target: Wire) -> None:
            while True:
                target.write(await source.read_available())
                await target.drain()

        tasks = [
            asyncio.ensure_future(pipe(self.client, conn.wire)),
            asyncio.ensure_future(pipe(conn.wire, self.client)),
        ]
        try:
            done, pending = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            for task in pending:
                task.cancel()
            for task in done:
                exc = task.exception()
                if exc is not None and not isinstance(exc, PeerClosed):
                    raise exc
        finally:
            pool.hostgroup.release(conn, pool, reusable=False)

    # ----------------------------------------------------------------------------------------------- dispatch

    async def _command_loop(self) -> None:
        client = self.client
        handlers = _HANDLERS
        loop = client.loop
        while True:
            self.idle_since = loop.time()
            payload = await client.read_payload()
            self.idle_since = 0.0
            self.busy_since = loop.time()
            self.command = payload
            if not payload:
                raise ProtocolError("empty command packet")
            handler = handlers.get(payload[0])
            if handler is None:
                self._send_error(ErrorCode.UNKNOWN_COM, f"Unknown or unsupported command 0x{payload[0]:02x}", 1)
            else:
                await handler(self, payload)

    def _send_error(self, code: int, message: str, seq: int = 1) -> None:
        self.services.counters.generated_error_packets += 1
        with contextlib.suppress(ConnectionError, RuntimeError, AttributeError):
            self.client.send(err_packet(code, message), seq)

    def _send_ok(self, info: bytes = b"", affected: int = 0) -> None:
        self.client.send(ok_packet(affected, 0, self._status(), 0, info), 1)

    def _status(self) -> int:
        status = Status.AUTOCOMMIT if self.state.autocommit else 0
        if self.in_transaction:
            status |= Status.IN_TRANS
        return status

    async def _com_quit(self, payload: bytes) -> None:
        raise SessionEnd

    async def _com_ping(self, payload: bytes) -> None:
        self._send_ok()

    async def _com_statistics(self, payload: bytes) -> None:
        c = self.services.counters
        uptime = int(time.monotonic() - self.services.started)
        text = (
            f"Uptime: {uptime}  Threads: {c.Client_Connections_connected}  Questions: {c.Questions}  "
            f"Slow queries: {c.Slow_queries}  Opens: 0  Open tables: 0  Queries per second avg: "
            f"{c.Questions / max(uptime, 1):.3f}"
        )
        self.client.send(text.encode(), 1)

    async def _com_set_option(self, payload: bytes) -> None:
        if len(payload) < 3:
            raise ProtocolError("truncated COM_SET_OPTION")
        option = payload[1] | payload[2] << 8
        if option not in (0, 1):
            self._send_error(ErrorCode.UNKNOWN_COM, f"Unknown COM_SET_OPTION option {option}", 1)
            return
        self.state.multi_statements = option == 0
        self.client.send(eof_packet(self._status()), 1)

    async def _com_reset_connection(self, payload: bytes) -> None:
        await self._reset_session()
        self._send_ok()

    async def _reset_session(self) -> None:
        await self._drop_connection(reset=True)
        schema = self.state.schema
        multi = self.state.multi_statements
        self.state = SessionState(schema=schema, names=names_for_collation(self.collation), multi_statements=multi)
        self.statements.clear()
        self.last_insert_id = 0
        self.flag_in = 0
        if self.in_transaction:
            self.services.counters.Active_Transactions -= 1
            self.in_transaction = False
        if self.followed:
            self.services.listener.session_reset(self.id)

    async def _com_change_user(self, payload: bytes) -> None:
        name, pos = read_nul_str(payload, 1)
        if self.capabilities & Cap.SECURE_CONNECTION:
            if pos >= len(payload):
                raise ProtocolError("truncated COM_CHANGE_USER")
            n = payload[pos]
            token = payload[pos + 1 : pos + 1 + n]
            pos += 1 + n
        else:
            token, pos = read_nul_str(payload, pos)
        schema_raw, pos = read_nul_str(payload, pos)
        charset = self.collation
        plugin = auth.NATIVE
        if pos + 2 <= len(payload):
            charset = payload[pos] | payload[pos + 1] << 8
            if self.capabilities & Cap.PLUGIN_AUTH and pos + 2 < len(payload):
                plugin = read_nul_str(payload, pos + 2)[0].decode("ascii", "replace") or auth.NATIVE
        username = name.decode("utf-8", "replace")
        user = self.services.runtime.frontend_users.get(username)
        seq = 1
        verdict = auth.Verdict(False)
        if user is not None and plugin in auth.SUPPORTED_PLUGINS:
            # As MariaDB does: a reply computed from this connection's scramble is checked without a new challenge
            # (libmariadb sends one and does not expect to be asked again).
            verdict = auth.verify(plugin, user.password, self.scramble, token)
        if not verdict.ok:
            # Otherwise a fresh challenge, in the native plugin whatever the client's: the verdict does not
            # depend on the client's plugin, and an unknown user is asked exactly as a known one.
            plugin = auth.NATIVE
            self.scramble = auth.new_scramble()
            self.client.send(auth_switch_request(plugin, self.scramble), seq)
            token = await self.client.read_payload()
            seq = self.client.seq + 1
            verdict = auth.verify(plugin, user.password, self.scramble, token) if user else auth.Verdict(False)
        if user is None or not verdict.ok:
            self.services.counters.Access_Denied_Wrong_Password += 1
            self._send_error(ErrorCode.ACCESS_DENIED, f"Access denied for user '{username}'@'{self.client_addr}'", seq)
            raise SessionEnd
        if plugin == auth.CACHING_SHA2 and user.password:
            self.client.send(b"\x01" + auth.SHA2_FAST_AUTH_OK, seq)
            seq += 1
        await self._reset_session()
        schema = schema_raw.decode("utf-8", "surrogateescape")  # a name in the client's character set: kept as sent
        self._become(username, user.password, verdict.stage1, schema or user.default_schema)
        self.collation = charset
        self.state.names = names_for_collation(charset)
        self.client.send(ok_packet(status=self._status()), seq)

    async def _com_init_db(self, payload: bytes) -> None:
        schema = payload[1:].decode("utf-8", "surrogateescape")
        response = await self._execute(self._idle_hostgroup(), _simple_runner(payload, _read_single), [], None)
        if response is not None and response.error is None:
            self.state.schema = schema
            if self.conn is not None:
                self.conn.state.schema = schema

    async def _com_field_list(self, payload: bytes) -> None:
        await self._execute(self._idle_hostgroup(), _simple_runner(payload, _read_field_list), [], None)

    def _idle_hostgroup(self) -> int:
        return self.conn_hostgroup if self.conn is not None else self.default_hostgroup

    # ----------------------------------------------------------------------------------------------- queries

    async def _com_query(self, payload: bytes) -> None:
        services = self.services
        rt = services.runtime
        services.counters.Questions += 1
        started = time.perf_counter()
        raw = payload[1:]
        sql = raw.decode("utf-8", "surrogateescape")
        statements = scan(sql)
        if not statements:
            self._send_error(1065, "Query was empty", 1)
            return
        digest = compute_digest(sql, rt.settings.max_digest_length)
        schema = self.state.schema or ""
        outcome = self._apply_rules(sql, digest)
        if outcome.next_query_flagIN is not None:  # ProxySQL: it stays the session's flagIN until a rule changes it
            self.flag_in = outcome.next_query_flagIN
        if outcome.error_msg is not None:
            self._send_error(ErrorCode.RULE_BLOCKED, outcome.error_msg, 1)
            self._record(-1, digest, started, 0, 0)
            return
        if outcome.OK_msg is not None:
            self._send_ok(outcome.OK_msg.encode())
            self._record(-1, digest, started, 0, 0)
            return
        if outcome.query is not None:
            sql = outcome.query
            raw = sql.encode("utf-8", "surrogateescape")
            payload = b"\x03" + raw
            statements = scan(sql) or statements
        delay = outcome.delay if outcome.delay is not None else rt.settings.default_query_delay_ms
        if delay:
            await asyncio.sleep(delay / 1000)
        if Pin.WARNINGS in self.state.pins and not sql.lstrip().upper().startswith(_WARNING_QUERIES):
            self.state.pins.discard(Pin.WARNINGS)
            await self._maybe_release()
        first = statements[0]
        if first.keyword == "KILL" and len(statements) == 1:
            try:
                request = parse_kill(sql)
            except KillRefused as refused:
                self._send_error(ErrorCode.NOT_SUPPORTED, str(refused), 1)
                return
            await self._kill_request(request)
            self._record(-1, digest, started, 0, 0)
            return
        if not (self.local_files and rt.settings.local_infile) and any(s.load_local for s in statements):
            # Refused here, as MariaDB refuses it: the backend would ask this client for a file it cannot send.
            self._send_error(
                ErrorCode.LOCAL_INFILE_DISABLED,
                "The used command is not allowed because the MariaDB server or client has disabled the local "
                "infile capability",
                1,
            )
            return
        if len(statements) == 1 and first.last_insert_id_only and self.conn is None:
            self.client.write(result_set([("LAST_INSERT_ID()", FieldType.LONGLONG)], [[self.last_insert_id]]))
            self._record(-1, digest, started, 1, 0)
            return
        cache_key = None
        if outcome.cache_ttl and self.conn is None and all(s.is_read for s in statements):
            cache_key = (self.username, schema, raw)
            hit = services.cache.get(cache_key)
            if hit is not None:
                self.client.write(hit)
                self._record(-1, digest, started, 0, 0)
                return
        hostgroup = self._route(statements, outcome)
        relay_infile = self._relay_infile

        async def run(conn: BackendConnection, sink: _Sink) -> Response:
            conn.wire.send(payload, 0)
            return await read_response(conn.wire, sink, relay_infile=relay_infile)

        response = await self._execute(hostgroup, run, statements, outcome, cache_key=cache_key)
        if outcome.mirror_hostgroup is not None or outcome.mirror_flagOUT is not None or self.followed:
            self._tell(payload, statements, outcome, response, None)
        if response is not None:
            self._record(hostgroup, digest, started, response.rows, response.affected_rows)
        if outcome.log or (outcome.log is None and rt.settings.eventslog_default_log):
            self._log_event(hostgroup, digest.hash, sql, started, response)

    def _apply_rules(self, sql: str, digest: Digest) -> RuleOutcome:
        """The query rules' verdict on ``sql`` for this session, from its current flagIN."""
        rules = self.services.runtime.rules
        if not rules.active and "/*" not in sql:  # no rule and no annotation can apply: the shared empty verdict
            return _NO_RULES
        return rules.evaluate(
            QueryContext(
                self.username,
                self.state.schema or "",
                self.client_addr,
                self.proxy_addr,
                self.proxy_port,
                sql,
                digest.hash,
                digest.text,
            ),
            self.flag_in,
        )

    def _route(self, statements: list[Statement], outcome: RuleOutcome) -> int:
        """The hostgroup for a statement: kept connection, transaction, rule, or the user's default."""
        if self.conn is not None:
            if self._beside_transaction(outcome.destination_hostgroup, statements):
                return outcome.destination_hostgroup  # type: ignore[return-value]
            return self.conn_hostgroup
        first = statements[0]
        if outcome.destination_hostgroup is not None:
            hostgroup = outcome.destination_hostgroup
            # A multi-statement batch a read rule matched by its first SELECT may still write: writer it is.
            writer = self.services.runtime.writer_of.get(hostgroup)
            if writer is not None and len(statements) > 1 and any(s.kind is Kind.WRITE for s in statements):
                return writer
            if first.kind is Kind.BEGIN or not self.transaction_persistent:
                return hostgroup
        else:
            hostgroup = self.default_hostgroup
        # Better than ProxySQL (its most frequent complaint): with autocommit=0 every statement opens a
        # transaction, so the first one goes where the transaction's writes must go, the user's default.
        if (
            not self.state.autocommit
            and self.services.runtime.settings.autocommit_false_is_transaction
            and first.kind not in _TRANSACTION_NEUTRAL
        ):
            return self.default_hostgroup
        if (first.kind is Kind.SET or first.kind is Kind.USE) and all(
            (s.kind is Kind.SET or s.kind is Kind.USE) and not s.unparsable_set for s in statements
        ):
            return self.services.pools.stand_in(hostgroup)  # no writer in the writer hostgroup: a reader runs it
        return hostgroup

    def _beside_transaction(self, hostgroup: int | None, statements: list[Statement]) -> bool:
        """transaction_persistent=0: a read routed away from the open transaction runs on another connection."""
        return (
            hostgroup is not None
            and hostgroup != self.conn_hostgroup
            and not self.transaction_persistent
            and self.state.pins == {Pin.TRANSACTION}
            and bool(statements)
            and all(s.is_read for s in statements)
        )

    async def _execute(
        self,
        hostgroup: int,
        run: Runner,
        statements: list[Statement],
        outcome: RuleOutcome | None,
        *,
        cache_key: tuple[str, str, bytes] | None = None,
    ) -> Response | None:
        """Run one command on a backend of ``hostgroup`` and relay the response; None if an error was sent."""
        rt = self.services.runtime
        retries = outcome.retries if outcome is not None and outcome.retries is not None else None
        if retries is None:
            retries = rt.settings.query_retries_on_failure
        safe_to_retry = bool(statements) and all(s.is_read for s in statements)
        timeout_ms = rt.settings.default_query_timeout_ms
        if outcome is not None and outcome.timeout:
            timeout_ms = outcome.timeout
        beside = self.conn is not None and self._beside_transaction(hostgroup, statements)
        while True:
            kept = self.conn is not None and not beside
            conn = self.conn if kept else None
            if conn is None:
                conn = await self._borrow(hostgroup)
                if conn is None:
                    return None
            elif not self.state.matches(conn.state):
                err = await self._sync_safely(conn)
                if err is not None:
                    self._relay_error(err)
                    return None
            if self.killed:  # killed while it waited for the connection: the statement must not run
                if not kept:
                    self._release(conn)
                raise SessionEnd
            pool = conn.pool
            assert isinstance(pool, ServerPool)
            sink = _Sink(self.client, cache_key is not None)
            timer = None
            if timeout_ms < _NO_TIMEOUT_MS:
                timer = self.client.loop.call_later(timeout_ms / 1000, self._on_query_timeout, conn)
            sent_before = conn.wire.bytes_out
            began = time.perf_counter()
            self.running = conn
            try:
                response = await run(conn, sink)
            except (PeerClosed, ProtocolError, OSError) as exc:
                lost: BaseException | None = exc
            except InfileAbandoned as abandoned:
                # As the server does: the statement is abandoned with its connection (closed mid-file, the server
                # rolls the load back), the client's stray packet is answered with 1156, and the session ends.
                self._lose(conn, pool)
                self._send_error(ErrorCode.PACKETS_OUT_OF_ORDER, "Got packets out of order", abandoned.seq + 1)
                raise SessionEnd from None
            else:
                lost = None
            finally:
                self.running = None
                if timer is not None:
                    timer.cancel()
            if lost is not None:
                self._lose(conn, pool)
                what = f"{pool.server.hostname}:{pool.server.port} (hostgroup {pool.server.hostgroup_id})"
                if sink.written == 0 and not kept and safe_to_retry and retries > 0:
                    retries -= 1
                    log.info("session %d: retrying a read after losing %s: %s", self.id, what, lost)
                    continue
                sent = "" if safe_to_retry else " (not retried: the statement may have run)"
                self._send_error(
                    ErrorCode.BACKEND_LOST,
                    f"Lost connection to backend {what} during query: {lost}{sent}",
                    conn.wire.seq + 1 if sink.written else 1,
                )
                return None
            pool.queries += 1
            # Latency_us: a moving average of the backend's response time (first byte to last), in µs.
            pool.latency_us += (int((time.perf_counter() - began) * 1_000_000) - pool.latency_us) >> 3
            self.last_pool = pool
            pool.bytes_sent += conn.wire.bytes_out - sent_before
            pool.bytes_recv += sink.written
            if response.status != STATUS_UNKNOWN:  # the common case, without a coroutine
                conn.status = response.status
            else:
                await conn.settle(response)
            captured = True
            if response.error is None and not (len(statements) == 1 and statements[0].plain):
                assigned = [name for st in statements for name in st.user_vars_assigned]
                if assigned:
                    captured = await self._capture_user_variables(conn, assigned)
                if any(st.sets_last_insert_id for st in statements):
                    await self._capture_last_insert_id(conn)
            if (
                cache_key is not None
                and outcome is not None
                and response.error is None
                and (
                    response.rows
                    or (
                        outcome.cache_empty_result
                        if outcome.cache_empty_result is not None
                        else rt.settings.query_cache_stores_empty_result
                    )
                )
            ):
                self.services.cache.put(cache_key, b"".join(sink.parts), outcome.cache_ttl or 0)
            if beside:
                self._release(conn)
                return response
            self._track(conn, hostgroup, statements, response, outcome, captured)
            return response

    async def _borrow(self, hostgroup: int) -> BackendConnection | None:
        """A connection from ``hostgroup`` brought to the session's state, or None after sending the error."""
        hg: Hostgroup = self.services.pools.hostgroup(hostgroup)
        conn = hg.take_idle(self.credentials.username, self.state.schema)
        if not isinstance(conn, BackendConnection):
            try:
                conn = await hg.acquire(self.credentials, self.state.schema, conn)
            except PoolError as exc:
                self.services.counters.ConnPool_get_conn_failure += 1
                self._send_error(exc.code, f"ProxyFleet: {exc}", 1)
                return None
        self.services.counters.ConnPool_get_conn_success += 1
        if self.state.matches(conn.state):
            return conn
        err = await self._sync_safely(conn)
        if err is not None:
            self._release(conn, reusable=False)
            self._relay_error(err)
            return None
        return conn

    async def _sync_safely(self, conn: BackendConnection) -> ErrPacket | None:
        try:
            return await bring(conn, self.state)
        except (PeerClosed, ProtocolError, OSError) as exc:
            pool = conn.pool
            assert isinstance(pool, ServerPool)
            self._lose(conn, pool)
            return ErrPacket(
                ErrorCode.BACKEND_LOST,
                "HY000",
                f"ProxyFleet: lost backend {pool.server.hostname}:{pool.server.port} "
                f"(hostgroup {pool.server.hostgroup_id}) while restoring session state: {exc}",
            )

    def _tell(
        self,
        payload: bytes,
        statements: list[Statement],
        outcome: RuleOutcome | None,
        response: Response | None,
        prepared: ClientStatement | None,
    ) -> None:
        """Tell the listener that a command ran (``prepared``: an execution of it)."""
        done = QueryDone(
            self.id,
            self.username,
            self.credentials,
            self.client_addr,
            self.proxy_addr,
            self.proxy_port,
            self.default_hostgroup,
            self.state,
            self.in_transaction,
            self.services.runtime.rules,
            payload,
            statements,
            outcome,
            response,
            prepared,
        )
        self.followed = self.services.listener.query_done(done)

    def _relay_error(self, err: ErrPacket) -> None:
        self._send_error(err.code, err.message, 1)

    def _lose(self, conn: BackendConnection, pool: ServerPool) -> None:
        """Forget a broken connection; a transaction or pinned state on it is gone with it."""
        if self.conn is conn:
            self.conn = None
            self.state.pins.clear()
            self.state.temp_tables.clear()
            self.state.locks_held = 0
            if self.in_transaction:
                self.in_transaction = False
                self.services.counters.Active_Transactions -= 1
        pool.hostgroup.release(conn, pool, reusable=False)

    def _release(self, conn: BackendConnection, reusable: bool = True) -> None:
        pool = conn.pool
        assert isinstance(pool, ServerPool)
        pool.hostgroup.release(conn, pool, reusable)

    async def _maybe_release(self) -> None:
        if self.conn is not None and not self.state.pins and self.services.runtime.settings.multiplexing:
            conn = self.conn
            self.conn = None
            if conn.dirty:
                self.conn = conn
                await self._drop_connection(reset=True)
            else:
                self._release(conn)

    def _on_query_timeout(self, conn: BackendConnection) -> None:
        """The query timeout fired: kill the running query from a separate connection."""
        task = asyncio.get_running_loop().create_task(self._kill_backend_query(conn, "a timed-out query"))
        self.services.background.add(task)
        task.add_done_callback(self.services.background.discard)

    async def _kill_backend_query(self, conn: BackendConnection, what: str) -> None:
        """``KILL QUERY`` the statement running on ``conn``, from a separate connection to its server."""
        pool = conn.pool
        assert isinstance(pool, ServerPool)
        try:
            killer = await BackendConnection.connect(
                pool.server.hostname, pool.server.port, self.credentials, None, timeout=2
            )
        except BackendError as exc:
            log.warning("session %d: cannot kill %s: %s", self.id, what, exc)
            return
        try:
            await killer.query(f"KILL QUERY {conn.thread_id}")
            self.services.counters.mysql_killed_backend_queries += 1
        except (PeerClosed, ProtocolError, OSError) as exc:
            log.warning("session %d: cannot kill %s: %s", self.id, what, exc)
        finally:
            killer.close()

    # ----------------------------------------------------------------------------------------------- KILL

    async def kill(self, query_only: bool) -> None:
        """Another session's (or the admin's) KILL: interrupt the running statement; unless ``query_only``, end
        the session too (its client is disconnected; a transaction it had open is rolled back by the reset of its
        backend connection)."""
        conn = self.running
        if not query_only:  # the client is gone before its statement's interruption could reach it as an answer
            log.info("session %d: killed", self.id)
            self.killed = True
            self.client.close()
        if conn is not None:
            await self._kill_backend_query(conn, f"the query of session {self.id} (KILL)")

    async def _com_process_kill(self, payload: bytes) -> None:
        if len(payload) < 5:
            raise ProtocolError("truncated COM_PROCESS_KILL")
        await self._kill_request(KillRequest(int.from_bytes(payload[1:5], "little"), False))

    async def _kill_request(self, request: KillRequest) -> None:
        """Carry out a client's KILL on a proxy session and answer it."""
        if request.target == self.id:
            if request.query_only:  # nothing of this session runs but the KILL itself, which it interrupts
                self._send_error(ErrorCode.QUERY_INTERRUPTED, "Query execution was interrupted", 1)
                return
            self._send_error(ErrorCode.CONNECTION_KILLED, "Connection was killed", 1)
            raise SessionEnd
        answer = await self.services.kill_session(request.target, request.query_only, self.username)
        if answer.get("ok"):
            self._send_ok()
        else:
            self._send_error(int(answer.get("code") or ErrorCode.NO_SUCH_THREAD), str(answer.get("error")), 1)

    def process_row(self, now: float) -> dict[str, object]:
        """This session as a row of the processlist (ProxySQL's stats_mysql_processlist columns)."""
        conn = self.running or self.conn
        pool = conn.pool if conn is not None else None
        server = pool.server if isinstance(pool, ServerPool) else None
        idle = self.idle_since != 0.0
        payload = self.command
        command = "Sleep" if idle or not payload else _COMMAND_NAMES.get(payload[0], f"0x{payload[0]:02x}")
        info = ""
        if not idle and payload and payload[0] in (Command.QUERY, Command.STMT_PREPARE):
            info = payload[1 : 1 + _PROCESSLIST_INFO_MAX].decode("utf-8", "replace")
        return {
            "SessionID": self.id,
            "user": self.username,
            "db": self.state.schema or "",
            "cli_host": self.client_addr,
            "cli_port": self.client_port,
            "hostgroup": server.hostgroup_id if server is not None else -1,
            "srv_host": server.hostname if server is not None else "",
            "srv_port": server.port if server is not None else 0,
            "backend_thread_id": conn.thread_id if conn is not None else 0,
            "command": command,
            "time_ms": int(((now - self.idle_since) if idle else (now - self.busy_since)) * 1000),
            "info": info,
            "in_transaction": self.in_transaction,
        }

    async def _relay_infile(self, backend: Wire) -> None:
        """Relay a LOAD DATA LOCAL INFILE: the client's file packets go to the backend until the empty one."""
        if not (self.local_files and self.services.runtime.settings.local_infile):
            backend.send(b"", backend.seq + 1)
            return
        await self.client.drain()
        client = self.client
        expected = (backend.seq + 1) & 0xFF  # the file's packets continue the request's numbering
        while True:
            _, length = await client.next_part()
            if client.seq != expected:  # not a file packet: the client gave up (its file is missing) and moved on
                raise InfileAbandoned(client.seq)
            expected = (expected + 1) & 0xFF
            backend.write(client.take())
            if length == 0:
                break
            if backend.transport.get_write_buffer_size() > 1 << 20:
                await backend.drain()
        backend.seq = client.seq

    # ----------------------------------------------------------------------------------------------- tracking

    def _track(
        self,
        conn: BackendConnection,
        hostgroup: int,
        statements: list[Statement],
        response: Response,
        outcome: RuleOutcome | None,
        user_variables_captured: bool = True,
    ) -> None:
        """Record what the statements changed, then keep or release the connection."""
        state = self.state
        pins = state.pins
        ok = response.error is None
        for s in statements:
            if s.plain:
                continue
            if s.kind is Kind.SET and ok:
                self._track_set(conn, s)
            elif s.kind is Kind.USE and ok and s.schema:
                state.schema = conn.state.schema = s.schema
            if s.user_vars_assigned and not user_variables_captured:
                pins.add(Pin.USER_VARIABLES)
            if s.temp_tables_created and ok:
                state.temp_tables.update(t.lower() for t in s.temp_tables_created)
            if s.tables_dropped and ok:
                state.temp_tables.difference_update(t.lower() for t in s.tables_dropped)
            if s.get_lock:
                state.locks_held += 1
            if s.release_lock:
                state.locks_held = max(0, state.locks_held - 1)
            if s.lock_tables:
                pins.add(Pin.LOCK_TABLES)
            elif s.unlock_tables or s.kind is Kind.BEGIN:
                pins.discard(Pin.LOCK_TABLES)
            if s.calc_found_rows:
                pins.add(Pin.FOUND_ROWS)
            elif s.found_rows:
                pins.discard(Pin.FOUND_ROWS)  # FOUND_ROWS() read: the pin has served its purpose
            if s.prepare_name:
                pins.add(Pin.TEXT_PREPARE)
            if s.unparsable_set:
                pins.add(Pin.LOCKED_SET)
        if not ok and len(statements) > 1 and not all(s.plain for s in statements):
            pins.add(Pin.FAILED_BATCH)  # which of its SETs, USEs, variables... ran before the error is unknown
        if pins or state.temp_tables or state.locks_held:  # else there is nothing to add or remove
            self._toggle(Pin.TEMPORARY_TABLES, bool(state.temp_tables))
            self._toggle(Pin.GET_LOCK, state.locks_held > 0)
        if outcome is not None and outcome.multiplex is not None:
            self._toggle(Pin.RULE, outcome.multiplex == 0)
        if response.cursor:
            pins.add(Pin.CURSOR)
        if response.warnings and not pins:
            pins.add(Pin.WARNINGS)
        if response.last_insert_id:
            self.last_insert_id = response.last_insert_id
        in_trans = conn.in_transaction
        if in_trans != self.in_transaction:
            self.in_transaction = in_trans
            self.transaction_since = self.busy_since
            self.services.counters.Active_Transactions += 1 if in_trans else -1
        if in_trans or pins:
            self._toggle(Pin.TRANSACTION, in_trans)
        if pins and not pins.isdisjoint(DIRTY_PINS):
            conn.dirty = True
        if pins or not self.services.runtime.settings.multiplexing:
            self.conn = conn
            self.conn_hostgroup = hostgroup
        elif self.conn is conn or self.conn is None:
            self.conn = None
            if conn.dirty:
                self.conn = conn
                task = self.client.loop.create_task(self._drop_connection(reset=True))
                self.services.background.add(task)
                task.add_done_callback(self.services.background.discard)
            else:
                self._release(conn)

    async def _capture_user_variables(self, conn: BackendConnection, names: list[str]) -> bool:
        """Read back the user variables a statement assigned, so they can follow the session to any connection.

        ProxySQL pins a session for good once it touches a user variable (its issue #1250); we replay the
        values instead. Returns False when they could not be read (the session is then pinned).
        """
        unique = list(dict.fromkeys(names))
        try:
            result = await conn.fetch_row("SELECT " + ", ".join(user_variable(n) for n in unique))
        except (PeerClosed, ProtocolError, OSError):
            return False
        if isinstance(result, ErrPacket):
            return False
        columns, values = result
        for name, (field_type, charset), value in zip(unique, columns, values, strict=True):
            literal = value_literal(value, field_type, charset)
            self.state.user_variables[name] = conn.state.user_variables[name] = literal
        return True

    async def _capture_last_insert_id(self, conn: BackendConnection) -> None:
        """After ``LAST_INSERT_ID(expr)`` (no OK packet tells it), read the session's insert id back."""
        try:
            result = await conn.fetch_row("SELECT LAST_INSERT_ID()")
        except (PeerClosed, ProtocolError, OSError):
            return
        if not isinstance(result, ErrPacket) and result[1] and result[1][0] is not None:
            self.last_insert_id = int(result[1][0])

    def _toggle(self, pin: Pin, on: bool) -> None:
        if on:
            self.state.pins.add(pin)
        else:
            self.state.pins.discard(pin)

    def _track_set(self, conn: BackendConnection, s: Statement) -> None:
        state = self.state
        applied = conn.state
        for name, expr in s.session_vars:
            if name == "autocommit":
                value = expr.strip().strip("'\"").lower() in ("1", "on", "true")
                state.autocommit = applied.autocommit = value
            elif name in ("names", "character set"):
                state.names = applied.names = expr
            elif name == "session transaction":
                for var, setting in _transaction_settings(expr):
                    state.variables[var] = applied.variables[var] = setting
            elif name == "next transaction":
                continue
            else:
                state.variables[name] = applied.variables[name] = expr
        if s.sql_log_bin is not None:
            self._toggle(Pin.SQL_LOG_BIN, not s.sql_log_bin)

    def _log_event(self, hostgroup: int, digest: str, sql: str, started: float, response: Response | None) -> None:
        """Append this query to the events log (rule ``log=1`` or ``mysql-eventslog_default_log``)."""
        error = None
        if response is None:
            error = "ProxyFleet error (sent to the client)"
        elif response.error is not None:
            error = f"{response.error.code}: {response.error.message}"
        last = self.last_pool
        self.services.events.write(
            query_event(
                username=self.username,
                schemaname=self.state.schema or "",
                client=f"{self.client_addr}",
                hostgroup=hostgroup,
                server=f"{last.server.hostname}:{last.server.port}" if last is not None else "",
                digest=digest,
                query=sql,
                thread_id=self.id,
                started=time.time() - (time.perf_counter() - started),
                rows_sent=response.rows if response else 0,
                rows_affected=response.affected_rows if response else 0,
                last_insert_id=self.last_insert_id,
                error=error,
            )
        )

    def _record(self, hostgroup: int, digest: Digest, started: float, rows: int, affected: int) -> None:
        elapsed_us = int((time.perf_counter() - started) * 1_000_000)
        services = self.services
        if elapsed_us > services.runtime.settings.long_query_time_ms * 1000:
            services.counters.Slow_queries += 1
        if services.runtime.settings.query_digests:
            services.digests.record(
                hostgroup,
                self.state.schema or "",
                self.username,
                self.client_addr,
                digest.hash,
                digest.text,
                elapsed_us,
                rows,
                affected,
            )

    # ----------------------------------------------------------------------------------------------- prepared

    async def _com_stmt_prepare(self, payload: bytes) -> None:
        rt = self.services.runtime
        self.services.counters.Questions += 1
        sql = payload[1:].decode("utf-8", "surrogateescape")
        statements = scan(sql)
        digest = compute_digest(sql, rt.settings.max_digest_length)
        outcome = self._apply_rules(sql, digest)
        if outcome.error_msg is not None:
            self._send_error(ErrorCode.RULE_BLOCKED, outcome.error_msg, 1)
            return
        if outcome.query is not None:
            sql = outcome.query
            statements = scan(sql) or statements
            digest = compute_digest(sql, rt.settings.max_digest_length)
        hostgroup = self._route(statements, outcome) if statements else self.default_hostgroup
        stmt = ClientStatement(self.next_stmt_id, sql, statements, hostgroup, 0, 0, digest)

        async def run(conn: BackendConnection, sink: _Sink) -> Response:
            conn.wire.send(b"\x16" + sql.encode("utf-8", "surrogateescape"), 0)
            result, raw = await read_prepare_response(conn.wire)
            if isinstance(result, ErrPacket):
                sink.write(raw)
                return Response(status=conn.status, error=result)
            # Close what this prepare replaces (the same text prepared before) or pushes over the per-connection
            # cap: a backend statement nobody can reach again would stay open until max_prepared_stmt_count.
            old = conn.prepared.pop(sql, None)
            if old is None and len(conn.prepared) >= MAX_STATEMENTS_PER_CONNECTION:
                old = conn.prepared.pop(next(iter(conn.prepared)))
            if old is not None and old.stmt_id != result.stmt_id:
                conn.wire.send(bytes((Command.STMT_CLOSE,)) + struct.pack("<I", old.stmt_id), 0)
            conn.prepared[sql] = result
            stmt.num_params = result.num_params
            stmt.num_columns = result.num_columns
            sink.write(with_client_id(raw, stmt.client_id))
            return Response(status=conn.status)

        response = await self._execute(hostgroup, run, [], None)
        if response is not None and response.error is None:
            if outcome.mirror_hostgroup is not None or outcome.mirror_flagOUT is not None:
                stmt.mirror = outcome
            self.statements[stmt.client_id] = stmt
            self.next_stmt_id += 1

    async def _com_stmt_execute(self, payload: bytes) -> None:
        self.services.counters.Questions += 1
        started = time.perf_counter()
        stmt = self._statement(payload)
        if stmt is None:
            return
        try:  # a malformed execute is the client's error: not a lost backend (and its transaction)
            rewrite_execute(payload, 0, stmt)
        except ProtocolError as exc:
            self._send_error(1835, f"Malformed communication packet: {exc}", 1)  # ER_MALFORMED_PACKET
            return
        if len(payload) > 5 and payload[5] and stmt.num_columns:
            stmt.cursor = True
        hostgroup = self._route(stmt.statements, _NO_RULES) if stmt.statements else stmt.hostgroup
        if self.conn is None and self.state.autocommit:
            hostgroup = stmt.hostgroup

        async def run(conn: BackendConnection, sink: _Sink) -> Response:
            prepared = await ensure_prepared(conn, stmt)
            if isinstance(prepared, ErrPacket):
                sink.write(frame(err_packet(prepared.code, prepared.message, prepared.sqlstate), 1))
                return Response(status=conn.status, error=prepared)
            for chunk in stmt.long_data:
                conn.wire.send(chunk[:1] + struct.pack("<I", prepared.stmt_id) + chunk[5:], 0)
            conn.wire.send(rewrite_execute(payload, prepared.stmt_id, stmt), 0)
            return await read_response(conn.wire, sink, binary=True)

        try:
            response = await self._execute(hostgroup, run, stmt.statements, None)
            if stmt.mirror is not None or self.followed:
                self._tell(payload, stmt.statements, stmt.mirror, response, stmt)
        finally:
            stmt.long_data.clear()
        if response is not None:
            self._record(hostgroup, stmt.digest, started, response.rows, response.affected_rows)

    def _statement(self, payload: bytes) -> ClientStatement | None:
        if len(payload) < 5:
            raise ProtocolError("truncated statement command")
        client_id = struct.unpack_from("<I", payload, 1)[0]
        stmt = self.statements.get(client_id)
        if stmt is None and payload[0] not in (Command.STMT_CLOSE, Command.STMT_SEND_LONG_DATA):
            self._send_error(
                ErrorCode.UNKNOWN_STMT_HANDLER,
                f"Unknown prepared statement handler ({client_id}) given to mysqld_stmt_execute",
                1,
            )
        return stmt

    async def _com_stmt_send_long_data(self, payload: bytes) -> None:
        stmt = self._statement(payload)
        if stmt is not None:
            stmt.long_data.append(payload)

    async def _com_stmt_close(self, payload: bytes) -> None:
        stmt = self._statement(payload)
        if stmt is not None:
            del self.statements[stmt.client_id]

    async def _com_stmt_reset(self, payload: bytes) -> None:
        stmt = self._statement(payload)
        if stmt is None:
            return
        stmt.long_data.clear()
        if stmt.cursor and self.conn is not None:
            prepared = self.conn.prepared.get(stmt.sql)
            if prepared is not None:
                err = await self.conn.simple_command(payload[:1] + struct.pack("<I", prepared.stmt_id))
                if err is not None:
                    self._relay_error(err)
                    return
            stmt.cursor = False
            self.state.pins.discard(Pin.CURSOR)
        self._send_ok()

    async def _com_stmt_fetch(self, payload: bytes) -> None:
        stmt = self._statement(payload)
        if stmt is None:
            return
        conn = self.conn
        prepared = conn.prepared.get(stmt.sql) if conn is not None else None
        if conn is None or prepared is None:
            self._send_error(ErrorCode.UNKNOWN_STMT_HANDLER, "The statement has no open cursor", 1)
            return
        conn.wire.send(payload[:1] + struct.pack("<I", prepared.stmt_id) + payload[5:], 0)
        status, error = await _relay_until_eof(conn.wire, self.client)
        await conn.settle(Response(status, error))
        if error is None and status & Status.LAST_ROW_SENT:
            stmt.cursor = False


_NO_RULES = RuleOutcome()


def _transaction_settings(expr: str) -> list[tuple[str, str]]:
    """Session variables equivalent to ``SET SESSION TRANSACTION <expr>``."""
    upper = " ".join(expr.upper().split())
    out = []
    for level, value in _ISOLATION.items():
        if f"ISOLATION LEVEL {level}" in upper:
            out.append(("tx_isolation", value))
    if "READ ONLY" in upper:
        out.append(("tx_read_only", "1"))
    elif "READ WRITE" in upper:
        out.append(("tx_read_only", "0"))
    return out


def _simple_runner(payload: bytes, reader: Callable[[Wire, _Sink], Awaitable[Response]]) -> Runner:
    """A runner that sends ``payload`` as it is and reads the response with ``reader``."""

    async def run(conn: BackendConnection, sink: _Sink) -> Response:
        conn.wire.send(payload, 0)
        return await reader(conn.wire, sink)

    return run


async def _read_single(backend: Wire, client: _Sink) -> Response:
    """The one-packet response of COM_INIT_DB and similar commands, relayed."""
    start, length = await backend.next_part()
    payload = bytes(backend.buf[start : start + length])
    client.write(backend.take())
    if payload[:1] == b"\xff":
        return Response(error=parse_err(payload))
    if payload[:1] == b"\x00":
        return Response(status=parse_ok(payload).status)
    return Response()


async def _read_field_list(backend: Wire, client: _Sink) -> Response:
    """A COM_FIELD_LIST response (column definitions up to EOF, or ERR), relayed."""
    status, error = await _relay_until_eof(backend, client)
    return Response(status, error)


async def _relay_until_eof(backend: Wire, client: Sink) -> tuple[int, ErrPacket | None]:
    """Relay packets up to an EOF or ERR (COM_FIELD_LIST, COM_STMT_FETCH); returns (EOF status, error)."""
    while True:
        start, length = backend.part() or await backend.next_part()
        first = backend.buf[start] if length else 0
        if first == 0xFF:
            error = parse_err(bytes(backend.buf[start : start + length]))
            client.write(backend.take())
            return STATUS_UNKNOWN, error
        if first == 0xFE and length < 9:
            status = backend.buf[start + 3] | backend.buf[start + 4] << 8 if length >= 5 else 0
            client.write(backend.take())
            return status, None


_HANDLERS: dict[int, Callable[[Session, bytes], Awaitable[None]]] = {
    Command.QUIT: Session._com_quit,
    Command.INIT_DB: Session._com_init_db,
    Command.QUERY: Session._com_query,
    Command.FIELD_LIST: Session._com_field_list,
    Command.STATISTICS: Session._com_statistics,
    Command.PING: Session._com_ping,
    Command.CHANGE_USER: Session._com_change_user,
    Command.STMT_PREPARE: Session._com_stmt_prepare,
    Command.STMT_EXECUTE: Session._com_stmt_execute,
    Command.STMT_SEND_LONG_DATA: Session._com_stmt_send_long_data,
    Command.STMT_CLOSE: Session._com_stmt_close,
    Command.STMT_RESET: Session._com_stmt_reset,
    Command.STMT_FETCH: Session._com_stmt_fetch,
    Command.SET_OPTION: Session._com_set_option,
    Command.RESET_CONNECTION: Session._com_reset_connection,
    Command.PROCESS_KILL: Session._com_process_kill,
}
