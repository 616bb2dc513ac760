"""A proxy process collects cyclic garbage less often than Python's default, and never walks its startup objects."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from proxyapp.__main__ import YOUNG_COLLECTION_THRESHOLD, collect_cycles_less_often


@pytest.fixture
def restored_gc() -> Iterator[None]:
    """Give the test process its collector's settings back."""
    thresholds = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*thresholds)


@pytest.mark.usefixtures("restored_gc")
def test_young_objects_are_collected_less_often_and_startup_objects_are_frozen() -> None:
    _, middle, old = gc.get_threshold()
    collect_cycles_less_often()
    assert gc.get_threshold() == (YOUNG_COLLECTION_THRESHOLD, middle, old)
    assert YOUNG_COLLECTION_THRESHOLD > 700  # Python's default
    assert gc.get_freeze_count() > 0
    assert gc.isenabled()  # cycles are still collected


@pytest.mark.usefixtures("restored_gc")
def test_a_cycle_made_after_the_tuning_is_still_collected() -> None:
    collect_cycles_less_often()

    class Node:
        def __init__(self) -> None:
            self.other: Node | None = None

    first, second = Node(), Node()
    first.other, second.other = second, first
    gone = weakref.ref(first)
    del first, second
    gc.collect()
    assert gone() is None
