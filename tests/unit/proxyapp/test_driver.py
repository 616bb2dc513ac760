"""The driver: a coroutine run from I/O callbacks, resumed by the wire it waits on with no loop round trip.

Every test runs twice: with the C step and wait (``proxyapp._send``: ``send``, ``DirectWait``) and with their Python
fallbacks (``python_send``, ``PythonDirectWait``).
"""

from __future__ import annotations

import asyncio
import types
from collections.abc import Generator
from typing import Any

import pytest

from proxyapp import driver as driver_module
from proxyapp.driver import RUNNING, Driver, PythonDirectWait, Send, python_send
from proxyapp.mysql import wire as wire_module
from proxyapp.mysql.wire import PeerClosed, Wire
from tests.support.native import built
from tests.support.transport import MemoryTransport


def _c_send() -> types.ModuleType:
    return built("proxyapp._send")


@pytest.fixture(params=["c", "python"])
def kind(request: pytest.FixtureRequest) -> str:
    """Which step and wait this test runs with: the C ones or the Python fallbacks."""
    return str(request.param)


@pytest.fixture(autouse=True)
def send(kind: str, monkeypatch: pytest.MonkeyPatch) -> Send:
    """The step the driver uses in this test, and the wait the wires made in it keep for a driver."""
    chosen: Send = _c_send().send if kind == "c" else python_send
    monkeypatch.setattr(driver_module, "SEND", chosen)
    wait = _c_send().DirectWait if kind == "c" else PythonDirectWait
    monkeypatch.setattr(driver_module, "DIRECT_WAIT", wait)
    monkeypatch.setattr(wire_module, "DIRECT_WAIT", wait)
    return chosen


def _wire() -> Wire:
    return Wire(MemoryTransport())  # type: ignore[arg-type]


def _arrive(wire: Wire, data: bytes) -> None:
    """What ``WireProtocol.data_received`` does with bytes."""
    wire.buf += data
    wire.wake()


@types.coroutine
def _bare_yield() -> Generator[None, None, None]:
    """Give the loop a turn, as ``asyncio.sleep(0)`` does: a bare yield."""
    yield


def _packet(payload: bytes, seq: int = 0) -> bytes:
    return len(payload).to_bytes(3, "little") + bytes((seq,)) + payload


class _Ends:
    """What the driver's ``done`` was told."""

    def __init__(self) -> None:
        self.told: list[BaseException | None] = []

    def __call__(self, failure: BaseException | None) -> None:
        self.told.append(failure)


def test_a_coroutine_that_never_waits_ends_in_run() -> None:
    async def main() -> None:
        ends = _Ends()
        driver = Driver(asyncio.get_running_loop(), ends)
        seen: list[int] = []

        async def command() -> None:
            seen.append(1)

        assert driver.run(command()) is True
        assert seen == [1] and not driver.busy and driver.failure is None and ends.told == []

        async def failing() -> None:
            raise ValueError("bad")

        assert driver.run(failing()) is True
        assert isinstance(driver.failure, ValueError) and not driver.busy and ends.told == []
        assert RUNNING.driver is None

    asyncio.run(main())


def test_a_wire_resumes_its_reader_from_its_own_callback() -> None:
    """The bytes are read before ``wake`` returns: no task, no turn of the loop in between."""

    async def main() -> None:
        ends = _Ends()
        driver = Driver(asyncio.get_running_loop(), ends)
        wire = _wire()
        payloads: list[bytes] = []

        async def command() -> None:
            payloads.append(await wire.read_payload())
            payloads.append(await wire.read_payload())

        assert driver.run(command()) is False
        assert driver.busy and wire.resumer is driver
        _arrive(wire, _packet(b"one")[:3])  # half a header: it reads nothing, waits again
        assert payloads == [] and wire.resumer is driver
        _arrive(wire, _packet(b"one")[3:] + _packet(b"two", 1)[:5])
        assert payloads == [b"one"] and ends.told == []
        _arrive(wire, _packet(b"two", 1)[5:])
        assert payloads == [b"one", b"two"]
        assert ends.told == [None] and not driver.busy and RUNNING.driver is None

    asyncio.run(main())


def test_other_awaits_resume_it_through_the_loop_and_failures_reach_done() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        ended: asyncio.Future[BaseException | None] = loop.create_future()
        driver = Driver(loop, ended.set_result)
        past_the_yield: asyncio.Future[None] = loop.create_future()
        future: asyncio.Future[int] = loop.create_future()
        got: list[Any] = []

        async def command() -> None:
            await _bare_yield()  # what asyncio.sleep(0) does: resumed on the loop's next turn
            past_the_yield.set_result(None)
            got.append(await future)
            raise KeyError("late")

        assert driver.run(command()) is False
        assert not past_the_yield.done()  # ``run`` returned at the yield
        await past_the_yield
        assert driver.busy and got == []
        future.set_result(7)
        failure = await ended
        assert got == [7] and isinstance(failure, KeyError) and not driver.busy

    asyncio.run(main())


def test_a_parked_coroutine_resumes_only_from_its_own_wait() -> None:
    async def main() -> None:
        ends = _Ends()
        driver = Driver(asyncio.get_running_loop(), ends)
        parked: list[int] = []
        resumed: list[int] = []

        async def command() -> None:
            for i in range(2):
                number, wait = driver.park()
                parked.append(number)
                assert wait is driver.parking  # the driver's one wait, not a new object
                await wait
                resumed.append(i)

        assert driver.run(command()) is False
        first = parked[0]
        assert driver.direct is driver.parking and resumed == []
        driver.unpark(first + 1)  # a park that never was
        assert resumed == []
        driver.unpark(first)
        assert resumed == [0] and parked == [first, first + 1]  # resumed at once, and parked again with a new number
        driver.unpark(first)  # a stale resume: the coroutine no longer waits in that park
        assert resumed == [0] and driver.busy
        driver.cancel()
        driver.unpark(parked[1])  # cancelled: the resume finds nothing parked
        assert resumed == [0] and not driver.busy and ends.told == []

    asyncio.run(main())


def test_a_closed_wire_fails_the_read_it_resumes() -> None:
    async def main() -> None:
        ends = _Ends()
        driver = Driver(asyncio.get_running_loop(), ends)
        wire = _wire()

        async def command() -> None:
            await wire.read_payload()

        driver.run(command())
        wire.closed = "connection closed by peer"
        wire.wake()
        assert len(ends.told) == 1 and isinstance(ends.told[0], PeerClosed)

    asyncio.run(main())


def test_cancel_runs_the_coroutines_cleanup_and_frees_the_wire() -> None:
    """A cancelled coroutine's ``finally`` runs, ``done`` is not told, and the wire's next bytes go to
    ``on_arrival`` (the wait left behind resumes nothing)."""

    async def main() -> None:
        ends = _Ends()
        driver = Driver(asyncio.get_running_loop(), ends)
        wire = _wire()
        cleaned: list[str] = []
        arrivals: list[int] = []
        wire.on_arrival = lambda: arrivals.append(len(wire.buf))

        async def command() -> None:
            try:
                await wire.read_payload()
            finally:
                cleaned.append("finally")

        driver.run(command())
        driver.cancel()
        assert cleaned == ["finally"] and not driver.busy
        _arrive(wire, _packet(b"late"))
        assert arrivals == [8] and ends.told == [] and wire.resumer is None

    asyncio.run(main())


def test_a_task_reading_a_wire_is_woken_through_the_loop_as_before() -> None:
    async def main() -> None:
        wire = _wire()
        loop = asyncio.get_running_loop()
        reading: asyncio.Future[None] = loop.create_future()

        async def read() -> bytes:
            reading.set_result(None)  # its task goes on to wait for the wire before the test runs again
            return await wire.read_payload()

        reader = loop.create_task(read())
        await reading
        assert wire.resumer is None and wire.waiter is not None
        _arrive(wire, _packet(b"x"))
        assert not reader.done()  # the task runs on the loop's next turn
        assert await reader == b"x"
        with pytest.raises(PeerClosed):
            wire.closed = "gone"
            await wire.read_payload()

    asyncio.run(main())


def test_a_step_tells_a_yield_a_return_and_a_failure_apart(send: Send) -> None:
    """A yielded value comes back as it is (None too), a return as the marker (its value dropped, no StopIteration
    raised), an exception as itself."""
    finished = object()
    marker = object()

    @types.coroutine
    def yields(value: object) -> Generator[object, None, None]:
        yield value

    async def twice() -> int:
        await yields(marker)
        await yields(None)
        return 5

    coro = twice()
    assert send(coro, finished) is marker
    assert send(coro, finished) is None
    assert send(coro, finished) is finished

    async def failing() -> None:
        await yields(marker)
        raise KeyError("late")

    coro2 = failing()
    assert send(coro2, finished) is marker
    with pytest.raises(KeyError):
        send(coro2, finished)
    with pytest.raises(RuntimeError):  # a finished coroutine cannot be stepped again
        send(coro, finished)


def test_a_direct_wait_yields_itself_once_then_ends(kind: str) -> None:
    """Awaiting a wire's wait yields the wait itself (the driver knows it by that), the next step ends the await with
    None; the same wait serves every later await; an exception thrown in is raised where the coroutine awaits."""
    wait = _c_send().DirectWait() if kind == "c" else PythonDirectWait()
    finished = object()

    async def two_wires() -> tuple[Wire, Wire]:
        return _wire(), _wire()

    first, second = asyncio.run(two_wires())
    assert first.direct is not second.direct  # one per wire
    assert type(first.direct) is type(wait)

    async def twice() -> list[object]:
        return [await wait, await wait]

    coro = twice()
    assert python_send(coro, finished) is wait
    assert python_send(coro, finished) is wait  # the first await ended, the second yields
    with pytest.raises(StopIteration) as returned:
        coro.send(None)
    assert returned.value.value == [None, None]

    async def cancelled() -> str:
        try:
            await wait
        except asyncio.CancelledError:
            return "cancelled where it awaited"
        return "not cancelled"

    coro2 = cancelled()
    assert python_send(coro2, finished) is wait
    with pytest.raises(StopIteration) as returned:
        coro2.throw(asyncio.CancelledError())
    assert returned.value.value == "cancelled where it awaited"
    coro3 = twice()  # a wait left mid-await by a cancelled coroutine serves the next one from the start
    assert python_send(coro3, finished) is wait
    coro3.close()
