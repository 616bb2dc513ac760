"""One step of a coroutine without StopIteration (``_send.c``)."""

from collections.abc import Coroutine
from typing import Any

def send(coro: Coroutine[Any, Any, Any], finished: object, /) -> object:
    """What ``coro.send(None)`` yields, or ``finished`` when the coroutine returned (its value dropped); what the
    coroutine raises is raised."""
