"""Running a coroutine from I/O callbacks, as a task would, without the event loop's round trip.

A task waiting on a socket is resumed in two steps: the socket's callback completes a future, and the event loop
later runs the task's wake-up, a scheduled callback of its own. A ``Driver`` runs one coroutine at a time and is
resumed by the callback itself: when the coroutine waits for a ``Wire``'s bytes (``proxyapp.mysql.wire``), the wire
resumes the driver from its ``data_received``, with nothing scheduled in between. A pool's waiting list parks it
(``park``) and resumes it (``unpark``) from one scheduled call for all the sessions it handed a connection, with no
future. Any other awaitable (a sleep, a lock) resumes it through the future's callback, as it would resume a task.

The coroutine sees what it would see in a task, except that ``asyncio.current_task()`` is not its own: it runs in
whichever callback resumed it. What needs a task (aiohttp's timeouts cancel the task they run in) is run in one of
its own and awaited (``proxyapp.session.kill.forward_kill``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine, Generator
from typing import Any, Final, cast

#: One step of a coroutine: what ``coro.send(None)`` yields, or its second argument when the coroutine returned.
Send = Callable[[Coroutine[Any, Any, Any], object], object]


def python_send(coro: Coroutine[Any, Any, Any], finished: object) -> object:
    """``_send.send`` in Python, for when it is not built: the return told by StopIteration."""
    try:
        return coro.send(None)
    except StopIteration:
        return finished


class PythonDirectWait:
    """``_send.DirectWait`` in Python, for when it is not built: what a coroutine run by a driver awaits for a wire's
    bytes. Awaiting it yields it once to the driver (which knows it as the wait a wire resumes); the next step ends
    the await."""

    __slots__ = ()

    def __await__(self) -> Generator[PythonDirectWait, None, None]:
        yield self


def _load_send() -> tuple[Send, Callable[[], Awaitable[None]]]:
    try:
        from proxyapp import _send
    except ImportError:  # not built (``make build``), or PROXYFLEET_NATIVE=0
        return python_send, PythonDirectWait
    return _send.send, _send.DirectWait


#: How the driver steps its coroutine: the C step (``_send``, no StopIteration per command) when it is built; and what
#: makes the wait a wire keeps for a driver's coroutine (``Wire.direct``): ``_send.DirectWait`` when it is built.
SEND, DIRECT_WAIT = _load_send()
#: What ``SEND`` returns when the coroutine returned.
_FINISHED: Final = object()


class Driver:
    """Runs one coroutine at a time, resumed by the wires it waits on (``wire_ready``) or by the futures it awaits;
    ``done`` is told of its end (None, or the exception it raised) when it ends after having waited."""

    __slots__ = ("coro", "direct", "done", "failure", "loop", "parking", "parks", "step_with")

    def __init__(self, loop: asyncio.AbstractEventLoop, done: Callable[[BaseException | None], None]) -> None:
        self.loop = loop
        self.done = done
        self.coro: Coroutine[Any, Any, None] | None = None  # the coroutine running (None: idle)
        self.direct: object | None = None  # the wait a wire will resume it from (``Wire.fill``)
        self.failure: BaseException | None = None  # what a coroutine that ended in ``run`` raised
        self.step_with = SEND  # kept: a module global not Final (tests choose it) is a dict lookup per step
        self.parking = DIRECT_WAIT()  # what ``park`` hands out: one wait, made once (parks are told apart by number)
        self.parks = 0  # the number of the latest park

    @property
    def busy(self) -> bool:
        """Whether a coroutine is running (started and not ended)."""
        return self.coro is not None

    def run(self, coro: Coroutine[Any, Any, None]) -> bool:
        """Start ``coro`` now; True when it ended before waiting for anything (``failure``: what it raised, if it
        did), False when it waits (``done`` will be told of its end)."""
        self.coro = coro
        return self._step()

    def wire_ready(self) -> None:
        """The wire it waits on has bytes (or is closed): resume it."""
        self.direct = None
        self._resume()

    def park(self) -> tuple[int, Awaitable[None]]:
        """Park the running coroutine: the park's number, and what the coroutine awaits to wait until ``unpark`` is
        called with that number (a pool handing it a connection, ``proxyapp.backends.pool``). No future, no done
        callback and no object made: the wait is the driver's own, and a resume meant for an earlier park finds the
        number changed."""
        self.parks += 1
        wait = self.direct = self.parking
        return self.parks, wait

    def unpark(self, park: int) -> None:
        """Resume the coroutine parked with number ``park`` now, unless it no longer waits on that park (cancelled,
        waiting on something else, or parked again since). Called from a callback of the loop's own, never inside
        another driver's step."""
        if self.direct is self.parking and self.parks == park:
            self.wire_ready()

    def cancel(self) -> None:
        """End the running coroutine as a cancelled task ends (its ``finally`` blocks run); ``done`` is not told."""
        coro = self.coro
        if coro is None:
            return
        self.coro = None
        self.direct = None
        try:
            coro.throw(asyncio.CancelledError())
        except BaseException:  # the coroutine is over, however it ended
            return
        coro.close()

    def _woken(self, future: asyncio.Future[Any]) -> None:
        self._resume()

    def _resume(self) -> None:
        if self.coro is None:  # cancelled while it waited
            return
        if self._step():
            failure = self.failure
            self.failure = None
            self.done(failure)

    def _step(self) -> bool:
        coro = self.coro
        assert coro is not None
        previous = RUNNING.driver
        RUNNING.driver = self
        try:
            yielded = self.step_with(coro, _FINISHED)
        except BaseException as exc:  # handed to ``done`` (or the caller of ``run``), as a task would
            self.coro = None
            self.failure = exc
            return True
        finally:
            RUNNING.driver = previous
        if yielded is _FINISHED:
            self.coro = None
            return True
        if yielded is None:  # a bare yield (``asyncio.sleep(0)``): run again on the loop's next turn
            self.loop.call_soon(self._resume)
            return False
        if yielded is self.direct:  # a wire resumes it
            return False
        future = cast("asyncio.Future[Any]", yielded)
        future._asyncio_future_blocking = False  # as a task does with what its coroutine awaits
        future.add_done_callback(self._woken)
        return False


class Running:
    """Which driver, if any, is running a coroutine step right now (the wires ask, ``Wire.fill``)."""

    __slots__ = ("driver",)

    def __init__(self) -> None:
        self.driver: Driver | None = None


#: The driver stepping its coroutine at this moment, if any (one event loop per process).
RUNNING: Final = Running()
