"""A client connection to a PostgreSQL server: TLS when asked, trust, cleartext, MD5 or SCRAM-SHA-256 login, and the
simple query protocol. The monitor's checks go through it.

``PgConnection.connect`` raises ``PgUnreachable`` when the server cannot be reached or breaks the connection, and
``PgError`` when it answers with an error (a wrong password, an unknown database): the monitor tells the two apart
as it does for MySQL servers (unreachable servers are shunned, refusals are logged).
"""

from __future__ import annotations

import asyncio
import ssl
import struct

from proxyapp.pgsql.auth import MECHANISM, AuthError, ScramClient, SecretMissing, ServerSecret
from proxyapp.pgsql.messages import (
    CANCEL_REQUEST,
    CANCEL_REQUEST_LENGTH,
    SSL_REQUEST,
    data_row,
    error_fields,
    message,
    request,
    startup_message,
)
from proxyapp.pgsql.wire import PeerGone, PgWire, ProtocolViolation

#: Authentication request codes (the body of an ``R`` message starts with one).
AUTH_OK, AUTH_CLEARTEXT, AUTH_MD5, AUTH_SASL, AUTH_SASL_CONTINUE, AUTH_SASL_FINAL = 0, 3, 5, 10, 11, 12


class PgError(Exception):
    """An ErrorResponse from the server: its SQLSTATE, message and every field."""

    def __init__(self, fields: dict[str, str]) -> None:
        self.fields = fields
        self.sqlstate = fields.get("C", "")
        self.message = fields.get("M", "")
        super().__init__(f"{fields.get('S', 'ERROR')} {self.sqlstate}: {self.message}")


class PgUnreachable(Exception):
    """The server could not be reached, or broke the connection or the protocol."""


class PgConnection:
    """A logged-in connection to a PostgreSQL server."""

    def __init__(self, wire: PgWire) -> None:
        self.wire = wire
        self.parameters: dict[str, str] = {}  # the server's ParameterStatus values
        self.backend_key = (0, 0)  # BackendKeyData: process id, secret key

    @property
    def closed(self) -> bool:
        """Whether the connection is gone (closed by either side, or broken)."""
        return self.wire.closed is not None

    @classmethod
    async def connect(
        cls,
        host: str,
        port: int,
        user: str,
        secret: ServerSecret,
        database: str,
        *,
        tls: ssl.SSLContext | None = None,
        application_name: str = "ProxyFleet",
    ) -> PgConnection:
        """Open a connection and log in with ``secret`` (bound the wait with ``asyncio.wait_for``)."""
        where = f"{host}:{port}"
        try:
            _, wire = await asyncio.get_running_loop().create_connection(PgWire, host, port)
        except OSError as exc:
            raise PgUnreachable(f"cannot connect to {where}: {exc.strerror or exc}") from None
        conn = cls(wire)
        try:
            if tls is not None:
                wire.write(request(SSL_REQUEST))
                if await wire.byte() != b"S":
                    raise PgError({"S": "FATAL", "C": "08P01", "M": f"{where} refuses TLS, and use_ssl=1 needs it"})
                await wire.start_tls(tls, server_side=False, server_hostname=host)
            parameters = {"user": user, "database": database, "application_name": application_name}
            wire.write(startup_message(parameters))
            await conn._login(user, secret)
        except SecretMissing as exc:  # the server is fine: this user cannot be logged in to it
            conn.close()
            raise PgError({"S": "FATAL", "C": "28P01", "M": f"ProxyFleet cannot log in to {where}: {exc}"}) from None
        except (OSError, PeerGone, ProtocolViolation, struct.error, AuthError) as exc:
            conn.close()
            raise PgUnreachable(f"login to {where} failed: {exc}") from None
        except BaseException:
            conn.close()
            raise
        return conn

    async def _login(self, user: str, secret: ServerSecret) -> None:
        scram: ScramClient | None = None
        while True:
            kind, body = await self.read()
            if kind == b"R":
                (code,) = struct.unpack_from("!i", body)
                if code == AUTH_OK:
                    continue
                if code == AUTH_CLEARTEXT:
                    self.wire.write(message(b"p", secret.cleartext() + b"\0"))
                elif code == AUTH_MD5:
                    self.wire.write(message(b"p", secret.md5_answer(user, body[4:8]) + b"\0"))
                elif code == AUTH_SASL:
                    if MECHANISM.encode() not in body[4:].split(b"\0"):
                        raise AuthError(f"the server offers no {MECHANISM}")
                    scram = ScramClient(secret)
                    first = scram.first()
                    mechanism = MECHANISM.encode() + b"\0"
                    self.wire.write(message(b"p", mechanism + struct.pack("!i", len(first)) + first))
                elif code == AUTH_SASL_CONTINUE and scram is not None:
                    self.wire.write(message(b"p", scram.final(body[4:])))
                elif code == AUTH_SASL_FINAL and scram is not None:
                    scram.verify(body[4:])
                else:
                    raise AuthError(f"authentication method {code} is not supported")
            elif kind == b"S":
                name, value, _ = body.split(b"\0", 2)
                self.parameters[name.decode()] = value.decode()
            elif kind == b"K":
                self.backend_key = struct.unpack("!ii", body[:8])
            elif kind == b"E":
                raise PgError(error_fields(body))
            elif kind == b"Z":
                return

    async def read(self) -> tuple[bytes, bytes]:
        """The next message: its type byte and its body."""
        try:
            whole = await self.wire.message()
        except ProtocolViolation as exc:
            raise PgUnreachable(f"not PostgreSQL's protocol: {exc}") from None
        except PeerGone as exc:
            raise PgUnreachable(str(exc)) from None
        return whole[:1], whole[5:]

    async def query(self, sql: str) -> list[tuple[str | None, ...]]:
        """Run ``sql`` with the simple query protocol: the rows of its last result, as text; PgError when the server
        answers with an error, PgUnreachable when the connection breaks."""
        try:
            self.wire.write(message(b"Q", sql.encode() + b"\0"))
            rows: list[tuple[str | None, ...]] = []
            error: PgError | None = None
            while True:
                kind, body = await self.read()
                if kind == b"T":
                    rows = []
                elif kind == b"D":
                    rows.append(tuple(None if v is None else v.decode() for v in data_row(body)))
                elif kind == b"E":
                    error = PgError(error_fields(body))
                elif kind == b"Z":
                    break
        except (OSError, PgUnreachable, struct.error) as exc:
            self.close()
            raise PgUnreachable(f"lost the connection: {exc}") from None
        if error is not None:
            raise error
        return rows

    def close(self) -> None:
        """Say goodbye (Terminate) and close."""
        if self.closed:
            return
        self.wire.write(message(b"X"))
        self.wire.close()


async def send_cancel(host: str, port: int, backend_key: tuple[int, int], timeout_s: float = 5.0) -> bool:
    """Ask the server at ``host``:``port`` to cancel what its session ``backend_key`` (process id, secret key) is
    running (``deliver_cancel``)."""
    packet = struct.pack("!iiii", CANCEL_REQUEST_LENGTH, CANCEL_REQUEST, backend_key[0], backend_key[1])
    return await deliver_cancel(host, port, packet, timeout_s)


async def deliver_cancel(host: str, port: int, packet: bytes, timeout_s: float = 5.0) -> bool:
    """Send a CancelRequest (its 16 bytes) to the server at ``host``:``port`` on a connection of its own, and wait
    until the server closes it: the server has then acted on it, so a client told the cancel is done (its own
    cancel connection closed) cannot have its next statement cancelled by it, as with the server direct. Whether it
    was delivered within ``timeout_s``."""
    sender: asyncio.StreamWriter | None = None
    try:
        async with asyncio.timeout(timeout_s):
            reader, sender = await asyncio.open_connection(host, port)
            sender.write(packet)
            await reader.read()  # the server answers nothing and closes when it has signalled the session
    except (OSError, TimeoutError):
        return False
    finally:
        if sender is not None:
            sender.close()
    return True
