"""The C extensions ``make build`` compiles, for the tests that compare them with their Python twins."""

from __future__ import annotations

import importlib
from types import ModuleType

import pytest


def built(name: str) -> ModuleType:
    """The built C extension ``name`` (``proxyapp.mysql._walk``, say); the test fails, not skips, when it is not
    built: a skipped comparison would pass for a broken build."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        pytest.fail(f"{name} is not built ({exc}): run `make build` first")
