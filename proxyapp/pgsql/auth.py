"""PostgreSQL password authentication as a client: MD5 and SCRAM-SHA-256 (RFC 5802 and 7677, no channel binding).

``ScramClient`` walks the three SASL steps; the server's final signature is checked, so a server that does not know
the password cannot pass for one that does.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets

MECHANISM = "SCRAM-SHA-256"


class AuthError(Exception):
    """The server's authentication exchange cannot be completed (a malformed message, a wrong signature)."""


def md5_password(user: str, password: str, salt: bytes) -> bytes:
    """The answer to AuthenticationMD5Password: 'md5' + md5(md5(password + user) + salt), hex."""
    inner = hashlib.md5((password + user).encode()).hexdigest().encode()
    return b"md5" + hashlib.md5(inner + salt).hexdigest().encode()


def _hmac(key: bytes, text: bytes) -> bytes:
    return hmac.digest(key, text, "sha256")


def _fields(message: bytes) -> dict[str, str]:
    try:
        text = message.decode("ascii")
        return dict(part.split("=", 1) for part in text.split(","))  # type: ignore[misc]
    except (UnicodeDecodeError, ValueError):
        raise AuthError(f"malformed SCRAM message {message[:80]!r}") from None


class ScramClient:
    """One SCRAM-SHA-256 exchange: ``first()``, then ``final(server_first)``, then ``verify(server_final)``."""

    def __init__(self, password: str, nonce: str | None = None, user: str = "") -> None:
        self.password = password
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
        salted = hashlib.pbkdf2_hmac("sha256", self.password.encode(), salt, iterations)
        client_key = _hmac(salted, b"Client Key")
        without_proof = f"c=biws,r={nonce}"
        auth_message = f"{self.first_bare},{server_first.decode()},{without_proof}".encode()
        signature = _hmac(hashlib.sha256(client_key).digest(), auth_message)
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        self.server_signature = _hmac(_hmac(salted, b"Server Key"), auth_message)
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
