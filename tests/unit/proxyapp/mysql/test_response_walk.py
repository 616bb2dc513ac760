"""Reading a command's response: the C walk (``_walk``) and the Python reader say the same of every response.

``read_response`` hands a response that is all in the buffer to the C walk and everything else to the Python reader.
Each response here, well-formed or broken, is read three ways: with the C walk, arriving all at once; with the Python
reader alone (``Wire.walk`` off), all at once; and with the C walk, arriving a few bytes at a time (so the Python reader
takes over mid-response). All three must return the same response, relay the same bytes and leave the wire at the
same place, or raise the same error; the expected counts are also checked against the model that built the bytes.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Iterator
from dataclasses import dataclass
from types import ModuleType

import pytest

from proxyapp.driver import Driver
from proxyapp.mysql import wire
from proxyapp.mysql.constants import MAX_PACKET
from proxyapp.mysql.packets import ProtocolError
from proxyapp.mysql.wire import STATUS_UNKNOWN, Relay, Response, Wire, read_response
from tests.support.native import built
from tests.support.transport import MemoryTransport

MORE = 0x0008
CURSOR = 0x0040
AUTOCOMMIT = 0x0002


@pytest.fixture(scope="module")
def walk() -> ModuleType:
    """The built C walk."""
    return built("proxyapp.mysql._walk")


class _Packets:
    """Frames payloads with running sequence ids."""

    def __init__(self) -> None:
        self.out = bytearray()
        self.seq = 1

    def add(self, payload: bytes) -> _Packets:
        while True:
            part = payload[:MAX_PACKET]
            self.out += len(part).to_bytes(3, "little") + bytes((self.seq & 0xFF,)) + part
            self.seq += 1
            payload = payload[MAX_PACKET:]
            if len(part) < MAX_PACKET:
                return self


def _lenenc(n: int) -> bytes:
    if n < 251:
        return bytes((n,))
    if n < 1 << 16:
        return b"\xfc" + n.to_bytes(2, "little")
    if n < 1 << 24:
        return b"\xfd" + n.to_bytes(3, "little")
    return b"\xfe" + n.to_bytes(8, "little")


def _ok(affected: int = 0, insert_id: int = 0, status: int = AUTOCOMMIT, warnings: int = 0) -> bytes:
    return (
        b"\x00" + _lenenc(affected) + _lenenc(insert_id) + status.to_bytes(2, "little") + warnings.to_bytes(2, "little")
    )


def _eof(status: int = AUTOCOMMIT, warnings: int = 0) -> bytes:
    return b"\xfe" + warnings.to_bytes(2, "little") + status.to_bytes(2, "little")


def _err(code: int = 1146, message: bytes = b"Table 'x' doesn't exist") -> bytes:
    return b"\xff" + code.to_bytes(2, "little") + b"#42S02" + message


@dataclass
class Expected:
    """What the model that built a response says it holds."""

    rows: int = 0
    result_sets: int = 0
    affected: int = 0
    status: int = STATUS_UNKNOWN
    error: int | None = None


def _result_set(packets: _Packets, rows: list[bytes], status: int, columns: int = 1, tail: bytes | None = None) -> None:
    packets.add(_lenenc(columns))
    for i in range(columns):
        packets.add(b"\x03def\x00\x00\x00" + _lenenc(len(f"c{i}")) + f"c{i}".encode() + b"\x00\x0c" + bytes(13))
    packets.add(_eof(status & ~MORE))
    for row in rows:
        packets.add(row)
    packets.add(tail if tail is not None else _eof(status))


def _random_response(rng: random.Random, binary: bool) -> tuple[bytes, Expected]:
    """A response of one to four results (OKs and result sets), the last maybe an error."""
    packets = _Packets()
    expected = Expected()
    results = rng.randint(1, 4)
    for index in range(results):
        last = index == results - 1
        status = AUTOCOMMIT | (0 if last else MORE) | rng.choice((0, 0x0001))  # maybe IN_TRANS
        what = rng.random()
        if last and what < 0.15:
            code = rng.randint(1000, 2000)
            packets.add(_err(code, b"x" * rng.randint(0, 40)))
            expected.error = code
            expected.status = STATUS_UNKNOWN
            return bytes(packets.out), expected
        if what < 0.45:
            affected = rng.choice((0, 1, 250, 251, 70000, 1 << 30))
            packets.add(_ok(affected, rng.choice((0, 1, 7, 1 << 20)), status, rng.randint(0, 3)))
            expected.affected += affected
        else:
            rows = []
            for _ in range(rng.randint(0, 20)):
                kind = rng.random()
                if kind < 0.1:
                    rows.append(b"")  # a zero-length row
                elif kind < 0.2 and binary:
                    rows.append(b"\xfe" + bytes(rng.randint(8, 30)))  # 0xFE first, but long: a row, not an EOF
                else:
                    rows.append(bytes(rng.randint(1, 250)) + b"\x01v")
            error_mid = last and rng.random() < 0.1
            columns = rng.choice((1, 2, 5, 251 if rng.random() < 0.05 else 3))
            tail = _err() if error_mid else None
            if tail is None and not status & MORE and rng.random() < 0.2:  # an EOF cut short: fewer flags read
                tail = _eof(status, rng.randint(1, 9))[: rng.choice((1, 3))]
                status = 0
            _result_set(packets, rows, status, columns, tail)
            expected.rows += len(rows)
            expected.result_sets += 1
            if error_mid:
                expected.status = STATUS_UNKNOWN
                expected.error = 1146
                return bytes(packets.out), expected
        expected.status = status
    return bytes(packets.out), expected


@dataclass
class Read:
    """How one reading went: the response (or the error raised), the bytes relayed, where the wire stopped."""

    response: tuple[object, ...] | None
    raised: str | None
    relayed: bytes
    pos: int
    seq: int


def _summary(response: Response) -> tuple[object, ...]:
    error = response.error
    return (
        response.status,
        (error.code, error.sqlstate, error.message) if error is not None else None,
        response.affected_rows,
        response.last_insert_id,
        response.warnings,
        response.rows,
        response.result_sets,
        response.cursor,
    )


def _read(data: bytes, *, use_walk: bool, chunk: int | None, binary: bool) -> Read:
    """Read ``data`` (followed by the peer's close) as one response."""

    async def go() -> Read:
        backend = Wire(MemoryTransport())  # type: ignore[arg-type]
        if not use_walk:
            backend.walk = None  # the Python reader alone
        client_transport = MemoryTransport()
        client = Wire(client_transport)  # type: ignore[arg-type]
        responses: list[Response] = []
        ends: list[BaseException | None] = []

        async def reading() -> None:
            responses.append(await read_response(backend, Relay(client), binary=binary))

        # Read on a driver, as a session does: each piece's arrival resumes the reader before ``wake`` returns.
        driver = Driver(asyncio.get_running_loop(), ends.append)
        if chunk is None:
            backend.buf += data
            backend.closed = "connection closed by peer"
        if driver.run(reading()):
            ends.append(driver.failure)
        if chunk is not None:
            for at in range(0, len(data), chunk):
                backend.buf += data[at : at + chunk]
                backend.wake()
            backend.closed = "connection closed by peer"
            backend.wake()
        assert len(ends) == 1 and not driver.busy  # the reader ended: the response was read, or it failed
        failure = ends[0]
        if failure is not None:
            if not isinstance(failure, (ProtocolError, ConnectionError)):
                raise failure
            return Read(None, f"{type(failure).__name__}: {failure}", bytes(client_transport.written), -1, -1)
        return Read(_summary(responses[0]), None, bytes(client_transport.written), backend.pos, backend.seq)

    return asyncio.run(go())


def _three_ways(data: bytes, binary: bool) -> Read:
    """Read ``data`` the three ways; they must agree. Returns the C walk's reading."""
    walked = _read(data, use_walk=True, chunk=None, binary=binary)
    python = _read(data, use_walk=False, chunk=None, binary=binary)
    trickled = _read(data, use_walk=True, chunk=max(7, len(data) // 5), binary=binary)
    assert walked == python
    assert trickled.response == walked.response
    assert trickled.raised == walked.raised
    if walked.raised is None:
        assert trickled.relayed == walked.relayed
        assert (trickled.pos, trickled.seq) == (walked.pos, walked.seq)
    return walked


def _responses(seed: int, count: int) -> Iterator[tuple[bytes, Expected, bool]]:
    rng = random.Random(seed)
    for _ in range(count):
        binary = rng.random() < 0.5
        data, expected = _random_response(rng, binary)
        yield data, expected, binary


def test_random_responses_read_the_same_by_the_c_walk_and_the_python_reader(walk: ModuleType) -> None:
    """300 random responses (OKs, result sets with empty, long and 0xFE-led rows, several results, errors at the end
    or mid-rows): the same reading three ways, matching what the model built; the whole response is relayed."""
    assert wire.WALK is walk.walk
    for data, expected, binary in _responses(seed=17, count=300):
        read = _three_ways(data, binary)
        assert read.raised is None
        assert read.response is not None
        status, error, affected, _, _, rows, result_sets, cursor = read.response
        assert (status, rows, result_sets, affected, cursor) == (
            expected.status,
            expected.rows,
            expected.result_sets,
            expected.affected,
            False,
        )
        assert (error is not None) == (expected.error is not None)
        assert read.relayed == data
        assert read.pos == len(data)


def test_a_response_followed_by_the_next_stops_at_its_own_end(walk: ModuleType) -> None:
    """Bytes after the response (a pipelined command's answer) stay in the buffer, unrelayed."""
    first = _Packets().add(_ok(3, 0, AUTOCOMMIT)).out
    data = bytes(first) + bytes(_Packets().add(_ok(1)).out)
    read = _three_ways(data, False)
    assert read.response is not None and read.response[2] == 3
    assert read.relayed == first
    assert read.pos == len(first)
    assert walk.walk(bytearray(data), 0, False, 1 << 20)[0] == len(first)


def test_broken_responses_fail_alike(walk: ModuleType) -> None:
    """Truncated responses, and every response with a byte changed, read the same three ways: the same error or the
    same response."""
    rng = random.Random(5)
    broken = 0
    for data, _, binary in _responses(seed=23, count=120):
        cut = data[: rng.randrange(len(data))]
        mutated = bytearray(data)
        mutated[rng.randrange(len(data))] = rng.choice((0x00, 0xFB, 0xFC, 0xFE, 0xFF, rng.randrange(256)))
        for sample in (cut, bytes(mutated)):
            read = _three_ways(sample, binary)
            broken += read.raised is not None
    assert broken >= 120  # every truncation raises (the peer closed mid-response), and some mutations


@pytest.mark.parametrize(
    ("name", "payloads", "binary", "raised"),
    [
        ("no columns", [b"\x00\x00"], False, "ProtocolError: result set with no columns"),
        ("no EOF after the definitions", [b"\x01", b"\x03def", b"\x01row"], False, "ProtocolError: expected EOF"),
        ("OK without its flags", [b"\x00\xfc\x10\x00\xfc\x01\x00"], False, None),
        ("NULL count", [b"\xfb\x00\x00\x00\x00\x00\x00"], True, "ProtocolError: result set with no columns"),
        ("one-byte ERR", [b"\xff"], False, None),
        ("OK with an invalid length prefix", [b"\x00\xff\x00\x00\x02\x00\x00\x00"], False, "ProtocolError: invalid"),
    ],
)
def test_malformed_responses_are_left_to_the_python_reader(
    walk: ModuleType,
    name: str,
    payloads: list[bytes],
    binary: bool,
    raised: str | None,
) -> None:
    """What the Python reader refuses (or reads in its own way), the C walk does not answer."""
    packets = _Packets()
    for payload in payloads:
        packets.add(payload)
    data = bytes(packets.out)
    assert walk.walk(bytearray(data), 0, binary, 1 << 20) is None or raised is None, name
    read = _three_ways(data, binary)
    if raised is not None:
        assert read.raised is not None and read.raised.startswith(raised), read.raised


def test_a_cursor_ends_the_response_after_the_definitions(walk: ModuleType) -> None:
    """CURSOR_EXISTS on the EOF after the definitions: no rows follow, the response is over."""
    packets = _Packets().add(b"\x02")
    packets.add(b"\x03def").add(b"\x03def").add(_eof(AUTOCOMMIT | CURSOR))
    read = _three_ways(bytes(packets.out), True)
    assert read.response is not None
    assert read.response[0] == AUTOCOMMIT | CURSOR
    assert read.response[7] is True
    assert read.response[6] == 1


def test_local_infile_and_long_responses_go_to_the_python_reader(walk: ModuleType) -> None:
    """A LOCAL INFILE request (text protocol) and a response over the limit are not walked in C."""
    infile = bytes(_Packets().add(b"\xfbdata.csv").out)
    assert walk.walk(bytearray(infile), 0, False, 1 << 20) is None
    long_rows = _Packets()
    _result_set(long_rows, [b"\x05hello"] * 1000, AUTOCOMMIT)
    data = bytearray(long_rows.out)
    assert walk.walk(data, 0, False, len(data) - 1) is None
    walked = walk.walk(data, 0, False, len(data))
    assert walked is not None and walked[0] == len(data) and walked[6] == 1000


def test_sixteen_mebibyte_rows_continue_in_the_next_packet(walk: ModuleType) -> None:
    """A row of MAX_PACKET bytes or more spans packets: counted once, in C (given the limit) and in Python."""
    packets = _Packets()
    _result_set(packets, [b"\xfe" + bytes(MAX_PACKET - 1), b"\x01a", b"\x01" + bytes(MAX_PACKET + 5)], AUTOCOMMIT)
    data = bytes(packets.out)
    walked = walk.walk(bytearray(data), 0, False, len(data))
    assert walked is not None
    assert (walked[0], walked[1], walked[6]) == (len(data), (packets.seq - 1) & 0xFF, 3)
    read = _read(data, use_walk=False, chunk=None, binary=False)
    assert read.response is not None and read.response[5] == 3
    assert read.pos == len(data)


def test_walk_refuses_positions_outside_the_buffer(walk: ModuleType) -> None:
    """A bad position is the caller's bug: ValueError, not a read outside the buffer."""
    with pytest.raises(ValueError):
        walk.walk(bytearray(b"\x01\x00\x00\x01\x00"), 6, False, 100)
    with pytest.raises(ValueError):
        walk.walk(bytearray(b""), -1, False, 100)
