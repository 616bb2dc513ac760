"""The C shape (``proxyapp.sql._shape``) is ``python_shape`` over every ASCII text: the same string or None. Its table
of shapes seen (``known``, ``keep``) answers as its Python twins (``analysis.python_known``, ``python_keep``) do, and
never with what was kept for another shape."""

from __future__ import annotations

import random
from types import ModuleType

import pytest

from proxyapp.sql import analysis, digest
from proxyapp.sql.analysis import python_keep, python_known
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


def test_known_and_keep_answer_as_their_python_twins(shape: ModuleType) -> None:
    """5,000 random texts: the shape or None, as the Python twin says; once a value is kept for a shape, every text of
    that shape (other numbers) is answered with it, by both."""
    rng = random.Random(5)
    kept = 0
    for i in range(5000):
        text = "tag" + str(i) + " " + "".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 40)))
        expected = python_shape(text)
        assert shape.known(text, python_shape) == expected == python_known(text, python_shape), repr(text)
        if expected is None:
            continue
        value = object()
        shape.keep(expected, value)
        python_keep(expected, value)
        again = expected.replace("?", "5")  # other numbers: the same shape, unless the text held a '?' of its own
        if python_shape(again) == expected:
            assert shape.known(again, python_shape) is value, repr(again)
            assert python_known(again, python_shape) is value
            kept += 1
    assert kept > 500


def test_a_full_table_answers_each_text_with_its_own_value_or_its_shape(shape: ModuleType) -> None:
    """Far more shapes than the table holds (8,192): each text is answered with the value kept for its own shape or,
    once that was dropped, with its shape; the shape kept last is always there."""
    values = {}
    for i in range(30000):
        text = f"SELECT c_{i}x FROM fill WHERE id = {i}"
        own = f"SELECT c_{i}x FROM fill WHERE id = ?"
        values[own] = i
        shape.keep(own, i)
        assert shape.known(text, python_shape) == i  # the last kept
    found = 0
    for own, i in values.items():
        answer = shape.known(own.replace("?", "1"), python_shape)
        assert answer in (i, own), (own, answer)
        found += answer == i
    assert 4000 < found <= 8192


def test_a_text_that_is_not_ascii_is_looked_up_by_the_shape_the_python_rules_give(shape: ModuleType) -> None:
    value = object()
    shape.keep("SELECT ?, ? FROM not_ascii", value)
    assert shape.known("SELECT 12, 3 FROM not_ascii", python_shape) is value
    assert shape.known("SELECT ١٢, 3 FROM not_ascii", python_shape) is value  # Arabic-Indic digits: a bare number
    assert shape.known("SELECT 'é', 3 FROM not_ascii", python_shape) is None  # a quote: no simple shape
    assert shape.known("SELECT é, 3 FROM not_ascii", python_shape) == "SELECT é, ? FROM not_ascii"
    with pytest.raises(TypeError):
        shape.known("SELECT é", lambda sql: 1)
    with pytest.raises(TypeError):
        shape.known(b"SELECT 1", python_shape)
    with pytest.raises(TypeError):
        shape.keep(b"SELECT ?", value)


def test_analyze_uses_the_c_table(shape: ModuleType) -> None:
    assert analysis.KNOWN is shape.known and analysis.KEEP is shape.keep


def test_a_shape_holding_bytes_that_are_not_utf8_is_kept_and_found(shape: ModuleType) -> None:
    """A query whose bytes are not UTF-8 (``SELECT \\xff``, decoded with surrogateescape) has a shape with lone
    surrogates, which have no UTF-8: the table keys it by other bytes (it raised UnicodeEncodeError, and the session
    got "internal error"), apart from every other shape; analyze answers it as the Python twins do."""
    text = "SELECT \udcff, 7 FROM t\udcfe"
    own = "SELECT \udcff, ? FROM t\udcfe"
    assert shape.known(text, python_shape) == own == python_known(text, python_shape)
    value, other = object(), object()
    shape.keep(own, value)
    shape.keep("SELECT \udcfe, ? FROM t\udcfe", other)
    assert shape.known("SELECT \udcff, 8 FROM t\udcfe", python_shape) is value
    assert shape.known("SELECT \udcfe, 9 FROM t\udcfe", python_shape) is other
    assert shape.known("SELECT \xff, 9 FROM t\xfe", python_shape) == "SELECT \xff, ? FROM t\xfe"  # ÿ is another text
    statements, found, _ = analysis.analyze("SELECT \udcff", 2048)
    assert statements[0].keyword == "SELECT" and found.text == "SELECT \udcff"
    assert analysis.analyze("SELECT \udcff", 2048)[1] == found
