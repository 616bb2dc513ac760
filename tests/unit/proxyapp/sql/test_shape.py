"""The C shape (``proxyapp.sql._shape``) is ``python_shape`` over every ASCII text: the same string or None."""

from __future__ import annotations

import random
from types import ModuleType

import pytest

from proxyapp.sql import digest
from proxyapp.sql.digest import python_shape, simple_shape
from tests.support.native import built


@pytest.fixture(scope="module")
def shape() -> ModuleType:
    """The built C shape."""
    return built("proxyapp.sql._shape")


#: Characters that matter to the rules, and a few that do not.
ALPHABET = "0123456789" * 3 + ".eE$?_ xyzSELECTabc(),=;*\t\n'\"`#/\\+-@"


def test_random_texts_shape_the_same_in_c_and_python(shape: ModuleType) -> None:
    """20,000 random ASCII texts, mostly digits and the characters the rules look at; both literals."""
    rng = random.Random(3)
    replaced = refused = 0
    for _ in range(20000):
        text = "".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 40)))
        for literal in ("?", "0"):
            expected = python_shape(text, literal)
            assert shape.shape(text, literal, python_shape) == expected, repr(text)
            replaced += expected is not None and expected != text
            refused += expected is None
    assert replaced > 1000 and refused > 1000


def test_sysbench_queries_and_long_texts(shape: ModuleType) -> None:
    point = "SELECT c FROM sbtest1 WHERE id=4242"
    assert shape.shape(point, "?", python_shape) == "SELECT c FROM sbtest1 WHERE id=?"
    many = "SELECT * FROM t WHERE id IN (" + ",".join(str(i) for i in range(500)) + ")"  # more than 64 numbers
    assert shape.shape(many, "?", python_shape) == python_shape(many, "?")
    assert shape.shape("SELECT 1", "?", python_shape) == "SELECT ?"
    same = "SELECT a FROM t"
    assert shape.shape(same, "?", python_shape) is same  # nothing replaced: the text itself, no copy
    assert shape.shape("", "?", python_shape) == ""


def test_simple_shape_takes_the_c_path_for_ascii_only(shape: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    """Texts that are not ASCII go to the Python rules (the C shape hands them to the function it is given)."""
    assert digest.SHAPE is shape.shape
    assert shape.shape("SELECT 'é', 1", "?", lambda sql, literal: f"other: {sql} {literal}") == "other: SELECT 'é', 1 ?"
    assert shape.shape("SELECT 1", "é", lambda sql, literal: None) is None
    with pytest.raises(ZeroDivisionError):
        shape.shape("SELECT 'é'", "?", lambda sql, literal: 1 // 0)
    assert simple_shape("SELECT ١٢ + 1 FROM t") is None  # a sign: not simple
    assert simple_shape("SELECT ١٢, 3 FROM t") == "SELECT ?, ? FROM t"
    monkeypatch.setattr(digest, "SHAPE", None)
    assert simple_shape("SELECT 1, x2 FROM t") == "SELECT ?, x2 FROM t"
