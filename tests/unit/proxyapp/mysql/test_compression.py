"""The compressed protocol's framing (proxyapp.mysql.compression): frames round-trip, and a frame that would
inflate past what its header says is refused before it takes the memory (a decompression bomb)."""

from __future__ import annotations

import tracemalloc
import zlib

import pytest

from proxyapp.mysql.compression import Compression
from proxyapp.mysql.packets import ProtocolError, frame


def header(length: int, seq: int, size: int) -> bytes:
    return length.to_bytes(3, "little") + bytes((seq,)) + size.to_bytes(3, "little")


def test_packed_frames_unpack_to_the_same_bytes_split_anywhere() -> None:
    raw = frame(b"q" * 70_000, 0) + frame(b"short", 1)
    packed = Compression(1 << 30).pack(raw)
    receiver = Compression(1 << 30)
    out = b"".join(receiver.unpack(packed[i : i + 999]) for i in range(0, len(packed), 999))
    assert out == raw and not receiver.pending


def test_a_bomb_is_refused_without_inflating_it() -> None:
    bomb = zlib.compress(b"\0" * (64 << 20), 9)  # 64 MiB of zeros in about 64 KB, its header claiming 100 bytes
    tracemalloc.start()
    try:
        with pytest.raises(ProtocolError, match="inflates past the 100 bytes its header says"):
            Compression(1 << 30).unpack(header(len(bomb), 0, 100) + bomb)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 << 20, peak


@pytest.mark.parametrize(
    ("body", "size", "message"),
    [
        (zlib.compress(b"abc"), 5, "holds 3 bytes, its header says 5"),
        (zlib.compress(b"abc")[:-3], 3, "holds"),  # cut short: the stream does not end
        (b"not zlib at all", 9, "does not decompress"),
    ],
)
def test_a_frame_that_does_not_hold_what_its_header_says_is_refused(body: bytes, size: int, message: str) -> None:
    with pytest.raises(ProtocolError, match=message):
        Compression(1 << 30).unpack(header(len(body), 0, size) + body)
