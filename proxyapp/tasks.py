"""Background tasks the proxy starts and does not await: held until they end (so they are not collected while
running), and an exception one ends with logged with what it was doing, never left for asyncio to report as
"Task exception was never retrieved"."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any

log = logging.getLogger("proxyapp.tasks")


def spawn(
    coro: Coroutine[Any, Any, Any],
    held: set[asyncio.Task[Any]],
    what: str,
    loop: asyncio.AbstractEventLoop | None = None,
) -> asyncio.Task[Any]:
    """Run ``coro`` (``what`` it does, for the log) as a task kept in ``held`` until it ends."""
    task = (loop or asyncio.get_running_loop()).create_task(coro)
    held.add(task)

    def ended(done: asyncio.Task[Any]) -> None:
        held.discard(done)
        if not done.cancelled() and (error := done.exception()) is not None:
            log.error("%s ended with an unhandled error", what, exc_info=error)

    task.add_done_callback(ended)
    return task
