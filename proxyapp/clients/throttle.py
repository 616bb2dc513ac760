"""Login throttling: a client address that fails to log in too often in a row is refused for a while.

As MariaDB's ``max_connect_errors`` and MaxScale's ``max_auth_errors_until_block``: after
``mysql-max_auth_errors_until_block`` failed logins from one address with no success between them, new
connections from it get ER_HOST_IS_BLOCKED (1129) before any authentication, for ``mysql-auth_block_time_ms``; a
success clears the count. Counted per worker process (with N workers an address gets up to N times the failures
before every worker blocks it). The decisions take the time as an argument, so tests hold the clock.
"""

from __future__ import annotations

from collections import OrderedDict

#: Addresses remembered at most (the least recently failed are forgotten first): a flood of addresses cannot
#: grow the table without bound.
MAX_ADDRESSES = 65_536


class AuthThrottle:
    """Failed logins by client address, and which addresses are blocked until when."""

    def __init__(self, max_errors: int = 10, block_ms: int = 60_000) -> None:
        self.max_errors = max_errors  # 0: never block
        self.block_ms = block_ms
        self._failures: OrderedDict[str, int] = OrderedDict()
        self._blocked: dict[str, float] = {}  # address -> time the block ends

    def configure(self, max_errors: int, block_ms: int) -> None:
        """New limits (a reload); what was counted stays."""
        self.max_errors = max_errors
        self.block_ms = block_ms

    def blocked(self, addr: str, now: float) -> bool:
        """Whether ``addr`` is refused at time ``now`` (a block that ended is forgotten, with its count)."""
        until = self._blocked.get(addr)
        if until is None:
            return False
        if now < until:
            return True
        del self._blocked[addr]
        self._failures.pop(addr, None)
        return False

    def failed(self, addr: str, now: float) -> bool:
        """Count a failed login from ``addr``; True when this one blocks it."""
        if self.max_errors <= 0:
            return False
        count = self._failures.pop(addr, 0) + 1
        self._failures[addr] = count
        if len(self._failures) > MAX_ADDRESSES:
            self._failures.popitem(last=False)
        if count >= self.max_errors:
            self._blocked[addr] = now + self.block_ms / 1000
            if len(self._blocked) > MAX_ADDRESSES:  # forget ended blocks, then the oldest
                for ended in [a for a, until in self._blocked.items() if until <= now]:
                    del self._blocked[ended]
                while len(self._blocked) > MAX_ADDRESSES:
                    del self._blocked[next(iter(self._blocked))]
            return True
        return False

    def succeeded(self, addr: str) -> None:
        """A login from ``addr`` succeeded: its count starts again."""
        if self._failures:
            self._failures.pop(addr, None)

    def tracked(self) -> int:
        """Addresses with failed logins counted."""
        return len(self._failures)

    def blocked_count(self) -> int:
        """Addresses blocked now or until their next attempt."""
        return len(self._blocked)
