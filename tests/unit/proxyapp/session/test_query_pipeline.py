"""The COM_QUERY path carried out (``QueryPipeline`` over ``BackendLink``) in one process, against scripted servers
(``tests.support.session_rig``): what the client gets, what each server is sent, which connection the session keeps
and what goes back to the pool."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from proxyapp.mysql.constants import ErrorCode, Status
from tests.support.session_rig import SessionRig, error, ok, rows

IN_TRANS = Status.AUTOCOMMIT | Status.IN_TRANS


def run(scenario: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(scenario())


def error_code(packet: tuple[int, bytes]) -> int:
    payload = packet[1]
    assert payload[0] == 0xFF, payload
    return int.from_bytes(payload[1:3], "little")


def test_a_read_is_relayed_as_the_server_sent_it_and_its_connection_goes_back() -> None:
    async def scenario() -> None:
        rig = SessionRig()
        answer = rows("a", ["1", "2"])
        server = rig.server(answer)
        got = await rig.query("SELECT a FROM t")
        assert b"".join(len(p).to_bytes(3, "little") + bytes((s,)) + p for s, p in got) == answer
        assert server.commands == [b"\x03SELECT a FROM t"]
        assert rig.link.conn is None and rig.idle() == 1
        assert rig.proxy.counters.Questions == 1
        (entry,) = rig.proxy.digests.rows()
        assert (entry["count_star"], entry["sum_rows_sent"], entry["hostgroup"]) == (1, 2, 10)

    run(scenario)


def test_a_transaction_opens_with_its_first_statement_and_keeps_its_connection_until_it_ends() -> None:
    async def scenario() -> None:
        rig = SessionRig()
        other = rig.server()
        first = rig.server(ok(status=IN_TRANS), ok(1, status=IN_TRANS), ok())
        assert rig.proxy.runtime.holds_begin  # hot-row queues may apply (their default): a BEGIN waits
        await rig.query("BEGIN")
        assert rig.link.conn is None and rig.link.in_transaction and rig.idle() == 2  # answered, held back
        assert first.commands == []
        await rig.query("INSERT INTO t VALUES (1)")  # runs the BEGIN first, on the connection it draws
        assert rig.link.conn is not None and rig.idle() == 1
        await rig.query("COMMIT")
        assert first.commands == [b"\x03BEGIN", b"\x03INSERT INTO t VALUES (1)", b"\x03COMMIT"]
        assert other.commands == []
        assert rig.link.conn is None and not rig.link.in_transaction and rig.idle() == 2
        assert rig.proxy.counters.Active_Transactions == 0

    run(scenario)


def test_the_proxy_answers_a_rules_error_an_empty_query_and_last_insert_id_itself() -> None:
    async def scenario() -> None:
        rules = [{"rule_id": 1, "active": 1, "match_pattern": "^DROP", "error_msg": "not here", "apply": 1}]
        rig = SessionRig(rules=rules)
        server = rig.server()
        assert error_code((await rig.query("DROP TABLE t"))[0]) == ErrorCode.RULE_BLOCKED
        assert error_code((await rig.query("  "))[0]) == 1065
        answer = await rig.query("SELECT LAST_INSERT_ID()")
        assert answer[-2][1] == b"\x010"  # its one row: the session's own value, 0
        assert server.commands == [] and rig.idle() == 1
        assert rig.proxy.counters.generated_error_packets == 2

    run(scenario)


def test_a_read_whose_server_went_away_runs_again_on_another_connection() -> None:
    async def scenario() -> None:
        rig = SessionRig()
        alive = rig.server(rows("a", ["1"]))
        gone = rig.server()  # drawn first; it answers nothing: the connection closes
        got = await rig.query("SELECT a FROM t")
        assert got[-2][1] == b"\x011"
        assert (gone.commands, alive.commands) == ([b"\x03SELECT a FROM t"], [b"\x03SELECT a FROM t"])
        assert rig.idle() == 1  # the lost connection is not pooled again

    run(scenario)


def test_a_write_whose_server_went_away_is_not_run_again() -> None:
    async def scenario() -> None:
        rig = SessionRig()
        untouched = rig.server()
        rig.server()  # drawn first; it answers nothing
        got = await rig.query("UPDATE t SET a = 1")
        assert error_code(got[0]) == ErrorCode.BACKEND_LOST
        assert b"not retried: the statement may have run" in got[0][1]
        assert untouched.commands == []

    run(scenario)


def test_a_user_variable_is_read_back_and_the_session_stays_unpinned() -> None:
    async def scenario() -> None:
        rig = SessionRig()
        server = rig.server(ok(), rows("@`a`", ["42"]))
        await rig.query("SET @a = 42")
        assert server.commands == [b"\x03SET @a = 42", b"\x03SELECT @`a`"]
        assert rig.state.user_variables == {"a": "CONVERT(X'3432' USING utf8mb4)"}  # replayed as it was read
        assert rig.link.conn is None and rig.idle() == 1

    run(scenario)


def test_a_servers_error_reaches_the_client_as_it_was_sent_and_the_connection_is_pooled_again() -> None:
    async def scenario() -> None:
        rig = SessionRig()
        server = rig.server(error(1146, "Table 'db.t' doesn't exist"), ok())
        got = await rig.query("SELECT * FROM t")
        assert error_code(got[0]) == 1146 and b"doesn't exist" in got[0][1]
        assert server.commands == [b"\x03SELECT * FROM t", b"\x0e"]  # an error tells no status: a COM_PING asks
        assert rig.idle() == 1 and rig.proxy.counters.generated_error_packets == 0

    run(scenario)
