"""The proxy's command surface, spoken in raw packets: field lists, statistics, options, prepared statement
commands, unknown commands, and refused logins."""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Iterator

import pymysql
import pytest

from devstack.proxy import ProxyProcess
from devstack.sandbox import APP_PASSWORD, APP_USER, Sandbox
from proxyapp.mysql.constants import Cap, Command
from proxyapp.mysql.packets import frame
from proxyapp.session.prepared import MAX_STATEMENTS_PER_CONNECTION
from tests.support.harness import StartProxy
from tests.support.rawclient import (
    APP2_PASSWORD,
    APP2_USER,
    DEFAULT_CAPS,
    SCHEMA,
    Err,
    Ok,
    RawClient,
    ResultSet,
    ServerError,
    encode_params,
    ensure_backend_users,
    execute_payload,
    is_eof,
    parse_column,
    parse_err,
    protocol_config,
    start_module_proxy,
)


@pytest.fixture(scope="module")
def proxy(sandbox: Sandbox, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProxyProcess]:
    """One rw-split proxy for the module, with a table to look at."""
    ensure_backend_users(sandbox)
    with sandbox.primary().connect() as conn, conn.cursor() as cur:
        cur.execute(f"CREATE TABLE IF NOT EXISTS {SCHEMA}.pc_fields (id INT PRIMARY KEY, name VARCHAR(20), b BLOB)")
        cur.execute(f"CREATE TABLE IF NOT EXISTS {SCHEMA}.pc_blobs (id INT PRIMARY KEY, b LONGBLOB)")
    sandbox.wait_replicated()
    p = start_module_proxy(protocol_config(sandbox), tmp_path_factory.mktemp("pc-proxy"))
    yield p
    p.stop()


@pytest.fixture
def raw(proxy: ProxyProcess) -> Iterator[RawClient]:
    """A logged-in raw client on schema ``app``."""
    client = RawClient.connect(proxy.port)
    yield client
    client.close()


def assert_alive(client: RawClient) -> None:
    """The session still answers queries."""
    assert client.rows("SELECT 40 + 2") == [[b"42"]]


def test_field_list_lists_the_columns_of_a_table(raw: RawClient) -> None:
    raw.send_packet(bytes((Command.FIELD_LIST,)) + b"pc_fields\x00", 0)
    names = []
    while True:
        packet = raw.read_packet()
        assert packet[:1] != b"\xff", parse_err(packet)
        if is_eof(packet):
            break
        column = parse_column(packet)
        assert column.table == "pc_fields"
        names.append(column.name)
    assert names == ["id", "name", "b"]
    # A wildcard narrows the list; an unknown table is the backend's 1146.
    raw.send_packet(bytes((Command.FIELD_LIST,)) + b"pc_fields\x00na%", 0)
    assert parse_column(raw.read_packet()).name == "name"
    assert is_eof(raw.read_packet())
    reply = raw.command(bytes((Command.FIELD_LIST,)) + b"no_such_table\x00")
    assert parse_err(reply).code == 1146
    assert_alive(raw)


def test_statistics_is_a_status_string(raw: RawClient) -> None:
    raw.rows("SELECT 1")
    text = raw.command(bytes((Command.STATISTICS,))).decode()
    assert text.startswith("Uptime: ")
    fields = dict(part.split(": ", 1) for part in text.split("  "))
    assert int(fields["Threads"]) >= 1
    assert int(fields["Questions"]) >= 1
    assert_alive(raw)


def test_set_option_turns_multi_statements_off_and_on(raw: RawClient) -> None:
    results = raw.query("SELECT 1; SELECT 2")
    assert [r.rows for r in results if isinstance(r, ResultSet)] == [[[b"1"]], [[b"2"]]]
    off = raw.command(bytes((Command.SET_OPTION,)) + struct.pack("<H", 1))
    assert is_eof(off)
    (result,) = raw.query("SELECT 1; SELECT 2")
    assert isinstance(result, Err) and result.code == 1064
    assert_alive(raw)
    on = raw.command(bytes((Command.SET_OPTION,)) + struct.pack("<H", 0))
    assert is_eof(on)
    results = raw.query("SELECT 3; SELECT 4")
    assert [r.rows for r in results if isinstance(r, ResultSet)] == [[[b"3"]], [[b"4"]]]
    bad = raw.command(bytes((Command.SET_OPTION,)) + struct.pack("<H", 7))
    assert parse_err(bad).code == 1047
    assert_alive(raw)


def test_a_client_without_multi_statements_gets_a_syntax_error(proxy: ProxyProcess) -> None:
    client = RawClient.connect(proxy.port, caps=DEFAULT_CAPS & ~Cap.MULTI_STATEMENTS)
    try:
        (result,) = client.query("SELECT 1; SELECT 2")
        assert isinstance(result, Err) and result.code == 1064
        assert_alive(client)
    finally:
        client.close()


def test_send_long_data_then_execute(raw: RawClient) -> None:
    raw.query("DELETE FROM pc_blobs WHERE id IN (1, 2)")
    stmt = raw.prepare("INSERT INTO pc_blobs (id, b) VALUES (?, ?)")
    assert stmt.num_params == 2
    chunks = [bytes([i]) * 100_000 for i in range(1, 6)]
    for chunk in chunks:
        raw.send_long_data(stmt.stmt_id, 1, chunk)
    result = raw.execute(stmt.stmt_id, [1, b""], long_data=frozenset({1}))
    assert isinstance(result, Ok) and result.affected_rows == 1, result
    # Long data is per execution: the next one binds its value inline.
    result = raw.execute(stmt.stmt_id, [2, b"inline"])
    assert isinstance(result, Ok) and result.affected_rows == 1, result
    rows = raw.rows("SELECT id, LENGTH(b), MD5(b) FROM pc_blobs WHERE id = 1 FOR UPDATE")
    assert rows == [[b"1", b"500000", hashlib.md5(b"".join(chunks)).hexdigest().encode()]]
    assert raw.rows("SELECT b FROM pc_blobs WHERE id = 2 FOR UPDATE") == [[b"inline"]]


def test_stmt_reset_discards_long_data(raw: RawClient) -> None:
    stmt = raw.prepare("SELECT LENGTH(?), ?")
    raw.send_long_data(stmt.stmt_id, 0, b"discarded" * 10)
    reset = raw.command(bytes((Command.STMT_RESET,)) + struct.pack("<I", stmt.stmt_id))
    assert reset[:1] == b"\x00", reset
    raw.send_long_data(stmt.stmt_id, 0, b"kept")
    result = raw.execute(stmt.stmt_id, [b"", 5], long_data=frozenset({0}))
    assert isinstance(result, ResultSet) and result.error is None, result
    assert result.rows == [[4, 5]]
    unknown = raw.command(bytes((Command.STMT_RESET,)) + struct.pack("<I", 999_999))
    assert parse_err(unknown).code == 1243


def test_prepared_statement_values_round_trip(raw: RawClient) -> None:
    stmt = raw.prepare("SELECT ? + 1, CONCAT(?, '!'), ? IS NULL, HEX(?)")
    for n in (1, 2, -7):
        result = raw.execute(stmt.stmt_id, [n, "é-utf8", None, b"\x00\xff"])
        assert isinstance(result, ResultSet) and result.error is None, result
        assert result.rows == [[n + 1, "é-utf8!".encode(), 1, b"00FF"]]


def test_stmt_close_then_execute_is_1243(raw: RawClient) -> None:
    stmt = raw.prepare("SELECT ?")
    result = raw.execute(stmt.stmt_id, [7])
    assert isinstance(result, ResultSet) and result.rows == [[7]]
    raw.send_packet(bytes((Command.STMT_CLOSE,)) + struct.pack("<I", stmt.stmt_id), 0)  # no answer
    result = raw.execute(stmt.stmt_id, [7])
    assert isinstance(result, Err) and result.code == 1243, result
    assert_alive(raw)
    # A new statement gets a new id, and works.
    again = raw.prepare("SELECT ?")
    assert again.stmt_id != stmt.stmt_id
    result = raw.execute(again.stmt_id, [8])
    assert isinstance(result, ResultSet) and result.rows == [[8]]


@pytest.mark.parametrize("command", [0x00, 0x05, 0x08, 0x0A, 0x12, 0x1D, 0x20, 0x7F, 0xEE])
def test_an_unknown_command_is_1047_and_the_session_goes_on(raw: RawClient, command: int) -> None:
    reply = raw.command(bytes((command,)) + b"junk")
    err = parse_err(reply)
    assert err.code == 1047, err
    assert_alive(raw)


def test_ping_init_db_and_quit(raw: RawClient) -> None:
    assert raw.command(bytes((Command.PING,)))[:1] == b"\x00"
    assert raw.command(bytes((Command.INIT_DB,)) + b"app_other")[:1] == b"\x00"
    assert raw.rows("SELECT DATABASE()") == [[b"app_other"]]
    assert parse_err(raw.command(bytes((Command.INIT_DB,)) + b"no_such_db")).code == 1049
    assert raw.rows("SELECT DATABASE()") == [[b"app_other"]]
    raw.send_packet(bytes((Command.QUIT,)), 0)
    assert raw.wait_closed()


# --------------------------------------------------------------------------------------- refused logins


def _denied(proxy: ProxyProcess, user: str, password: str) -> int:
    with pytest.raises(pymysql.err.OperationalError) as info:
        proxy.connect(user=user, password=password)
    return info.value.args[0]


def test_refused_logins_are_1045_and_counted(proxy: ProxyProcess) -> None:
    before = proxy.stats()["global"]["Access_Denied_Wrong_Password"]
    assert _denied(proxy, APP_USER, "wrong-password") == 1045
    assert _denied(proxy, "nobody_here", APP_PASSWORD) == 1045
    assert _denied(proxy, APP_USER, "") == 1045
    with pytest.raises(ServerError) as info:
        RawClient.connect(proxy.port, user="nobody_here", password="")
    assert info.value.code == 1045
    assert "using password: NO" in info.value.err.message
    after = proxy.stats()["global"]["Access_Denied_Wrong_Password"]
    assert after - before == 4
    with proxy.connect() as conn, conn.cursor() as cur:
        cur.execute("SELECT 1")
        assert cur.fetchall() == ((1,),)


def test_a_wrong_password_after_an_auth_switch_is_1045(proxy: ProxyProcess) -> None:
    """A client asking for an unknown plugin is switched to mysql_native_password, then checked."""
    client = RawClient(proxy.port)
    try:
        result = client.login(APP_USER, "wrong", SCHEMA, plugin="dialog")
        assert isinstance(result, Err) and result.code == 1045
        assert client.wait_closed()
    finally:
        client.close()
    client = RawClient(proxy.port)
    try:
        result = client.login(APP_USER, APP_PASSWORD, SCHEMA, plugin="dialog")
        assert isinstance(result, Ok), result
        assert_alive(client)
    finally:
        client.close()


def _global_status(sandbox: Sandbox, name: str) -> int:
    with sandbox.primary().connect() as conn, conn.cursor() as cur:
        cur.execute("SHOW GLOBAL STATUS LIKE %s", (name,))
        return int(cur.fetchone()[1])


def _prepared_count(sandbox: Sandbox) -> int:
    return _global_status(sandbox, "Prepared_stmt_count")


def test_executes_without_types_reuse_the_statement_each_backend_connection_holds(
    raw: RawClient, sandbox: Sandbox
) -> None:
    """The first execute binds the types and the next 40 send only values, as libmysqlclient does: each answers its
    own values (the proxy sends the types it kept to whichever pooled connection runs it), and the statement is
    prepared once per backend connection, not once per execute (the server's Com_stmt_prepare)."""
    stmt = raw.prepare("SELECT ? * 2, ?")
    prepares = _global_status(sandbox, "Com_stmt_prepare")
    first = raw.execute(stmt.stmt_id, [0, "first"])
    assert isinstance(first, ResultSet) and first.rows == [[0, b"first"]], first
    head = bytes((Command.STMT_EXECUTE,)) + struct.pack("<IBI", stmt.stmt_id, 0, 1)
    for n in range(1, 41):
        block = encode_params([n, f"v{n}"])  # null bitmap (1 byte), bound flag 1, two 2-byte types, the values
        untyped = block[:1] + b"\x00" + block[6:]
        (result,) = raw.read_results(raw.command(head + untyped), binary=True)
        assert isinstance(result, ResultSet) and result.rows == [[2 * n, f"v{n}".encode()]], result
    assert _global_status(sandbox, "Com_stmt_prepare") - prepares <= 8
    assert_alive(raw)


def test_preparing_one_statement_again_and_again_does_not_leak_backend_statements(
    raw: RawClient, sandbox: Sandbox
) -> None:
    """Clients that prepare, execute and close per call (most drivers) must not pile statements on the backend."""
    sql = "INSERT INTO pc_blobs (id, b) VALUES (?, 'leak') ON DUPLICATE KEY UPDATE b = VALUES(b)"
    before = _prepared_count(sandbox)
    for _ in range(40):
        stmt = raw.prepare(sql)
        result = raw.execute(stmt.stmt_id, [3])
        assert isinstance(result, Ok), result
        raw.send_packet(bytes((Command.STMT_CLOSE,)) + struct.pack("<I", stmt.stmt_id), 0)
    assert_alive(raw)
    assert _prepared_count(sandbox) - before <= 2


def test_many_distinct_statements_stay_under_the_per_connection_cap(raw: RawClient, sandbox: Sandbox) -> None:
    """300 statements open at once: the backend keeps at most 256 per connection, and all still execute."""
    before = _prepared_count(sandbox)
    stmts = [raw.prepare(f"SELECT ? + {k} FROM pc_fields LIMIT 0 FOR UPDATE") for k in range(300)]
    assert len({s.stmt_id for s in stmts}) == 300
    assert _prepared_count(sandbox) - before <= MAX_STATEMENTS_PER_CONNECTION + 2
    for stmt in stmts[:5] + stmts[-5:]:  # the first ones were closed on the backend: prepared again there
        result = raw.execute(stmt.stmt_id, [1])
        assert isinstance(result, ResultSet) and result.error is None and result.rows == [], result
    single = raw.prepare("SELECT ? * 2")
    result = raw.execute(single.stmt_id, [21])
    assert isinstance(result, ResultSet) and result.rows == [[42]]


def test_a_malformed_execute_is_an_error_and_the_transaction_survives(raw: RawClient) -> None:
    stmt = raw.prepare("INSERT INTO pc_blobs (id, b) VALUES (?, ?)")
    raw.query("DELETE FROM pc_blobs WHERE id = 9")
    (begin,) = raw.query("BEGIN")
    assert isinstance(begin, Ok)
    result = raw.execute(stmt.stmt_id, [9, b"in-tx"])
    assert isinstance(result, Ok) and result.status & 0x01, result  # in a transaction
    whole = execute_payload(stmt.stmt_id, [10, b"never"])
    for cut in (6, 9, 11, 12):  # flags, iteration count, null bitmap, bound flag: all cut short
        err = parse_err(raw.command(whole[:cut]))
        assert err.code in (1835, 1210), err
    assert raw.rows("SELECT b FROM pc_blobs WHERE id = 9") == [[b"in-tx"]]  # the same connection
    (rollback,) = raw.query("ROLLBACK")
    assert isinstance(rollback, Ok)
    assert raw.rows("SELECT COUNT(*) FROM pc_blobs WHERE id = 9 FOR UPDATE") == [[b"0"]]


def _change_user(client: RawClient, user: str, password: str, schema: bytes) -> Ok | Err:
    """A raw COM_CHANGE_USER (the proxy re-challenges; the client answers the auth switch)."""
    token = b"\x00" * 20  # answered against the proxy's first scramble: it always asks again
    payload = bytes((Command.CHANGE_USER,)) + user.encode() + b"\x00" + bytes((len(token),)) + token
    payload += schema + b"\x00" + struct.pack("<H", 45) + b"mysql_native_password\x00"
    client.send_packet(payload, 0)
    return client.finish_auth(password)


def test_change_user_in_raw_packets(proxy: ProxyProcess) -> None:
    client = RawClient.connect(proxy.port)
    try:
        assert isinstance(client.query("SET @before_change = 1")[0], Ok)
        result = _change_user(client, APP2_USER, APP2_PASSWORD, b"app_other")
        assert isinstance(result, Ok), result
        assert client.rows("SELECT CURRENT_USER(), DATABASE(), @before_change") == [[b"app2@%", b"app_other", None]]
        result = _change_user(client, APP_USER, "wrong", b"app")
        assert isinstance(result, Err) and result.code == 1045
        assert client.wait_closed()
    finally:
        client.close()


def test_change_user_to_a_schema_that_is_not_utf8(proxy: ProxyProcess, sandbox: Sandbox) -> None:
    """Bytes that do not decode are the client's problem, not an internal error of the proxy: the name reaches the
    server as the client sent it, and the client gets the server's own answer to it."""
    bad = b"\xff\xfe-bad"
    direct = RawClient.connect(sandbox.primary().port)
    try:
        expected = direct.read_result(direct.command(bytes((Command.INIT_DB,)) + bad))
    finally:
        direct.close()
    assert isinstance(expected, Err), expected
    client = RawClient.connect(proxy.port)
    try:
        result = _change_user(client, APP2_USER, APP2_PASSWORD, bad)
        if isinstance(result, Ok):  # the schema is checked when a backend is used
            (result,) = client.query("SELECT 1")
        assert isinstance(result, Err) and result.code == expected.code, (result, expected)
    finally:
        client.close()
    assert "internal error" not in proxy.log()
    assert_alive(RawClient.connect(proxy.port))


def test_pipelined_commands_are_answered_in_order(raw: RawClient) -> None:
    """Commands sent back to back in one write, before reading any answer."""
    batch = b"".join(
        frame(payload, 0)
        for payload in [
            bytes((Command.PING,)),
            b"\x03SELECT 1",
            bytes((Command.INIT_DB,)) + b"app_other",
            b"\x03SELECT DATABASE()",
            bytes((0x05,)),  # unknown
            b"\x03SELECT 1; SELECT 2",
            bytes((Command.PING,)),
        ]
    )
    raw.send_raw(batch * 5)
    for _ in range(5):
        assert raw.read_packet()[:1] == b"\x00"
        assert raw.read_results(raw.read_packet())[0].rows == [[b"1"]]  # type: ignore[union-attr]
        assert raw.read_packet()[:1] == b"\x00"
        assert raw.read_results(raw.read_packet())[0].rows == [[b"app_other"]]  # type: ignore[union-attr]
        assert parse_err(raw.read_packet()).code == 1047
        results = raw.read_results(raw.read_packet())
        assert [r.rows for r in results] == [[[b"1"]], [[b"2"]]]  # type: ignore[union-attr]
        assert raw.read_packet()[:1] == b"\x00"
    assert_alive(raw)


def _local_infile(client: RawClient, sql: str, content: bytes | None) -> Ok | Err:
    """Run a LOAD DATA LOCAL: answer the file request with ``content`` (None: expect no request)."""
    first = client.command(b"\x03" + sql.encode())
    if content is None:
        result = client.read_result(first)
        assert isinstance(result, Ok | Err), result
        return result
    assert first[:1] == b"\xfb", first
    seq = client.seq + 1
    for i in range(0, len(content), 4096):
        client.send_packet(content[i : i + 4096], seq)
        seq += 1
    client.send_packet(b"", seq)
    result = client.read_result(client.read_packet())
    assert isinstance(result, Ok | Err), result
    return result


def test_load_data_local_in_raw_packets(raw: RawClient, proxy: ProxyProcess, sandbox: Sandbox) -> None:
    raw.query("DELETE FROM pc_fields WHERE id >= 100")
    sql = "LOAD DATA LOCAL INFILE 'whatever.csv' INTO TABLE pc_fields FIELDS TERMINATED BY ',' (id, name)"
    content = b"".join(b"%d,row-%d\n" % (i, i) for i in range(100, 3100))  # several packets
    result = _local_infile(raw, sql, content)
    assert isinstance(result, Ok) and result.affected_rows == 3000, result
    result = _local_infile(raw, sql.replace("whatever", "empty"), b"")  # a client that declines
    assert isinstance(result, Ok) and result.affected_rows == 0, result
    assert_alive(raw)
    # A client without CLIENT_LOCAL_FILES is refused, as a server refuses it: it never sees a file request.
    client = RawClient.connect(proxy.port, caps=DEFAULT_CAPS & ~Cap.LOCAL_FILES)
    try:
        result = _local_infile(client, sql, None)
        assert isinstance(result, Err) and result.code == 4166, result
        assert_alive(client)
    finally:
        client.close()
    with sandbox.primary().connect() as conn, conn.cursor() as cur:
        cur.execute("SELECT COUNT(*), MAX(name) FROM app.pc_fields WHERE id >= 100")
        assert cur.fetchone() == (3000, "row-999")


def test_load_data_local_is_refused_when_the_proxy_disables_it(sandbox: Sandbox, start_proxy: StartProxy) -> None:
    proxy = start_proxy(protocol_config(sandbox, mysql_enable_load_data_local_infile="false"))
    client = RawClient.connect(proxy.port)
    try:
        sql = "LOAD DATA LOCAL INFILE 'x.csv' INTO TABLE pc_fields FIELDS TERMINATED BY ',' (id, name)"
        result = _local_infile(client, sql, None)
        assert isinstance(result, Err) and result.code == 4166, result
        assert_alive(client)
    finally:
        client.close()


def test_long_data_past_max_allowed_packet_is_dropped_and_the_execute_refused(
    sandbox: Sandbox, start_proxy: StartProxy
) -> None:
    proxy = start_proxy(protocol_config(sandbox, mysql_max_allowed_packet=1 << 20))
    client = RawClient.connect(proxy.port)
    try:
        stmt = client.prepare("SELECT LENGTH(?)")
        for _ in range(3):  # 1.2 MiB in all: past the 1 MiB the proxy keeps for one parameter set
            client.send_long_data(stmt.stmt_id, 0, b"x" * 400_000)
        result = client.execute(stmt.stmt_id, [b""], long_data=frozenset({0}))
        assert isinstance(result, Err) and result.code == 1153, result
        assert "longer than 'max_allowed_packet' bytes (1048576)" in result.message
        # The statement is usable again, with long data within the limit.
        client.send_long_data(stmt.stmt_id, 0, b"y" * 900_000)
        result = client.execute(stmt.stmt_id, [b""], long_data=frozenset({0}))
        assert isinstance(result, ResultSet) and result.rows == [[900_000]], result
    finally:
        client.close()


def test_a_packet_over_max_allowed_packet_is_1153(sandbox: Sandbox, start_proxy: StartProxy) -> None:
    proxy = start_proxy(protocol_config(sandbox, mysql_max_allowed_packet=1 << 20))
    client = RawClient.connect(proxy.port)
    try:
        assert client.rows("SELECT LENGTH(REPEAT('a', 900000))") == [[b"900000"]]
        # A header announcing 2 MiB: refused on sight, without waiting for (or reading) the payload.
        client.send_raw(struct.pack("<I", 2 << 20) + b"\x03SELECT '" + b"a" * 1000)
        err = parse_err(client.read_packet())
        assert err.code == 1153, err
        assert client.wait_closed()
    finally:
        client.close()
    assert_alive(RawClient.connect(proxy.port))
