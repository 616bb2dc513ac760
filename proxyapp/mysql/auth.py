"""Authentication plugins: mysql_native_password and caching_sha2_password, both sides of each."""

from __future__ import annotations

import hashlib
import hmac
import os
from dataclasses import dataclass

NATIVE = "mysql_native_password"
CACHING_SHA2 = "caching_sha2_password"
SUPPORTED_PLUGINS = (NATIVE, CACHING_SHA2)

# caching_sha2_password exchange bytes (after a 0x01 "more data" prefix).
SHA2_REQUEST_PUBLIC_KEY = b"\x02"
SHA2_FAST_AUTH_OK = b"\x03"
SHA2_FULL_AUTH = b"\x04"


def new_scramble() -> bytes:
    """Twenty random bytes without NUL or '$' (some clients treat them specially)."""
    out = bytearray()
    while len(out) < 20:
        for b in os.urandom(24):
            b &= 0x7F
            if b not in (0, 36) and len(out) < 20:
                out.append(b)
    return bytes(out)


def _xor(a: bytes, b: bytes) -> bytes:
    return bytes(x ^ y for x, y in zip(a, b, strict=True))


def native_token_from_stage1(stage1: bytes, scramble: bytes) -> bytes:
    """The mysql_native_password reply built from SHA1(password)."""
    return _xor(stage1, hashlib.sha1(scramble[:20] + hashlib.sha1(stage1).digest()).digest())


def native_token(password: str, scramble: bytes) -> bytes:
    """The mysql_native_password reply for a clear-text password (empty for an empty password)."""
    if not password:
        return b""
    return native_token_from_stage1(hashlib.sha1(password.encode()).digest(), scramble)


def native_hash(password: str) -> str:
    """The '*HEX' hash MySQL stores for mysql_native_password (SHA1 of SHA1)."""
    return "*" + hashlib.sha1(hashlib.sha1(password.encode()).digest()).hexdigest().upper()


def sha2_token(password: str, scramble: bytes) -> bytes:
    """The caching_sha2_password fast-auth reply for a clear-text password."""
    if not password:
        return b""
    p1 = hashlib.sha256(password.encode()).digest()
    p2 = hashlib.sha256(hashlib.sha256(p1).digest() + scramble[:20]).digest()
    return _xor(p1, p2)


@dataclass(frozen=True, slots=True)
class Verdict:
    """The outcome of checking a client's auth reply.

    ``stage1`` is SHA1(password) when it could be recovered from a native reply against a '*HEX' hash: the
    proxy then logs in to backends with it although it never saw the clear password.
    """

    ok: bool
    stage1: bytes | None = None


def verify(plugin: str, stored: str, scramble: bytes, token: bytes) -> Verdict:
    """Check a client's ``token`` for ``plugin`` against the configured password ``stored``."""
    if not stored:
        return Verdict(token in (b"", b"\x00"))
    if plugin == NATIVE:
        if stored.startswith("*") and len(stored) == 41:
            try:
                hash2 = bytes.fromhex(stored[1:])
            except ValueError:
                return Verdict(False)
            if len(token) != 20:
                return Verdict(False)
            stage1 = _xor(token, hashlib.sha1(scramble[:20] + hash2).digest())
            ok = hmac.compare_digest(hashlib.sha1(stage1).digest(), hash2)
            return Verdict(ok, stage1 if ok else None)
        return Verdict(hmac.compare_digest(token, native_token(stored, scramble)))
    if plugin == CACHING_SHA2:
        if stored.startswith("*"):
            return Verdict(False)
        return Verdict(hmac.compare_digest(token, sha2_token(stored, scramble)))
    return Verdict(False)


def verify_clear(stored: str, password: bytes) -> Verdict:
    """Check a password a client sent as it is (caching_sha2_password's full authentication, over TLS only) against
    the configured ``stored`` password, clear or a '*HEX' hash."""
    if stored.startswith("*") and len(stored) == 41:
        stage1 = hashlib.sha1(password).digest()
        ok = hmac.compare_digest(("*" + hashlib.sha1(stage1).hexdigest().upper()).encode(), stored.upper().encode())
        return Verdict(ok, stage1 if ok else None)
    return Verdict(hmac.compare_digest(password, stored.encode()))


def rsa_encrypt_password(password: str, scramble: bytes, public_key_pem: bytes) -> bytes:
    """caching_sha2_password full authentication without TLS: the password, XORed with the scramble, RSA-OAEP."""
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import padding

    key = serialization.load_pem_public_key(public_key_pem)
    plain = password.encode() + b"\x00"
    mixed = bytes(b ^ scramble[i % 20] for i, b in enumerate(plain))
    oaep = padding.OAEP(mgf=padding.MGF1(algorithm=hashes.SHA1()), algorithm=hashes.SHA1(), label=None)
    return key.encrypt(mixed, oaep)  # type: ignore[union-attr]
