"""One OK's info for a statement over several shards (proxyapp.sharding.okinfo): the shards' counts added up, a
one-row part of an INSERT or REPLACE (which MariaDB tells no info) counted as one record."""

from __future__ import annotations

import pytest

from proxyapp.mysql.packets import OkPacket
from proxyapp.sharding.okinfo import summed_info


def ok(affected: int, info: bytes = b"", warnings: int = 0) -> OkPacket:
    """A shard's OK as MySQL sends it (its info to the packet's end)."""
    return OkPacket(affected, 0, 2, warnings, info)


def test_the_info_is_sent_as_the_shards_sent_theirs() -> None:
    """MariaDB writes the info with its length first: so does the summed OK; a text the proxy makes up alone too."""
    told = b"Records: 2  Duplicates: 0  Warnings: 0"
    mariadb = [OkPacket(2, 0, 2, 0, bytes([len(told)]) + told)] * 2
    assert summed_info(mariadb, ["INSERT ..."] * 2) == b"&Records: 4  Duplicates: 0  Warnings: 0"
    assert summed_info([ok(1), ok(1)], ["INSERT INTO t (k) VALUES (1)"] * 2)[:1] == b"&"


def test_the_shards_counts_add_up() -> None:
    oks = [ok(2, b"Records: 2  Duplicates: 0  Warnings: 0"), ok(3, b"Records: 3  Duplicates: 1  Warnings: 2")]
    assert summed_info(oks, ["INSERT ..."] * 2) == b"Records: 5  Duplicates: 1  Warnings: 2"
    updated = [ok(1, b"Rows matched: 1  Changed: 1  Warnings: 0"), ok(0, b"Rows matched: 2  Changed: 0  Warnings: 0")]
    assert summed_info(updated, ["UPDATE t SET n = 1"] * 2) == b"Rows matched: 3  Changed: 1  Warnings: 0"
    assert summed_info([ok(1), ok(2)], ["DELETE FROM t"] * 2) == b""
    assert summed_info([ok(0, b"Records: 4  Duplicates: 0  Warnings: 0")] * 2, ["ALTER TABLE t ADD x INT"] * 2) == (
        b"Records: 8  Duplicates: 0  Warnings: 0"
    )


@pytest.mark.parametrize(
    ("sql", "affected", "duplicates"),
    [
        ("INSERT INTO t (k) VALUES (1)", 1, 0),
        ("INSERT IGNORE INTO t (k) VALUES (1)", 0, 1),
        ("INSERT IGNORE INTO t (k) VALUES (1)", 1, 0),
        ("REPLACE INTO t (k) VALUES (1)", 2, 1),
        ("REPLACE INTO t (k) VALUES (1)", 1, 0),
        ("INSERT INTO t (k) VALUES (1) ON DUPLICATE KEY UPDATE n = n + 1", 2, 1),
        ("INSERT INTO t (k) VALUES (1) ON DUPLICATE KEY UPDATE n = n + 1", 1, 0),
    ],
)
def test_a_one_row_part_counts_as_one_record(sql: str, affected: int, duplicates: int) -> None:
    other = ok(2, b"Records: 2  Duplicates: 0  Warnings: 1", warnings=1)
    told = summed_info([ok(affected), other], [sql, sql])
    assert told == b"Records: 3  Duplicates: %d  Warnings: 1" % duplicates
    assert summed_info([ok(affected), ok(affected)], [sql, sql])[1:] == b"Records: 2  Duplicates: %d  Warnings: 0" % (
        2 * duplicates
    )


def test_one_ok_is_the_whole_answer() -> None:
    """A write to a global table answers its first copy's OK: a one-row INSERT tells no info, as on one server."""
    assert summed_info([ok(1)], ["INSERT INTO cities (id) VALUES (1)"]) == b""
    told = b"\x26Records: 2  Duplicates: 0  Warnings: 0"
    assert summed_info([ok(2, told)], ["INSERT INTO cities (id) VALUES (1), (2)"]) == told
