"""The mypyc-compiled hot modules: a proxy runs them exactly when the build matches the sources, never a stale one."""

from __future__ import annotations

import ast
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


def _awaits_in_except_blocks(path: Path) -> list[int]:
    """The lines of ``path`` where an ``await`` (or ``async with``/``async for``) runs inside an ``except`` block."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ExceptHandler):
            found += [n.lineno for n in ast.walk(node) if isinstance(n, (ast.Await, ast.AsyncWith, ast.AsyncFor))]
    return found


def test_no_compiled_coroutine_waits_inside_an_except_block() -> None:
    """Compiled, a coroutine suspended inside an ``except`` block leaves the exception it handles as the thread's
    handled exception while others run: the mirror's retry sleep after a refused connect made six client sessions'
    ``finally`` blocks raise its BackendError ("session N ended with an unhandled error"). Such a wait goes after
    the block."""
    offenders = {module: lines for module in native.COMPILED if (lines := _awaits_in_except_blocks(REPO / module))}
    assert offenders == {}
