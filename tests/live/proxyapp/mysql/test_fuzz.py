"""Malformed bytes at the proxy's listener, before and after login, with a fixed seed.

Every case ends within a few seconds in one of the ways a server may end it (an answer, an ERR, closing the
connection), never in a hang; after all of them the proxy still serves a normal client, has no sessions left
over and has logged no unhandled error.
"""

from __future__ import annotations

import contextlib
import random
import socket
import struct
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from devstack.proxy import ProxyProcess
from devstack.sandbox import APP_PASSWORD, APP_USER, Sandbox
from devstack.stack import wait_until
from proxyapp.mysql.constants import Command
from tests.support.rawclient import (
    DEFAULT_CAPS,
    SCHEMA,
    PeerClosedError,
    RawClient,
    ensure_backend_users,
    execute_payload,
    parse_err,
    protocol_config,
    start_module_proxy,
)

SEED = 0x5EED_F022
CASE_TIMEOUT = 5.0  # seconds any single case may take before it counts as a hang
BAD_LOG_MARKERS = ("Traceback", "internal error", "Task exception was never retrieved", "Exception in callback")

# Commands whose random payloads are harmless to send (no random SQL): everything but QUERY and STMT_PREPARE.
_RANDOM_COMMANDS = [c for c in range(0x00, 0x22) if c not in (Command.QUERY, Command.STMT_PREPARE)]


@pytest.fixture(scope="module")
def proxy(sandbox: Sandbox, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProxyProcess]:
    """A rw-split proxy for the whole fuzz run."""
    ensure_backend_users(sandbox)
    p = start_module_proxy(protocol_config(sandbox), tmp_path_factory.mktemp("fuzz-proxy"))
    yield p
    p.stop()


def assert_healthy(proxy: ProxyProcess) -> None:
    """The proxy process runs, serves a PyMySQL client, and logged no unhandled error."""
    assert proxy.proc is not None and proxy.proc.poll() is None, proxy.log()[-4000:]
    with proxy.connect(database=SCHEMA, autocommit=True) as conn, conn.cursor() as cur:
        cur.execute("SELECT 1 + 1, DATABASE()")
        assert cur.fetchall() == ((2, SCHEMA),)
    log = proxy.log()
    for marker in BAD_LOG_MARKERS:
        assert marker not in log, log[log.find(marker) - 2000 : log.find(marker) + 2000]


def ends_cleanly(client: RawClient) -> None:
    """Half-close our side: the proxy must then close the connection within the case timeout."""
    with contextlib.suppress(OSError):  # already reset by the proxy
        client.sock.shutdown(socket.SHUT_WR)
    assert client.wait_closed(CASE_TIMEOUT), "the proxy kept a half-closed connection open"


def first_answer(client: RawClient) -> bytes | None:
    """The next packet from the proxy, or None when it closed the connection."""
    try:
        return client.read_packet()
    except (PeerClosedError, ConnectionResetError):
        return None


def logged_in(proxy: ProxyProcess) -> RawClient:
    """A raw client logged in as ``app`` with a short timeout."""
    return RawClient.connect(proxy.port, timeout=CASE_TIMEOUT)


def run_cases(cases: list[Callable[[], None]]) -> None:
    """Run every case; report the first failures with their index (the seed makes them reproducible)."""
    failures = []
    for i, case in enumerate(cases):
        try:
            case()
        except (AssertionError, TimeoutError, OSError) as exc:
            failures.append(f"case {i} ({getattr(case, '__name__', '?')}): {type(exc).__name__}: {exc}")
    assert not failures, "\n".join(failures[:10])


# --------------------------------------------------------------------------------------- before login


def test_garbage_instead_of_a_handshake_response(proxy: ProxyProcess) -> None:
    rng = random.Random(SEED)

    def case(data: bytes, half_close: bool) -> Callable[[], None]:
        def garbage() -> None:
            client = RawClient(proxy.port, timeout=CASE_TIMEOUT)
            try:
                client.read_greeting()
                client.send_raw(data)
                if half_close:
                    ends_cleanly(client)
            finally:
                client.close()

        return garbage

    cases = []
    for _ in range(120):
        data = rng.randbytes(rng.randint(1, 400))
        if rng.random() < 0.5:  # a well-framed packet of garbage: the proxy must answer it
            data = struct.pack("<I", len(data) | 1 << 24) + data
        cases.append(case(data, half_close=rng.random() < 0.7))
    run_cases(cases)
    assert_healthy(proxy)


def test_truncated_handshake_responses(proxy: ProxyProcess) -> None:
    rng = random.Random(SEED + 1)

    def case(cut: int, framed_whole: bool, plugin: str) -> Callable[[], None]:
        def truncated() -> None:
            client = RawClient(proxy.port, timeout=CASE_TIMEOUT)
            try:
                client.read_greeting()
                payload = client.login_payload(APP_USER, APP_PASSWORD, SCHEMA, DEFAULT_CAPS, plugin)
                if framed_whole:
                    # The header claims the whole response, the bytes stop short: then we close.
                    client.send_raw(struct.pack("<I", len(payload) | 1 << 24) + payload[:cut])
                    ends_cleanly(client)
                    return
                client.send_packet(payload[:cut], 1)
                answer = first_answer(client)
                if answer is not None and answer[:1] == b"\xfe":  # an auth switch: answer it with garbage
                    client.send_packet(rng.randbytes(20), client.seq + 1)
                    answer = first_answer(client)
                if answer is not None and answer[:1] == b"\x00":  # the cut kept all that matters: logged in
                    assert client.command(bytes((Command.PING,)))[:1] == b"\x00"
                else:
                    assert answer is None or answer[:1] == b"\xff", answer
                    if answer is not None:
                        assert parse_err(answer).code in (1043, 1045), parse_err(answer)
                ends_cleanly(client)
            finally:
                client.close()

        return truncated

    cases = []
    for _ in range(100):
        cases.append(
            case(
                cut=rng.randint(0, 90),
                framed_whole=rng.random() < 0.3,
                plugin=rng.choice(["mysql_native_password", "caching_sha2_password", "bogus_plugin"]),
            )
        )
    run_cases(cases)
    assert_healthy(proxy)


def test_a_header_claiming_16_mib_then_close(proxy: ProxyProcess) -> None:
    rng = random.Random(SEED + 2)

    def case(after_login: bool, tail: int, half_close: bool) -> Callable[[], None]:
        def huge() -> None:
            if after_login:
                client = logged_in(proxy)
                seq = 0
            else:
                client = RawClient(proxy.port, timeout=CASE_TIMEOUT)
                client.read_greeting()
                seq = 1
            try:
                length = rng.choice([0xFFFFFF, 0xFFFFFE, 0x800000 + rng.randint(0, 0x7FFFFF)])
                client.send_raw(struct.pack("<I", length | seq << 24) + rng.randbytes(tail))
                if half_close:
                    ends_cleanly(client)
            finally:
                client.close()

        return huge

    cases = [case(rng.random() < 0.5, rng.randint(0, 70_000), rng.random() < 0.5) for _ in range(30)]
    run_cases(cases)
    assert_healthy(proxy)


# --------------------------------------------------------------------------------------- after login


def test_garbage_commands_after_login(proxy: ProxyProcess) -> None:
    rng = random.Random(SEED + 3)

    def alive(client: RawClient) -> None:
        assert client.rows("SELECT 7") == [[b"7"]]

    def bogus_execute() -> None:
        client = logged_in(proxy)
        try:
            stmt_id = rng.choice([0, 1, 2, 999, 0xFFFFFFFF, rng.randint(0, 1 << 32 - 1)])
            err = parse_err(client.command(execute_payload(stmt_id, [])))
            assert err.code == 1243, err
            alive(client)
        finally:
            client.close()

    def truncated_execute() -> None:
        client = logged_in(proxy)
        try:
            stmt = client.prepare("SELECT ?, ?")
            whole = execute_payload(stmt.stmt_id, [rng.randint(-100, 100), "x" * rng.randint(0, 300)])
            cut = rng.randint(1, len(whole) - 1)
            client.send_packet(whole[:cut], 0)
            answer = first_answer(client)
            if cut < 5:  # not even a statement id: a malformed packet, the session ends
                assert answer is None or parse_err(answer).code == 1043, answer
                ends_cleanly(client)
                return
            assert answer is not None
            if answer[:1] == b"\xff":  # the proxy's or the server's 1835/1210, never a "lost backend"
                assert parse_err(answer).code in (1835, 1210), parse_err(answer)
            else:  # MariaDB itself runs an execute whose last string value is cut short
                client.read_results(answer, binary=True)
            alive(client)
        finally:
            client.close()

    def truncated_change_user() -> None:
        client = logged_in(proxy)
        try:
            whole = bytes((Command.CHANGE_USER,)) + b"app2\x00\x14" + rng.randbytes(20) + b"app\x00\x2d\x00"
            client.send_packet(whole[: rng.randint(1, len(whole) - 1)], 0)
            answer = first_answer(client)
            if answer is not None and answer[:1] == b"\xfe":  # re-challenged: a wrong answer
                client.send_packet(rng.randbytes(rng.choice([0, 5, 20])), client.seq + 1)
                answer = first_answer(client)
            assert answer is None or answer[:1] == b"\xff", answer
            ends_cleanly(client)
        finally:
            client.close()

    def empty_packet() -> None:
        client = logged_in(proxy)
        try:
            client.send_packet(b"", 0)
            answer = first_answer(client)
            assert answer is None or answer[:1] == b"\xff", answer
            ends_cleanly(client)
        finally:
            client.close()

    def random_command() -> None:
        client = logged_in(proxy)
        try:
            command = rng.choice(_RANDOM_COMMANDS)
            client.send_packet(bytes((command,)) + rng.randbytes(rng.choice([0, 1, 3, 4, 9, 40, 300])), 0)
            ends_cleanly(client)  # whatever it answered, it must still notice our end
        finally:
            client.close()

    def garbage_query() -> None:
        client = logged_in(proxy)
        try:
            sql = b"SELECT '" + rng.randbytes(rng.randint(0, 200)).replace(b";", b" ") + b"'"
            answer = client.command(bytes((Command.QUERY,)) + sql)
            assert answer[:1] in (b"\xff", b"\x01"), answer  # a syntax error, or a one-column result
            client.read_results(answer)
            alive(client)
        finally:
            client.close()

    def unknown_command() -> None:
        client = logged_in(proxy)
        try:
            err = parse_err(client.command(bytes((rng.choice([0x00, 0x05, 0x07, 0x08, 0x0D, 0x40, 0xFF]),))))
            assert err.code == 1047, err
            alive(client)
        finally:
            client.close()

    kinds = [
        bogus_execute,
        truncated_execute,
        truncated_change_user,
        empty_packet,
        random_command,
        random_command,
        garbage_query,
        unknown_command,
    ]
    cases = [rng.choice(kinds) for _ in range(160)]
    run_cases(cases)
    assert_healthy(proxy)


def test_connections_that_close_at_once(proxy: ProxyProcess) -> None:
    rng = random.Random(SEED + 4)

    def one(i: int) -> None:
        sock = socket.create_connection(("127.0.0.1", proxy.port), timeout=CASE_TIMEOUT)
        how = i % 4
        if how == 1:  # reset instead of a FIN
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        elif how == 2:
            sock.recv(4)  # part of the greeting
        elif how == 3:
            sock.recv(1024)
            sock.sendall(rng.randbytes(3))  # part of a packet header
        sock.close()

    with ThreadPoolExecutor(max_workers=16) as pool:
        list(pool.map(one, range(400)))
    assert_healthy(proxy)


def test_no_session_is_left_behind(proxy: ProxyProcess) -> None:
    """After all the abuse, every aborted session has been cleaned up (only ours is open)."""
    wait_until(lambda: proxy.stats()["global"]["Client_Connections_connected"] == 0, "every aborted session gone", 10)
    client = RawClient.connect(proxy.port)
    try:
        assert client.rows("SELECT 'fine'") == [[b"fine"]]
        assert proxy.stats()["global"]["Client_Connections_connected"] == 1
    finally:
        client.close()
    assert_healthy(proxy)
