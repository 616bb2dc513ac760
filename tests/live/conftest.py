"""Every test under ``tests/live`` is ``live``: it needs something outside the test process (a sandbox, a proxy process,
a web server, a browser, Redis). ``make test-unit`` runs ``tests/unit`` alone; ``-m "not live"`` leaves these out of
any run."""

from __future__ import annotations

from pathlib import Path

import pytest

LIVE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark the tests of this folder ``live``."""
    for item in items:
        if item.path.is_relative_to(LIVE):
            item.add_marker(pytest.mark.live)
