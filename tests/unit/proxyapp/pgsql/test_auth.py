"""PostgreSQL password authentication as a client, against RFC 7677's worked example and PostgreSQL's MD5 rule."""

from __future__ import annotations

import base64
import hashlib

import pytest

from proxyapp.pgsql.auth import (
    AuthError,
    ScramClient,
    ScramServer,
    SecretMissing,
    ServerSecret,
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


def _log_in(client: ScramClient, server: ScramServer) -> None:
    """One whole SCRAM exchange; AuthError from either side when it fails."""
    client.verify(server.final(client.final(server.first(client.first()))))


def test_a_verifier_and_the_clients_proof_log_in_to_a_server_keeping_that_verifier() -> None:
    """SCRAM pass-through: the proxy keeps only the verifier; the client's proof gives it the ClientKey, with which
    it proves itself to a server that keeps the same verifier, and checks that server's signature."""
    verifier = scram_verifier("pencil")
    proxy_side = ScramServer(verifier)
    _log_in(ScramClient("pencil"), proxy_side)
    secret = ServerSecret(verifier=verifier, client_key=proxy_side.client_key)
    _log_in(ScramClient(secret), ScramServer(verifier))
    impostor = Verifier(verifier.iterations, verifier.salt, verifier.stored_key, b"\0" * 32)
    with pytest.raises(AuthError, match="signature is wrong"):
        _log_in(ScramClient(secret), ScramServer(impostor))
    with pytest.raises(SecretMissing, match="salt or iterations differ"):
        _log_in(ScramClient(secret), ScramServer(scram_verifier("pencil")))  # the same password, another salt


def test_a_wrong_password_reveals_no_client_key() -> None:
    server = ScramServer(scram_verifier("pencil"))
    with pytest.raises(AuthError):
        _log_in(ScramClient("crayon"), server)
    assert server.client_key == b""


def test_an_md5_hash_answers_md5_as_the_password_would() -> None:
    stored = "md5" + hashlib.md5(b"secretalice").hexdigest()
    assert ServerSecret(md5_hash=stored).md5_answer("alice", b"salt") == md5_password("alice", "secret", b"salt")
    assert ServerSecret(password="secret").md5_answer("alice", b"salt") == md5_password("alice", "secret", b"salt")


def test_a_hash_cannot_answer_what_needs_the_password() -> None:
    md5_only = ServerSecret(md5_hash="md5" + "0" * 32)
    verifier_only = ServerSecret(verifier=scram_verifier("pencil"), client_key=b"k" * 32)
    with pytest.raises(SecretMissing, match="clear text password, and pgsql_users holds an MD5 hash"):
        md5_only.cleartext()
    with pytest.raises(SecretMissing, match="asks for MD5, and pgsql_users holds a SCRAM-SHA-256 verifier"):
        verifier_only.md5_answer("alice", b"salt")
    with pytest.raises(SecretMissing, match="asks for SCRAM-SHA-256, and pgsql_users holds an MD5 hash"):
        md5_only.scram_keys(b"salt", 4096)
    assert ServerSecret(password="pencil").cleartext() == b"pencil"
