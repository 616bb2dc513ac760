"""A session's statement timeout (a rule's ``timeout``, else ``pgsql-default_query_timeout``): one timer over the
statements sent and not yet answered; when it fires while they still run, the server is asked to cancel them (a
CancelRequest, as a client's cancel, through ``PgPools.cancel``) and the error the server answers with says why."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from proxyapp.config.variables import NO_TIMEOUT_MS
from proxyapp.pgproxy.pool import PgPools, ServerConn
from proxyapp.pgsql.messages import QUERY_CANCELED, error_response


class StatementTimer:
    """The timeout of what a session's server connection still owes it."""

    __slots__ = ("cancelling", "fired_ms", "handle", "on_fire", "pools", "still_running")

    def __init__(
        self, pools: PgPools, still_running: Callable[[ServerConn], bool], on_fire: Callable[[], None]
    ) -> None:
        self.pools = pools
        self.still_running = still_running  # whether the session's statements on that connection still run
        self.on_fire = on_fire  # counts a statement cancelled for its timeout
        self.handle: asyncio.TimerHandle | None = None
        self.fired_ms = 0  # the timeout (ms) of the statements the server was asked to cancel, until their end
        self.cancelling: asyncio.Task[None] | None = None  # the CancelRequest being sent

    def arm(self, server: ServerConn, ms: int) -> None:
        """Time a statement sent to ``server`` for ``ms``, unless the timeout of statements before it still runs
        (they share it) or ``ms`` means none."""
        if self.handle is None and ms < NO_TIMEOUT_MS:
            self.handle = asyncio.get_running_loop().call_later(ms / 1000, self._fire, server, ms)

    def stop(self) -> None:
        """Nothing is owed any longer: no timeout runs."""
        if self.handle is not None:
            self.handle.cancel()
            self.handle = None

    def error(self) -> bytes:
        """The error the client gets in place of the server's for a statement cancelled for its timeout."""
        return error_response(
            QUERY_CANCELED,
            f"canceling statement due to statement timeout (ProxyFleet: it ran past {self.fired_ms} ms)",
            severity="ERROR",
        )

    def _fire(self, server: ServerConn, ms: int) -> None:
        """The statements ran past their timeout: the server is asked to cancel them (the connection goes to no
        other client before the server has acted on it)."""
        self.handle = None
        if not self.still_running(server):
            return
        self.fired_ms = ms
        self.on_fire()
        self.cancelling = asyncio.get_running_loop().create_task(self.pools.cancel(server))
