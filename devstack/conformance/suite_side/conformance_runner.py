"""Django's test runner with a journal (``settings.TEST_RUNNER``): every test's outcome as the main process learns
it, every test's start as the process running it begins it, and each test bounded in time: past
``CONFORMANCE_TEST_TIMEOUT`` seconds a SIGALRM raises ``TestTimeout`` in it, and the run moves on."""

from __future__ import annotations

import os
import signal
import unittest
from types import FrameType, TracebackType
from typing import Any

import journal_lines
from django.test.runner import DiscoverRunner, ParallelTestSuite, RemoteTestResult, RemoteTestRunner

TIMEOUT_ENV = "CONFORMANCE_TEST_TIMEOUT"
ExcInfo = tuple[type[BaseException], BaseException, TracebackType | None]


class TestTimeout(Exception):
    """A test ran past the harness's per-test limit."""


def _time_out(signum: int, frame: FrameType | None) -> None:
    raise TestTimeout(f"the test ran past {os.environ.get(TIMEOUT_ENV)} s (the harness's per-test limit)")


def _arm() -> None:
    seconds = int(os.environ.get(TIMEOUT_ENV, "0"))
    if seconds:
        signal.signal(signal.SIGALRM, _time_out)
        signal.alarm(seconds)


def _disarm() -> None:
    signal.alarm(0)


class JournalResult(unittest.TextTestResult):
    """The main process's result: writes each outcome (run here, or replayed from a parallel worker)."""

    def startTest(self, test: unittest.TestCase) -> None:
        """Journal the start (a replayed one is harmless) and arm the per-test limit."""
        journal_lines.started(test.id())
        _arm()
        super().startTest(test)

    def stopTest(self, test: unittest.TestCase) -> None:
        """Disarm the per-test limit."""
        _disarm()
        super().stopTest(test)

    def _failed(self, test: Any, outcome: str, err: ExcInfo) -> None:
        journal_lines.finished(test.id(), outcome, self._exc_info_to_string(err, test))

    def addSuccess(self, test: unittest.TestCase) -> None:
        """Journal a pass."""
        journal_lines.finished(test.id(), "passed")
        super().addSuccess(test)

    def addError(self, test: unittest.TestCase, err: Any) -> None:
        """Journal an error."""
        self._failed(test, "error", err)
        super().addError(test, err)

    def addFailure(self, test: unittest.TestCase, err: Any) -> None:
        """Journal a failure."""
        self._failed(test, "failed", err)
        super().addFailure(test, err)

    def addSubTest(self, test: unittest.TestCase, subtest: unittest.TestCase, err: Any) -> None:
        """Journal a failing subtest as its test's failure (the test itself then reports no success)."""
        if err is not None:
            outcome = "failed" if issubclass(err[0], test.failureException) else "error"
            journal_lines.finished(test.id(), outcome, f"{subtest}\n{self._exc_info_to_string(err, test)}")
        super().addSubTest(test, subtest, err)

    def addSkip(self, test: unittest.TestCase, reason: str) -> None:
        """Journal a skip."""
        journal_lines.finished(test.id(), "skipped", reason)
        super().addSkip(test, reason)

    def addExpectedFailure(self, test: unittest.TestCase, err: Any) -> None:
        """Journal an expected failure."""
        journal_lines.finished(test.id(), "xfail")
        super().addExpectedFailure(test, err)

    def addUnexpectedSuccess(self, test: unittest.TestCase) -> None:
        """Journal an unexpected success."""
        journal_lines.finished(test.id(), "xpass")
        super().addUnexpectedSuccess(test)


class TimedRemoteResult(RemoteTestResult):
    """A parallel worker's result: journals each start with the worker's pid and bounds each test in time."""

    def startTest(self, test: unittest.TestCase) -> None:
        """Journal the start and arm the per-test limit."""
        journal_lines.started(test.id())
        _arm()
        super().startTest(test)

    def stopTest(self, test: unittest.TestCase) -> None:
        """Disarm the per-test limit."""
        _disarm()
        super().stopTest(test)


class TimedRemoteRunner(RemoteTestRunner):
    """A parallel worker's runner, with ``TimedRemoteResult``."""

    resultclass = TimedRemoteResult


class JournalParallelSuite(ParallelTestSuite):
    """Django's parallel suite whose workers journal and time their tests."""

    runner_class = TimedRemoteRunner


class JournalRunner(DiscoverRunner):
    """Django's runner with the journal and the per-test limit, serial or parallel."""

    parallel_test_suite = JournalParallelSuite

    def get_resultclass(self) -> type[unittest.TextTestResult] | None:
        """``JournalResult``, unless Django's debugging results were asked for."""
        return super().get_resultclass() or JournalResult
