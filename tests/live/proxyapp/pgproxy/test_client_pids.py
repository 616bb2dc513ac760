"""The process ids and cancel keys the pooling proxy tells its clients (issue 41, defect 3; issue 42, item 4): none
can name a server process, a client's pg_terminate_backend or pg_cancel_backend of one is refused (by the simple and
the extended protocol) and reaches no server, and a CancelRequest with any 32-bit key is taken, its connection closed,
on one worker and on two."""

from __future__ import annotations

from collections.abc import Callable

import psycopg
import pytest

from devstack.stack import wait_until
from tests.live.proxyapp.pgproxy.conftest import DATABASE, PASSWORD, ROLE, Pooler, server_sessions, superuser
from tests.support.pgraw import cancel_request, logged_in, login, message, read_message

StartPooler = Callable[..., Pooler]
#: The highest process id Linux may give (its pid_max is at most 2**22).
LINUX_PID_MAX = 1 << 22


@pytest.fixture(params=[1, 2], ids=["one worker", "two workers"])
def pooler(request: pytest.FixtureRequest, start_pooler: StartPooler) -> Pooler:
    return start_pooler(**{"mysql-threads": request.param})


def server_pids() -> set[int]:
    with superuser() as conn:
        return {pid for (pid,) in conn.execute("SELECT pid FROM pg_stat_activity").fetchall()}


def test_no_client_is_told_a_process_id_a_server_process_can_have(pooler: Pooler) -> None:
    clients = [pooler.connect() for _ in range(8)]
    try:
        pids = [conn.info.backend_pid for conn in clients]
        assert len(set(pids)) == len(pids)
        assert all(LINUX_PID_MAX < pid < 2**31 for pid in pids), pids
        assert not set(pids) & server_pids()
    finally:
        for conn in clients:
            conn.close()


@pytest.mark.parametrize("function", ["pg_terminate_backend", "pg_cancel_backend"])
def test_signalling_a_clients_process_id_is_refused(pooler: Pooler, function: str) -> None:
    with pooler.connect(autocommit=True) as conn, pooler.connect(autocommit=True) as other:
        pid = other.info.backend_pid
        for cursor in (psycopg.ClientCursor(conn), conn.cursor()):  # the simple protocol, then the extended one
            with pytest.raises(psycopg.errors.InsufficientPrivilege, match=f"process {pid} is a pooler client's"):
                cursor.execute(f"SELECT {function}( {pid} )")
        assert other.execute("SELECT 1").fetchone() == (1,)
        assert conn.execute("SELECT 2").fetchone() == (2,)
    assert pooler.stats()["blocked"] == 2


@pytest.mark.parametrize("function", ["pg_terminate_backend", "pg_cancel_backend"])
def test_signalling_a_clients_process_id_bound_as_a_parameter_is_refused(pooler: Pooler, function: str) -> None:
    """The id bound to ``$1`` (text and binary, the unnamed statement and a prepared one): refused at the Bind, the
    statement's Parse answered as the server answers it, the connection usable after; a server's id passes."""
    with pooler.connect(autocommit=True) as conn, pooler.connect(autocommit=True) as other:
        pid = other.info.backend_pid
        tries = [{"binary": False}, {"binary": True}, {"prepare": True}, {"prepare": True, "binary": True}]
        for options in tries:
            with pytest.raises(psycopg.errors.InsufficientPrivilege, match=f"process {pid} is a pooler client's"):
                conn.execute(f"SELECT {function}(%s)", (pid,), **options)  # type: ignore[arg-type]
            assert conn.execute("SELECT 3").fetchone() == (3,)
        assert other.execute("SELECT 1").fetchone() == (1,)
        with conn.transaction(), pytest.raises(psycopg.errors.InsufficientPrivilege):  # in a transaction too
            conn.execute(f"SELECT {function}(%s::int)", (pid,))
        (server_pid,) = conn.execute("SELECT pg_backend_pid()").fetchone() or (0,)
        assert conn.execute("SELECT pg_cancel_backend(%s)", (server_pid + 2**22,)).fetchone() == (False,)
    assert pooler.stats()["blocked"] == len(tries) + 1


def test_a_cancel_request_with_any_key_closes_its_connection(pooler: Pooler) -> None:
    sock, (pid, key) = login(pooler.port, ROLE, PASSWORD, DATABASE, 10)
    with sock:
        for wrong in (key ^ 0x8000_0000, 0xFFFF_FFFF, 0):
            cancel_request(pooler.port, pid, wrong)  # the proxy closes the connection (no OverflowError)
        cancel_request(pooler.port, 0x7FFF_FFFF, 0xFFFF_FFFF)  # no such session
        sock.sendall(message(b"Q", b"SELECT 42\0"))
        kinds = []
        while not kinds or kinds[-1] != b"Z":
            kinds.append(read_message(sock)[0])
        assert kinds == [b"T", b"D", b"C", b"Z"]
    log = pooler.proxy.log()
    assert "OverflowError" not in log and "never retrieved" not in log, log[-3000:]


def test_a_cancel_request_with_a_key_of_the_top_bit_cancels(pooler: Pooler) -> None:
    """Half of all keys have their top bit set: a cancel naming such a key reaches the running query."""
    for _ in range(64):  # a key with its top bit set comes within a few logins
        sock, (pid, key) = login(pooler.port, ROLE, PASSWORD, DATABASE, 30)
        if key >= 2**31:
            break
        sock.close()
    else:
        pytest.fail("no key of 2**31 or more in 64 logins")
    with sock:
        sock.sendall(message(b"Q", b"SELECT pg_sleep(60)\0"))
        wait_until(lambda: ("active", "SELECT pg_sleep(60)") in server_sessions(), "the sleep running", 10)
        cancel_request(pooler.port, pid, key)
        assert read_message(sock)[0] == b"T"
        kind, body = read_message(sock)
        assert kind == b"E" and b"C57014\0" in body  # canceling statement due to user request


def test_a_server_process_ended_by_an_administrator_tells_the_client_its_own_reason(pooler: Pooler) -> None:
    """pg_terminate_backend of the server process a client's statement runs on: the client gets the server's FATAL
    (57P01, "terminating connection due to administrator command") and then the end of the connection, as direct,
    with no error of the proxy's after it (asyncpg reports the last error before the close)."""
    sock = logged_in(pooler.port, ROLE, PASSWORD, DATABASE, 30)
    with sock:
        sock.sendall(message(b"Q", b"SELECT pg_sleep(60)\0"))
        wait_until(lambda: ("active", "SELECT pg_sleep(60)") in server_sessions(), "the sleep running", 10)
        with superuser() as conn:
            conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query = 'SELECT pg_sleep(60)'")
        errors = []
        while True:
            try:
                kind, body = read_message(sock)
            except (AssertionError, OSError):  # the connection ended
                break
            if kind == b"E":
                errors.append(body)
    assert len(errors) == 1 and b"C57P01\0" in errors[0], errors
    assert b"terminating connection due to administrator command" in errors[0]
