"""A PostgreSQL client's login to the pooling proxy: encryption negotiated (TLS with the proxy's certificate, GSS
refused), a CancelRequest told apart, then the password checked against ``pgsql_users``: SCRAM-SHA-256 for a user
whose password is clear text or a SCRAM verifier, MD5 for one whose password is an md5 hash.

The login gives the pooler what it logs in to servers with (``ServerSecret``): the clear text password, or, for a
user stored as a hash, the hash and what the client's proof reveals, so that hashes copied from the servers work as
they do in PgBouncer.

An unknown user goes through the same exchange as a known one (with a verifier nobody knows), so a client cannot
tell which users exist; both get "password authentication failed". Failures count toward the client address's
login throttle, as on the MySQL side.
"""

from __future__ import annotations

import secrets
import ssl
import struct
from dataclasses import dataclass
from functools import lru_cache

from proxyapp.config.tables import PgsqlUser
from proxyapp.pgsql.auth import (
    MECHANISM,
    AuthError,
    ScramServer,
    ServerSecret,
    Verifier,
    is_md5_hash,
    is_scram_verifier,
    md5_matches,
    scram_verifier,
)
from proxyapp.pgsql.messages import (
    CANCEL_REQUEST,
    CANCEL_REQUEST_LENGTH,
    ENCRYPTION_REQUESTS,
    GSSENC_REQUEST,
    SSL_REQUEST,
    auth_request,
    cstring,
    startup_parameters,
)
from proxyapp.pgsql.wire import PgWire, ProtocolViolation

#: Authentication request codes the proxy sends.
AUTH_OK, AUTH_MD5, AUTH_SASL, AUTH_SASL_CONTINUE, AUTH_SASL_FINAL = 0, 5, 10, 11, 12


class LoginFailed(Exception):
    """The login is refused: the SQLSTATE and message of the FATAL error the client gets."""

    def __init__(self, sqlstate: str, message: str) -> None:
        super().__init__(message)
        self.sqlstate = sqlstate
        self.message = message


@dataclass(frozen=True, slots=True)
class Cancel:
    """A CancelRequest: the process id and secret key of the session it names."""

    pid: int
    key: int


@dataclass(frozen=True, slots=True)
class Startup:
    """A client's StartupMessage, read once encryption is settled."""

    parameters: dict[str, str]
    tls: bool

    @property
    def user(self) -> str:
        """The user it logs in as."""
        return self.parameters.get("user", "")

    @property
    def database(self) -> str:
        """The database it asks for (the user's name when none, as PostgreSQL does)."""
        return self.parameters.get("database") or self.user


async def negotiate(wire: PgWire, tls: ssl.SSLContext | None) -> Startup | Cancel:
    """Read the first messages: encryption requests answered, then a StartupMessage or a CancelRequest."""
    encrypted = False
    while True:
        first = await wire.first()
        (code,) = struct.unpack_from("!i", first, 4)
        if code == CANCEL_REQUEST and len(first) == CANCEL_REQUEST_LENGTH:
            pid, key = struct.unpack_from("!iI", first, 8)  # the key is any 32 bits
            return Cancel(pid, key)
        if code in ENCRYPTION_REQUESTS:
            if encrypted:
                raise ProtocolViolation("an encryption request on an encrypted connection")
            if code == SSL_REQUEST and tls is not None:
                wire.write(b"S")
                await wire.start_tls(tls, server_side=True)
                encrypted = True
            else:
                assert code in (SSL_REQUEST, GSSENC_REQUEST)
                wire.write(b"N")
            continue
        if code >> 16 != 3:
            raise LoginFailed(
                "08P01", f"unsupported frontend protocol {code >> 16}.{code & 0xFFFF}: ProxyFleet speaks 3"
            )
        try:
            parameters = startup_parameters(first)
        except ValueError as exc:
            raise LoginFailed("08P01", str(exc)) from None
        if "replication" in parameters and parameters["replication"].lower() not in ("false", "off", "no", "0"):
            raise LoginFailed("08P01", "ProxyFleet does not proxy replication connections")
        if not parameters.get("user"):
            raise LoginFailed("28000", "no PostgreSQL user name specified in startup packet")
        return Startup(parameters, encrypted)


@lru_cache(maxsize=1024)
def verifier_of(password: str) -> Verifier:
    """The SCRAM verifier a ``pgsql_users`` password stands for (made once per clear text password)."""
    if is_scram_verifier(password):
        return Verifier.parse(password)
    return scram_verifier(password)


async def authenticate(wire: PgWire, user: PgsqlUser | None, name: str) -> ServerSecret:
    """Check the client's password; LoginFailed when it is wrong, the user unknown or not allowed in.

    Returns what the pooler logs in to servers with as this user: the clear text password when ``pgsql_users``
    holds it; else the MD5 hash, or the SCRAM verifier with the ClientKey this login's proof gave (pass-through)."""
    refused = LoginFailed("28P01", f'password authentication failed for user "{name}"')
    stored = user.password if user is not None else ""
    if user is not None and is_md5_hash(stored):
        salt = secrets.token_bytes(4)
        wire.write(auth_request(AUTH_MD5, salt))
        answer = await _password_message(wire)
        if not md5_matches(name, stored, salt, answer.rstrip(b"\0")):
            raise refused
        return ServerSecret(md5_hash=stored)
    verifier = verifier_of(stored) if user is not None else scram_verifier(secrets.token_hex(16))
    wire.write(auth_request(AUTH_SASL, MECHANISM.encode() + b"\0\0"))
    body = await _password_message(wire)
    try:
        mechanism, at = cstring(body, 0)
        if mechanism.decode() != MECHANISM:
            raise LoginFailed("28000", f"SASL mechanism {mechanism.decode('utf-8', 'replace')!r} is not supported")
        (length,) = struct.unpack_from("!i", body, at)
        scram = ScramServer(verifier)
        wire.write(auth_request(AUTH_SASL_CONTINUE, scram.first(body[at + 4 : at + 4 + length])))
        final = scram.final(await _password_message(wire))
    except (AuthError, ValueError, struct.error):
        raise refused from None
    if user is None:
        raise refused
    wire.write(auth_request(AUTH_SASL_FINAL, final))
    if is_scram_verifier(stored):
        return ServerSecret(verifier=verifier, client_key=scram.client_key)
    return ServerSecret(password=stored)


async def _password_message(wire: PgWire) -> bytes:
    """The body of the client's next message, which must be a password message (``p``) of at most 64 kB."""
    msg = await wire.message()
    if msg[:1] != b"p" or len(msg) > 64 * 1024:
        raise LoginFailed("08P01", f"expected a password message, got a {msg[:1]!r} message")
    return msg[5:]
