"""The connection phase: the server's HandshakeV10 and the client's HandshakeResponse41, both directions."""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from proxyapp.mysql.constants import Cap, Status
from proxyapp.mysql.packets import (
    ProtocolError,
    lenenc_int,
    lenenc_str,
    read_lenenc_int,
    read_lenenc_str,
    read_nul_str,
    schema_name,
)


@dataclass(slots=True)
class ServerGreeting:
    """A HandshakeV10 packet, as sent by a server."""

    server_version: str
    connection_id: int
    scramble: bytes
    capabilities: int
    charset: int
    status: int = Status.AUTOCOMMIT
    plugin: str = "mysql_native_password"

    def encode(self) -> bytes:
        """Serialize to a packet payload."""
        caps = self.capabilities
        return b"".join(
            (
                b"\x0a",
                self.server_version.encode() + b"\x00",
                struct.pack("<I", self.connection_id),
                self.scramble[:8],
                b"\x00",
                struct.pack("<HBHH", caps & 0xFFFF, self.charset, self.status, caps >> 16 & 0xFFFF),
                bytes((len(self.scramble) + 1,)),
                b"\x00" * 10,
                self.scramble[8:] + b"\x00",
                self.plugin.encode() + b"\x00",
            )
        )

    @classmethod
    def decode(cls, payload: bytes) -> ServerGreeting:
        """Parse a server's handshake packet."""
        if not payload or payload[0] != 10:
            raise ProtocolError(f"unsupported handshake protocol version {payload[:1]!r}")
        version, pos = read_nul_str(payload, 1)
        if len(payload) < pos + 31:
            raise ProtocolError("truncated server handshake")
        (conn_id,) = struct.unpack_from("<I", payload, pos)
        part1 = payload[pos + 4 : pos + 12]
        pos += 13
        caps_lo, charset, status, caps_hi = struct.unpack_from("<HBHH", payload, pos)
        pos += 7
        auth_len = payload[pos]
        pos += 11
        part2_len = max(13, auth_len - 8)
        part2 = payload[pos : pos + part2_len].rstrip(b"\x00")
        pos += part2_len
        plugin, _ = read_nul_str(payload, pos)
        return cls(
            server_version=version.decode("utf-8", "replace"),
            connection_id=conn_id,
            scramble=part1 + part2,
            capabilities=caps_lo | caps_hi << 16,
            charset=charset,
            status=status,
            plugin=plugin.decode() or "mysql_native_password",
        )


@dataclass(slots=True)
class ClientLogin:
    """A HandshakeResponse41 packet, as sent by a client."""

    capabilities: int
    username: str
    auth_response: bytes
    charset: int = 45
    database: str | None = None
    plugin: str = ""
    attributes: dict[str, str] = field(default_factory=dict)
    max_packet: int = 1 << 24

    def encode(self) -> bytes:
        """Serialize to a packet payload."""
        caps = self.capabilities
        parts = [
            struct.pack("<IIB", caps, self.max_packet, self.charset),
            b"\x00" * 23,
            self.username.encode() + b"\x00",
        ]
        if caps & Cap.PLUGIN_AUTH_LENENC_DATA:
            parts.append(lenenc_str(self.auth_response))
        else:
            parts.append(bytes((len(self.auth_response),)) + self.auth_response)
        if caps & Cap.CONNECT_WITH_DB:
            parts.append((self.database or "").encode("utf-8", "surrogateescape") + b"\x00")
        if caps & Cap.PLUGIN_AUTH:
            parts.append(self.plugin.encode() + b"\x00")
        if caps & Cap.CONNECT_ATTRS:
            attrs = b"".join(lenenc_str(k.encode()) + lenenc_str(v.encode()) for k, v in self.attributes.items())
            parts.append(lenenc_int(len(attrs)) + attrs)
        return b"".join(parts)

    @classmethod
    def decode(cls, payload: bytes) -> ClientLogin:
        """Parse a client's handshake response; raises ProtocolError on anything malformed."""
        if len(payload) < 32:
            raise ProtocolError("truncated handshake response")
        caps, max_packet, charset = struct.unpack_from("<IIB", payload, 0)
        if not caps & Cap.PROTOCOL_41:
            raise ProtocolError("client does not speak protocol 4.1")
        name, pos = read_nul_str(payload, 32)
        if caps & Cap.PLUGIN_AUTH_LENENC_DATA:
            auth, pos = read_lenenc_str(payload, pos)
        elif caps & Cap.SECURE_CONNECTION:
            if pos >= len(payload):
                raise ProtocolError("truncated auth response")
            n = payload[pos]
            auth = payload[pos + 1 : pos + 1 + n]
            if len(auth) != n:
                raise ProtocolError("truncated auth response")
            pos += 1 + n
        else:
            auth, pos = read_nul_str(payload, pos)
        database = None
        if caps & Cap.CONNECT_WITH_DB and pos < len(payload):
            db, pos = read_nul_str(payload, pos)
            database = schema_name(db) or None
        plugin = ""
        if caps & Cap.PLUGIN_AUTH and pos < len(payload):
            raw, pos = read_nul_str(payload, pos)
            plugin = raw.decode("ascii", "replace")
        attrs: dict[str, str] = {}
        if caps & Cap.CONNECT_ATTRS and pos < len(payload):
            total, pos = read_lenenc_int(payload, pos)
            end = pos + (total or 0)
            while pos < end:
                key, pos = read_lenenc_str(payload, pos)
                value, pos = read_lenenc_str(payload, pos)
                attrs[(key or b"").decode("utf-8", "replace")] = (value or b"").decode("utf-8", "replace")
        try:
            username = name.decode("utf-8")
        except UnicodeDecodeError:
            raise ProtocolError("user name is not valid UTF-8") from None
        return cls(caps, username, auth or b"", charset, database, plugin, attrs, max_packet)


#: The length of an SSL request: a handshake response cut after its filler, with ``Cap.SSL`` set.
SSL_REQUEST_LENGTH = 32


def ssl_request(capabilities: int, max_packet: int, charset: int) -> bytes:
    """The SSLRequest payload a client sends before upgrading the connection to TLS."""
    return struct.pack("<IIB", capabilities | Cap.SSL, max_packet, charset) + b"\x00" * 23


def is_ssl_request(payload: bytes) -> bool:
    """Whether a client's first packet asks for TLS rather than logging in (a full handshake response follows)."""
    return len(payload) == SSL_REQUEST_LENGTH and bool(struct.unpack_from("<I", payload)[0] & Cap.SSL)


def auth_switch_request(plugin: str, scramble: bytes) -> bytes:
    """An AuthSwitchRequest payload asking the client to answer ``plugin`` over ``scramble``."""
    return b"\xfe" + plugin.encode() + b"\x00" + scramble + b"\x00"


def parse_auth_switch(payload: bytes) -> tuple[str, bytes]:
    """Decode an AuthSwitchRequest payload into (plugin, scramble)."""
    plugin, pos = read_nul_str(payload, 1)
    return plugin.decode(), payload[pos:].rstrip(b"\x00")
