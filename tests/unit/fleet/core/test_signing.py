"""The control plane's config signing key (``fleet.core.signing``): from ``FLEET_SIGNING_KEY`` or a 0600 file made on
first use, its public half printed for the nodes, and an unusable key said when publishing, not raised."""

from __future__ import annotations

import io
import stat
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from fleet.core import publishing, push, signing
from fleet.core.models import Cluster, ProxyNode
from proxyapp.node import signature


@pytest.fixture
def key_file(settings: Any, tmp_path: Path) -> Path:
    """No key in the settings, a key file of this test's own (not made yet)."""
    settings.FLEET_SIGNING_KEY = ""
    settings.FLEET_SIGNING_KEY_FILE = str(tmp_path / "keys" / "signing.key")
    return Path(settings.FLEET_SIGNING_KEY_FILE)


def public_key_printed() -> str:
    out = io.StringIO()
    call_command("signing-public-key", stdout=out)
    return out.getvalue()


def test_the_key_file_is_made_once_owner_only_and_its_public_half_printed(key_file: Path) -> None:
    printed = public_key_printed()
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600 and stat.S_IMODE(key_file.parent.stat().st_mode) == 0o700
    private = key_file.read_text().strip()
    assert printed == signature.public_key_text(signature.private_key_from_text(private)) + "\n"
    assert public_key_printed() == printed  # made once: the same key from then on
    assert private not in printed


def test_the_key_from_the_setting_wins_and_a_bad_key_is_named(key_file: Path, settings: Any) -> None:
    given = signature.new_private_key()
    settings.FLEET_SIGNING_KEY = given
    assert signing.public_key_text() == signature.public_key_text(signature.private_key_from_text(given))
    assert not key_file.exists()

    settings.FLEET_SIGNING_KEY = "not-a-key"
    with pytest.raises(CommandError, match=r"^FLEET_SIGNING_KEY: the signing key is not an Ed25519 key"):
        public_key_printed()
    settings.FLEET_SIGNING_KEY = ""
    key_file.parent.mkdir(parents=True)
    key_file.write_text("garbage\n")
    with pytest.raises(signing.SigningKeyError, match=rf"^{key_file}: the signing key is not an Ed25519 key"):
        signing.private_key()


def test_a_publish_with_an_unusable_key_is_stored_and_says_why_it_was_not_sent(cluster: Cluster, settings: Any) -> None:
    ProxyNode.objects.create(cluster=cluster, name="signing-test-node")
    settings.FLEET_SIGNING_KEY = "not-a-key"
    version = publishing.publish(cluster, None, "unsigned")

    assert push.push_version(version) == (
        "the signing key is unusable (FLEET_SIGNING_KEY: the signing key is not an Ed25519 key "
        "(the base64 of 32 bytes))"
    )
    assert ProxyNode.objects.get(name="signing-test-node").last_pushed_at is None  # nothing sent
