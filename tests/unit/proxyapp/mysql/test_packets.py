"""The proxy's own ERR packets (proxyapp.mysql.packets.err_packet)."""

from __future__ import annotations

from proxyapp.mysql.packets import err_packet, parse_err


def test_a_message_holding_a_clients_bytes_that_are_not_utf8_shows_them_escaped() -> None:
    """A hint the client wrote in bytes that are not UTF-8 (``trx_queue=\\xff``), quoted in the proxy's error: shown
    as ``\\xff``, as MariaDB shows them in its own messages (it was a '?')."""
    payload = err_packet(1210, "malformed trx_queue hint '\udcff'")
    assert payload.endswith(b"malformed trx_queue hint '\\xff'")
    assert parse_err(payload).message == "malformed trx_queue hint '\\xff'"
    assert err_packet(1210, "caf\u00e9").endswith("caf\u00e9".encode())
