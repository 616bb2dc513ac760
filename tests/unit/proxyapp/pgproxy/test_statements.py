"""Named prepared statements of the pooling proxy (proxyapp.pgproxy.statements) whose text or name is not UTF-8: each
keeps its bytes, and two such statements are never taken for one another."""

from __future__ import annotations

from proxyapp.pgproxy.statements import parse_fields, parse_message, server_statement
from proxyapp.pgsql.messages import error_response


def test_statements_that_are_not_utf8_keep_their_bytes_and_names() -> None:
    """``SELECT '\\xff'`` and ``SELECT '\\xfe'`` were both read as ``SELECT '\\ufffd'``: the text the digest shows,
    the Parse a rewrite rule re-encoded (a valid query the server ran), one and the same for the proxy."""
    first, second = server_statement(b"SELECT '\xff'", b"\0\0"), server_statement(b"SELECT '\xfe'", b"\0\0")
    assert first.server_name != second.server_name
    assert first.query != second.query
    assert first.query.encode("utf-8", "surrogateescape") == b"SELECT '\xff'"
    assert b"SELECT '\xff'\0" in first.parse


def test_a_statement_name_that_is_not_utf8_round_trips() -> None:
    body = parse_message("s\udcff", b"SELECT 1", b"\0\0")[5:]
    assert body.startswith(b"s\xff\0SELECT 1\0")
    name, query, _ = parse_fields(body)
    assert (name, query) == ("s\udcff", b"SELECT 1")
    assert name != parse_fields(parse_message("s\udcfe", b"SELECT 1", b"\0\0")[5:])[0]


def test_the_proxys_own_errors_show_such_bytes_escaped() -> None:
    assert b"Mno rule for 'SELECT \\xff'\0" in error_response("42000", "no rule for 'SELECT \udcff'")
