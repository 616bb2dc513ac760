"""The control plane's signing key: every version sent to a node is signed with it (``proxyapp.node.signature``;
docs/security.md, "Configs").

The key comes from ``FLEET_SIGNING_KEY`` (the key itself, e.g. from a secret store) or else the file
``FLEET_SIGNING_KEY_FILE`` (default ``var/signing.key``), made on first use, readable by its owner only. Nodes are
given its public half (``manage.py signing-public-key``): they check configs with it and cannot sign one.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from django.conf import settings
from django.utils import timezone

from fleet.core import keyfiles
from proxyapp.node import signature


class SigningKeyError(RuntimeError):
    """The signing key setting or file holds no usable key."""


def private_key() -> Ed25519PrivateKey:
    """The signing key: ``FLEET_SIGNING_KEY`` if set, else the key file's (made on first use)."""
    if settings.FLEET_SIGNING_KEY:
        where, text = "FLEET_SIGNING_KEY", settings.FLEET_SIGNING_KEY
    else:
        path = Path(settings.FLEET_SIGNING_KEY_FILE)
        warning = "a new config signing key: give its public half to every node (manage.py signing-public-key)"
        where, text = str(path), keyfiles.read_or_create(path, lambda: signature.new_private_key() + "\n", warning)
    try:
        return signature.private_key_from_text(text)
    except ValueError as exc:
        raise SigningKeyError(f"{where}: {exc}") from None


def public_key_text() -> str:
    """The public key nodes are given (``--signing-public-key``)."""
    return signature.public_key_text(private_key())


def apply_message(
    node: str, cluster: str, cluster_uid: str, number: int, checksum: str, document: Any
) -> dict[str, Any]:
    """The keyword arguments of ``proxyfleet.node.apply`` sending this version to ``node``, signed for it now."""
    config = signature.SignedConfig(cluster, cluster_uid, number, checksum, document, timezone.now().isoformat())
    return {**asdict(config), "signature": signature.sign(private_key(), config, node)}
