"""mysql_replication_hostgroups: the runtime view (``proxyapp.backends.topology``) and the writer the monitor keeps,
then real proxies against a sandbox of their own whose servers' read_only the tests flip: servers move between the
writer and reader hostgroups live, a second writer is refused, and a write waits for a writer (or fails naming the
hostgroup)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pymysql
import pytest

from devstack.proxy import READER_HG, WRITER_HG, ProxyProcess, rw_split_config
from devstack.sandbox import Sandbox, SandboxServer
from tests.support.harness import StartProxy
from tests.support.monitor_support import global_variables, own_sandbox, placement, set_read_only, transitions, wait_for
from tests.unit.proxyapp.backends.test_replication_hostgroups import server_id

P, R1, R2 = ("db1", 3306), ("db2", 3306), ("db3", 3306)


# --- the runtime view -------------------------------------------------------------------------------------------


# --- the writer the monitor keeps (its findings set by hand, no servers) ----------------------------------------


# --- live ---------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def box() -> Iterator[Sandbox]:
    """A primary and one replica for this module alone (its tests flip their read_only)."""
    with own_sandbox("rhg", replicas=1) as sandbox:
        yield sandbox


@pytest.fixture
def pair(box: Sandbox) -> Iterator[tuple[SandboxServer, SandboxServer]]:
    """(primary, replica), given back their read_only (0 and 1) after the test."""
    primary, replica = box.primary(), box.replicas()[0]
    yield primary, replica
    set_read_only(replica, True)
    set_read_only(primary, False)


def ids(box: Sandbox) -> tuple[int, int]:
    return box.primary().server_id, box.replicas()[0].server_id


def start(start_proxy: StartProxy, box: Sandbox, **variables: object) -> ProxyProcess:
    primary, replica = box.primary(), box.replicas()[0]
    return start_proxy(
        rw_split_config(primary.port, [replica.port], global_variables=global_variables(dict(variables)))
    )


def insert(conn: pymysql.Connection, value: int) -> None:
    with conn.cursor() as cur:
        cur.execute("INSERT INTO app.writes VALUES (%s)", (value,))


def _attempt(action: Any, *args: Any) -> BaseException | None:
    try:
        action(*args)
    except BaseException as exc:  # handed to the test's thread
        return exc
    return None


def test_read_only_flips_move_servers_between_the_writer_and_reader_hostgroups_live(
    box: Sandbox, pair: tuple[SandboxServer, SandboxServer], start_proxy: StartProxy
) -> None:
    primary, replica = pair
    primary_id, replica_id = ids(box)
    proxy = start(start_proxy, box)
    configured = {(WRITER_HG, primary.port, "ONLINE"), (READER_HG, replica.port, "ONLINE")}
    assert placement(proxy) == configured
    client = proxy.connect(autocommit=True)
    assert server_id(client) == primary_id

    set_read_only(replica, False)  # a second writer: refused, loudly
    wait_for(lambda: "TWO WRITERS in hostgroup 10" in proxy.log(), "the second writer reported", proxy)
    assert placement(proxy) == configured and server_id(client) == primary_id

    set_read_only(primary, True)  # the writer steps down: the replica is the writer, the old primary a reader
    moved = {
        (WRITER_HG, replica.port, "ONLINE"),
        (READER_HG, replica.port, "ONLINE"),  # it was a reader: writer_is_also_reader keeps it one
        (READER_HG, primary.port, "ONLINE"),
    }
    wait_for(lambda: placement(proxy) == moved, "the writer hostgroup's new writer", proxy)
    assert server_id(client) == replica_id  # the same client session, no reconnect
    left = [t for t in transitions(proxy, primary.port) if t["hostgroup"] == WRITER_HG][-1]
    assert (left["from"], left["to"], left["reason"]) == (
        "ONLINE",
        "ABSENT",
        "read_only=1: not a writer of hostgroup 10",
    )
    joined = [t for t in transitions(proxy, replica.port) if t["hostgroup"] == WRITER_HG][-1]
    assert (joined["from"], joined["to"], joined["reason"]) == (
        "ABSENT",
        "ONLINE",
        "read_only=0: the writer of hostgroup 10",
    )
    rows = {(r["hostgroup_id"], r["port"]): r for r in proxy.admin("GET", "/runtime/servers")}
    assert rows[(WRITER_HG, replica.port)]["max_connections"] == 64  # the replica's own row, moved
    assert proxy.admin("GET", "/config")["document"]["mysql_servers"][0]["port"] == primary.port  # as published

    set_read_only(replica, True)
    set_read_only(primary, False)  # back as configured
    wait_for(lambda: placement(proxy) == configured, "the configured placement again", proxy)
    assert server_id(client) == primary_id


def test_a_write_waits_for_a_writer_while_reads_go_on(
    box: Sandbox, pair: tuple[SandboxServer, SandboxServer], start_proxy: StartProxy
) -> None:
    primary, _ = pair
    with primary.connect() as conn, conn.cursor() as cur:
        cur.execute("CREATE TABLE IF NOT EXISTS app.writes (v INT PRIMARY KEY)")
        cur.execute("DELETE FROM app.writes")
    proxy = start(start_proxy, box, **{"mysql-no_writer_wait_ms": 60_000})
    writer = proxy.connect(autocommit=True)
    insert(writer, 1)
    box.wait_replicated()

    set_read_only(primary, True)  # no server of hostgroup 10 takes writes now
    wait_for(lambda: WRITER_HG not in {hg for hg, _, _ in placement(proxy)}, "the writer hostgroup empty", proxy)
    outcome: list[BaseException | None] = []
    waiting = threading.Thread(target=lambda: outcome.append(_attempt(insert, writer, 2)))
    waiting.start()
    wait_for(lambda: proxy.stats()["global"]["Sessions_waiting_for_writer"] == 1, "the write waiting", proxy)
    with proxy.connect(autocommit=True) as reader, reader.cursor() as cur:  # reads go on from the replica
        cur.execute("SELECT COUNT(*) FROM app.writes")
        assert cur.fetchone() == (1,)
    assert outcome == []

    set_read_only(primary, False)  # the writer is back: the waiting write goes through, on the same session
    waiting.join(30)
    assert not waiting.is_alive(), "the write still waits"
    assert outcome == [None]
    insert(writer, 3)
    with primary.connect() as conn, conn.cursor() as cur:
        cur.execute("SELECT v FROM app.writes ORDER BY v")
        assert cur.fetchall() == ((1,), (2,), (3,))
    assert proxy.stats()["global"]["Writer_wait_timeouts"] == 0


def test_a_write_without_a_writer_fails_after_the_wait_naming_the_hostgroup(
    box: Sandbox, pair: tuple[SandboxServer, SandboxServer], start_proxy: StartProxy
) -> None:
    primary, _ = pair
    with primary.connect() as conn, conn.cursor() as cur:
        cur.execute("CREATE TABLE IF NOT EXISTS app.writes (v INT PRIMARY KEY)")
        cur.execute("DELETE FROM app.writes")
    proxy = start(start_proxy, box, **{"mysql-no_writer_wait_ms": 300})
    client = proxy.connect(autocommit=True)
    set_read_only(primary, True)
    wait_for(lambda: WRITER_HG not in {hg for hg, _, _ in placement(proxy)}, "the writer hostgroup empty", proxy)

    with pytest.raises(pymysql.err.OperationalError) as failed:
        insert(client, 1)
    code, message = failed.value.args
    assert code == 9001
    assert message == (
        "ProxyFleet: hostgroup 10 has no writer: none came ONLINE within 300 ms (mysql-no_writer_wait_ms) "
        "(it has no servers)"
    )
    assert proxy.stats()["global"]["Writer_wait_timeouts"] == 1

    set_read_only(primary, False)
    wait_for(lambda: WRITER_HG in {hg for hg, _, _ in placement(proxy)}, "the writer back", proxy)
    insert(client, 1)  # the same session writes again
