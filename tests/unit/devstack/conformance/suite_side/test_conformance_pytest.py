"""The pytest plugin that writes the journal: a pytest run with it leaves each test's one outcome, and an error for a
module that does not collect."""

from __future__ import annotations

from pathlib import Path

import pytest

from devstack.conformance.journal import read_journal

pytest_plugins = ("pytester",)
SUITE_SIDE = Path(__file__).resolve().parents[5] / "devstack" / "conformance" / "suite_side"

SAMPLE = """
import unittest
import pytest

class T(unittest.TestCase):
    def test_passes(self):
        pass

    def test_fails(self):
        self.assertEqual(1, 2)

    @unittest.skip("no such feature")
    def test_skipped(self):
        pass

    @unittest.expectedFailure
    def test_expected_failure(self):
        self.fail("as expected")

    @unittest.expectedFailure
    def test_unexpected_success(self):
        pass

@pytest.fixture
def broken():
    raise RuntimeError("setup broke")

def test_setup_errors(broken):
    pass
"""


def test_each_test_gets_one_outcome_from_its_phases(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    journal = pytester.path / "journal.jsonl"
    monkeypatch.setenv("CONFORMANCE_JOURNAL", str(journal))
    monkeypatch.syspath_prepend(str(SUITE_SIDE))
    pytester.makepyfile(test_sample=SAMPLE, test_broken="import nowhere_to_be_found\n")
    pytester.runpytest_inprocess(
        "-p", "conformance_pytest", "-p", "no:cacheprovider", "-p", "no:django", "--continue-on-collection-errors"
    )
    outcomes = read_journal(journal)
    assert {t: o.status for t, o in outcomes.items()} == {
        "test_sample.py::T::test_passes": "passed",
        "test_sample.py::T::test_fails": "failed",
        "test_sample.py::T::test_skipped": "skipped",
        "test_sample.py::T::test_expected_failure": "xfail",
        "test_sample.py::T::test_unexpected_success": "failed",  # as pytest reports a unittest one
        "test_sample.py::test_setup_errors": "error",
        "test_broken.py": "error",
    }
    assert "AssertionError: 1 != 2" in outcomes["test_sample.py::T::test_fails"].detail
    assert "RuntimeError: setup broke" in outcomes["test_sample.py::test_setup_errors"].detail
    assert "nowhere_to_be_found" in outcomes["test_broken.py"].detail
    assert outcomes["test_sample.py::T::test_skipped"].detail == "no such feature"
