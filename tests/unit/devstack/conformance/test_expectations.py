"""The lists of differences: their entries read, their mistakes named, and the repository's own files valid."""

from __future__ import annotations

import pytest

from devstack.conformance.expectations import BY_DESIGN, KNOWN_DEFECTS, Expectation, ExpectationError, find, load, parse

KNOWN = """
[[difference]]
suite = "asyncpg"
target = "pooler"
tests = ["tests/test_copy.py::TestCopyTo::*", "tests/test_x.py::T::test_y"]
reason = "COPY hangs with a slow reader"
issue = 41
"""


def test_an_entry_covers_its_tests_by_id_or_pattern_for_its_suite_and_target() -> None:
    [entry] = parse(KNOWN, need_issue=True)
    assert entry == Expectation(
        "asyncpg", "pooler", ("tests/test_copy.py::TestCopyTo::*", "tests/test_x.py::T::test_y"),
        "COPY hangs with a slow reader", 41,
    )  # fmt: skip
    assert entry.covers("asyncpg", "pooler", "tests/test_copy.py::TestCopyTo::test_large")
    assert not entry.covers("asyncpg", "forward", "tests/test_copy.py::TestCopyTo::test_large")
    assert not entry.covers("asyncpg", "pooler", "tests/test_copy.py::TestCopyFrom::test_large")
    assert find([entry], "asyncpg", "pooler", "tests/test_x.py::T::test_y") is entry


@pytest.mark.parametrize(
    ("text", "need_issue", "message"),
    [
        (KNOWN, False, "difference 1: missing [], unknown ['issue']"),
        (KNOWN.replace("issue = 41", ""), True, "difference 1: missing ['issue']"),
        (KNOWN.replace("issue = 41", 'issue = "41"'), True, "issue must be an issue number"),
        (KNOWN.replace('reason = "COPY hangs with a slow reader"', 'reason = " "'), True, "the reason is empty"),
        (KNOWN.replace('tests = ["tests', 'tests = [], x = ["tests'), True, "x"),
        ("[[differences]]\n", True, "unknown top-level keys ['differences']"),
        ("suite = ", True, "Invalid value"),
    ],
)
def test_a_broken_file_is_refused_naming_the_entry_and_field(text: str, need_issue: bool, message: str) -> None:
    with pytest.raises(ExpectationError, match=None) as caught:
        parse(text, need_issue=need_issue, source="f.toml")
    assert message in str(caught.value)
    assert str(caught.value).startswith("f.toml")


def test_the_repositorys_lists_read_and_django_has_nothing_by_design() -> None:
    by_design = load(BY_DESIGN, need_issue=False)
    known = load(KNOWN_DEFECTS, need_issue=True)
    assert not [e for e in by_design if e.suite.startswith("django")]
    assert all(e.issue for e in known)
