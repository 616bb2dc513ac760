"""Signed configs: the control plane signs every version it sends to a node, the node checks the signature before it
looks at anything else (docs/security.md, "Configs").

The scheme is Ed25519 (``cryptography``): the control plane holds the private key, a node only the public key, so a
node (or anyone who read a node's settings) can check configs but never sign one. What is signed is the canonical
JSON of everything the node acts on: the node's own name (a message signed for one node is refused by every other),
the cluster's name and identity, the version number, the checksum, the document and when it was signed. Keys are
written as the base64 of their 32 raw bytes, one line. A node may hold several public keys (comma-separated), so
that the control plane's key can be changed without a moment where nodes refuse its signatures.

Both sides use this module: the control plane (``fleet``) to sign, the node agent to check; it imports nothing of
either.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat, PublicFormat

#: Put before the canonical JSON: a signature made for anything else never checks as a config's.
CONTEXT = b"proxyfleet.node.apply signed config 1\n"
KEY_BYTES = 32
SIGNATURE_FAILED = "signature check failed"


class SignatureError(ValueError):
    """A config message whose signature is missing, malformed or does not check: the node refuses it."""


@dataclass(frozen=True)
class SignedConfig:
    """What a ``proxyfleet.node.apply`` message asks a node to run: every field is covered by its signature."""

    cluster: str
    cluster_uid: str
    version: int
    checksum: str
    document: Any
    #: When the control plane signed it (ISO 8601 with its offset): a node moved to another cluster identity refuses
    #: a message signed before the config it runs (a replay of what it was sent earlier).
    signed_at: str

    def payload(self, node: str) -> bytes:
        """The bytes signed for ``node``: ``CONTEXT`` and the canonical JSON (sorted keys, no spaces, UTF-8) of the
        fields and the node's name. ValueError when the document holds something JSON cannot carry."""
        fields = {
            "node": node,
            "cluster": self.cluster,
            "cluster_uid": self.cluster_uid,
            "version": self.version,
            "checksum": self.checksum,
            "document": self.document,
            "signed_at": self.signed_at,
        }
        try:
            text = json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
        except TypeError as exc:
            raise ValueError(f"the document cannot be signed: {exc}") from None
        return CONTEXT + text.encode("utf-8")


def sign(key: Ed25519PrivateKey, config: SignedConfig, node: str) -> str:
    """The signature of ``config`` for ``node``, base64."""
    return base64.b64encode(key.sign(config.payload(node))).decode("ascii")


def verify(keys: Sequence[Ed25519PublicKey], config: SignedConfig, node: str, signature: object) -> None:
    """Return if ``signature`` is ``config``'s for ``node`` under one of ``keys``; SignatureError saying why not, its
    text starting with ``SIGNATURE_FAILED``."""
    if not isinstance(signature, str) or not signature:
        raise SignatureError(f"{SIGNATURE_FAILED}: the message is not signed")
    try:
        raw = base64.b64decode(signature, validate=True)
    except (binascii.Error, ValueError):
        raise SignatureError(f"{SIGNATURE_FAILED}: the signature is not base64") from None
    try:
        payload = config.payload(node)
    except ValueError:  # a document JSON cannot carry was never signed
        keys = ()
        payload = b""
    for key in keys:
        try:
            key.verify(raw, payload)
            return
        except InvalidSignature:
            continue
    raise SignatureError(
        f"{SIGNATURE_FAILED}: version {config.version} of cluster {config.cluster!r} is not signed by the "
        "control plane whose public key this node has (forged, altered, or meant for another node)"
    )


def new_private_key() -> str:
    """A new private key, as text."""
    raw = Ed25519PrivateKey.generate().private_bytes(Encoding.Raw, PrivateFormat.Raw, NoEncryption())
    return base64.b64encode(raw).decode("ascii")


def _raw_key(text: str, what: str) -> bytes:
    try:
        raw = base64.b64decode(text.strip(), validate=True)
    except (binascii.Error, ValueError):
        raw = b""
    if len(raw) != KEY_BYTES:
        raise ValueError(f"{what} is not an Ed25519 key (the base64 of {KEY_BYTES} bytes)")
    return raw


def private_key_from_text(text: str) -> Ed25519PrivateKey:
    """The private key ``text`` holds; ValueError when it holds none."""
    return Ed25519PrivateKey.from_private_bytes(_raw_key(text, "the signing key"))


def public_keys_from_text(text: str) -> tuple[Ed25519PublicKey, ...]:
    """The public keys ``text`` holds, comma-separated (at least one); ValueError naming a bad one."""
    return tuple(
        Ed25519PublicKey.from_public_bytes(_raw_key(item, f"the signing public key {item.strip()!r}"))
        for item in text.split(",")
    )


def public_key_text(key: Ed25519PrivateKey) -> str:
    """The public half of ``key``, as text: what nodes are given."""
    return base64.b64encode(key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)).decode("ascii")
