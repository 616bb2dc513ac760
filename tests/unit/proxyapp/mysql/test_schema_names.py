"""Schema names and ``SET NAMES`` arguments are one object per name: a session's schema and a pooled connection's
compare by reference."""

from __future__ import annotations

from proxyapp.mysql.constants import Cap, names_for_collation
from proxyapp.mysql.handshake import ClientLogin
from proxyapp.mysql.packets import schema_name


def _login(database: str | None) -> ClientLogin:
    caps = Cap.PROTOCOL_41 | Cap.SECURE_CONNECTION | Cap.PLUGIN_AUTH | Cap.CONNECT_WITH_DB
    sent = ClientLogin(caps, "app", b"\x01" * 20, 45, database, "mysql_native_password")
    return ClientLogin.decode(sent.encode())


def test_two_logins_naming_one_schema_hold_the_same_object() -> None:
    first, second = _login("sbtest"), _login("sbtest")
    assert first.database == "sbtest"
    assert first.database is second.database
    assert _login("other").database == "other"


def test_a_login_without_a_schema_has_none() -> None:
    assert _login(None).database is None


def test_a_schema_name_is_kept_as_sent_and_interned() -> None:
    raw = b"caf\xc3\xa9"
    assert schema_name(raw) == "café"
    assert schema_name(bytes(raw)) is schema_name(bytes(bytearray(raw)))
    odd = schema_name(b"db\xff")  # not UTF-8: escaped, so that it goes back out as the same bytes
    assert odd.encode("utf-8", "surrogateescape") == b"db\xff"
    assert schema_name(b"") == ""


def test_names_for_a_collation_are_one_object() -> None:
    assert names_for_collation(45) == "utf8mb4 COLLATE utf8mb4_general_ci"
    assert names_for_collation(45) is names_for_collation(45)
    assert names_for_collation(8) is names_for_collation(8)
