"""PostgreSQL password authentication as a client, against RFC 7677's worked example and PostgreSQL's MD5 rule."""

from __future__ import annotations

import hashlib

import pytest

from proxyapp.pgsql.auth import AuthError, ScramClient, md5_password

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
