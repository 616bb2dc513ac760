"""The line of sessions waiting for a connection (``pool._Line``): a list read from a head index, whose places before
the head are given back as it moves on. Random sequences of queueing, taking the first, leaving and keeping, against
a model deque."""

from __future__ import annotations

import random
from collections import deque

import pytest

from proxyapp.backends.pool import _Line, _Waiter
from proxyapp.mysql.backend import Credentials


def _same(line: _Line, model: deque[_Waiter]) -> None:
    assert line.waiters() == list(model) and len(line) == len(model)
    assert line.first() is (model[0] if model else None)
    assert len(line.items) <= 2 * len(model) + 64  # the places before the head are given back


@pytest.mark.parametrize("seed", range(20))
def test_the_line_keeps_its_order_through_any_sequence(seed: int) -> None:
    rng = random.Random(seed)
    line = _Line()
    model: deque[_Waiter] = deque()
    made = 0
    for _ in range(2000):
        step = rng.random()
        if step < 0.5 or not model:
            for _ in range(rng.choice((1, 1, 1, 50))):  # now and then a burst: the head runs far ahead
                waiter = _Waiter(Credentials(f"user{made}"), None, float(made))
                made += 1
                line.push(waiter)
                model.append(waiter)
        elif step < 0.85:
            line.pop_first()
            model.popleft()
        elif step < 0.97:
            gone = rng.choice(list(model))
            line.remove(gone)
            model.remove(gone)
            line.remove(gone)  # not in line any more: nothing changes
        else:
            kept = [w for w in model if rng.random() < 0.5]
            line.keep(kept)
            model = deque(kept)
        _same(line, model)


def test_an_emptied_line_starts_again_at_the_front() -> None:
    line = _Line()
    waiters = [_Waiter(Credentials("app"), None, 0.0) for _ in range(3)]
    for waiter in waiters:
        line.push(waiter)
    line.pop_first()
    line.remove(waiters[2])
    line.pop_first()
    assert (line.items, line.head, len(line), line.first()) == ([], 0, 0, None)
