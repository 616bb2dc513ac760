"""The mypyc-compiled hot modules: a proxy runs them exactly when the build matches the sources, never a stale one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from proxyapp import native
from tests.conftest import REPO

HOT = {
    "proxyapp.session.session",
    "proxyapp.mysql.wire",
    "proxyapp.backends.pool",
    "proxyapp.sql.scan",
    "proxyapp.sql.digest",
}


def loaded_files(env: dict[str, str]) -> dict[str, str]:
    """Where a fresh interpreter loads the hot modules from, under ``env``."""
    modules = sorted(HOT)
    code = f"import importlib, json; print(json.dumps({{m: importlib.import_module(m).__file__ for m in {modules!r}}}))"
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, env={**os.environ, **env}, capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout)


def test_proxyfleet_native_0_forces_the_plain_modules() -> None:
    files = loaded_files({"PROXYFLEET_NATIVE": "0"})
    assert set(files) == HOT
    assert all(path.endswith(".py") for path in files.values()), files
    default = loaded_files({})
    assert all(path.endswith(".so") == native.is_fresh() for path in default.values()), default


def test_the_stamp_covers_every_compiled_source_and_changes_with_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    copy = tmp_path / "repo"
    for name in (*native.COMPILED, *(source for _, source in native.EXTENSIONS)):
        target = copy / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes((REPO / name).read_bytes())
    monkeypatch.setattr(native, "REPO", copy)
    before = native.source_stamp()
    assert before == native.source_stamp()
    edited = copy / "proxyapp" / "session" / "session.py"
    edited.write_text(edited.read_text() + "\n# edited\n")
    assert native.source_stamp() != before
    after_python = native.source_stamp()
    extension = copy / "proxyapp" / "forward" / "_splice.c"
    extension.write_text(extension.read_text() + "\n/* edited */\n")
    assert native.source_stamp() != after_python
