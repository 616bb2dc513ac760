"""The extended query protocol through the pooling proxy, message by message beside the machine's PostgreSQL direct
(issue 41): errors before and after the client's Sync, pipelines of several Syncs, named statements the server
refused and statements re-created on another server connection after an error. Each step's answers must be the
server's own, in order; a step the proxy leaves unanswered fails at its deadline instead of hanging."""

from __future__ import annotations

import random
import socket
import struct
import threading
from collections.abc import Callable

import psycopg
import pytest

from tests.live.proxyapp.pgproxy.conftest import DATABASE, PASSWORD, PG_PORT, ROLE, Pooler, pool_config
from tests.support.pgraw import logged_in, message, read_message

StartPooler = Callable[..., Pooler]
DEADLINE = 10.0  # seconds within which every answer must come

#: A step: the messages to send, then the message type and count that end its answers.
Step = tuple[bytes, bytes, int]
#: A backend message as compared: its type and what identifies it (an error's SQLSTATE, a tag, a row).
Seen = tuple[str, str]


def parse(name: str, sql: str) -> bytes:
    return message(b"P", name.encode() + b"\0" + sql.encode() + b"\0" + struct.pack("!h", 0))


def bind(name: str, portal: str = "") -> bytes:
    return message(b"B", portal.encode() + b"\0" + name.encode() + b"\0" + struct.pack("!hhh", 0, 0, 0))


def describe(what: bytes, name: str) -> bytes:
    return message(b"D", what + name.encode() + b"\0")


def execute(portal: str = "") -> bytes:
    return message(b"E", portal.encode() + b"\0" + struct.pack("!i", 0))


SYNC, FLUSH = message(b"S"), message(b"H")


def query(sql: str) -> bytes:
    return message(b"Q", sql.encode() + b"\0")


def run(sock: socket.socket, steps: list[Step]) -> list[list[Seen]]:
    """Every step's answers, read until the step's last expected message (each read within the deadline)."""
    out = []
    for sent, until, count in steps:
        sock.sendall(sent)
        seen: list[Seen] = []
        while count:
            try:
                kind, body = read_message(sock)
            except TimeoutError:
                pytest.fail(f"no answer within {DEADLINE} s after {seen} (step {len(out) + 1}: {sent!r})")
            seen.append((kind.decode(), _identity(kind, body)))
            count -= kind == until
        out.append(seen)
    return out


def _identity(kind: bytes, body: bytes) -> str:
    if kind in (b"E", b"N"):
        fields = dict((f[:1], f[1:]) for f in body.split(b"\0") if f)
        return fields.get(b"C", b"").decode()
    if kind in (b"C", b"D", b"Z"):
        return body.hex()
    return ""


def direct() -> socket.socket:
    return logged_in(PG_PORT, ROLE, PASSWORD, DATABASE, DEADLINE)


def pooled(pooler: Pooler) -> socket.socket:
    return logged_in(pooler.port, ROLE, PASSWORD, DATABASE, DEADLINE)


#: Each case's steps; every one is answered alike by the server direct and through the proxy.
CASES: dict[str, list[Step]] = {
    "a named Parse fails before a Flush, then a Describe of it and the Sync": [
        (parse("s1", "SELEC 1") + FLUSH, b"E", 1),
        (describe(b"S", "s1") + SYNC, b"Z", 1),
        (bind("s1") + execute() + SYNC, b"Z", 1),
    ],
    "an unnamed Parse fails, then the Sync on its own": [
        (parse("", "SELEC 1") + FLUSH, b"E", 1),
        (SYNC, b"Z", 1),
        (parse("", "SELECT 1") + bind("") + execute() + SYNC, b"Z", 1),
    ],
    "a named Parse fails with its Sync, then its Bind": [
        (parse("s1", "SELEC 1") + SYNC, b"Z", 1),
        (bind("s1") + execute() + SYNC, b"Z", 1),
        (parse("s1", "SELECT 1") + bind("s1") + execute() + SYNC, b"Z", 1),
    ],
    "three Syncs in one pipeline, the middle one failing": [
        (
            parse("a", "SELECT 1")
            + bind("a")
            + execute()
            + SYNC
            + parse("", "SELEC 2")
            + bind("")
            + describe(b"P", "")
            + execute()
            + SYNC
            + parse("", "SELECT 3")
            + bind("")
            + execute()
            + SYNC,
            b"Z",
            3,
        ),
    ],
    "an error at Execute, after its Bind, then more before the Sync": [
        (parse("z", "SELECT 1 / (random() * 0)::int") + bind("z") + FLUSH, b"2", 1),
        (execute() + FLUSH, b"E", 1),
        (parse("y", "SELECT 2") + bind("z") + execute() + describe(b"S", "a") + SYNC, b"Z", 1),
        (bind("z") + execute() + SYNC + query("SELECT 4"), b"Z", 2),
    ],
    "errors in a transaction block and after it": [
        (query("BEGIN"), b"Z", 1),
        (parse("", "SELEC 1") + FLUSH, b"E", 1),
        (bind("") + execute() + SYNC, b"Z", 1),
        (parse("", "SELECT 1") + bind("") + execute() + SYNC, b"Z", 1),
        (query("ROLLBACK"), b"Z", 1),
        (parse("", "SELECT 5") + bind("") + execute() + SYNC, b"Z", 1),
    ],
}


@pytest.mark.parametrize("case", list(CASES))
def test_every_message_gets_the_servers_answers(start_pooler: StartPooler, case: str) -> None:
    pooler = start_pooler()
    with direct() as twin, pooled(pooler) as client:
        expected = run(twin, CASES[case])
        assert run(client, CASES[case]) == expected


def test_a_statement_is_prepared_again_on_another_connection_after_an_error(start_pooler: StartPooler) -> None:
    """The client's statement was prepared on one server connection; after an error the next lacks it: the proxy's
    own Parse would be dropped by the server (skipping to the Sync) and must not take the Sync's answer."""
    pooler = start_pooler(max_connections=2)
    prepare = [(parse("s2", "SELECT 2") + SYNC, b"Z", 1)]
    after_error: list[Step] = [
        (parse("", "SELEC 1") + FLUSH, b"E", 1),
        (bind("s2") + execute() + SYNC, b"Z", 1),
        (bind("s2") + execute() + SYNC, b"Z", 1),
    ]
    with direct() as twin, pooled(pooler) as client:
        expected = run(twin, prepare + after_error)
        assert run(client, prepare) == expected[:1]
        with pooler.connect() as other:  # holds the connection that prepared s2, in a transaction
            other.execute("SELECT 1")
            assert run(client, after_error) == expected[1:]
            other.rollback()


#: The model's vocabulary: statement and portal names, and statements that succeed, fail at Parse or at Execute.
_NAMES = ("", "s1", "s2")
_PORTALS = ("", "p1")
_SQL = ("SELECT 1", "SELECT 'two'::text", "SELEC 3", "SELECT 1 / (random() * 0)::int", "SELECT 4 FROM pg_class LIMIT 2")
#: Each client's first step: the unnamed statement a server connection keeps from its previous client is one the
#: pooler's client cannot see (as with PgBouncer), so both sides start from the same one.
_PRELUDE: Step = (parse("", "SELECT 0") + SYNC, b"Z", 1)


def random_step(rng: random.Random) -> Step:
    """A random batch of extended-protocol messages ending in a Sync (some with Syncs and Flushes inside)."""
    out = b""
    syncs = 0
    for _ in range(rng.randint(1, 8)):
        pick = rng.random()
        if pick < 0.25:  # a named statement closed first, as drivers do (a Parse of one that exists fails)
            name = rng.choice(_NAMES)
            closed = message(b"C", b"S" + name.encode() + b"\0") if name else b""
            out += closed + parse(name, rng.choice(_SQL))
        elif pick < 0.45:
            out += bind(rng.choice(_NAMES), rng.choice(_PORTALS))
        elif pick < 0.6:
            out += execute(rng.choice(_PORTALS))
        elif pick < 0.8:
            what = rng.choice((b"S", b"P"))
            target = what + rng.choice(_NAMES if what == b"S" else _PORTALS).encode() + b"\0"
            out += message(rng.choice((b"D", b"C")), target)
        elif pick < 0.9:
            out += FLUSH
        else:
            out += SYNC
            syncs += 1
    return out + SYNC, b"Z", syncs + 1


def test_random_pipelines_answer_as_the_server_does(start_pooler: StartPooler) -> None:
    """A model run: random Parse/Bind/Describe/Execute/Close/Flush/Sync batches with errors at Parse, Bind and
    Execute, through the proxy and direct, step by step; the first difference or hang fails with its seed."""
    pooler = start_pooler(max_connections=3)
    for seed in range(300):
        rng = random.Random(seed)
        steps = [_PRELUDE] + [random_step(rng) for _ in range(8)]
        with direct() as twin, pooled(pooler) as client:
            for at, step in enumerate(steps):
                expected = run(twin, [step])
                assert run(client, [step]) == expected, f"seed {seed}, step {at}: {step[0]!r}"


def test_a_parse_a_rule_refuses_in_a_pipeline_leaves_the_sync_to_the_server(start_pooler: StartPooler) -> None:
    """The messages before the refused Parse went to the server: their answers come at the client's Sync, which
    must reach the server (the proxy answering it itself left them unanswered)."""
    pooler = start_pooler()
    config = pool_config(pooler.port)
    config["pgsql_query_rules"] = [{"rule_id": 1, "active": 1, "match_pattern": "forbidden", "error_msg": "no"}]
    assert pooler.proxy.admin("POST", "/reload", config)["ok"]
    refused = parse("", "SELECT 'forbidden'") + bind("") + execute()
    with pooled(pooler) as client:
        [answers] = run(client, [(parse("", "SELECT 1") + bind("") + execute() + refused + SYNC, b"Z", 1)])
        assert [kind for kind, _ in answers] == ["1", "2", "D", "C", "E", "Z"]
        assert answers[4] == ("E", "28000") and answers[5] == ("Z", "49")
        assert run(client, [(query("SELECT 2"), b"Z", 1)])[0][-1] == ("Z", "49")


def within_deadline(pooler: Pooler, work: Callable[[psycopg.Connection], None]) -> None:
    """Run ``work`` on a psycopg connection through the proxy in a thread; a hang fails at the deadline (the proxy's
    stop at the test's end then ends the thread)."""
    failures: list[BaseException] = []
    conn = pooler.connect(autocommit=True)

    def run_it() -> None:
        try:
            work(conn)
        except BaseException as exc:  # the test thread reports it
            failures.append(exc)

    thread = threading.Thread(target=run_it, daemon=True)
    thread.start()
    thread.join(DEADLINE)
    if thread.is_alive():
        pytest.fail(f"psycopg waited {DEADLINE} s for the proxy")
    conn.close()
    if failures:
        raise failures[0]


def test_psycopg_pipelines_with_errors_and_prepared_statements(start_pooler: StartPooler) -> None:
    """psycopg 3's pipeline mode: a statement prepared in a pipeline and executed again after an error, executemany
    of a bad query, and an error before the pipeline's Sync."""
    pooler = start_pooler()

    def work(conn: psycopg.Connection) -> None:
        conn.prepare_threshold = 0  # every statement prepared (named), as the runs did
        for _ in range(3):
            with pytest.raises(psycopg.errors.SyntaxError), conn.pipeline():
                conn.execute("SELECT %s::int", (1,))
                conn.execute("SELEC 1")
                conn.execute("SELECT %s::int", (2,))
            with conn.pipeline():
                assert conn.execute("SELECT %s::int", (3,)).fetchone() == (3,)
        with pytest.raises(psycopg.errors.UndefinedTable), conn.cursor() as cur:
            cur.executemany("INSERT INTO no_such_table VALUES (%s)", [(i,) for i in range(5)])
        with pytest.raises(psycopg.errors.DivisionByZero), conn.pipeline() as pipeline:
            conn.execute("SELECT 1 / %s::int", (0,))
            pipeline.sync()
        assert conn.execute("SELECT %s::int", (4,)).fetchone() == (4,)

    within_deadline(pooler, work)
