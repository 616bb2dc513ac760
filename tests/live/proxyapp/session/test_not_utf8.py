"""Bytes that are not UTF-8 through the proxy (issue 39): sent raw, through the proxy and straight to the server, they
get the same answer byte for byte and the session goes on; the proxy's stats, metrics, events log and processlist
show them escaped (``\\xff``, ``proxyapp.shown``).

The proxy runs the read/write split (the rule engine reads every text), a rewrite rule, a query cache rule and a
mirror rule, and logs every query. Texts are sent with a raw client, so the bytes on the wire are exactly those
written here (0xff and 0xfe are never UTF-8). In a latin1 session the server takes them (``ÿ``): a user variable and a
schema named so are tracked and replayed by the proxy on other connections.
"""

from __future__ import annotations

import json
import random
import struct
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from devstack.proxy import WRITER_HG, ProxyProcess, small_pool_config
from devstack.sandbox import Sandbox
from devstack.stack import wait_until
from proxyapp import credential
from proxyapp.mysql.constants import Command
from proxyapp.mysql.packets import read_lenenc_int
from tests.support.harness import StartProxy
from tests.support.rawclient import (
    SCHEMA,
    Ok,
    RawClient,
    ResultSet,
    ensure_backend_users,
    eof_status,
    execute_payload,
    is_eof,
    parse_ok,
    protocol_config,
    start_module_proxy,
)

#: A schema whose name is ``u8ÿ`` in latin1: its bytes are not UTF-8.
LATIN1_SCHEMA = b"u8\xff"
LOCK = "pf_not_utf8"


@pytest.fixture(scope="module")
def events_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("not-utf8-events") / "events.log"


@pytest.fixture(scope="module")
def schemas(sandbox: Sandbox) -> None:
    """The app user, its schema ``app`` with a table for LOAD DATA, and the latin1 schema, on the primary and the
    replica."""
    ensure_backend_users(sandbox)
    with sandbox.primary().connect() as conn, conn.cursor() as cur:
        cur.execute(b"SET NAMES latin1")
        cur.execute(b"CREATE DATABASE IF NOT EXISTS `" + LATIN1_SCHEMA + b"`")
        cur.execute(f"CREATE TABLE IF NOT EXISTS {SCHEMA}.not_utf8_rows (a VARBINARY(10))")
    sandbox.wait_replicated()


@pytest.fixture(scope="module")
def proxy(
    sandbox: Sandbox, schemas: None, events_log: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ProxyProcess]:
    """The read/write split with a rewrite rule (``SELECT 'rw`` becomes ``SELECT 'RW``), a cache rule (``cached``)
    and a mirror rule (``mirrored``, mirrored to the writer), every query logged."""
    config = protocol_config(sandbox, mysql_eventslog_filename=str(events_log), mysql_eventslog_default_log="true")
    split = config["mysql_query_rules"]
    config["mysql_query_rules"] = [
        {"rule_id": 1, "active": 1, "match_pattern": "^SELECT 'rw", "replace_pattern": "SELECT 'RW", "apply": 0},
        {"rule_id": 2, "active": 1, "match_pattern": "cached", "cache_ttl": 600_000, "apply": 1},
        {
            "rule_id": 3,
            "active": 1,
            "match_pattern": "mirrored",
            "destination_hostgroup": WRITER_HG,
            "mirror_hostgroup": WRITER_HG,
            "apply": 1,
        },
        *({**rule, "rule_id": 10 + rule["rule_id"]} for rule in split),
    ]
    p = start_module_proxy(config, tmp_path_factory.mktemp("not-utf8-proxy"))
    yield p
    p.stop()


@pytest.fixture
def pair(proxy: ProxyProcess, sandbox: Sandbox) -> Iterator[tuple[RawClient, RawClient]]:
    """A raw client through the proxy and one straight to the primary, both logged in as ``app`` in ``app``."""
    through, direct = RawClient.connect(proxy.port), RawClient.connect(sandbox.primary().port)
    yield through, direct
    through.close()
    direct.close()


def answer(client: RawClient, payload: bytes) -> list[bytes]:
    """Send a command; its whole answer (``read_answer``)."""
    return read_answer(client, client.command(payload), payload[:1] == bytes((Command.STMT_PREPARE,)))


def read_answer(client: RawClient, first: bytes, prepare: bool = False) -> list[bytes]:
    """The packets of a whole answer whose first is ``first``, as they came (every result of a multi-result answer;
    up to a LOCAL INFILE request), with a prepare's statement id and an OK's session state left out (each side has
    its own)."""
    packets = []
    while True:
        packets.append(first)
        kind = first[:1]
        if kind in (b"\xff", b"\xfb"):
            return packets
        if prepare:
            packets[-1] = first[:1] + first[5:]
            _, columns, params = struct.unpack_from("<IHH", first, 1)
            for count in (params, columns):
                packets += [client.read_packet() for _ in range(count + 1 if count else 0)]
            return packets
        if kind == b"\x00":
            ok = parse_ok(first)
            packets[-1] = first[:1] + struct.pack("<QQHH", ok.affected_rows, ok.last_insert_id, ok.status, ok.warnings)
            status = ok.status
        else:
            count, _ = read_lenenc_int(first, 0)
            packets += [client.read_packet() for _ in range((count or 0) + 1)]  # definitions, EOF
            while True:
                packets.append(client.read_packet())
                if is_eof(packets[-1]) or packets[-1][:1] == b"\xff":
                    break
            status = eof_status(packets[-1]) if is_eof(packets[-1]) else 0
        if not status & 0x08:  # no more results
            return packets
        first = client.read_packet()


def same_answers(through: RawClient, direct: RawClient, *payloads: bytes | tuple[bytes, bytes]) -> list[list[bytes]]:
    """Each command sent through the proxy and straight to the server (a pair: what the proxy is sent, and what the
    server is sent in its stead: the rewrite rule's text) answers alike; the answers."""
    answers = []
    for payload in payloads:
        sent, expected = payload if isinstance(payload, tuple) else (payload, payload)
        proxied = answer(through, sent)
        assert proxied == answer(direct, expected), sent
        answers.append(proxied)
    return answers


def query(sql: bytes) -> bytes:
    return bytes((Command.QUERY,)) + sql


def error_code(packets: list[bytes]) -> int | None:
    """The error code of an answer that is an ERR packet, else None."""
    return struct.unpack_from("<H", packets[0], 1)[0] if packets[0][:1] == b"\xff" else None


def rows(packets: list[bytes]) -> list[bytes]:
    """The row packets of a one-result answer."""
    count, _ = read_lenenc_int(packets[0], 0)
    return packets[(count or 0) + 2 : -1]


def goes_on(client: RawClient) -> None:
    """The session still serves: a next query answers."""
    assert client.rows("SELECT 40 + 2") == [[b"42"]]


def readable(document: bytes) -> Any:
    """A JSON document whose texts every program can take: not one lone surrogate (a byte that is not UTF-8 as the
    proxy decodes it, which JSON writes ``\\udcff``) in it."""
    decoded = json.loads(document)
    json.dumps(decoded, ensure_ascii=False).encode("utf-8")  # UnicodeEncodeError on a lone surrogate
    return decoded


def admin_get(proxy: ProxyProcess, path: str) -> tuple[int, bytes]:
    """GET ``path`` of the admin endpoint: its status and body as they came (500s included)."""
    request = urllib.request.Request(f"http://127.0.0.1:{proxy.admin_port}{path}")
    request.headers.update(credential.header(credential.read(proxy.token_path)))
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def test_queries_that_are_not_utf8_answer_as_the_server_does(pair: tuple[RawClient, RawClient]) -> None:
    through, direct = pair
    errors = same_answers(
        through,
        direct,
        query(b"SELECT \xff"),  # the report's case: a parse error, and the session goes on
        query(b"SELECT `\xff`"),
        query(b"SELECT 1 FROM no_such_table\xfe"),
        query(b"USE `\xff`"),
        query(b"SELECT `mirrored\xff`"),  # mirrored too: the mirror's server refuses it alike (below)
    )
    assert [error_code(e) for e in errors] == [1064, 1300, 1064, 1300, 1300]
    goes_on(through)
    answered = same_answers(
        through,
        direct,
        query(b"SELECT '\xff', 1"),  # a string literal's bytes the server takes as they are
        (query(b"SELECT 'rw\xfe\xff'"), query(b"SELECT 'RW\xfe\xff'")),  # rewritten, the bytes kept
        query(b"SELECT 'cached \xff'"),
        query(b"SELECT 'cached \xff'"),  # from the query cache
        query(b"SELECT 1 /* \xff */, 2"),
        query(b"/* hostgroup=\xff */ SELECT 3"),
        query(b"SELECT 4; SELECT '\xfe'"),
        query(b"SET @u = '\xfe''\xff'"),  # on the writer; read back and replayed on the reader
        query(b"SELECT HEX(@u), CHARSET(@u)"),
    )
    assert rows(answered[0]) == [b"\x01\xff\x011"]
    assert rows(answered[1]) == [b"\x04RW\xfe\xff"]
    assert rows(answered[2]) == rows(answered[3]) == [b"\x08cached \xff"]
    assert rows(answered[-1]) == [b"\x06FE27FF\x07utf8mb4"]  # not 3F273F: each byte a '?'
    goes_on(through)


def test_random_bytes_that_are_not_utf8_answer_as_the_server_does(pair: tuple[RawClient, RawClient]) -> None:
    """Fuzzed queries (a fixed seed): ``SELECT`` and bytes 0x80-0xff among numbers, quotes, backticks and commas,
    each answered as the server answers it, in the one session."""
    rng = random.Random(0x39)
    alphabet = bytes(range(0x80, 0x100)) + b"0123456789 ,'`"
    cases = [b"SELECT " + bytes(rng.choice(alphabet) for _ in range(rng.randint(1, 24))) for _ in range(80)]
    same_answers(*pair, *(query(sql) for sql in cases))
    goes_on(pair[0])


def test_a_hint_that_is_not_utf8_is_refused_with_the_bytes_shown(pair: tuple[RawClient, RawClient]) -> None:
    """The proxy's own answer to a malformed hot-row hint quotes it escaped; the session goes on."""
    through, _ = pair
    refused = answer(through, query(b"/* trx_queue=\xff */ SELECT 1"))
    assert error_code(refused) == 1210 and b"'\\xff'" in refused[0]
    goes_on(through)


def test_a_latin1_session_sets_and_uses_names_that_are_not_utf8(
    pair: tuple[RawClient, RawClient], proxy: ProxyProcess
) -> None:
    """In latin1 the server takes 0xff: a user variable named ``ÿ`` (read back by the proxy after the SET, which
    ended the session with an internal error) and the schema ``u8ÿ`` (by USE and COM_INIT_DB), both replayed on
    the reader's connections, answer as the server's own session does."""
    through, direct = pair
    aborted = proxy.stats()["global"]["Client_Connections_aborted"]
    answers = same_answers(
        through,
        direct,
        query(b"SET NAMES latin1"),
        query(b"SET @`\xff` = 7, @v = '\xfe\xff'"),
        query(b"SELECT @`\xff`, HEX(@v)"),
        query(b"USE `" + LATIN1_SCHEMA + b"`"),
        query(b"SELECT HEX(DATABASE()), @`\xff`"),
        bytes((Command.INIT_DB,)) + SCHEMA.encode(),
        bytes((Command.INIT_DB,)) + LATIN1_SCHEMA,
        query(b"SELECT HEX(DATABASE())"),
        query(b"SELECT 5 AS `\xff`"),
    )
    assert rows(answers[2]) == [b"\x017\x04FEFF"]
    assert rows(answers[4]) == [b"\x087538C3BF\x017"]  # the schema's name in UTF-8: u8ÿ
    assert rows(answers[7]) == [b"\x087538C3BF"]
    assert b"\xff" in answers[8][1]  # the column's name, as the server sent it
    goes_on(through)
    assert proxy.stats()["global"]["Client_Connections_aborted"] == aborted


def test_a_schema_chosen_by_com_init_db_is_not_left_to_the_next_session(
    sandbox: Sandbox, schemas: None, start_proxy: StartProxy
) -> None:
    """One pooled connection: a session moves it to ``u8ÿ`` by COM_INIT_DB and leaves. The connection was released
    noted in the schema it was brought to, so the next session, in ``app``, ran there (any schema name)."""
    one = start_proxy(small_pool_config(sandbox.primary().port, max_connections=1))
    first = RawClient.connect(one.port)
    assert answer(first, query(b"SET NAMES latin1"))[0][:1] == b"\x00"
    assert answer(first, bytes((Command.INIT_DB,)) + LATIN1_SCHEMA)[0][:1] == b"\x00"
    first.close()
    second = RawClient.connect(one.port)
    try:
        assert second.rows("SELECT DATABASE()") == [[SCHEMA.encode()]]
    finally:
        second.close()


def prepare(client: RawClient, sql: bytes) -> tuple[int, list[bytes]]:
    """COM_STMT_PREPARE: the statement's id (each side numbers its own), and the answer without it."""
    first = client.command(bytes((Command.STMT_PREPARE,)) + sql)
    assert first[:1] == b"\x00", first
    return struct.unpack_from("<I", first, 1)[0], read_answer(client, first, prepare=True)


def test_prepared_statements_that_are_not_utf8(pair: tuple[RawClient, RawClient]) -> None:
    through, direct = pair
    [refused] = same_answers(through, direct, bytes((Command.STMT_PREPARE,)) + b"SELECT `\xff`")
    assert error_code(refused) == 1300
    goes_on(through)
    same_answers(through, direct, query(b"SET NAMES latin1"))
    prepared = [prepare(client, b"SELECT ? AS `\xff`, '\xfe'") for client in pair]
    assert prepared[0][1] == prepared[1][1]
    executed = [
        answer(client, execute_payload(stmt_id, [b"\xff\xfe"]))
        for client, (stmt_id, _) in zip(pair, prepared, strict=True)
    ]
    assert executed[0] == executed[1]
    assert executed[0][-2].endswith(b"\x02\xff\xfe\x01\xfe")  # the binary row: the parameter, the literal
    goes_on(through)


def test_load_data_local_asks_for_the_file_name_as_written(pair: tuple[RawClient, RawClient]) -> None:
    """The server's request for the file names it in the bytes the statement wrote; an empty file loads nothing."""
    sql = query(b"LOAD DATA LOCAL INFILE '/no/such/dir/\xff.csv' INTO TABLE not_utf8_rows (a)")
    requests = [answer(client, sql) for client in pair]
    assert requests[0] == requests[1] == [b"\xfb/no/such/dir/\xff.csv"]
    finished = []
    for client in pair:
        client.send_packet(b"", client.seq + 1)
        finished.append(client.read_result(client.read_packet()))
    assert finished[0] == finished[1]
    assert isinstance(finished[0], Ok) and finished[0].affected_rows == 0
    goes_on(pair[0])


def test_stats_metrics_events_and_processlist_show_the_texts_escaped(
    proxy: ProxyProcess, sandbox: Sandbox, events_log: Path
) -> None:
    """The digests of a query, a prepared statement and a schema whose bytes are not UTF-8, in /stats and /metrics;
    the events log; the mirror; the processlist."""
    client = RawClient.connect(proxy.port)
    try:
        for sql in (b"SELECT `\xff`", b"SELECT `mirrored\xff`", b"SET NAMES latin1", b"USE `" + LATIN1_SCHEMA + b"`"):
            answer(client, query(sql))
        answer(client, query(b"SELECT 6 AS `\xfe`"))
        stmt_id, _ = prepare(client, b"SELECT ? AS `prep\xff`")
        # Run three times: /metrics exports the busiest digests only, and the module's earlier tests left over a
        # hundred that ran once.
        for _ in range(3):
            assert answer(client, execute_payload(stmt_id, [b"x"]))[0] == b"\x01"  # one column
        status, body = admin_get(proxy, "/stats")
        assert status == 200
        stats = readable(body)
        texts = {(row["schemaname"], row["digest_text"]) for row in stats["query_digest"]}
        assert {
            (SCHEMA, "SELECT `\\xff`"),
            (SCHEMA, "SELECT `mirrored\\xff`"),
            ("u8\\xff", "SELECT ? AS `\\xfe`"),
            ("u8\\xff", "SELECT ? AS `prep\\xff`"),
        } <= texts
        status, body = admin_get(proxy, "/metrics")  # 500 on every scrape, once such a digest was recorded
        assert status == 200
        metrics = body.decode("utf-8")
        for label in ('digest_text="SELECT `\\\\xff`"', 'digest_text="SELECT ? AS `prep\\\\xff`"'):
            assert label in metrics
        assert 'schemaname="u8\\\\xff"' in metrics

        # The mirror's server got the bytes as they were: it refused them as the primary did (1300, not 1054).
        wait_until(lambda: "1300" in proxy.stats()["mirror"]["failed"], "the mirrored statement's error", 30)

        # A statement running in the latin1 schema, named by an alias that is not UTF-8 (a lock held on the
        # reader keeps it running): the processlist shows both escaped.
        seen: list[dict] = []
        with sandbox.replicas()[0].connect() as holder, holder.cursor() as cur:
            cur.execute(f"SELECT GET_LOCK('{LOCK}', 30)")
            client.send_packet(query(f"SELECT GET_LOCK('{LOCK}', 30) AS `".encode() + b"\xff`"), 0)

            def running() -> bool:
                status, body = admin_get(proxy, "/processlist")
                assert status == 200
                seen[:] = [row for row in readable(body) if "GET_LOCK" in row["info"]]
                return bool(seen)

            wait_until(running, "the statement in the processlist", 10)
            cur.execute(f"SELECT RELEASE_LOCK('{LOCK}')")
        assert seen[0]["db"] == "u8\\xff" and seen[0]["info"].endswith("AS `\\xff`"), seen
        result = client.read_result(client.read_packet())
        assert isinstance(result, ResultSet) and result.rows == [[b"1"]] and result.columns[0].name == "\udcff"
        goes_on(client)
    finally:
        client.close()
    events = [readable(line) for line in events_log.read_bytes().splitlines()]
    assert {"SELECT `\\xff`", "SELECT GET_LOCK('pf_not_utf8', 30) AS `\\xff`"} <= {event["query"] for event in events}
    assert any(event["schemaname"] == "u8\\xff" for event in events)
