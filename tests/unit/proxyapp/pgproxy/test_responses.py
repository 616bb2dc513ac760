"""The order of a server's answers: the proxy's own messages' answers left out, its own answers given in turn, and
an error that skips to the Sync."""

from __future__ import annotations

from proxyapp.pgproxy.responses import SWALLOW, ResponseOrder
from proxyapp.pgproxy.statements import server_statement
from proxyapp.pgsql.messages import error_response, message

PARSE, BIND, EXECUTE, SYNC, QUERY = (ord(c) for c in "PBESQ")


def answers(order: ResponseOrder, *kinds: bytes) -> list[bytes]:
    """What the client gets for server messages of ``kinds`` (an ``E`` is an ErrorResponse)."""
    out = []
    for kind in kinds:
        msg = error_response("42P01", "no table") if kind == b"E" else message(kind)
        written, _ = order.received(msg)
        out += [written[i : i + 5][:1] for i in range(0, len(written), 5)] if kind != b"E" else [b"E"]
    return out


def test_the_answers_to_the_proxys_own_messages_are_left_out() -> None:
    order = ResponseOrder()
    order.sent(PARSE, SWALLOW, "pf_x")  # the proxy prepares a statement the client bound
    order.sent(BIND)
    order.sent(EXECUTE, query="SELECT 1")
    order.sent(SYNC)
    assert answers(order, b"1", b"2", b"C", b"Z") == [b"2", b"C", b"Z"]
    assert order.parsed == ["pf_x"] and not order


def test_the_proxys_own_answer_waits_for_its_turn() -> None:
    order = ResponseOrder()
    order.sent(BIND)
    assert order.answer_myself(message(b"1")) == b""  # owed after the Bind's answer
    order.sent(SYNC)
    written, _ = order.received(message(b"2"))
    assert written == message(b"2") + message(b"1")
    assert ResponseOrder().answer_myself(message(b"3")) == message(b"3")  # nothing owed: at once


def test_an_error_skips_to_the_sync_and_a_failed_parse_is_forgotten() -> None:
    order = ResponseOrder()
    order.sent(PARSE, SWALLOW, "pf_bad")
    order.sent(BIND)
    order.sent(EXECUTE, query="SELECT * FROM nowhere")
    order.sent(SYNC)
    written, ended = order.received(error_response("42P01", "relation does not exist"))
    assert written.startswith(b"E")  # the error is the client's, whoever's message caused it
    assert ended is not None and ended.kind == PARSE
    assert order.failed_parse == ["pf_bad"]
    written, ended = order.received(message(b"Z", b"I"))
    assert written == message(b"Z", b"I") and ended is not None and ended.kind == SYNC and not order


def test_a_statement_ends_with_its_text_and_start() -> None:
    order = ResponseOrder()
    order.sent(QUERY, query="SELECT 1", started=12.5)
    for kind in (b"T", b"D", b"C"):
        assert order.received(message(kind))[1] is None
    _, ended = order.received(message(b"Z", b"I"))
    assert ended is not None and (ended.query, ended.started) == ("SELECT 1", 12.5)


def test_an_error_before_the_sync_is_sent_skips_until_the_next_sync() -> None:
    order = ResponseOrder()
    statement = server_statement(b"SELEC 1", b"")
    order.sent(PARSE, payload=statement.server_name, named=("s1", statement))
    assert answers(order, b"E") == [b"E"]
    assert order.skipping and not order  # nothing owed, and the server drops all up to the Sync
    assert order.failed_parse == [statement.server_name] and [e.named for e in order.undone] == [("s1", statement)]
    order.sent(SYNC)
    assert not order.skipping
    assert answers(order, b"Z") == [b"Z"] and not order


def test_an_error_with_its_sync_already_sent_skips_nothing_after_it() -> None:
    order = ResponseOrder()
    order.sent(PARSE)
    assert order.answer_myself(message(b"1")) == b""  # a Parse the proxy answers, dropped by the server too
    order.sent(SYNC)
    assert answers(order, b"E") == [b"E"]
    assert not order.skipping and len(order) == 1
    assert answers(order, b"Z") == [b"Z"]


def test_a_named_parse_before_an_unanswered_sync_is_unsettled() -> None:
    order = ResponseOrder()
    statement = server_statement(b"SELECT 1", b"")
    order.sent(PARSE, payload=statement.server_name, named=("s1", statement))
    assert not order.synced_parse  # in the same group as what follows: the server skips alike
    order.sent(SYNC)
    order.sent(BIND)
    assert order.synced_parse and order.syncs == 1
    assert answers(order, b"1", b"Z") == [b"1", b"Z"]
    assert not order.synced_parse and order.syncs == 0
