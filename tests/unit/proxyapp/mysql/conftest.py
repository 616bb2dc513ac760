"""Fixtures of the MySQL protocol's unit tests."""

from __future__ import annotations

from types import ModuleType

import pytest

from tests.support.native import built


@pytest.fixture(scope="module")
def sockio() -> ModuleType:
    """The built direct socket calls (``_sockio``)."""
    return built("proxyapp.mysql._sockio")
