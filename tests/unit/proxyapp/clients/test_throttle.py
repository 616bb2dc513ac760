"""Login throttling on a clock the test holds."""

from __future__ import annotations

import pytest

from proxyapp.clients import throttle
from proxyapp.clients.throttle import AuthThrottle

A, B = "10.0.0.1", "10.0.0.2"


def test_an_address_is_blocked_after_its_failures_in_a_row_until_the_block_ends() -> None:
    t = AuthThrottle(max_errors=3, block_ms=60_000)
    assert [t.failed(A, 100.0) for _ in range(3)] == [False, False, True]
    assert t.blocked(A, 100.0) and t.blocked(A, 159.9)
    assert not t.blocked(B, 100.0)  # another address is not
    assert not t.blocked(A, 160.0)  # the block ended, and its count with it
    assert [t.failed(A, 161.0) for _ in range(3)] == [False, False, True]


def test_a_success_starts_the_count_again_and_zero_never_blocks() -> None:
    t = AuthThrottle(max_errors=3)
    t.failed(A, 1.0)
    t.failed(A, 2.0)
    t.succeeded(A)
    assert [t.failed(A, 3.0) for _ in range(2)] == [False, False]
    assert not t.blocked(A, 3.0)
    t.configure(0, 60_000)
    assert not any(t.failed(B, 4.0) for _ in range(100)) and not t.blocked(B, 4.0)


def test_the_tables_stay_bounded_under_a_flood_of_addresses(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(throttle, "MAX_ADDRESSES", 100)
    t = AuthThrottle(max_errors=1, block_ms=1_000)
    for i in range(1_000):
        t.failed(f"10.1.{i // 256}.{i % 256}", float(i))
    assert t.tracked() <= 100 and t.blocked_count() <= 100
    assert t.blocked("10.1.3.231", 999.5)  # the latest is still blocked
