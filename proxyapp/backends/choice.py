"""Choosing a server by weight: the order to try a hostgroup's servers in, and the refusal when there is none to try,
shared by the PostgreSQL forwarding listeners and pools."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable
from typing import TypeVar

from proxyapp.backends.topology import show_address
from proxyapp.config.tables import PgsqlServer

T = TypeVar("T")


def weighted_order(candidates: Iterable[T], weight: Callable[[T], int], rng: random.Random) -> list[T]:
    """``candidates`` with a weight above 0 in the order to try them: each next one drawn by weight among those left
    (weighted sampling without replacement)."""
    left = [c for c in candidates if weight(c) > 0]
    if len(left) < 2:
        return left
    order = []
    while left:
        chosen = rng.choices(left, weights=[weight(c) for c in left])[0]
        order.append(chosen)
        left.remove(chosen)
    return order


def no_server(hostgroup: int, servers: Iterable[PgsqlServer]) -> str:
    """Why no server of pgsql ``hostgroup`` can take a connection: it has none, or each one's address and status."""
    shown = ", ".join(f"{show_address(s.address)} {s.status}" for s in servers)
    if not shown:
        return f"ProxyFleet: pgsql hostgroup {hostgroup} has no server"
    return f"ProxyFleet: no server of pgsql hostgroup {hostgroup} can take a connection ({shown})"
