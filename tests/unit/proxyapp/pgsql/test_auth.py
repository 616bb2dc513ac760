"""PostgreSQL password authentication as a client, against RFC 7677's worked example and PostgreSQL's MD5 rule."""

from __future__ import annotations

import base64
import hashlib

import pytest

from proxyapp.pgproxy.login import server_password
from proxyapp.pgsql.auth import (
    AuthError,
    ScramClient,
    ScramServer,
    Verifier,
    is_md5_hash,
    is_scram_verifier,
    md5_matches,
    md5_password,
    scram_verifier,
)

SERVER_FIRST = b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"


def test_scram_follows_rfc_7677() -> None:
    client = ScramClient("pencil", nonce="rOprNGfwEbeRWgbNEkqO", user="user")
    assert client.first() == b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
    assert client.final(SERVER_FIRST) == (
        b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
    )
    client.verify(b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")


def test_scram_refuses_a_server_that_does_not_know_the_password() -> None:
    client = ScramClient("pencil", nonce="rOprNGfwEbeRWgbNEkqO", user="user")
    client.final(SERVER_FIRST)
    with pytest.raises(AuthError, match="signature is wrong"):
        client.verify(b"v=AAAATRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")
    with pytest.raises(AuthError, match="nonce does not extend ours"):
        ScramClient("pencil", nonce="other").final(SERVER_FIRST)
    with pytest.raises(AuthError, match="malformed"):
        ScramClient("pencil").final(b"\xff garbage")


def test_md5_is_postgresqls_double_hash() -> None:
    inner = hashlib.md5(b"secretalice").hexdigest()
    expected = "md5" + hashlib.md5(inner.encode() + b"salt").hexdigest()
    assert md5_password("alice", "secret", b"salt") == expected.encode()


def test_the_server_side_accepts_the_client_side_and_refuses_a_wrong_password() -> None:
    verifier = scram_verifier("pencil")
    client = ScramClient("pencil")
    server = ScramServer(verifier)
    server_final = server.final(client.final(server.first(client.first())))
    client.verify(server_final)
    wrong = ScramClient("crayon")
    server = ScramServer(verifier)
    with pytest.raises(AuthError, match="password authentication failed"):
        server.final(wrong.final(server.first(wrong.first())))


def test_a_verifier_reads_as_postgresql_writes_it() -> None:
    made = scram_verifier("pencil", salt=b"0123456789abcdef")
    text = (
        f"SCRAM-SHA-256${made.iterations}:{base64.b64encode(made.salt).decode()}$"
        f"{base64.b64encode(made.stored_key).decode()}:{base64.b64encode(made.server_key).decode()}"
    )
    assert Verifier.parse(text) == made
    with pytest.raises(ValueError, match="not a SCRAM-SHA-256 verifier"):
        Verifier.parse("SCRAM-SHA-256$x")


def test_md5_answers_are_checked_against_clear_text_or_hash() -> None:
    answer = md5_password("alice", "secret", b"salt")
    stored_hash = "md5" + hashlib.md5(b"secretalice").hexdigest()
    assert md5_matches("alice", "secret", b"salt", answer)
    assert md5_matches("alice", stored_hash, b"salt", answer)
    assert not md5_matches("alice", "other", b"salt", answer)


def test_stored_passwords_are_told_hash_verifier_or_clear_text() -> None:
    md5_hash = "md5" + hashlib.md5(b"secretalice").hexdigest()
    verifier = "SCRAM-SHA-256$4096:c2FsdA==$c3RvcmVk:c2VydmVy"
    assert is_md5_hash(md5_hash) and not is_scram_verifier(md5_hash)
    assert is_scram_verifier(verifier) and not is_md5_hash(verifier)
    assert not is_md5_hash("md5-but-clear") and not is_scram_verifier("secret")
    assert [server_password(p) for p in (md5_hash, verifier, "md5-but-clear")] == ["", "", "md5-but-clear"]
