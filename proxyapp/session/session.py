"""A client session: the composition of its rooms, its lifecycle and its command dispatch.

The rooms: ``client`` (the connection and who logged in), ``login`` (handshake, COM_CHANGE_USER), ``link`` (the
backend side: borrow, replay, run and relay, retry, timeout, release), ``query`` (the COM_QUERY pipeline, routing
by the pure ``route``), ``track`` (what a statement changed, a pure function) and ``statements`` (the binary
protocol). The session wires them together, reads commands and hands each to its room; the commands that need no
room of their own (ping, statistics, set option, reset, init db, field list, quit) are answered here.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any, Final

from proxyapp.backends.pool import ServerPool
from proxyapp.clock import MONOTONIC
from proxyapp.driver import Driver
from proxyapp.mysql.constants import MAX_PACKET, Command, ErrorCode, names_for_collation
from proxyapp.mysql.packets import PacketTooLarge, ProtocolError, eof_packet, ok_packet, schema_name
from proxyapp.mysql.wire import PeerClosed, Wire
from proxyapp.session.client import Client, SessionEnd
from proxyapp.session.kill import KillRequest, carry_out, kill_running
from proxyapp.session.limits import tells_inactivity
from proxyapp.session.link import BackendLink, release
from proxyapp.session.login import authenticate_change, log_in
from proxyapp.session.query import QueryPipeline
from proxyapp.session.relay import init_db_runner, read_field_list, simple_runner
from proxyapp.session.services import SessionServices
from proxyapp.session.state import SessionState
from proxyapp.session.statements import PreparedStatements
from proxyapp.shown import shown
from proxyapp.sql.digest import compute_digest
from proxyapp.tasks import spawn

log = logging.getLogger("proxyapp.session.session")

#: What serves one command: a coroutine of the session (or of one of its rooms) for its packet.
Handler = Callable[["Session", bytes], Coroutine[Any, Any, None]]

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


class Session:
    """One client connection to the proxy: its lifecycle, the command dispatch and the small commands; the work is
    its rooms' (``client``, ``login``, ``query``, ``statements``, ``link``, ``state``), and at ~420 lines most of it is
    one short handler per command of the protocol."""

    def __init__(self, services: SessionServices, wire: Wire, session_id: int) -> None:
        self.services = services
        self.id = session_id
        self.wire = wire
        wire.max_packet = services.runtime.settings.max_allowed_packet
        self.client = Client(wire, services.counters)
        self.state = SessionState()
        self.link = BackendLink(services, self.client, self.state, session_id)
        self.queries = QueryPipeline(services, self.client, self.state, self.link, session_id)
        self.prepared = PreparedStatements(services, self.client, self.state, self.link, self.queries)
        self.idle_since = 0.0  # since when (the proxy's clock) the session waits for a command; 0 while one runs
        self.command = b""  # the current (or last) command packet, for the processlist
        self.seated = False  # it logged in and holds one of the node's seats (mysql-max_connections)
        self.partial = 0  # bytes of a half-sent packet the housekeeping saw last, and since when they stand still
        self.partial_since = 0.0
        self.login_since = 0.0  # since when (the proxy's clock) it has been logging in; 0 once it has
        self.gone_since = 0.0  # since when its client is gone with its statement still running on a backend
        self.driver = Driver(wire.loop, self._command_done)  # runs its commands (``_command_loop``)
        self.ending: asyncio.Future[None] = wire.loop.create_future()  # what ends the command loop
        self.over = False  # its command loop ended, or is ending (``ending`` is done): no command starts any more
        wire.on_close = self._client_gone

    def stalled(self, now: float) -> float:
        """Since when the client has left a packet half sent without sending more of it (0: it has not), as the
        housekeeping sees it once a second at ``now`` on the proxy's clock."""
        unread = self.wire.unread() if self.idle_since else 0
        if unread == 0:
            self.partial, self.partial_since = 0, 0.0
        elif unread != self.partial:
            self.partial, self.partial_since = unread, now
        return self.partial_since

    @property
    def username(self) -> str:
        """The user the session is logged in as ("" before the login)."""
        return self.client.username

    @property
    def in_transaction(self) -> bool:
        """Whether the session is inside a transaction on its backend."""
        return self.link.in_transaction

    @property
    def transaction_since(self) -> float:
        """When (the proxy's clock) the command that opened the current transaction arrived."""
        return self.link.transaction_since

    @property
    def killed(self) -> bool:
        """Whether a KILL ended the session."""
        return self.link.killed

    # ----------------------------------------------------------------------------------------------- lifecycle

    async def run(self) -> None:
        """Serve the client until it quits or breaks; never raises."""
        counters = self.services.counters
        counters.Client_Connections_created += 1
        counters.Client_Connections_connected += 1
        client = self.client
        clean = False
        try:
            self.login_since = self.services.clock.now()  # the housekeeping ends a login past connect_timeout_client
            logged_in = await log_in(client, self.services, self.state, self.id)
            self.login_since = 0.0
            if logged_in:
                self.seated = True
                if client.fast_forward:
                    await self._forward_raw()
                else:
                    await self._command_loop()
            clean = True
        except SessionEnd:
            clean = True
        except (PeerClosed, asyncio.IncompleteReadError, ConnectionError):
            pass
        except PacketTooLarge as too_large:
            client.send_error(ErrorCode.NET_PACKET_TOO_LARGE, str(too_large), self.wire.seq + 1)
        except ProtocolError as malformed:
            log.info("session %d: malformed packet from %s: %s", self.id, client.addr, malformed)
            client.send_error(ErrorCode.HANDSHAKE, f"Malformed packet: {malformed}", self.wire.seq + 1)
        except Exception:
            log.exception("session %d: internal error", self.id)
            client.send_error(ErrorCode.PROXY_ERROR, "ProxyFleet internal error; see the proxy log", 1)
        finally:
            if not clean:
                counters.Client_Connections_aborted += 1
            counters.Client_Connections_connected -= 1
            if self.seated:
                self.seated = False
                self.services.seats.give_back()
            self.queries.sharding.spanning.discard()
            self.link.end_transaction()
            if self.queries.accounting.followed:
                self.queries.accounting.followed = False
                self.services.listener.session_ended(self.id)
            await self.link.drop(reset=True)
            self.queries.queue.leave()  # after the reset: its transaction's row locks are gone
            self.wire.close()

    def _client_gone(self) -> None:
        """The client closed its connection (or it broke): with ``mysql-kill_backend_connection_when_disconnect``,
        its running statement is killed on the backend rather than left to run to its end for nobody; a wait in a
        hot-row queue ends."""
        self.queries.queue.interrupt(gone=True)
        link = self.link
        conn = link.running
        if conn is None or link.killed or not self.services.runtime.settings.kill_backend_when_disconnect:
            return
        link.killed = True  # a statement still waiting for a connection must not run either
        killing = kill_running(conn, self.client.credentials, self.services, "its query (client gone)", self.id)
        spawn(killing, self.services.background, f"killing the query of session {self.id}", self.wire.loop)
        # A backend that does not answer even the KILL must not keep the session: the housekeeping drops its
        # connection after ``limits.ABANDON_AFTER_S`` (``abandon``).
        self.gone_since = self.services.clock.now()

    def time_out(self) -> None:
        """Close the connection of a client idle past its wait_timeout as its server would: telling it why first
        where the server does (``limits.tells_inactivity``), in silence where it does not."""
        if tells_inactivity(self.services.pools.backend_version):
            self.client.send_error(
                ErrorCode.CLIENT_INTERACTION_TIMEOUT,
                "The client was disconnected by the server because of inactivity. See wait_timeout and "
                "interactive_timeout for configuring this behavior.",
                0,
                "HY000",
            )
        self.wire.close()

    def abandon(self) -> None:
        """The client is gone and its statement still runs: close the backend connection (the session then ends)."""
        conn = self.link.running
        self.gone_since = 0.0
        if conn is not None:
            conn.wire.transport.abort()

    async def _forward_raw(self) -> None:
        """A ``fast_forward`` user: one backend connection of its own, bytes relayed both ways, no rules."""
        conn = await self.link.borrow(self.client.default_hostgroup)
        if conn is None:
            return

        async def pipe(source: Wire, target: Wire) -> None:
            while True:
                target.write(await source.read_available())
                await target.drain()

        tasks = [
            asyncio.ensure_future(pipe(self.wire, conn.wire)),
            asyncio.ensure_future(pipe(conn.wire, self.wire)),
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
            release(conn, reusable=False)

    # ----------------------------------------------------------------------------------------------- dispatch

    async def _command_loop(self) -> None:
        """Serve commands until the client is gone or a command ends the session (raising what ended it).

        The commands are not read here: the client connection's own callback (``_arrived``) starts each whole
        command the moment it arrives, on the session's driver (``proxyapp.driver``), which the backend
        connections' callbacks resume in turn. A command and its response thus cost no task wake-up; this task
        only waits for the session's end."""
        wire = self.wire
        self.idle_since = self.services.clock.now()
        wire.on_arrival = self._arrived
        try:
            self._arrived()  # what came right after the login
            await self.ending
        finally:
            self.over = True
            wire.on_arrival = None
            self.driver.cancel()

    def _arrived(self) -> None:
        """The client's bytes arrived, or it left: start its commands that are whole, one after another (while one
        runs, the next stays in the buffer until it ends)."""
        if self.driver.busy or self.over:
            return
        try:
            self._serve_buffered()
        except BaseException as failure:  # ends the session in its task, as from a command loop
            self._end(failure)

    def _serve_buffered(self) -> None:
        wire = self.wire
        driver = self.driver
        while True:
            start, length = wire.part()
            if length < 0:
                if wire.closed is not None:
                    self._end(PeerClosed(wire.closed))
                else:
                    wire.want_more()
                return
            if length == MAX_PACKET:  # a command in 16 MiB parts: read whole, waiting for the rest
                wire.pos = start - 4
                finished = driver.run(self._long_command())
            else:
                payload = wire.cut(start, start + length)
                wire.mark = wire.pos
                finished = self._start(payload)
            if not finished:
                return
            failure = driver.failure
            if failure is not None:
                driver.failure = None
                raise failure
            self._finished()

    def _start(self, payload: bytes) -> bool:
        """Start serving command ``payload``; True when it is done already (``driver.failure``: what it raised)."""
        handler = self._handler(payload)
        if handler is None:
            return True
        return self.driver.run(handler(self, payload))

    async def _long_command(self) -> None:
        """A command over 16 MiB comes in parts: read it whole (waiting for the parts), then serve it."""
        payload = await self.wire.read_payload()
        handler = self._handler(payload)
        if handler is not None:
            await handler(self, payload)

    def _handler(self, payload: bytes) -> Handler | None:
        """What serves command ``payload``, now that it runs; None when it is answered already (unknown)."""
        self.idle_since = 0.0
        link = self.link
        arrived = link.arrived = MONOTONIC()
        link.busy_since = self.services.clock.at(arrived)
        self.command = payload
        if len(payload) == 0:  # compiled, a length test; a bytes object's truth is a generic call
            raise ProtocolError("empty command packet")
        handler = _HANDLERS[payload[0]]
        if handler is None:
            self.client.send_error(ErrorCode.UNKNOWN_COM, f"Unknown or unsupported command 0x{payload[0]:02x}", 1)
        return handler

    def _finished(self) -> None:
        """A command ended: a transaction that ended gives its hot-row keys back; the session waits for the next,
        since its response's end when a backend answered it (read then), else since now."""
        queue = self.queries.queue
        if queue.holding:
            queue.settle()
        link = self.link
        clock = self.services.clock
        self.idle_since = clock.at(link.ended) if link.ended >= link.arrived else clock.now()

    def _command_done(self, failure: BaseException | None) -> None:
        """The driver's command ended after having waited: serve what the client sent meanwhile."""
        if failure is not None:
            self._end(failure)
            return
        try:
            self._finished()
        except BaseException as failed:  # ends the session in its task, as from a command loop
            self._end(failed)
            return
        if not self.wire.quiet():  # else nothing came meanwhile: the client's next bytes start its next command
            self._arrived()

    def _end(self, failure: BaseException) -> None:
        """End the session with ``failure`` raised in its task (``run`` handles it)."""
        self.over = True
        if not self.ending.done():
            self.ending.set_exception(failure)

    # The rooms' commands: plain functions handing back the room's coroutine, so that a command costs no extra
    # coroutine frame for passing through the session.

    def _com_query(self, payload: bytes) -> Coroutine[Any, Any, None]:
        return self.queries.com_query(payload)

    def _com_stmt_prepare(self, payload: bytes) -> Coroutine[Any, Any, None]:
        return self.prepared.prepare(payload)

    def _com_stmt_execute(self, payload: bytes) -> Coroutine[Any, Any, None]:
        return self.prepared.execute(payload)

    def _com_stmt_send_long_data(self, payload: bytes) -> Coroutine[Any, Any, None]:
        return self.prepared.send_long_data(payload)

    def _com_stmt_close(self, payload: bytes) -> Coroutine[Any, Any, None]:
        return self.prepared.close(payload)

    def _com_stmt_reset(self, payload: bytes) -> Coroutine[Any, Any, None]:
        return self.prepared.reset(payload)

    def _com_stmt_fetch(self, payload: bytes) -> Coroutine[Any, Any, None]:
        return self.prepared.fetch(payload)

    async def _com_quit(self, payload: bytes) -> None:
        raise SessionEnd

    async def _com_ping(self, payload: bytes) -> None:
        self.client.send_ok(self.queries.status())

    async def _com_statistics(self, payload: bytes) -> None:
        c = self.services.counters
        uptime = int(self.services.clock.now() - self.services.started)
        text = (
            f"Uptime: {uptime}  Threads: {c.Client_Connections_connected}  Questions: {c.Questions}  "
            f"Slow queries: {c.Slow_queries}  Opens: 0  Open tables: 0  Queries per second avg: "
            f"{c.Questions / max(uptime, 1):.3f}"
        )
        self.wire.send(text.encode(), 1)

    async def _com_set_option(self, payload: bytes) -> None:
        if len(payload) < 3:
            raise ProtocolError("truncated COM_SET_OPTION")
        option = payload[1] | payload[2] << 8
        if option not in (0, 1):
            self.client.send_error(ErrorCode.UNKNOWN_COM, f"Unknown COM_SET_OPTION option {option}", 1)
            return
        self.state.multi_statements = option == 0
        self.wire.send(eof_packet(self.queries.status()), 1)

    async def _com_reset_connection(self, payload: bytes) -> None:
        await self._reset_session()
        self.client.send_ok(self.queries.status())

    async def _reset_session(self) -> None:
        self.queries.sharding.spanning.discard()
        await self.link.drop(reset=True)
        self.queries.queue.leave()
        self.state.reset(names_for_collation(self.client.collation))
        self.prepared.clear()
        self.link.last_insert_id = 0
        self.queries.flag_in = 0
        self.link.end_transaction()
        if self.queries.accounting.followed:
            self.services.listener.session_reset(self.id)

    async def _com_change_user(self, payload: bytes) -> None:
        change = await authenticate_change(self.client, self.services, payload)
        await self._reset_session()
        self.client.become(self.services.runtime, change.username, change.stage1)
        self.state.schema = change.schema
        self.client.collation = change.charset
        self.state.names = names_for_collation(change.charset)
        self.wire.send(ok_packet(status=self.queries.status()), change.seq)

    async def _com_init_db(self, payload: bytes) -> None:
        schema = schema_name(payload[1:])
        response = await self.link.execute(self._idle_hostgroup(), init_db_runner(payload, schema), [], None)
        if response is not None and response.error is None:
            self.state.schema = schema

    async def _com_field_list(self, payload: bytes) -> None:
        await self.link.execute(self._idle_hostgroup(), simple_runner(payload, read_field_list), [], None)

    def _idle_hostgroup(self) -> int:
        return self.link.hostgroup if self.link.conn is not None else self.client.default_hostgroup

    # ----------------------------------------------------------------------------------------------- KILL

    async def kill(self, query_only: bool) -> None:
        """Another session's (or the admin's) KILL: interrupt the running statement; unless ``query_only``, end
        the session too (its client is disconnected; a transaction it had open is rolled back by the reset of its
        backend connection)."""
        conn = self.link.running
        self.queries.queue.interrupt(gone=not query_only)
        if not query_only:  # the client is gone before its statement's interruption could reach it as an answer
            log.info("session %d: killed", self.id)
            self.link.killed = True
            # Told why first, as MariaDB tells it: unasked while idle (sequence 0), else as its statement's answer
            # when none of that answer was sent yet.
            if self.idle_since:
                self.client.send_error(ErrorCode.CONNECTION_KILLED, "Connection was killed", 0)
            elif conn is not None and self.link.relay.written == 0:
                self.client.send_error(ErrorCode.CONNECTION_KILLED, "Connection was killed", 1)
            self.wire.close()
        if conn is not None:
            await kill_running(conn, self.client.credentials, self.services, "its query (KILL)", self.id)

    async def _com_process_kill(self, payload: bytes) -> None:
        if len(payload) < 5:
            raise ProtocolError("truncated COM_PROCESS_KILL")
        request = KillRequest(int.from_bytes(payload[1:5], "little"), False)
        await carry_out(request, self.id, self.client, self.services, self.queries.status())

    def process_row(self, now: float) -> dict[str, object]:
        """This session as a row of the processlist (ProxySQL's stats_mysql_processlist columns)."""
        link = self.link
        conn = link.running or link.conn
        pool = conn.pool if conn is not None else None
        server = pool.server if isinstance(pool, ServerPool) else None
        idle = self.idle_since != 0.0
        payload = self.command
        command = "Sleep" if idle or not payload else _COMMAND_NAMES.get(payload[0], f"0x{payload[0]:02x}")
        info = ""
        if not idle and payload and payload[0] in (Command.QUERY, Command.STMT_PREPARE):
            # The statement's digest text: its shape without its literals (a PASSWORD('...') among them), since the
            # processlist is read by whoever may read the node's stats; bytes that are not UTF-8 shown as \xff.
            text = payload[1 : 1 + _PROCESSLIST_INFO_MAX].decode("utf-8", "surrogateescape")
            info = shown(compute_digest(text, _PROCESSLIST_INFO_MAX).text)
        return {
            "SessionID": self.id,
            "user": self.client.username,
            "db": shown(self.state.schema or ""),
            "cli_host": self.client.addr,
            "cli_port": self.client.port,
            "hostgroup": server.hostgroup_id if server is not None else -1,
            "srv_host": server.hostname if server is not None else "",
            "srv_port": server.port if server is not None else 0,
            "backend_thread_id": conn.thread_id if conn is not None else 0,
            "command": command,
            "time_ms": int(((now - self.idle_since) if idle else (now - link.busy_since)) * 1000),
            "info": info,
            "in_transaction": link.in_transaction,
        }


#: What serves each command, at its byte (None: not served): indexing a tuple is cheaper than a dict lookup, and an
#: IntEnum key would make every lookup compare an int with an enum member through Python's slower rich comparison.
_SERVED: Final[dict[int, Handler]] = {
    int(command): handler
    for command, handler in (
        (Command.QUIT, Session._com_quit),
        (Command.INIT_DB, Session._com_init_db),
        (Command.QUERY, Session._com_query),
        (Command.FIELD_LIST, Session._com_field_list),
        (Command.STATISTICS, Session._com_statistics),
        (Command.PING, Session._com_ping),
        (Command.CHANGE_USER, Session._com_change_user),
        (Command.STMT_PREPARE, Session._com_stmt_prepare),
        (Command.STMT_EXECUTE, Session._com_stmt_execute),
        (Command.STMT_SEND_LONG_DATA, Session._com_stmt_send_long_data),
        (Command.STMT_CLOSE, Session._com_stmt_close),
        (Command.STMT_RESET, Session._com_stmt_reset),
        (Command.STMT_FETCH, Session._com_stmt_fetch),
        (Command.SET_OPTION, Session._com_set_option),
        (Command.RESET_CONNECTION, Session._com_reset_connection),
        (Command.PROCESS_KILL, Session._com_process_kill),
    )
}
_HANDLERS: Final[tuple[Handler | None, ...]] = tuple(_SERVED.get(byte) for byte in range(256))
