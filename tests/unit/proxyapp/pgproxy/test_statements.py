"""Named prepared statements of the pooling proxy (proxyapp.pgproxy.statements): one whose text or name is not UTF-8
keeps its bytes, and two such statements are never taken for one another; a Bind renamed for the server keeps its
portal and parameters."""

from __future__ import annotations

from proxyapp.pgproxy.statements import bind_statement, parse_fields, parse_message, rename_bind, server_statement
from proxyapp.pgsql.messages import error_response, message


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


def test_a_renamed_bind_names_the_servers_statement_and_keeps_its_portal_and_parameters() -> None:
    parameters = b"\0\1\0\1" + b"\0\1" + b"\0\0\x80\0" + b"x" * 32768 + b"\0\0"
    bind = message(b"B", b"portal\0client_stmt\0" + parameters)
    renamed = rename_bind(bind, "pf_0123abcd")
    assert renamed == message(b"B", b"portal\0pf_0123abcd\0" + parameters)
    assert (bind_statement(bind), bind_statement(renamed)) == ("client_stmt", "pf_0123abcd")
    assert rename_bind(message(b"B", b"\0s\0\0\0\0\0\0\0"), "p") == message(b"B", b"\0p\0\0\0\0\0\0\0")
