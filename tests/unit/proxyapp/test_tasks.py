"""Background tasks (proxyapp.tasks.spawn): held while they run, and one that fails is logged with what it did,
never left for asyncio's "Task exception was never retrieved"."""

from __future__ import annotations

import asyncio
import gc
import logging
from typing import Any

import pytest

from proxyapp.tasks import spawn


def test_a_failed_task_is_logged_and_let_go(caplog: pytest.LogCaptureFixture) -> None:
    async def fails() -> None:
        raise ValueError("broken")

    async def main() -> set[asyncio.Task[Any]]:
        held: set[asyncio.Task[Any]] = set()
        task = spawn(fails(), held, "a test task")
        assert held == {task}
        await asyncio.wait({task})
        return held

    with caplog.at_level(logging.ERROR):
        held = asyncio.run(main())
        gc.collect()
    assert held == set()
    assert "a test task ended with an unhandled error" in caplog.text and "ValueError: broken" in caplog.text
    assert "never retrieved" not in caplog.text
