"""Waiting on the event loop by events, not by time."""

from __future__ import annotations

import asyncio


async def scheduled_so_far() -> None:
    """Return once the running loop has run every callback scheduled before this call: a marker scheduled now runs
    after them (the loop runs its ready callbacks in order), and its future is what this awaits."""
    loop = asyncio.get_running_loop()
    ran: asyncio.Future[None] = loop.create_future()
    loop.call_soon(ran.set_result, None)
    await ran
