"""docs/compatibility.md rendered from a JSON report."""

from __future__ import annotations

from devstack.conformance.compare import BY_DESIGN, FLAKY, PROXY_ONLY, Finding
from devstack.conformance.docs import render
from devstack.conformance.journal import Counts, Outcome
from devstack.conformance.report import TargetReport, to_json


def test_the_page_has_the_prose_the_run_and_the_differing_tests_by_kind() -> None:
    counts = Counts(passed=10, failed=0, errored=0, skipped=1, total=11)
    clean = TargetReport("asyncpg", "forward", counts, counts, 1.0, 1.0)
    differing = TargetReport(
        "asyncpg",
        "pooler",
        counts,
        Counts(passed=8, failed=1, errored=1, skipped=1, total=11),
        1.0,
        2.0,
        [
            Finding("tests/test_a.py::T::test_x", PROXY_ONLY, Outcome("passed"), Outcome("failed", "boom")),
            Finding("tests/test_a.py::T::test_y", BY_DESIGN, Outcome("passed"), Outcome("error"), "on purpose"),
            Finding("tests/test_a.py::T::test_z", FLAKY, Outcome("passed"), Outcome("error"), "passed in the rerun"),
        ],
    )
    meta = {"date": "2026-12-07 05:00 UTC", "commit": "abc1234", "mode": "full", "suite_seconds": {"asyncpg": 600}}
    page = render(to_json([clean, differing], meta))
    assert page.startswith("# Compatibility: real clients' own test suites through ProxyFleet\n")
    assert "2026-12-07 05:00 UTC, commit `abc1234`, full run (asyncpg 10 min)." in page
    assert "| asyncpg | pooler | 11 | 10 | 8 | 1 | 1 | 0 | 1 |" in page
    assert "### asyncpg / forward\n\nNo difference." in page
    assert "Proxy-only failures (1):\n\n- `tests/test_a.py::T::test_x` (failed)" in page
    assert "By design (1):\n\n- `tests/test_a.py::T::test_y` (error: on purpose)" in page
    assert "Flaky (1):\n\n- `tests/test_a.py::T::test_z` (passed in the rerun)" in page
