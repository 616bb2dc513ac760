"""Outcomes compared test by test: the tests that pass direct and not through a proxy, explained by the lists of
differences (by design, known defects) or by a rerun (flaky), and what is left: the proxy-only failures."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from devstack.conformance.expectations import Expectation, find
from devstack.conformance.journal import Outcome

PROXY_ONLY = "proxy-only"
BY_DESIGN = "by-design"
KNOWN_DEFECT = "known-defect"
FLAKY = "flaky"
MISSING = Outcome("missing", "no outcome: the run ended before this test")

#: How a run's outcome of a test is found in a rerun's outcomes (a suite may name tests its runner cannot rerun as
#: they are, as Django's errors outside a test).
Lookup = Callable[[str, dict[str, Outcome]], Outcome]


@dataclass(frozen=True)
class Finding:
    """A test that passed direct and not through the proxy, and what it is: a proxy-only failure, a difference by
    design, a known defect or a flaky test, with the reason, the issue or the evidence in ``note``."""

    test: str
    kind: str
    direct: Outcome
    proxy: Outcome
    note: str = ""


def outcome(test: str, outcomes: dict[str, Outcome]) -> Outcome:
    """A test's outcome in a run, ``missing`` when the run has none."""
    return outcomes.get(test, MISSING)


def differing(direct: dict[str, Outcome], proxy: dict[str, Outcome]) -> list[str]:
    """The tests that did not fail direct and did through the proxy (or have no outcome there), in order."""
    return sorted(t for t, o in direct.items() if o.ok and not outcome(t, proxy).ok)


def skipped_through_proxy_only(direct: dict[str, Outcome], proxy: dict[str, Outcome]) -> list[str]:
    """The tests that passed direct and were skipped through the proxy (a feature the proxy hides)."""
    return sorted(t for t, o in direct.items() if o.status == "passed" and outcome(t, proxy).status == "skipped")


def failing_direct(direct: dict[str, Outcome]) -> list[str]:
    """The tests that fail direct already: the client's or the server's, not the proxy's."""
    return sorted(t for t, o in direct.items() if not o.ok)


def explain(
    suite: str,
    target: str,
    tests: list[str],
    direct: dict[str, Outcome],
    proxy: dict[str, Outcome],
    by_design: list[Expectation],
    known: list[Expectation],
) -> tuple[list[Finding], list[str]]:
    """The differing tests the lists explain, as findings, and those they do not (to be rerun)."""
    findings, left = [], []
    for test in tests:
        pair = (outcome(test, direct), outcome(test, proxy))
        if entry := find(by_design, suite, target, test):
            findings.append(Finding(test, BY_DESIGN, *pair, entry.reason))
        elif entry := find(known, suite, target, test):
            findings.append(Finding(test, KNOWN_DEFECT, *pair, f"issue {entry.issue}: {entry.reason}"))
        else:
            left.append(test)
    return findings, left


def judge(
    tests: list[str],
    direct: dict[str, Outcome],
    proxy: dict[str, Outcome],
    rerun_direct: dict[str, Outcome],
    rerun_proxy: dict[str, Outcome],
    lookup: Lookup = outcome,
) -> list[Finding]:
    """The unexplained differing tests after one rerun direct and one through the proxy: flaky when the rerun
    failed direct too or passed through the proxy (the evidence in the note), a proxy-only failure otherwise."""
    findings = []
    for test in tests:
        pair = (outcome(test, direct), outcome(test, proxy))
        again_direct, again_proxy = lookup(test, rerun_direct), lookup(test, rerun_proxy)
        if not again_direct.ok:
            note = f"passed direct in the run, {again_direct.status} direct in the rerun"
            findings.append(Finding(test, FLAKY, *pair, note))
        elif again_proxy.ok:
            note = f"{pair[1].status} through the proxy in the run, {again_proxy.status} there in the rerun"
            findings.append(Finding(test, FLAKY, *pair, note))
        else:
            findings.append(Finding(test, PROXY_ONLY, *pair))
    return findings


def stale(entries: list[Expectation], suite: str, target: str, ran: list[str], tests: list[str]) -> list[Expectation]:
    """The entries for this suite and target that cover tests of this run (``ran``) and none of the differing
    ``tests`` any more: what they listed now passes through the proxy."""
    return [
        e
        for e in entries
        if any(e.covers(suite, target, t) for t in ran) and not any(e.covers(suite, target, t) for t in tests)
    ]
