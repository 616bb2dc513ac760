"""``proxyapp.shown``: the one way a text is shown (stats, metrics, events log, processlist, error messages, the
control plane): a client's bytes that are not UTF-8, lone surrogates once decoded with surrogateescape, as ``\\xff``;
every other text as it is."""

from __future__ import annotations

import json

import pytest

from proxyapp.shown import shown, shown_in


def wire_text(raw: bytes) -> str:
    """What the proxy makes of a client's bytes (``_bytes.text``, ``packets.python_text``)."""
    return raw.decode("utf-8", "surrogateescape")


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (b"SELECT \xff", "SELECT \\xff"),
        (b"SELECT `\xff`", "SELECT `\\xff`"),
        (b"caf\xc3\xa9 \xe9", "caf\u00e9 \\xe9"),  # valid UTF-8 stays, the latin1 byte does not
        (b"\x80\xbf\xc3", "\\x80\\xbf\\xc3"),  # a lone continuation byte, a cut sequence
        (b"\xed\xa0\x80", "\\xed\\xa0\\x80"),  # an encoded surrogate is not UTF-8 either
        (b"SELECT 'a\\\\b'", "SELECT 'a\\\\b'"),  # backslashes are left as they are
        (b"", ""),
    ],
)
def test_bytes_that_are_not_utf8_are_shown_as_hex_escapes(raw: bytes, expected: str) -> None:
    text = shown(wire_text(raw))
    assert text == expected
    assert text.encode("utf-8").decode("utf-8") == text  # every encoder takes it
    assert json.loads(json.dumps(text, ensure_ascii=False)) == text
    assert shown(text) == text  # shown twice is shown once


def test_a_valid_text_is_the_same_object() -> None:
    for text in ("SELECT 1", "SELECT 'é', '日本', '🙂'"):
        assert shown(text) is text


def test_other_lone_surrogates_are_shown_as_unicode_escapes() -> None:
    """A JSON document may hold a lone surrogate that no byte made: ``\\ud800``; a pair JSON joins is a character."""
    assert shown(json.loads('"a\\ud800b\\udc00"')) == "a\\ud800b\\udc00"
    assert shown(json.loads('"\\ud83d\\ude00"')) == "\U0001f600"


def test_shown_in_shows_every_text_of_a_report_keys_too() -> None:
    report = json.loads(json.dumps({"query_digest": [{"digest_text": "SELECT \udcff", "count_star": 2}]}))
    report["by_schema"] = {"db\udcfe": [1.5, None, True, "x"]}
    assert shown_in(report) == {
        "query_digest": [{"digest_text": "SELECT \\xff", "count_star": 2}],
        "by_schema": {"db\\xfe": [1.5, None, True, "x"]},
    }
    assert shown_in("\udcff") == "\\xff" and shown_in(7) == 7 and shown_in(None) is None
    json.dumps(shown_in(report), ensure_ascii=False).encode("utf-8")
