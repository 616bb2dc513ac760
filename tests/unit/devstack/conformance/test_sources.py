"""The pinned sdists: downloaded once, checked against their sha256, refused when they do not match."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from devstack.conformance import sources


def sdist_at(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, content: bytes, sha256: str) -> sources.Sdist:
    monkeypatch.setattr(sources, "SDISTS", tmp_path / "sdists")
    origin = tmp_path / "origin" / "pkg-1.0.tar.gz"
    origin.parent.mkdir()
    origin.write_bytes(content)
    return sources.Sdist("pkg", "1.0", origin.as_uri(), sha256)


def test_an_sdist_is_fetched_once_and_kept_when_its_sha256_matches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    content = b"an sdist"
    sdist = sdist_at(tmp_path, monkeypatch, content, hashlib.sha256(content).hexdigest())
    assert sdist.filename == "pkg-1.0.tar.gz"
    archive = sources.fetch(sdist)
    assert archive == tmp_path / "sdists" / "pkg-1.0.tar.gz"
    assert archive.read_bytes() == content
    (tmp_path / "origin" / "pkg-1.0.tar.gz").unlink()  # a second fetch does not download
    assert sources.fetch(sdist) == archive


def test_an_sdist_whose_sha256_differs_is_refused_and_not_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sdist = sdist_at(tmp_path, monkeypatch, b"tampered", "0" * 64)
    with pytest.raises(sources.SourceError, match=r"pkg-1\.0\.tar\.gz: sha256 [0-9a-f]{64}, pinned 0{64}"):
        sources.fetch(sdist)
    assert list((tmp_path / "sdists").iterdir()) == []


def test_the_pins_are_the_versions_requirements_txt_pins() -> None:
    pinned = dict(line.split("==") for line in (sources.REPO / "requirements.txt").read_text().split())
    assert pinned["Django"] == sources.DJANGO.version
    assert pinned["asyncpg"] == sources.ASYNCPG.version
    assert sources.DJANGO.filename == f"django-{pinned['Django']}.tar.gz"
    for package in sources.VENV_PACKAGES:
        name, version = package.split("==")
        assert pinned.get(name, version) == version, package
