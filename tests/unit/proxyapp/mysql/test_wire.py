"""The wire's constants."""

from __future__ import annotations

from proxyapp.mysql import backend, wire
from proxyapp.mysql.constants import Status


def test_the_hot_paths_status_constants_are_the_servers_flags() -> None:
    """The relay and the backend read status bits as plain Final ints (compiled to constants); they must be the
    protocol's flags."""
    assert wire._MORE_RESULTS == Status.MORE_RESULTS_EXISTS
    assert wire._CURSOR_EXISTS == Status.CURSOR_EXISTS
    assert backend._IN_TRANS == Status.IN_TRANS
