"""Outcomes compared test by test: what differs, what the lists explain, what one rerun says, stale entries."""

from __future__ import annotations

from devstack.conformance.compare import (
    BY_DESIGN,
    FLAKY,
    KNOWN_DEFECT,
    PROXY_ONLY,
    differing,
    explain,
    failing_direct,
    judge,
    skipped_through_proxy_only,
    stale,
)
from devstack.conformance.expectations import Expectation
from devstack.conformance.journal import Outcome

PASSED, SKIPPED = Outcome("passed"), Outcome("skipped")
FAILED, ERROR = Outcome("failed", "AssertionError"), Outcome("error", "(1305, 'SAVEPOINT s1 does not exist')")

DIRECT = {"t.a": PASSED, "t.b": PASSED, "t.c": PASSED, "t.d": FAILED, "t.e": SKIPPED, "t.f": PASSED, "t.g": PASSED}
PROXY = {"t.a": PASSED, "t.b": ERROR, "t.c": FAILED, "t.d": FAILED, "t.e": ERROR, "t.f": SKIPPED}


def test_differing_tests_did_not_fail_direct_and_failed_or_went_missing_through_the_proxy() -> None:
    assert differing(DIRECT, PROXY) == ["t.b", "t.c", "t.e", "t.g"]
    assert failing_direct(DIRECT) == ["t.d"]
    assert skipped_through_proxy_only(DIRECT, PROXY) == ["t.f"]


def test_the_lists_explain_what_they_cover_for_their_suite_and_target_alone() -> None:
    by_design = [Expectation("s", "proxy", ("t.b",), "the proxy answers it itself")]
    known = [Expectation("s", "proxy", ("t.c*",), "COPY hangs", 41), Expectation("s", "pooler", ("t.e",), "x", 41)]
    found, left = explain("s", "proxy", ["t.b", "t.c", "t.e"], DIRECT, PROXY, by_design, known)
    assert [(f.test, f.kind, f.note) for f in found] == [
        ("t.b", BY_DESIGN, "the proxy answers it itself"),
        ("t.c", KNOWN_DEFECT, "issue 41: COPY hangs"),
    ]
    assert found[0].direct == PASSED and found[0].proxy == ERROR
    assert left == ["t.e"]


def test_one_rerun_tells_a_flaky_test_from_a_proxy_only_failure() -> None:
    tests = ["t.b", "t.c", "t.g"]
    rerun_direct = {"t.b": PASSED, "t.c": FAILED, "t.g": PASSED}
    rerun_proxy = {"t.b": ERROR, "t.c": FAILED, "t.g": PASSED}
    findings = {f.test: f for f in judge(tests, DIRECT, PROXY, rerun_direct, rerun_proxy)}
    assert findings["t.b"].kind == PROXY_ONLY
    assert findings["t.b"].proxy == ERROR
    assert (findings["t.c"].kind, findings["t.c"].note) == (
        FLAKY,
        "passed direct in the run, failed direct in the rerun",
    )
    assert (findings["t.g"].kind, findings["t.g"].note) == (
        FLAKY,
        "missing through the proxy in the run, passed there in the rerun",
    )


def test_an_entry_is_stale_when_the_tests_it_covers_ran_and_none_differs() -> None:
    entries = [
        Expectation("s", "proxy", ("t.a",), "fixed meanwhile", 41),
        Expectation("s", "proxy", ("t.b",), "still differs", 41),
        Expectation("s", "proxy", ("t.zzz",), "not run in this selection", 41),
    ]
    assert [e.reason for e in stale(entries, "s", "proxy", list(DIRECT), ["t.b"])] == ["fixed meanwhile"]
