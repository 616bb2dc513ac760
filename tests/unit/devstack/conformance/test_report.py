"""The report: the table's rows, the failures' text and the JSON document read back."""

from __future__ import annotations

from devstack.conformance.compare import FLAKY, KNOWN_DEFECT, PROXY_ONLY, Finding
from devstack.conformance.expectations import Expectation
from devstack.conformance.journal import Counts, Outcome
from devstack.conformance.report import TargetReport, details, exceptions, excerpt, from_json, table, to_json

TRACEBACK = "\n".join(f"  line {n}" for n in range(30)) + "\nOperationalError: (1305, 'SAVEPOINT s1 does not exist')"


def sample() -> TargetReport:
    passed = Outcome("passed")
    return TargetReport(
        "django-mysql",
        "proxy",
        Counts(passed=90, failed=1, errored=0, skipped=9, total=100),
        Counts(passed=87, failed=1, errored=3, skipped=9, total=100),
        12.5,
        14.0,
        [
            Finding("transactions.tests.T.test_a", PROXY_ONLY, passed, Outcome("error", TRACEBACK)),
            Finding("backends.tests.T.test_b", KNOWN_DEFECT, passed, Outcome("failed"), "issue 41: x"),
            Finding("queries.tests.T.test_c", FLAKY, passed, Outcome("failed"), "passed there in the rerun"),
        ],
        stale=[Expectation("django-mysql", "proxy", ("basic.*",), "fixed", 40)],
        problems=["proxy: the watchdog stopped a run after 4500 s"],
    )


def test_the_table_has_a_row_per_comparison_with_the_counts_by_kind() -> None:
    lines = table([sample()]).splitlines()
    assert lines[0].split()[:3] == ["suite", "target", "tests"]
    assert lines[1].split() == ["django-mysql", "proxy", "100", "90", "87", "1", "0", "1", "1"]
    assert sample().failed


def test_the_details_show_each_proxy_only_failures_traceback_end_flaky_evidence_stale_entries_and_problems() -> None:
    text = details([sample()])
    assert "PROXY-ONLY django-mysql / proxy: transactions.tests.T.test_a (error through the proxy)" in text
    assert "    OperationalError: (1305, 'SAVEPOINT s1 does not exist')" in text
    assert "line 29" in text and "line 10" not in text
    assert "FLAKY django-mysql / proxy: queries.tests.T.test_c: passed there in the rerun" in text
    assert "STALE django-mysql / proxy: ('basic.*',) (fixed) no longer differs" in text
    assert "PROBLEM django-mysql / proxy: proxy: the watchdog stopped a run after 4500 s" in text
    assert excerpt("a\nb\nc", lines=2) == "b\nc"


def test_the_json_report_reads_back_as_it_was_written() -> None:
    doc = to_json([sample()], {"date": "2026-12-07 05:00 UTC", "commit": "abc1234"})
    assert doc["commit"] == "abc1234"
    assert from_json(doc) == [sample()]


CHAINED = """Traceback (most recent call last):
  File "django/db/backends/utils.py", line 105, in _execute
    return self.cursor.execute(sql, params)
MySQLdb.OperationalError: (1305, 'SAVEPOINT s1_x2 does not exist')

The above exception was the direct cause of the following exception:

Traceback (most recent call last):
  File "transactions/tests.py", line 40, in test_x
    Reporter.objects.create()
django.db.transaction.TransactionManagementError: An error occurred in the current transaction.
"""


def test_a_failures_excerpt_names_each_exception_of_its_chain_first() -> None:
    assert exceptions(CHAINED) == [
        "MySQLdb.OperationalError: (1305, 'SAVEPOINT s1_x2 does not exist')",
        "django.db.transaction.TransactionManagementError: An error occurred in the current transaction.",
    ]
    lines = excerpt(CHAINED, lines=2).splitlines()
    assert lines == [
        "MySQLdb.OperationalError: (1305, 'SAVEPOINT s1_x2 does not exist')",
        "...",
        "    Reporter.objects.create()",
        "django.db.transaction.TransactionManagementError: An error occurred in the current transaction.",
    ]
