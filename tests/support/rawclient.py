"""A tiny synchronous MySQL protocol client for tests, and the shared setup of the client protocol tests.

The client speaks raw packets (so tests can send anything, malformed included) and decodes just enough of the
answers to assert on: OK, ERR, text and binary result sets, prepare responses. It reuses the proxy's own packet
builders (handshake, auth tokens, framing) but none of its session logic.
"""

from __future__ import annotations

import socket
import ssl
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from devstack.proxy import WRITER_HG, ProxyProcess, rw_split_config
from devstack.sandbox import APP_PASSWORD, APP_USER, Sandbox
from proxyapp.mysql import auth
from proxyapp.mysql.constants import MAX_PACKET, PROXY_CAPABILITIES, Cap, Command, FieldType
from proxyapp.mysql.handshake import ClientLogin, ServerGreeting, parse_auth_switch, ssl_request
from proxyapp.mysql.packets import frame, lenenc_str, read_lenenc_int, read_lenenc_str

#: What the raw client announces by default: everything the proxy offers (multi statements and results too).
DEFAULT_CAPS = int(PROXY_CAPABILITIES & ~Cap.CONNECT_ATTRS)

# --------------------------------------------------------------------------------------- shared test setup

APP2_USER, APP2_PASSWORD = "app2", "app2-pass"
HASH_USER, HASH_PASSWORD = "apphash", "hash-pass"
SCHEMA = "app"
OTHER_SCHEMA = "app_other"


def ensure_backend_users(sandbox: Sandbox) -> None:
    """Create the extra users and schemas the protocol tests use on the primary (replicated to the replica)."""
    with sandbox.primary().connect() as conn, conn.cursor() as cur:
        for user, password in ((APP2_USER, APP2_PASSWORD), (HASH_USER, HASH_PASSWORD)):
            cur.execute(f"CREATE USER IF NOT EXISTS '{user}'@'%' IDENTIFIED BY '{password}'")
            cur.execute(f"GRANT ALL ON *.* TO '{user}'@'%'")
        cur.execute(f"CREATE DATABASE IF NOT EXISTS {SCHEMA}")
        cur.execute(f"CREATE DATABASE IF NOT EXISTS {OTHER_SCHEMA}")
    sandbox.wait_replicated()


def protocol_config(sandbox: Sandbox, **variables: str | int) -> dict[str, Any]:
    """The rw-split config with three users (``app``, ``app2``, and ``apphash`` stored as a '*HEX' hash).

    ``variables`` are global variables, with ``_`` standing for ``-`` in the name (``mysql_threads`` is
    ``mysql-threads``).
    """
    users = [
        {"username": APP_USER, "password": APP_PASSWORD, "default_hostgroup": WRITER_HG},
        {"username": APP2_USER, "password": APP2_PASSWORD, "default_hostgroup": WRITER_HG},
        {"username": HASH_USER, "password": auth.native_hash(HASH_PASSWORD), "default_hostgroup": WRITER_HG},
    ]
    rows = [{"variable_name": k.replace("_", "-", 1), "variable_value": str(v)} for k, v in variables.items()]
    return rw_split_config(
        sandbox.primary().port,
        [r.port for r in sandbox.replicas()],
        mysql_users=users,
        global_variables=rows,
    )


def start_module_proxy(config: dict[str, Any], workdir: Path) -> ProxyProcess:
    """Start a proxy for a whole test module (the caller stops it)."""
    workdir.mkdir(parents=True, exist_ok=True)
    return ProxyProcess(config, workdir).start()


# --------------------------------------------------------------------------------------- packets


class PeerClosedError(ConnectionError):
    """The proxy closed the connection."""


class ServerError(Exception):
    """The server answered with an ERR packet."""

    def __init__(self, err: Err) -> None:
        super().__init__(f"{err.code} ({err.sqlstate}): {err.message}")
        self.err = err

    @property
    def code(self) -> int:
        """The MySQL error number."""
        return self.err.code


@dataclass
class Ok:
    """An OK packet."""

    affected_rows: int
    last_insert_id: int
    status: int
    warnings: int
    info: bytes = b""


@dataclass
class Err:
    """An ERR packet."""

    code: int
    sqlstate: str
    message: str


@dataclass
class Column:
    """A column definition (the parts tests look at)."""

    schema: str
    table: str
    name: str
    type: int


@dataclass
class ResultSet:
    """A whole result set; text rows are bytes (or None), binary rows decoded Python values."""

    columns: list[Column]
    rows: list[list[Any]] = field(default_factory=list)
    status: int = 0
    error: Err | None = None


@dataclass
class Prepared:
    """A COM_STMT_PREPARE answer."""

    stmt_id: int
    num_columns: int
    num_params: int
    params: list[Column]
    columns: list[Column]


def parse_ok(payload: bytes) -> Ok:
    """Decode an OK packet payload."""
    affected, pos = read_lenenc_int(payload, 1)
    insert_id, pos = read_lenenc_int(payload, pos)
    status, warnings = struct.unpack_from("<HH", payload, pos)
    return Ok(affected or 0, insert_id or 0, status, warnings, payload[pos + 4 :])


def parse_err(payload: bytes) -> Err:
    """Decode an ERR packet payload."""
    code = struct.unpack_from("<H", payload, 1)[0]
    if payload[3:4] == b"#":
        return Err(code, payload[4:9].decode(), payload[9:].decode("utf-8", "replace"))
    return Err(code, "", payload[3:].decode("utf-8", "replace"))


def parse_column(payload: bytes) -> Column:
    """Decode a ColumnDefinition41 payload."""
    pos = 0
    parts: list[bytes] = []
    for _ in range(6):
        value, pos = read_lenenc_str(payload, pos)
        parts.append(value or b"")
    _, pos = read_lenenc_int(payload, pos)  # length of the fixed fields (0x0c)
    field_type = payload[pos + 6]
    names = [part.decode("utf-8", "surrogateescape") for part in parts]  # a name's bytes may not be UTF-8
    return Column(names[1], names[2], names[4], field_type)


def is_eof(payload: bytes) -> bool:
    """Whether a payload is an EOF packet."""
    return payload[:1] == b"\xfe" and len(payload) < 9


def eof_status(payload: bytes) -> int:
    """The status flags of an EOF packet."""
    return struct.unpack_from("<H", payload, 3)[0] if len(payload) >= 5 else 0


_FIXED = {
    FieldType.TINY: ("<b", 1),
    FieldType.SHORT: ("<h", 2),
    FieldType.YEAR: ("<h", 2),
    FieldType.LONG: ("<i", 4),
    FieldType.INT24: ("<i", 4),
    FieldType.LONGLONG: ("<q", 8),
    FieldType.FLOAT: ("<f", 4),
    FieldType.DOUBLE: ("<d", 8),
}
_TEMPORAL = (FieldType.DATE, FieldType.DATETIME, FieldType.TIMESTAMP, FieldType.TIME)


def decode_binary_row(payload: bytes, columns: list[Column]) -> list[Any]:
    """Decode a binary-protocol row: ints and floats as numbers, temporal values as raw bytes, the rest bytes."""
    n = len(columns)
    bitmap = payload[1 : 1 + (n + 9) // 8]
    pos = 1 + len(bitmap)
    row: list[Any] = []
    for i, column in enumerate(columns):
        bit = i + 2
        if bitmap[bit // 8] & (1 << (bit % 8)):
            row.append(None)
            continue
        if column.type in _FIXED:
            fmt, size = _FIXED[column.type]
            row.append(struct.unpack_from(fmt, payload, pos)[0])
            pos += size
        elif column.type in _TEMPORAL:
            size = payload[pos]
            row.append(payload[pos + 1 : pos + 1 + size])
            pos += 1 + size
        else:
            value, pos = read_lenenc_str(payload, pos)
            row.append(value)
    return row


def encode_params(params: list[Any], long_data: frozenset[int] = frozenset()) -> bytes:
    """The parameter block of a COM_STMT_EXECUTE that binds types: ints as LONGLONG, str/bytes as strings.

    Parameters whose index is in ``long_data`` are bound as BLOB and carry no value (it came by long data).
    """
    n = len(params)
    bitmap = bytearray((n + 7) // 8)
    types = bytearray()
    values = bytearray()
    for i, value in enumerate(params):
        if i in long_data:
            types += struct.pack("<H", FieldType.BLOB)
        elif value is None:
            bitmap[i // 8] |= 1 << (i % 8)
            types += struct.pack("<H", FieldType.NULL)
        elif isinstance(value, int):
            types += struct.pack("<H", FieldType.LONGLONG)
            values += struct.pack("<q", value)
        else:
            raw = value.encode() if isinstance(value, str) else bytes(value)
            types += struct.pack("<H", FieldType.BLOB if isinstance(value, bytes) else FieldType.VAR_STRING)
            values += lenenc_str(raw)
    return bytes(bitmap) + b"\x01" + bytes(types) + bytes(values)


def execute_payload(stmt_id: int, params: list[Any], long_data: frozenset[int] = frozenset()) -> bytes:
    """A COM_STMT_EXECUTE payload (no cursor, one iteration)."""
    head = bytes((Command.STMT_EXECUTE,)) + struct.pack("<IBI", stmt_id, 0, 1)
    return head + (encode_params(params, long_data) if params else b"")


# --------------------------------------------------------------------------------------- the client


class RawClient:
    """One blocking connection speaking raw MySQL packets."""

    def __init__(self, port: int, host: str = "127.0.0.1", timeout: float = 10.0) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = bytearray()
        self.seq = 0
        self.greeting: ServerGreeting | None = None

    @classmethod
    def connect(
        cls,
        port: int,
        user: str = APP_USER,
        password: str = APP_PASSWORD,
        database: str | None = SCHEMA,
        caps: int = DEFAULT_CAPS,
        timeout: float = 10.0,
    ) -> RawClient:
        """Open a connection and log in; raises ServerError when refused."""
        client = cls(port, timeout=timeout)
        try:
            result = client.login(user, password, database, caps)
        except BaseException:
            client.close()
            raise
        if isinstance(result, Err):
            client.close()
            raise ServerError(result)
        return client

    # ------------------------------------------------------------------------------- bytes

    def _recv_exact(self, n: int) -> bytes:
        while len(self.buf) < n:
            chunk = self.sock.recv(max(65536, n - len(self.buf)))
            if not chunk:
                raise PeerClosedError("the proxy closed the connection")
            self.buf += chunk
        out = bytes(self.buf[:n])
        del self.buf[:n]
        return out

    def read_packet(self) -> bytes:
        """Read one logical packet (joining 16 MiB parts); ``self.seq`` is its last sequence id."""
        parts = []
        while True:
            header = self._recv_exact(4)
            length = header[0] | header[1] << 8 | header[2] << 16
            self.seq = header[3]
            parts.append(self._recv_exact(length))
            if length < MAX_PACKET:
                return b"".join(parts)

    def send_packet(self, payload: bytes, seq: int = 0) -> None:
        """Frame (splitting at 16 MiB) and send one payload."""
        self.sock.sendall(frame(payload, seq))

    def send_raw(self, data: bytes) -> None:
        """Send bytes as they are."""
        self.sock.sendall(data)

    def close(self) -> None:
        """Close the socket (without COM_QUIT)."""
        self.sock.close()

    def wait_closed(self, timeout: float = 5.0) -> bool:
        """Read and drop whatever comes until the proxy closes; False if it is still open after ``timeout``."""
        self.sock.settimeout(timeout)
        try:
            while self.sock.recv(65536):
                pass
        except TimeoutError:
            return False
        except ConnectionError:
            pass
        return True

    # ------------------------------------------------------------------------------- handshake

    def start_tls(self, context: ssl.SSLContext, caps: int = DEFAULT_CAPS) -> None:
        """After the greeting: send an SSL request (sequence 1) and go on over TLS; the login then takes sequence 2."""
        self.send_packet(ssl_request(caps, 1 << 24, 45), 1)
        self.sock = context.wrap_socket(self.sock, server_hostname="127.0.0.1")

    def read_greeting(self) -> ServerGreeting:
        """Read and decode the server's handshake."""
        self.greeting = ServerGreeting.decode(self.read_packet())
        return self.greeting

    def login_payload(
        self,
        user: str,
        password: str,
        database: str | None = None,
        caps: int = DEFAULT_CAPS,
        plugin: str = auth.NATIVE,
    ) -> bytes:
        """The HandshakeResponse41 answering the greeting read before."""
        assert self.greeting is not None
        scramble = self.greeting.scramble
        token = (
            auth.sha2_token(password, scramble)
            if plugin == auth.CACHING_SHA2
            else auth.native_token(password, scramble)
        )
        if not database:
            caps &= ~Cap.CONNECT_WITH_DB
        return ClientLogin(caps, user, token, 45, database, plugin).encode()

    def login(
        self,
        user: str,
        password: str,
        database: str | None = None,
        caps: int = DEFAULT_CAPS,
        plugin: str = auth.NATIVE,
    ) -> Ok | Err:
        """Read the greeting, log in, follow auth switches; returns the final OK or ERR."""
        self.read_greeting()
        self.send_packet(self.login_payload(user, password, database, caps, plugin), 1)
        return self.finish_auth(password)

    def finish_auth(self, password: str) -> Ok | Err:
        """Follow the authentication exchange until OK or ERR."""
        while True:
            reply = self.read_packet()
            kind = reply[:1]
            if kind == b"\x00":
                return parse_ok(reply)
            if kind == b"\xff":
                return parse_err(reply)
            if kind == b"\xfe":
                plugin, scramble = parse_auth_switch(reply)
                if plugin == auth.CACHING_SHA2:
                    token = auth.sha2_token(password, scramble)
                else:
                    token = auth.native_token(password, scramble)
                self.send_packet(token, self.seq + 1)
            elif reply[:2] == b"\x01" + auth.SHA2_FAST_AUTH_OK:
                continue
            else:
                raise AssertionError(f"unexpected auth packet {reply[:16]!r}")

    # ------------------------------------------------------------------------------- commands

    def command(self, payload: bytes) -> bytes:
        """Send a command (sequence 0) and return the first packet of its answer."""
        self.send_packet(payload, 0)
        return self.read_packet()

    def read_result(self, first: bytes, binary: bool = False) -> Ok | Err | ResultSet:
        """Read the rest of one result (OK, ERR or a whole result set) whose first packet is ``first``."""
        if first[:1] == b"\x00" and len(first) >= 7:
            return parse_ok(first)
        if first[:1] == b"\xff":
            return parse_err(first)
        if first[:1] == b"\xfb":
            raise AssertionError("unexpected LOCAL INFILE request")
        count, _ = read_lenenc_int(first, 0)
        columns = [parse_column(self.read_packet()) for _ in range(count or 0)]
        eof = self.read_packet()
        assert is_eof(eof), f"expected EOF after column definitions, got {eof[:16]!r}"
        result = ResultSet(columns)
        while True:
            packet = self.read_packet()
            if is_eof(packet):
                result.status = eof_status(packet)
                return result
            if packet[:1] == b"\xff":
                result.error = parse_err(packet)
                return result
            if binary:
                result.rows.append(decode_binary_row(packet, columns))
            else:
                row: list[bytes | None] = []
                pos = 0
                while pos < len(packet):
                    value, pos = read_lenenc_str(packet, pos)
                    row.append(value)
                result.rows.append(row)

    def read_results(self, first: bytes, binary: bool = False) -> list[Ok | Err | ResultSet]:
        """Read every result of a (multi-)statement answer."""
        out: list[Ok | Err | ResultSet] = []
        while True:
            result = self.read_result(first, binary)
            out.append(result)
            status = result.status if isinstance(result, Ok | ResultSet) else 0
            if isinstance(result, Err) or not status & 0x08:
                return out
            first = self.read_packet()

    def query(self, sql: str | bytes) -> list[Ok | Err | ResultSet]:
        """Run a COM_QUERY; returns all its results."""
        raw = sql.encode() if isinstance(sql, str) else sql
        return self.read_results(self.command(bytes((Command.QUERY,)) + raw))

    def rows(self, sql: str) -> list[list[bytes | None]]:
        """The rows of a one-result query; raises ServerError on an error."""
        results = self.query(sql)
        assert len(results) == 1, results
        result = results[0]
        if isinstance(result, Err):
            raise ServerError(result)
        assert isinstance(result, ResultSet), result
        if result.error is not None:
            raise ServerError(result.error)
        return result.rows

    def prepare(self, sql: str) -> Prepared:
        """COM_STMT_PREPARE; raises ServerError on an error."""
        first = self.command(bytes((Command.STMT_PREPARE,)) + sql.encode())
        if first[:1] == b"\xff":
            raise ServerError(parse_err(first))
        stmt_id, num_columns, num_params = struct.unpack_from("<IHH", first, 1)
        params: list[Column] = []
        columns: list[Column] = []
        for count, into in ((num_params, params), (num_columns, columns)):
            if count:
                into.extend(parse_column(self.read_packet()) for _ in range(count))
                assert is_eof(self.read_packet())
        return Prepared(stmt_id, num_columns, num_params, params, columns)

    def execute(self, stmt_id: int, params: list[Any], long_data: frozenset[int] = frozenset()) -> Ok | Err | ResultSet:
        """COM_STMT_EXECUTE; returns its (single) result with binary rows decoded."""
        results = self.read_results(self.command(execute_payload(stmt_id, params, long_data)), binary=True)
        assert len(results) == 1, results
        return results[0]

    def send_long_data(self, stmt_id: int, param: int, data: bytes) -> None:
        """COM_STMT_SEND_LONG_DATA (no answer)."""
        self.send_packet(bytes((Command.STMT_SEND_LONG_DATA,)) + struct.pack("<IH", stmt_id, param) + data, 0)
