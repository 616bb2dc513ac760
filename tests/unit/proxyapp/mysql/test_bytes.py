"""The wire's byte work: the C ``_bytes`` and its Python twins (``packets.python_cut``, ``python_compact``,
``python_header``, ``python_frame_one``, ``python_stamp``) do the same to every buffer and payload, and the C
compaction keeps a small buffer's allocation."""

from __future__ import annotations

import random
from collections.abc import Callable
from types import ModuleType

import pytest

from proxyapp.mysql.packets import (
    python_compact,
    python_cut,
    python_frame_one,
    python_header,
    python_stamp,
    python_text,
)
from tests.support.native import built


@pytest.fixture(scope="module")
def buffer() -> ModuleType:
    """The built C byte work."""
    return built("proxyapp.mysql._bytes")


def _outcome(call: Callable[..., object], *args: object) -> object:
    """What a call returned, or the type of what it raised."""
    try:
        return call(*args)
    except (ValueError, TypeError, BufferError, OverflowError) as exc:
        return type(exc)


def test_cut_and_compact_agree_with_python(buffer: ModuleType) -> None:
    """2,000 random buffers, spans and drops (in range and out of it): the same bytes, the same buffer, the same
    errors."""
    rng = random.Random(17)
    for _ in range(2000):
        data = bytes(rng.randrange(256) for _ in range(rng.choice((0, 1, 5, 100, 3000))))
        start = rng.randrange(-2, len(data) + 3)
        end = rng.randrange(-2, len(data) + 3)
        assert _outcome(buffer.cut, bytearray(data), start, end) == _outcome(python_cut, bytearray(data), start, end)
        mine, theirs = bytearray(data), bytearray(data)
        assert _outcome(buffer.compact, mine, start) == _outcome(python_compact, theirs, start)
        assert mine == theirs
        mine += b"more"  # the buffer stays usable: appending after the drop
        theirs += b"more"
        assert mine == theirs
        assert _outcome(buffer.header, bytearray(data), start) == _outcome(python_header, bytearray(data), start)
        seq = rng.randrange(-300, 600)
        assert _outcome(buffer.frame, data, seq) == _outcome(python_frame_one, data, seq)


def test_header_and_frame_read_and_write_the_same_packet(buffer: ModuleType) -> None:
    """A framed payload's header reads back as its length and sequence id (the low byte), from any position; a
    header not all in is -1; a payload of 16 MiB - 1 bytes does not fit one packet."""
    for length, seq in ((0, 0), (1, 255), (250, 256), (70_000, 3), (0xFFFFFE, 7)):
        packet = buffer.frame(bytes(length), seq)
        assert len(packet) == length + 4 and packet == python_frame_one(bytes(length), seq)
        buf = bytearray(b"xy") + packet
        assert buffer.header(buf, 2) == length | (seq & 0xFF) << 24 == python_header(buf, 2)
        assert buffer.header(bytearray(packet[:3]), 0) == -1 == python_header(bytearray(packet[:3]), 0)
    assert buffer.frame(bytearray(b"abc"), 1) == b"\x03\x00\x00\x01abc"
    with pytest.raises(ValueError):
        buffer.frame(bytes(0xFFFFFF), 0)
    with pytest.raises(ValueError):
        python_frame_one(bytes(0xFFFFFF), 0)


def test_compact_after_the_front_moved(buffer: ModuleType) -> None:
    """A buffer whose front Python already dropped (its logical start is past its memory's start) compacts right."""
    buf = bytearray(range(200))
    del buf[:50]  # CPython moves the logical start instead of the bytes
    buffer.compact(buf, 30)
    assert buf == bytearray(range(80, 200))
    buf += b"\x01\x02"
    assert bytes(buf[-3:]) == bytes((199, 1, 2))
    assert buffer.cut(buf, 0, 3) == bytes((80, 81, 82))


def test_compact_keeps_a_small_allocation_and_gives_back_a_large_one(buffer: ModuleType) -> None:
    """A read buffer emptied each query keeps its memory (no allocation per query); one grown past 64 KiB by a
    large packet shrinks when mostly empty, as Python's ``del`` would shrink it."""
    small = bytearray(4000)
    allocated = small.__alloc__()
    buffer.compact(small, 4000)
    assert len(small) == 0 and small.__alloc__() == allocated
    small += bytes(3000)
    assert small.__alloc__() == allocated
    large = bytearray(1 << 20)
    buffer.compact(large, (1 << 20) - 10)
    assert len(large) == 10 and large.__alloc__() < 1000


def test_stamp_agrees_with_python(buffer: ModuleType) -> None:
    """3,000 random packets, statement ids (up to 2**32 and past it, negative), id and flag positions (in range and
    out of it), with and without parameter types: the same bytes or the same error."""
    rng = random.Random(29)
    for _ in range(3000):
        data = bytes(rng.randrange(256) for _ in range(rng.choice((0, 3, 4, 5, 10, 14, 40))))
        at = rng.randrange(-2, len(data) + 2)
        flag_at = rng.randrange(-2, len(data) + 3)
        stmt_id = rng.choice((0, 1, 0xFFFFFFFF, 1 << 32, -1, rng.randrange(1 << 32)))
        types = bytes(rng.randrange(256) for _ in range(rng.choice((0, 0, 2, 6))))
        args = (data, at, stmt_id, flag_at, types)
        assert _outcome(buffer.stamp, *args) == _outcome(python_stamp, *args)


def test_stamp_addresses_an_execute_and_binds_its_types(buffer: ModuleType) -> None:
    """An execute of two parameters sent without its types (flag 0 after a one-byte null bitmap): the id is set and
    the flag becomes 1 followed by the types; without types only the id changes."""
    execute = b"\x17" + (7).to_bytes(4, "little") + b"\x00\x01\x00\x00\x00" + b"\x00" + b"\x00" + b"v1v2"
    types = b"\x08\x00\xfe\x00"
    for stamp in (buffer.stamp, python_stamp):
        assert stamp(execute, 1, 0x01020304, 11, types) == (
            b"\x17\x04\x03\x02\x01\x00\x01\x00\x00\x00\x00\x01" + types + b"v1v2"
        )
        assert stamp(execute, 1, 9, 0, b"") == b"\x17\x09\x00\x00\x00" + execute[5:]
    with pytest.raises(TypeError):
        buffer.stamp(bytearray(execute), 1, 9, 0, b"")
    with pytest.raises(TypeError):
        buffer.stamp(execute, 1, 9, 0)


def test_text_agrees_with_python(buffer: ModuleType) -> None:
    """3,000 random payloads (valid UTF-8 and not, ASCII and not) from every start, in range and out of it: the same
    text (surrogates for the bytes that are no character) or the same error."""
    rng = random.Random(31)
    pieces = (b"SELECT ", b"\xc3\xa9", b"\xe5\x90\x8d", b"\xff", b"\xc3", b"\x00", b"1", b"\x80\x80")
    for _ in range(3000):
        data = b"\x03" + b"".join(rng.choice(pieces) for _ in range(rng.randint(0, 8)))
        start = rng.randrange(-1, len(data) + 2)
        assert _outcome(buffer.text, data, start) == _outcome(python_text, data, start)
    assert buffer.text(b"\x03SELECT \xc3\xa9\xff", 1) == "SELECT \xe9\udcff"
    with pytest.raises(TypeError):
        buffer.text(bytearray(b"\x03SELECT 1"), 1)


def test_types_and_exports_are_refused(buffer: ModuleType) -> None:
    """Only a bytearray is read; one with a live memoryview is not resized (as ``del`` refuses it)."""
    with pytest.raises(TypeError):
        buffer.cut(b"bytes", 0, 1)
    with pytest.raises(TypeError):
        buffer.compact(b"bytes", 0)
    with pytest.raises(TypeError):
        buffer.header(b"bytes", 0)
    with pytest.raises(TypeError):
        buffer.frame("text", 0)
    buf = bytearray(b"abcdef")
    view = memoryview(buf)
    with pytest.raises(BufferError):
        buffer.compact(buf, 2)
    with pytest.raises(BufferError):
        python_compact(buf, 2)
    view.release()
    buffer.compact(buf, 2)
    assert buf == b"cdef"
