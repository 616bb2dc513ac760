"""A run's journal read into one outcome per test: the worst line wins, a test cut off is hung or unfinished."""

from __future__ import annotations

import json
from pathlib import Path

from devstack.conformance.journal import Outcome, count, read_journal


def write(path: Path, *records: dict[str, object], tail: str = "") -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records) + tail)
    return path


def start(test: str, pid: int = 1) -> dict[str, object]:
    return {"event": "start", "test": test, "pid": pid}


def done(test: str, outcome: str, detail: str = "") -> dict[str, object]:
    return {"event": "outcome", "test": test, "outcome": outcome, "detail": detail}


def test_each_test_gets_its_worst_outcome(tmp_path: Path) -> None:
    journal = write(
        tmp_path / "j",
        start("a.T.test_ok"),
        done("a.T.test_ok", "passed"),
        start("a.T.test_sub"),
        done("a.T.test_sub", "failed", "AssertionError: 1 != 2"),
        done("a.T.test_sub", "error", "OperationalError: (1305, ...)"),
        start("a.T.test_skip"),
        done("a.T.test_skip", "skipped", "no feature"),
    )
    outcomes = read_journal(journal)
    assert outcomes == {
        "a.T.test_ok": Outcome("passed"),
        "a.T.test_sub": Outcome("error", "OperationalError: (1305, ...)"),
        "a.T.test_skip": Outcome("skipped", "no feature"),
    }
    assert [o.ok for o in outcomes.values()] == [True, False, True]


def test_a_test_cut_off_is_hung_if_its_process_ran_it_last_and_a_line_cut_short_is_ignored(tmp_path: Path) -> None:
    journal = write(
        tmp_path / "j",
        start("a.T.test_1", pid=10),
        start("a.T.test_2", pid=10),
        start("a.U.test_3", pid=11),
        done("a.U.test_3", "passed"),
        tail='{"event": "outcome", "test": "a.T.te',
    )
    outcomes = read_journal(journal)
    assert outcomes["a.T.test_1"].status == "unfinished"
    assert outcomes["a.T.test_2"].status == "hung"
    assert outcomes["a.U.test_3"].status == "passed"


def test_a_missing_journal_has_no_outcome(tmp_path: Path) -> None:
    assert read_journal(tmp_path / "none") == {}


def test_counts_group_the_outcomes_as_the_report_shows_them() -> None:
    statuses = ["passed", "passed", "failed", "xpass", "error", "hung", "missing", "unfinished", "skipped", "xfail"]
    counts = count({f"t{n}": Outcome(s) for n, s in enumerate(statuses)})
    assert (counts.passed, counts.failed, counts.errored, counts.skipped, counts.total) == (2, 2, 4, 2, 10)
