"""Loopback ports for the things tests start: picked where no outgoing connection can take them meanwhile."""

from __future__ import annotations

import socket

from devstack import ports


def test_a_free_port_is_below_the_ephemeral_range_and_can_be_listened_on() -> None:
    ceiling = int(ports.EPHEMERAL_RANGE.read_text().split()[0])
    picked = {ports.free_port() for _ in range(20)}
    assert all(ports.LOWEST <= port < ceiling for port in picked), picked
    assert len(picked) > 1  # drawn at random, so processes picking side by side rarely meet
    with socket.socket() as s:
        s.bind((ports.HOST, picked.pop()))
        s.listen()


def test_a_port_someone_listens_on_is_not_free() -> None:
    with socket.socket() as s:
        s.bind((ports.HOST, ports.free_port()))
        s.listen()
        assert not ports.port_free(s.getsockname()[1])
