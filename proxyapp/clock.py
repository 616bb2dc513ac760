"""The proxy's clock: what its housekeeping, session limits, pool ages, shunning, the query cache's TTLs, login
throttling and the monitor's latencies count with.

One per process, in seconds on the monotonic clock. A proxy started with ``PROXYFLEET_TEST_CLOCK=1`` in its
environment lets its admin endpoint move the clock forward (``POST /clock``), so that a test can make a minute pass
for the proxy without waiting a minute; the event loop's own timers (``asyncio.sleep``, ``wait_for``) keep real time.
Never set it in production: it lets whoever holds the admin credential end every transaction at once.
"""

from __future__ import annotations

import os
import time
from typing import Final

#: The environment variable that lets the admin endpoint move the clock (tests only).
TEST_CLOCK_ENV = "PROXYFLEET_TEST_CLOCK"
#: ``time.monotonic``, read once: a compiled call through a Final name costs no module or attribute lookup (the clock is
#: read several times per query). Also the real time that waits are measured on (a pool's waiting sessions), and the
#: durations the statistics report (a query's µs, a backend's latency), so that one reading serves both.
MONOTONIC: Final = time.monotonic
#: The most one ``advance`` may move the clock: a day.
MAX_ADVANCE_S = 86_400.0


class Clock:
    """Seconds on the monotonic clock, plus however far a test moved it forward (never back)."""

    def __init__(self) -> None:
        self.offset = 0.0

    def now(self) -> float:
        """The time now, in seconds. A method, not ``__call__``: a compiled caller calls it directly (calling an
        instance goes through Python's call protocol, twice the cost). Where a component wants a plain callable
        (``Callable[[], float]``), it is given ``clock.now``."""
        return MONOTONIC() + self.offset

    def at(self, reading: float) -> float:
        """The time of a ``MONOTONIC`` reading on this clock (a duration's end, read once for both)."""
        return reading + self.offset

    def advance(self, seconds: float) -> None:
        """Move the clock ``seconds`` forward; ValueError unless 0 <= ``seconds`` <= ``MAX_ADVANCE_S``."""
        if not 0 <= seconds <= MAX_ADVANCE_S:
            raise ValueError(f"the clock moves forward by 0 to {MAX_ADVANCE_S:.0f} s, not {seconds!r}")
        self.offset += seconds


def admin_may_advance() -> bool:
    """Whether this process may have its clock moved (``PROXYFLEET_TEST_CLOCK=1``)."""
    return os.environ.get(TEST_CLOCK_ENV) == "1"
