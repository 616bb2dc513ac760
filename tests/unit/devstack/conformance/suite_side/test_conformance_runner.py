"""Django's journaling runner: a unittest suite run through its result class leaves a journal the harness reads
into each test's outcome, and a test past the per-test limit is interrupted and counted as an error."""

from __future__ import annotations

import io
import signal
import sys
import unittest
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from devstack.conformance.journal import read_journal

SUITE_SIDE = Path(__file__).resolve().parents[5] / "devstack" / "conformance" / "suite_side"


class Sample(unittest.TestCase):
    __test__ = False  # run by the tests below through the runner's result, not collected by pytest

    def test_passes(self) -> None:
        pass

    def test_fails(self) -> None:
        self.assertEqual(1, 2)

    def test_errors(self) -> None:
        raise RuntimeError("(1305, 'SAVEPOINT s1 does not exist')")

    @unittest.skip("no such feature")
    def test_skipped(self) -> None:
        pass

    @unittest.expectedFailure
    def test_expected_failure(self) -> None:
        self.fail("as expected")

    def test_subtest_fails(self) -> None:
        for n in (1, 2):
            with self.subTest(n=n):
                self.assertEqual(n, 1)

    def test_runs_past_the_limit(self) -> None:
        signal.pause()  # the per-test alarm ends it


@pytest.fixture
def runner_module(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[ModuleType]:
    """The runner module as the suite's process imports it, writing its journal under ``tmp_path``, with a one
    second per-test limit; pytest-timeout's own SIGALRM handler and timer are given back afterwards."""
    monkeypatch.syspath_prepend(str(SUITE_SIDE))
    monkeypatch.setenv("CONFORMANCE_JOURNAL", str(tmp_path / "journal.jsonl"))
    monkeypatch.setenv("CONFORMANCE_TEST_TIMEOUT", "1")
    handler, timer = signal.getsignal(signal.SIGALRM), signal.getitimer(signal.ITIMER_REAL)
    import conformance_runner

    yield conformance_runner
    signal.signal(signal.SIGALRM, handler)
    signal.setitimer(signal.ITIMER_REAL, *timer)
    for name in ("conformance_runner", "journal_lines"):
        sys.modules.pop(name, None)


def test_the_journal_holds_each_tests_outcome(runner_module: ModuleType, tmp_path: Path) -> None:
    suite = unittest.defaultTestLoader.loadTestsFromTestCase(Sample)
    result = runner_module.JournalResult(io.StringIO(), descriptions=False, verbosity=0)
    suite.run(result)
    outcomes = read_journal(tmp_path / "journal.jsonl")
    name = f"{__name__}.Sample"
    assert {t.removeprefix(name + "."): o.status for t, o in outcomes.items()} == {
        "test_passes": "passed",
        "test_fails": "failed",
        "test_errors": "error",
        "test_skipped": "skipped",
        "test_expected_failure": "xfail",
        "test_subtest_fails": "failed",
        "test_runs_past_the_limit": "error",
    }
    assert "AssertionError: 1 != 2" in outcomes[f"{name}.test_fails"].detail
    assert "(n=2)" in outcomes[f"{name}.test_subtest_fails"].detail
    assert "TestTimeout: the test ran past 1 s" in outcomes[f"{name}.test_runs_past_the_limit"].detail
    assert outcomes[f"{name}.test_skipped"].detail == "no such feature"


def test_the_runner_uses_the_journaling_result_and_parallel_suite(runner_module: ModuleType) -> None:
    runner = runner_module.JournalRunner(verbosity=0)
    assert runner.get_resultclass() is runner_module.JournalResult
    assert runner.parallel_test_suite.runner_class.resultclass is runner_module.TimedRemoteResult
