"""The suites' sources: pinned sdists from PyPI, checked against their sha256 and unpacked under
``var/conformance/src``, and the virtualenv the suites run in (``var/conformance/venv``), holding exactly the pinned
client versions and nothing of ours."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import tarfile
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from devstack.stack import REPO

HOME = REPO / "var" / "conformance"
SDISTS = HOME / "sdists"
SOURCES = HOME / "src"
VENV = HOME / "venv"
FILES = "https://files.pythonhosted.org/packages"


@dataclass(frozen=True)
class Sdist:
    """One pinned source distribution on PyPI."""

    name: str
    version: str
    url: str
    sha256: str

    @property
    def filename(self) -> str:
        """The archive's file name (the URL's last part)."""
        return self.url.rpartition("/")[2]

    @property
    def archive(self) -> Path:
        """Where the downloaded archive is kept."""
        return SDISTS / self.filename

    @property
    def tree(self) -> Path:
        """Where the archive is unpacked (its top directory)."""
        return SOURCES / self.filename.removesuffix(".tar.gz")


#: Django as requirements.txt pins it: its sdist carries ``tests/`` and ``tests/runtests.py``.
DJANGO = Sdist(
    "Django",
    "5.2.19",
    f"{FILES}/02/29/a487a108caa76430c8b616aa90a6d09cf431306112c14093e6f0a7454e17/django-5.2.19.tar.gz",
    "ad03d8abc51dbff95ebf34b27123cf0c26a3b62db7ba0cd520783686362533d1",
)
#: asyncpg as requirements.txt pins it: its sdist carries ``tests/``.
ASYNCPG = Sdist(
    "asyncpg",
    "0.32.0",
    f"{FILES}/80/4e/59dc964f962f09e3ed472e5d2d3ba670a41a2be25080dc62ab3db507ff5e/asyncpg-0.32.0.tar.gz",
    "45e64e56714d888330b884aad1dfb363d0bf43fb343e3d1a8968525f3bade478",
)

#: What the suites' virtualenv holds besides Django from its sdist: the drivers at requirements.txt's versions, the
#: test requirements of the Django apps run (tblib for tracebacks from parallel workers, PyYAML for the serializers'
#: and fixtures' YAML tests, Pillow for ImageField), and for asyncpg's suite pytest with pytest-timeout and distro
#: (its ``test_connect.py`` imports it).
VENV_PACKAGES = (
    "asgiref==3.13.0",
    "sqlparse==0.6.1",
    "mysqlclient==2.3.1",
    "psycopg==3.3.9",
    "psycopg-binary==3.3.9",
    "asyncpg==0.32.0",
    "tblib==3.2.2",
    "PyYAML==6.0.4",
    "pillow==13.0.0",
    "pytest==9.2.0",
    "pytest-timeout==2.4.0",
    "distro==1.9.0",
    "iniconfig==2.3.1",
    "packaging==26.4",
    "pluggy==1.7.0",
    "Pygments==2.21.0",
    "typing_extensions==4.16.0",
)


class SourceError(RuntimeError):
    """A pinned sdist could not be fetched, or is not what was pinned."""


def sha256_of(path: Path) -> str:
    """The file's sha256, hex."""
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def fetch(sdist: Sdist) -> Path:
    """The sdist's archive, downloaded once into ``var/conformance/sdists``; SourceError when its sha256 is not the
    pinned one (a cached archive that no longer matches is fetched again)."""
    if sdist.archive.exists() and sha256_of(sdist.archive) == sdist.sha256:
        return sdist.archive
    SDISTS.mkdir(parents=True, exist_ok=True)
    partial = sdist.archive.with_suffix(".part")
    with urllib.request.urlopen(sdist.url, timeout=120) as response, partial.open("wb") as out:
        shutil.copyfileobj(response, out)
    found = sha256_of(partial)
    if found != sdist.sha256:
        partial.unlink()
        raise SourceError(f"{sdist.filename}: sha256 {found}, pinned {sdist.sha256}")
    partial.rename(sdist.archive)
    return sdist.archive


def unpack(sdist: Sdist) -> Path:
    """The sdist's tree under ``var/conformance/src``, unpacked from its verified archive once."""
    if (sdist.tree / "PKG-INFO").exists():
        return sdist.tree
    archive = fetch(sdist)
    SOURCES.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(sdist.tree, ignore_errors=True)
    with tarfile.open(archive) as tar:
        tar.extractall(SOURCES, filter="data")
    return sdist.tree


def venv_python() -> Path:
    """The suites' interpreter, the virtualenv made (no system site packages) and filled once: Django installed from
    its pinned sdist, then ``VENV_PACKAGES``; remade when its stamp does not name exactly these pins."""
    python = VENV / "bin" / "python"
    stamp = VENV / ".conformance-pins"
    wanted = "\n".join((DJANGO.filename, DJANGO.sha256, *VENV_PACKAGES))
    if python.exists() and stamp.exists() and stamp.read_text() == wanted:
        return python
    shutil.rmtree(VENV, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
    pip = [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    subprocess.run([*pip, str(fetch(DJANGO)), *VENV_PACKAGES], check=True)
    stamp.write_text(wanted)
    return python


def prepare() -> Path:
    """Both sdists unpacked and the virtualenv ready: the suites' interpreter."""
    unpack(DJANGO)
    unpack(ASYNCPG)
    return venv_python()
