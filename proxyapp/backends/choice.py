"""Choosing a server by weight: the order to try a hostgroup's servers in, shared by the PostgreSQL forwarding
listeners and pools."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable
from typing import TypeVar

T = TypeVar("T")


def weighted_order(candidates: Iterable[T], weight: Callable[[T], int], rng: random.Random) -> list[T]:
    """``candidates`` with a weight above 0 in the order to try them: each next one drawn by weight among those left
    (weighted sampling without replacement)."""
    left = [c for c in candidates if weight(c) > 0]
    order = []
    while left:
        chosen = rng.choices(left, weights=[weight(c) for c in left])[0]
        order.append(chosen)
        left.remove(chosen)
    return order
