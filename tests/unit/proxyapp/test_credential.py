"""The admin credential's file (proxyapp.credential): made 0600 at the first start, refused when others may read it."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from proxyapp import credential


def test_the_first_start_makes_a_random_token_only_its_owner_may_read(tmp_path: Path) -> None:
    path = credential.default_path(tmp_path / "proxy.json")
    assert path == tmp_path / "admin.token"
    token = credential.load_or_create(path)
    assert len(token) >= 40
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert credential.load_or_create(path) == token  # later starts keep it
    assert credential.load_or_create(tmp_path / "other.token") != token


def test_a_provisioned_token_is_used_as_it_is(tmp_path: Path) -> None:
    path = tmp_path / "admin.token"
    path.write_text("  provisioned-by-the-operator-42\n")
    path.chmod(0o600)
    assert credential.load_or_create(path) == "provisioned-by-the-operator-42"


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o620, 0o666])
def test_a_token_file_others_may_touch_is_refused(tmp_path: Path, mode: int) -> None:
    path = tmp_path / "admin.token"
    path.write_text("a-token-long-enough-to-use-0123\n")
    path.chmod(mode)
    with pytest.raises(credential.CredentialError, match=f"mode {mode:04o}.*chmod 600"):
        credential.read(path)


@pytest.mark.parametrize("text", ["", "short", "two tokens-long-enough-0123456"])
def test_a_token_file_without_one_good_token_is_refused(tmp_path: Path, text: str) -> None:
    path = tmp_path / "admin.token"
    path.write_text(text)
    path.chmod(0o600)
    with pytest.raises(credential.CredentialError, match="one token of 16 characters or more"):
        credential.read(path)


def test_a_missing_file_or_directory_is_said_plainly(tmp_path: Path) -> None:
    with pytest.raises(credential.CredentialError, match="cannot read the admin token file"):
        credential.read(tmp_path / "absent.token")
    with pytest.raises(credential.CredentialError, match="cannot create the admin token file"):
        credential.load_or_create(tmp_path / "no" / "such" / "dir" / "admin.token")


@pytest.mark.parametrize(
    ("header", "shows"),
    [
        ("Bearer the-token-0123456789", True),
        ("Bearer  the-token-0123456789 ", True),
        ("Bearer the-token-012345678", False),
        ("bearer the-token-0123456789", False),
        ("Basic the-token-0123456789", False),
        ("", False),
        (None, False),
    ],
)
def test_only_the_token_itself_is_shown(header: str | None, shows: bool) -> None:
    assert credential.shows(header, "the-token-0123456789") is shows
