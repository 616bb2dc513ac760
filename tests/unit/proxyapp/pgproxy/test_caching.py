"""A simple Query's answer kept for the query cache (proxyapp.pgproxy.caching): only a whole answer that leaves no
transaction open, with rows unless empty answers are kept too."""

from __future__ import annotations

from proxyapp.pgproxy.caching import CachedAnswer
from proxyapp.report.stats import GlobalCounters
from proxyapp.rules.cache import QueryCache

KEY = ("app", "db", b"Q\x00\x00\x00\x0dSELECT 1\x00")
ROW, TAG, ERROR = b"D-row", b"C-tag", b"E-error"


def answer(*parts: bytes, empty_too: bool = False) -> CachedAnswer:
    cached = CachedAnswer(KEY, 60_000, empty_too)
    for part in parts:
        cached.add(part[0], part)
    return cached


def test_a_whole_answer_with_rows_is_kept_when_it_leaves_the_session_idle() -> None:
    cache = QueryCache(1 << 20, GlobalCounters(), lambda: 0.0)
    assert answer(b"T-desc", ROW, ROW, TAG).store(cache, b"I")
    assert cache.get(KEY) == b"T-desc" + ROW + ROW + TAG


def test_an_answer_that_leaves_a_transaction_open_or_failed_is_not_kept() -> None:
    cache = QueryCache(1 << 20, GlobalCounters(), lambda: 0.0)
    assert not answer(b"C-BEGIN", ROW, TAG).store(cache, b"T")
    assert not answer(b"C-BEGIN", ROW, TAG).store(cache, b"E")
    assert cache.get(KEY) is None


def test_an_error_or_an_empty_answer_is_not_kept_unless_empty_ones_are_asked_for() -> None:
    cache = QueryCache(1 << 20, GlobalCounters(), lambda: 0.0)
    assert not answer(ROW, ERROR).store(cache, b"I")
    assert not answer(b"T-desc", TAG).store(cache, b"I")
    assert answer(b"T-desc", TAG, empty_too=True).store(cache, b"I")
