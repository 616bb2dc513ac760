"""The proxy's clock (``proxyapp.clock``): one monotonic reading serves a duration and the proxy's time."""

from __future__ import annotations

import pytest

from proxyapp.clock import MAX_ADVANCE_S, MONOTONIC, Clock


def test_a_reading_is_placed_on_the_clock_with_its_advance() -> None:
    clock = Clock()
    before = clock.now()
    reading = MONOTONIC()
    after = clock.now()
    assert before <= clock.at(reading) <= after
    clock.advance(90.0)
    assert clock.at(reading) == reading + 90.0  # a test's minute and a half, added to the reading
    assert clock.now() >= clock.at(reading)


@pytest.mark.parametrize("seconds", [-1.0, MAX_ADVANCE_S + 1])
def test_the_clock_never_moves_back_nor_too_far(seconds: float) -> None:
    clock = Clock()
    with pytest.raises(ValueError, match="moves forward"):
        clock.advance(seconds)
    assert clock.offset == 0.0
