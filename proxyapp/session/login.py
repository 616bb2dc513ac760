"""Who the client is: the handshake and login, and COM_CHANGE_USER's new authentication.

Both check the client's proof against ``mysql_users`` with the plugin the client chose when the proxy supports it
(``mysql_native_password`` otherwise), and answer an unknown user exactly as a wrong password. A client that sends
an SSL request has its connection upgraded to TLS (``services.tls.frontend``) before it logs in; a user with
``use_ssl=1`` who logs in without TLS is refused as a wrong password is.
"""

from __future__ import annotations

import logging
import ssl

from proxyapp.mysql import auth
from proxyapp.mysql.constants import PROXY_CAPABILITIES, Cap, ErrorCode, names_for_collation
from proxyapp.mysql.handshake import ClientLogin, ServerGreeting, auth_switch_request, is_ssl_request
from proxyapp.mysql.packets import ProtocolError, ok_packet, read_nul_str, schema_name
from proxyapp.session.client import Client, SessionEnd
from proxyapp.session.services import SessionServices
from proxyapp.session.state import SessionState

log = logging.getLogger("proxyapp.session.login")

_DEFAULT_VERSION = "5.5.5-10.11.0-MariaDB-ProxyFleet"  # until a backend has told its own


async def log_in(client: Client, services: SessionServices, state: SessionState, session_id: int) -> bool:
    """Greet the client, authenticate it and set ``client`` and ``state`` up for its user; False (after the error
    was sent) when it may not log in. A session that logged in holds a seat (``services.seats``) until it ends."""
    rt = services.runtime
    wire = client.wire
    if services.throttle.blocked(client.addr, services.clock.now()):
        services.counters.Access_Denied_Host_Blocked += 1
        why = f"Host '{client.addr}' is blocked because of many failed logins (mysql-max_auth_errors_until_block)"
        client.send_error(ErrorCode.HOST_IS_BLOCKED, why, 0)  # instead of the greeting, as the server does
        return False
    tls = services.tls.frontend
    capabilities = PROXY_CAPABILITIES | Cap.COMPRESS if rt.settings.have_compress else PROXY_CAPABILITIES
    greeting = ServerGreeting(
        server_version=rt.settings.server_version or services.pools.backend_version or _DEFAULT_VERSION,
        connection_id=session_id,
        scramble=client.scramble,
        capabilities=capabilities | Cap.SSL if tls is not None else capabilities,
        charset=45,
        plugin=rt.settings.auth_plugin,
    )
    wire.send(greeting.encode(), 0)
    payload = await wire.read_payload()
    if is_ssl_request(payload):
        if tls is None:
            client.send_error(ErrorCode.HANDSHAKE, "SSL is not enabled on this ProxyFleet listener", 2)
            return False
        try:
            await wire.start_tls(tls, True)
        except ssl.SSLError as failed:  # garbage instead of a ClientHello, an old version, a bad certificate
            services.counters.Client_TLS_handshake_errors += 1
            log.info("session %d: TLS handshake with %s failed: %s", session_id, client.addr, failed.reason or failed)
            return False
        services.counters.Client_Connections_tls += 1
        payload = await wire.read_payload()
    login = ClientLogin.decode(payload)
    if login.capabilities & Cap.COMPRESS and not rt.settings.have_compress:
        # Its next packets would come in frames this listener does not read: refuse now rather than misread.
        client.send_error(ErrorCode.HANDSHAKE, "Compression is not enabled on this ProxyFleet listener", 2)
        return False
    client.capabilities = login.capabilities
    client.local_files = bool(login.capabilities & Cap.LOCAL_FILES)
    seq = wire.seq + 1
    user = rt.frontend_users.get(login.username)
    using = "YES" if login.auth_response else "NO"
    denied = f"Access denied for user '{login.username}'@'{client.addr}' (using password: {using})"
    # An unknown user goes through the same exchange as a user with a clear-text password, so that the answers do
    # not tell which users exist (as MariaDB does); only the verdict differs.
    password = user.password if user is not None else ""
    client_plugin = login.plugin or auth.NATIVE
    token = login.auth_response
    wanted = client_plugin
    over_tls = wire.tls is not None
    if client_plugin not in auth.SUPPORTED_PLUGINS or (
        client_plugin == auth.CACHING_SHA2 and password.startswith("*") and not over_tls
    ):
        wanted = auth.NATIVE
    if wanted != client_plugin and client.capabilities & Cap.PLUGIN_AUTH:
        wire.send(auth_switch_request(wanted, client.scramble), seq)
        token = await wire.read_payload()
        seq = wire.seq + 1
    verdict = auth.verify(wanted, password, client.scramble, token) if user is not None else auth.Verdict(False)
    full_auth = wanted == auth.CACHING_SHA2 and over_tls and not verdict.ok
    if full_auth:
        # caching_sha2_password's full authentication, as the server asks it when the scramble does not do (a
        # '*HEX' password, a wrong one, an unknown user alike): the client sends its password inside TLS.
        wire.send(b"\x01" + auth.SHA2_FULL_AUTH, seq)
        sent = await wire.read_payload()
        seq = wire.seq + 1
        verdict = auth.verify_clear(password, sent.rstrip(b"\x00")) if user is not None else auth.Verdict(False)
    if user is not None and user.use_ssl and not over_tls:  # refused as a wrong password is, as MariaDB does
        verdict = auth.Verdict(False)
    if user is None or not verdict.ok:
        services.counters.Access_Denied_Wrong_Password += 1
        if services.throttle.failed(client.addr, services.clock.now()):
            log.warning("%s blocked after %d failed logins in a row", client.addr, services.throttle.max_errors)
        client.send_error(ErrorCode.ACCESS_DENIED, denied, seq)
        return False
    services.throttle.succeeded(client.addr)
    if not services.seats.take(rt.settings.max_connections):  # the node's limit, counting logged-in sessions
        services.counters.Access_Denied_Max_Connections += 1
        client.send_error(ErrorCode.CON_COUNT, "Too many connections", seq)
        return False
    if wanted == auth.CACHING_SHA2 and user.password and not full_auth:
        wire.send(b"\x01" + auth.SHA2_FAST_AUTH_OK, seq)
        seq += 1
    client.become(rt, user.username, verdict.stage1)
    state.schema = login.database or user.default_schema
    client.collation = login.charset
    state.names = names_for_collation(login.charset)
    state.multi_statements = bool(client.capabilities & Cap.MULTI_STATEMENTS)
    wire.send(ok_packet(), seq)
    if client.capabilities & Cap.COMPRESS:
        wire.compress()
    return True


class ChangeUser:
    """A COM_CHANGE_USER that authenticated: who the session becomes, and the sequence number its OK takes."""

    __slots__ = ("charset", "schema", "seq", "stage1", "username")

    def __init__(self, username: str, stage1: bytes | None, schema: str | None, charset: int, seq: int) -> None:
        self.username = username
        self.stage1 = stage1
        self.schema = schema
        self.charset = charset
        self.seq = seq


async def authenticate_change(client: Client, services: SessionServices, payload: bytes) -> ChangeUser:
    """Authenticate a COM_CHANGE_USER; SessionEnd (after the error was sent) when it fails, as the server does."""
    name, pos = read_nul_str(payload, 1)
    if client.capabilities & Cap.SECURE_CONNECTION:
        if pos >= len(payload):
            raise ProtocolError("truncated COM_CHANGE_USER")
        n = payload[pos]
        token = payload[pos + 1 : pos + 1 + n]
        pos += 1 + n
    else:
        token, pos = read_nul_str(payload, pos)
    schema_raw, pos = read_nul_str(payload, pos)
    charset = client.collation
    plugin = auth.NATIVE
    if pos + 2 <= len(payload):
        charset = payload[pos] | payload[pos + 1] << 8
        if client.capabilities & Cap.PLUGIN_AUTH and pos + 2 < len(payload):
            plugin = read_nul_str(payload, pos + 2)[0].decode("ascii", "replace") or auth.NATIVE
    username = name.decode("utf-8", "replace")
    user = services.runtime.frontend_users.get(username)
    seq = 1
    verdict = auth.Verdict(False)
    if user is not None and plugin in auth.SUPPORTED_PLUGINS:
        # As MariaDB does: a reply computed from this connection's scramble is checked without a new challenge
        # (libmariadb sends one and does not expect to be asked again).
        verdict = auth.verify(plugin, user.password, client.scramble, token)
    if not verdict.ok:
        # Otherwise a fresh challenge, in the native plugin whatever the client's: the verdict does not depend on
        # the client's plugin, and an unknown user is asked exactly as a known one.
        plugin = auth.NATIVE
        client.scramble = auth.new_scramble()
        client.wire.send(auth_switch_request(plugin, client.scramble), seq)
        token = await client.wire.read_payload()
        seq = client.wire.seq + 1
        verdict = auth.verify(plugin, user.password, client.scramble, token) if user else auth.Verdict(False)
    if user is not None and user.use_ssl and client.wire.tls is None:
        verdict = auth.Verdict(False)
    if user is None or not verdict.ok:
        services.counters.Access_Denied_Wrong_Password += 1
        client.send_error(ErrorCode.ACCESS_DENIED, f"Access denied for user '{username}'@'{client.addr}'", seq)
        raise SessionEnd
    if plugin == auth.CACHING_SHA2 and user.password:
        client.wire.send(b"\x01" + auth.SHA2_FAST_AUTH_OK, seq)
        seq += 1
    schema = schema_name(schema_raw)  # a name in the client's character set: kept as sent
    return ChangeUser(user.username, verdict.stage1, schema or user.default_schema, charset, seq)
