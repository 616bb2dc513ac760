"""The guard against signalling a pooler client's process id (proxyapp.pgproxy.client_pids): an id written in the
statement or bound to its parameter, in text or binary, is found; a server's id, another parameter, NULL and a
malformed Bind are told apart."""

from __future__ import annotations

import struct

import pytest

from proxyapp.pgproxy.client_pids import CLIENT_PIDS, bound_client_pid, refuse_written_pid
from proxyapp.pgproxy.routing import Route
from proxyapp.pgproxy.statements import bind_parameter

CLIENT = CLIENT_PIDS.start + 12345


def bind_body(values: list[bytes | None], formats: list[int]) -> bytes:
    """A Bind body of the unnamed portal and statement."""
    out = b"\0\0" + struct.pack(f"!h{len(formats)}h", len(formats), *formats) + struct.pack("!h", len(values))
    for value in values:
        out += struct.pack("!i", -1) if value is None else struct.pack("!i", len(value)) + value
    return out + b"\0\0"


def test_a_written_client_pid_is_refused_and_a_servers_passes() -> None:
    refused = refuse_written_pid(Route(None, f"SELECT pg_terminate_backend( {CLIENT} )", None))
    assert refused.error is not None and str(CLIENT) in refused.error and refused.sqlstate == "42501"
    assert refuse_written_pid(Route(None, "SELECT pg_cancel_backend(4242)", None)).error is None
    assert refuse_written_pid(Route(None, "SELECT pg_cancel_backend($1)", None)).error is None


@pytest.mark.parametrize(
    ("value", "fmt"),
    [(str(CLIENT).encode(), 0), (f" +{CLIENT} ".encode(), 0), (struct.pack("!i", CLIENT), 1),
     (struct.pack("!q", CLIENT), 1)],
)  # fmt: skip
def test_a_bound_client_pid_is_found_in_text_and_binary(value: bytes, fmt: int) -> None:
    query = "SELECT x, PG_TERMINATE_BACKEND( $2 ) FROM t WHERE y = $1"
    assert bound_client_pid(query, bind_body([b"1", value], [fmt])) == CLIENT  # one format code for all
    assert bound_client_pid(query, bind_body([b"1", value], [0, fmt])) == CLIENT


def test_other_values_and_parameters_pass() -> None:
    query = "SELECT pg_cancel_backend($1)"
    assert bound_client_pid(query, bind_body([b"4242"], [])) is None  # a server's id
    assert bound_client_pid(query, bind_body([None], [])) is None
    assert bound_client_pid(query, bind_body([b"abc"], [])) is None  # the server's error to give
    assert bound_client_pid("SELECT $1", bind_body([str(CLIENT).encode()], [])) is None
    assert bound_client_pid("SELECT pg_cancel_backend($3)", bind_body([str(CLIENT).encode()], [])) is None


def test_a_bind_that_runs_past_its_end_is_malformed() -> None:
    body = bind_body([b"12345"], [])
    with pytest.raises((ValueError, struct.error)):
        bind_parameter(body[:-6], 0)
    with pytest.raises((ValueError, struct.error)):
        bind_parameter(b"\0\0\0\5", 0)
