"""The proxy's side of a backend login over TLS, against a scripted server speaking as MySQL 8 does (MariaDB has no
caching_sha2_password to test it live): the SSL request, the upgrade, then a full authentication in which the
password goes in clear inside TLS."""

from __future__ import annotations

import asyncio

from proxyapp.mysql import auth
from proxyapp.mysql.backend import BackendConnection, Credentials
from proxyapp.mysql.constants import PROXY_CAPABILITIES, Cap
from proxyapp.mysql.handshake import ClientLogin, ServerGreeting, is_ssl_request
from proxyapp.mysql.packets import frame, ok_packet
from proxyapp.mysql.tls import TlsLayer, client_context, server_context


class ScriptedServer:
    """One connection of a MySQL 8 that offers TLS and asks every login for caching_sha2's full authentication."""

    def __init__(self) -> None:
        self.plain = bytearray()  # bytes received and not yet read as packets (decrypted once TLS is up)
        self.tls: TlsLayer | None = None
        self.seen: list[tuple[int, bytes]] = []  # (sequence id, payload) of every packet the proxy sent

    async def packet(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bytes:
        """The next packet from the proxy."""
        while len(self.plain) < 4 or len(self.plain) < 4 + int.from_bytes(self.plain[:3], "little"):
            data = await reader.read(65536)
            assert data, "the proxy closed the connection"
            self.plain += self.tls.unwrap(data) if self.tls is not None else data
        length = int.from_bytes(self.plain[:3], "little")
        seq, payload = self.plain[3], bytes(self.plain[4 : 4 + length])
        del self.plain[: 4 + length]
        self.seen.append((seq, payload))
        return payload

    def send(self, writer: asyncio.StreamWriter, payload: bytes, seq: int) -> None:
        """Send one packet (over TLS once it is up)."""
        raw = frame(payload, seq)
        writer.write(self.tls.wrap(raw) if self.tls is not None else raw)

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Greet, upgrade on the SSL request, ask for the clear password, accept it."""
        caps = int(PROXY_CAPABILITIES | Cap.SSL)
        self.send(writer, ServerGreeting("8.0.36", 7, b"s" * 20, caps, 45, plugin=auth.CACHING_SHA2).encode(), 0)
        assert is_ssl_request(await self.packet(reader, writer))
        layer = TlsLayer(server_context("", ""), True)
        received = bytes(self.plain)  # the ClientHello may have come with the SSL request
        self.plain.clear()
        while True:
            done, out = layer.handshake(received)
            writer.write(out)
            if done:
                break
            received = await reader.read(65536)
        self.plain += layer.unwrap(b"")
        self.tls = layer
        login = ClientLogin.decode(await self.packet(reader, writer))
        assert login.capabilities & Cap.SSL and login.plugin == auth.CACHING_SHA2
        self.send(writer, b"\x01" + auth.SHA2_FULL_AUTH, 3)
        await self.packet(reader, writer)  # the password
        self.send(writer, ok_packet(), 5)
        await writer.drain()


async def _log_in(password: str) -> tuple[BackendConnection, ScriptedServer]:
    script = ScriptedServer()
    server = await asyncio.start_server(script.serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        conn = await BackendConnection.connect(
            "127.0.0.1", port, Credentials("app", password), None, timeout=10, tls=client_context()
        )
    finally:
        server.close()
    return conn, script


def test_full_authentication_over_tls_sends_the_password_inside_tls() -> None:
    conn, script = asyncio.run(_log_in("app-pass"))
    assert conn.wire.tls is not None and conn.wire.tls.cipher()
    assert conn.server_version == "8.0.36"
    sequence = [seq for seq, _ in script.seen]
    assert sequence == [1, 2, 4]  # the SSL request, the login after the upgrade, the password
    assert script.seen[2][1] == b"app-pass\x00"
