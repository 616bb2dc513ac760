"""Reading a run's journal (``suite_side/journal_lines.py`` writes it): each test's one outcome.

A test may have several outcome lines (a failing subtest, then an error in its teardown): the worst counts. A test
that started and has no outcome was cut off: the last one each process started is ``hung`` when the run was stopped
by its watchdog (it was running then), the others ``unfinished`` (a parallel worker ran them, and its results died
with it)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

#: Outcomes from the worst to the best: the worst of a test's lines is its outcome. ``missing`` is the comparison's:
#: a test one run has and the other has not.
SEVERITY = ("hung", "missing", "error", "failed", "xpass", "unfinished", "passed", "xfail", "skipped")
#: Outcomes that are not a failure of the test.
GOOD = frozenset({"passed", "xfail", "skipped"})


@dataclass(frozen=True)
class Outcome:
    """One test's outcome in one run, with the text of its failure (a traceback's end) if any."""

    status: str
    detail: str = ""

    @property
    def ok(self) -> bool:
        """Whether the test did not fail (passed, skipped, or failed as expected)."""
        return self.status in GOOD


def worse(a: Outcome, b: Outcome) -> Outcome:
    """The worse of two outcomes of one test (the first on a tie)."""
    return b if SEVERITY.index(b.status) < SEVERITY.index(a.status) else a


def read_journal(path: Path) -> dict[str, Outcome]:
    """Every test's outcome in a journal, ``hung``/``unfinished`` for those that started and never finished (a
    line cut short by a kill is skipped)."""
    outcomes: dict[str, Outcome] = {}
    last_started: dict[int, str] = {}
    started: list[str] = []
    lines = path.read_text(errors="replace").splitlines() if path.exists() else []
    for line in lines:
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        test = record["test"]
        if record["event"] == "start":
            started.append(test)
            last_started[record["pid"]] = test
            continue
        outcome = Outcome(record["outcome"], record.get("detail", ""))
        outcomes[test] = worse(outcomes[test], outcome) if test in outcomes else outcome
    running = set(last_started.values())
    for test in started:
        if test not in outcomes:
            status = "hung" if test in running else "unfinished"
            outcomes[test] = Outcome(status, "started, and no outcome before the run ended")
    return outcomes


@dataclass(frozen=True)
class Counts:
    """A run's outcomes counted as the report shows them."""

    passed: int
    failed: int
    errored: int
    skipped: int
    total: int


def count(outcomes: dict[str, Outcome]) -> Counts:
    """Passed; failed (with unexpected successes); errored (with hung, missing and unfinished); skipped (with expected
    failures)."""
    statuses = [o.status for o in outcomes.values()]

    def of(*names: str) -> int:
        return sum(statuses.count(n) for n in names)

    return Counts(
        passed=of("passed"),
        failed=of("failed", "xpass"),
        errored=of("error", "hung", "missing", "unfinished"),
        skipped=of("skipped", "xfail"),
        total=len(statuses),
    )
