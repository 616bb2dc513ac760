"""A pytest plugin (``-p conformance_pytest``) that writes the journal: each test's start, then one outcome from its
setup, call and teardown reports (a failed setup or teardown is an error, a failed call a failure), and an error for
a module that cannot be collected."""

from __future__ import annotations

from typing import Any

import journal_lines
import pytest

_reports: dict[str, list[Any]] = {}


def pytest_runtest_logstart(nodeid: str, location: Any) -> None:
    """Journal the start."""
    journal_lines.started(nodeid)
    _reports[nodeid] = []


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Keep the phase's report for the outcome."""
    _reports.setdefault(report.nodeid, []).append(report)


def pytest_runtest_logfinish(nodeid: str, location: Any) -> None:
    """Journal the test's one outcome from its reports."""
    outcome, detail = "passed", ""
    for report in _reports.pop(nodeid, []):
        xfail = hasattr(report, "wasxfail")
        if report.failed:
            outcome, detail = ("failed" if report.when == "call" else "error"), report.longreprtext
            break
        if report.skipped:
            outcome = "xfail" if xfail else "skipped"
            reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else ""
            detail = report.wasxfail if xfail else str(reason).removeprefix("Skipped: ")
        elif report.when == "call" and xfail:
            outcome = "xpass"
    journal_lines.finished(nodeid, outcome, detail)


def pytest_collectreport(report: pytest.CollectReport) -> None:
    """Journal a module that failed to collect as an error of the module."""
    if report.failed:
        journal_lines.finished(report.nodeid, "error", report.longreprtext)
