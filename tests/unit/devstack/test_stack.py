"""The supervisor's restart policy (``devstack.stack.RestartPolicy``), with time given as data."""

from __future__ import annotations

from pathlib import Path

import pytest

from devstack import stack
from devstack.stack import RestartPolicy


def test_a_child_is_restarted_until_it_loops() -> None:
    policy = RestartPolicy(limit=3, window=60)
    assert [policy.allow("web", t) for t in (0, 10, 20)] == [True, True, True]
    assert policy.allow("web", 30) is False  # four exits within a minute: a crash loop, left stopped
    assert policy.allow("worker", 30) is True  # counted per child


def test_old_exits_are_forgotten() -> None:
    policy = RestartPolicy(limit=2, window=60)
    assert policy.allow("web", 0) and policy.allow("web", 50)
    assert policy.allow("web", 100)  # the exit at 0 is out of the window
    assert not policy.allow("web", 101)


def test_a_service_started_by_a_helper_that_was_interrupted_is_stopped_all_the_same(tmp_path: Path) -> None:
    """A SIGTERM (KeyboardInterrupt in ``make run``) while a helper waits for the service it started: the service is
    in no caller's list, and ``stop_started`` stops it."""

    def helper() -> stack.Service:
        stack.Service("sleeper", ["sleep", "600"], {}, tmp_path / "sleeper.log").start()
        raise KeyboardInterrupt  # before the helper returns it

    with pytest.raises(KeyboardInterrupt):
        helper()
    [sleeper] = [s for s in stack.STARTED if s.name == "sleeper"]
    assert sleeper.running
    stack.stop_started()
    assert not sleeper.running and sleeper.proc is not None and sleeper.proc.returncode == -15
