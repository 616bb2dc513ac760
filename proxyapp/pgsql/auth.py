"""PostgreSQL password authentication, both ways: MD5 and SCRAM-SHA-256 (RFC 5802 and 7677, no channel binding).

As a client (the proxy logging in to a server) ``ScramClient`` walks the three SASL steps and checks the server's
final signature, so a server that does not know the password cannot pass for one that does. It logs in with a
``ServerSecret``: the clear text password, or what a hash and the client's own login give (pass-through).

As a server (a client logging in to the proxy) ``ScramServer`` checks the client's proof against a verifier
(PostgreSQL's stored form, ``scram_verifier`` makes one from a clear text password), and ``md5_matches`` an MD5
answer.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from dataclasses import dataclass

MECHANISM = "SCRAM-SHA-256"


class AuthError(Exception):
    """The server's authentication exchange cannot be completed (a malformed message, a wrong signature)."""


class SecretMissing(AuthError):
    """The server asks for a proof the proxy cannot give from what ``pgsql_users`` holds (a hash, not the password)."""


def is_md5_hash(stored: str) -> bool:
    """Whether a stored password is PostgreSQL's MD5 hash ('md5' + 32 hex digits) rather than clear text."""
    return stored.startswith("md5") and len(stored) == 35


def is_scram_verifier(stored: str) -> bool:
    """Whether a stored password is read as a SCRAM-SHA-256 verifier (``Verifier.parse``) rather than clear text."""
    return stored.startswith(MECHANISM + "$")


def md5_password(user: str, password: str, salt: bytes) -> bytes:
    """The answer to AuthenticationMD5Password: 'md5' + md5(md5(password + user) + salt), hex."""
    return _md5_salted(hashlib.md5((password + user).encode()).hexdigest(), salt)


def _md5_salted(inner: str, salt: bytes) -> bytes:
    """The MD5 answer from the hex hash of password and user (what an md5 hash stores after its 'md5')."""
    return b"md5" + hashlib.md5(inner.encode() + salt).hexdigest().encode()


def _hmac(key: bytes, text: bytes) -> bytes:
    return hmac.digest(key, text, "sha256")


def _fields(message: bytes) -> dict[str, str]:
    try:
        text = message.decode("ascii")
        return dict(part.split("=", 1) for part in text.split(","))  # type: ignore[misc]
    except (UnicodeDecodeError, ValueError):
        raise AuthError(f"malformed SCRAM message {message[:80]!r}") from None


class ScramClient:
    """One SCRAM-SHA-256 exchange: ``first()``, then ``final(server_first)``, then ``verify(server_final)``.

    It proves the password from the clear text, or from a ``ServerSecret``'s keys (pass-through: a verifier's
    ServerKey and the ClientKey a client's proof gave), which only serve a server of the verifier's salt."""

    def __init__(self, secret: ServerSecret | str, nonce: str | None = None, user: str = "") -> None:
        self.secret = secret if isinstance(secret, ServerSecret) else ServerSecret(password=secret)
        self.nonce = nonce or base64.b64encode(secrets.token_bytes(18)).decode()
        self.first_bare = f"n={user},r={self.nonce}"  # PostgreSQL takes the user from the StartupMessage
        self.server_signature = b""

    def first(self) -> bytes:
        """The client-first-message (gs2 header "n,,": no channel binding)."""
        return f"n,,{self.first_bare}".encode()

    def final(self, server_first: bytes) -> bytes:
        """The client-final-message with its proof, from the server-first-message."""
        fields = _fields(server_first)
        try:
            nonce, salt, iterations = fields["r"], base64.b64decode(fields["s"]), int(fields["i"])
        except (KeyError, ValueError):
            raise AuthError(f"malformed SCRAM server-first-message {server_first[:80]!r}") from None
        if not nonce.startswith(self.nonce) or iterations < 1:
            raise AuthError("the server's SCRAM nonce does not extend ours")
        client_key, server_key = self.secret.scram_keys(salt, iterations)
        without_proof = f"c=biws,r={nonce}"
        auth_message = f"{self.first_bare},{server_first.decode()},{without_proof}".encode()
        signature = _hmac(hashlib.sha256(client_key).digest(), auth_message)
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        self.server_signature = _hmac(server_key, auth_message)
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def verify(self, server_final: bytes) -> None:
        """Check the server-final-message's signature; AuthError when it is wrong or an error."""
        fields = _fields(server_final)
        if "e" in fields:
            raise AuthError(f"SCRAM authentication failed: {fields['e']}")
        try:
            signature = base64.b64decode(fields["v"])
        except (KeyError, ValueError):
            raise AuthError(f"malformed SCRAM server-final-message {server_final[:80]!r}") from None
        if not hmac.compare_digest(signature, self.server_signature):
            raise AuthError("the server's SCRAM signature is wrong: it does not know the password")


#: The iterations ``scram_verifier`` uses (PostgreSQL's default, scram_iterations).
ITERATIONS = 4096


@dataclass(frozen=True, slots=True)
class Verifier:
    """What a server keeps of a SCRAM-SHA-256 password
    (``SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>``)."""

    iterations: int
    salt: bytes
    stored_key: bytes
    server_key: bytes

    @classmethod
    def parse(cls, text: str) -> Verifier:
        """Read PostgreSQL's text form; ValueError when it is not one."""
        try:
            scheme, head, keys = text.split("$")
            iterations, salt = head.split(":")
            stored, server = keys.split(":")
            if scheme != MECHANISM:
                raise ValueError(scheme)
            return cls(int(iterations), base64.b64decode(salt), base64.b64decode(stored), base64.b64decode(server))
        except ValueError:
            raise ValueError("not a SCRAM-SHA-256 verifier") from None


def scram_verifier(password: str, salt: bytes | None = None, iterations: int = ITERATIONS) -> Verifier:
    """The verifier of a clear text password (a fresh random salt unless given)."""
    salt = salt if salt is not None else secrets.token_bytes(16)
    salted = hashlib.pbkdf2_hmac("sha256", password.encode(), salt, iterations)
    stored = hashlib.sha256(_hmac(salted, b"Client Key")).digest()
    return Verifier(iterations, salt, stored, _hmac(salted, b"Server Key"))


class ScramServer:
    """One SCRAM-SHA-256 exchange as the server: ``first(client_first)``, then ``final(client_final)``, which raises
    AuthError unless the client proved it knows the password."""

    def __init__(self, verifier: Verifier, nonce: str | None = None) -> None:
        self.verifier = verifier
        self.nonce = nonce or base64.b64encode(secrets.token_bytes(18)).decode()
        self.client_first_bare = ""
        self.server_first = ""
        self.client_key = b""  # what the client's proof gave, once checked: it logs in to servers of this verifier

    def first(self, client_first: bytes) -> bytes:
        """The server-first-message for the client-first-message."""
        text = client_first.decode("utf-8", "replace")
        bare = text.partition(",,")[2] if text.startswith(("n,", "y,")) else ""
        if not bare:
            raise AuthError("the client's SCRAM first message asks for channel binding or is malformed")
        fields = _fields(bare.encode())
        if not fields.get("r"):
            raise AuthError("the client's SCRAM first message has no nonce")
        self.client_first_bare = bare
        v = self.verifier
        salt = base64.b64encode(v.salt).decode()
        self.server_first = f"r={fields['r']}{self.nonce},s={salt},i={v.iterations}"
        return self.server_first.encode()

    def final(self, client_final: bytes) -> bytes:
        """Check the client's proof; the server-final-message with the server's signature."""
        without_proof, _, proof_field = client_final.decode("utf-8", "replace").rpartition(",p=")
        fields = _fields(without_proof.encode())
        if fields.get("r") != _fields(self.server_first.encode())["r"] or fields.get("c") not in ("biws", "eSws"):
            raise AuthError("the client's SCRAM final message does not match the exchange")
        try:
            proof = base64.b64decode(proof_field, validate=True)
        except ValueError:
            raise AuthError("the client's SCRAM proof is not base64") from None
        v = self.verifier
        auth_message = f"{self.client_first_bare},{self.server_first},{without_proof}".encode()
        signature = _hmac(v.stored_key, auth_message)
        if len(proof) != len(signature):
            raise AuthError("password authentication failed")
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        if not hmac.compare_digest(hashlib.sha256(client_key).digest(), v.stored_key):
            raise AuthError("password authentication failed")
        self.client_key = client_key
        return f"v={base64.b64encode(_hmac(v.server_key, auth_message)).decode()}".encode()


@dataclass(frozen=True, slots=True)
class ServerSecret:
    """What the proxy logs in to servers with, as a user: the clear text password; else what ``pgsql_users`` holds
    of it, an MD5 hash (answers MD5 as well as the password would) or a SCRAM verifier with the ClientKey the
    client's login proved (answers SCRAM to a server that keeps that verifier, as PgBouncer's pass-through does)."""

    password: str = ""
    md5_hash: str = ""
    verifier: Verifier | None = None
    client_key: bytes = b""

    def cleartext(self) -> bytes:
        """The answer to AuthenticationCleartextPassword; SecretMissing without the clear text."""
        if not self.password:
            raise SecretMissing(f"the server asks for the clear text password, and pgsql_users holds {self._held()}")
        return self.password.encode()

    def md5_answer(self, user: str, salt: bytes) -> bytes:
        """The answer to AuthenticationMD5Password; SecretMissing when only a SCRAM verifier is known."""
        if self.password:
            return md5_password(user, self.password, salt)
        if self.md5_hash:
            return _md5_salted(self.md5_hash[3:], salt)
        raise SecretMissing(f"the server asks for MD5, and pgsql_users holds {self._held()}")

    def scram_keys(self, salt: bytes, iterations: int) -> tuple[bytes, bytes]:
        """ClientKey and ServerKey for a server's salt and iterations; SecretMissing when they cannot be had."""
        if self.password:
            salted = hashlib.pbkdf2_hmac("sha256", self.password.encode(), salt, iterations)
            return _hmac(salted, b"Client Key"), _hmac(salted, b"Server Key")
        v = self.verifier
        if v is None or not self.client_key:
            raise SecretMissing(f"the server asks for {MECHANISM}, and pgsql_users holds {self._held()}")
        if (salt, iterations) != (v.salt, v.iterations):
            raise SecretMissing(
                f"the server's {MECHANISM} salt or iterations differ from pgsql_users' verifier: "
                "store the verifier the server keeps (pg_authid.rolpassword), or the clear text password"
            )
        return self.client_key, v.server_key

    def _held(self) -> str:
        if self.md5_hash:
            return "an MD5 hash of the password"
        if self.verifier is not None:
            return "a SCRAM-SHA-256 verifier of the password"
        return "no password"


def md5_matches(user: str, stored: str, salt: bytes, answer: bytes) -> bool:
    """Whether an MD5 answer proves the password ``stored`` holds (clear text, or PostgreSQL's 'md5' + hex hash)."""
    expected = _md5_salted(stored[3:], salt) if is_md5_hash(stored) else md5_password(user, stored, salt)
    return hmac.compare_digest(expected, answer)
