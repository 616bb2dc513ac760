"""The PostgreSQL messages the proxy reads first and answers with."""

from __future__ import annotations

import struct

import pytest

from proxyapp.pgsql.messages import CANCEL_REQUEST, SSL_REQUEST, error_response, first_message, is_cancel_request


def test_first_messages_are_told_apart() -> None:
    assert is_cancel_request(struct.pack("!ii", 16, CANCEL_REQUEST))
    assert not is_cancel_request(struct.pack("!ii", 8, SSL_REQUEST))
    assert first_message(struct.pack("!ii", 40, 196608)) == (40, 196608)
    with pytest.raises(ValueError, match="needs 8 bytes"):
        first_message(b"\0\0\0")


def test_an_error_response_carries_its_fields() -> None:
    message = error_response("53300", "too many\0clients", detail="d")
    assert message[:1] == b"E"
    (length,) = struct.unpack("!i", message[1:5])
    assert length == len(message) - 1
    fields = dict((f[:1], f[1:].decode()) for f in message[5:-1].split(b"\0") if f)
    assert fields == {b"S": "FATAL", b"V": "FATAL", b"C": "53300", b"M": "too many clients", b"D": "d"}
