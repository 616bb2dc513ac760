"""One step of a coroutine without StopIteration, and the wait a wire resumes (``_send.c``)."""

from collections.abc import Coroutine, Generator
from typing import Any

def send(coro: Coroutine[Any, Any, Any], finished: object, /) -> object:
    """What ``coro.send(None)`` yields, or ``finished`` when the coroutine returned (its value dropped); what the
    coroutine raises is raised."""

class DirectWait:
    """What a coroutine run by a driver awaits for a wire's bytes: yields itself once, then ends with None."""

    def __await__(self) -> Generator[DirectWait]: ...
