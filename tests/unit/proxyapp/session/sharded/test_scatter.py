"""What a write over several shards tells the client (proxyapp.session.sharded.scatter): the info counts of several
OKs added up, and the copies of a global table checked for one answer before the write commits; and the session's
sql_select_limit as a read's cap."""

from __future__ import annotations

import pytest

from proxyapp.mysql.packets import OkPacket
from proxyapp.session.sharded.scatter import copies_differ, rows_cap
from proxyapp.sharding.gather import Refused
from proxyapp.sharding.shardmap import Shard

SHARDS = [Shard(0, 100, None), Shard(1, 101, None)]


def test_copies_that_answer_alike_agree() -> None:
    same = OkPacket(affected_rows=2, info=b"Rows matched: 2  Changed: 2  Warnings: 0")
    assert copies_differ(SHARDS, [same, OkPacket(affected_rows=2, info=same.info)]) == ""


def test_copies_that_change_other_rows_or_ids_differ() -> None:
    rows = copies_differ(SHARDS, [OkPacket(affected_rows=1), OkPacket(affected_rows=0)])
    assert "shard 0: 1 rows affected, insert id 0; shard 1: 0 rows affected" in rows
    assert copies_differ(SHARDS, [OkPacket(1, last_insert_id=7), OkPacket(1, last_insert_id=8)])
    changed = b"Rows matched: 1  Changed: %d  Warnings: 0"
    assert copies_differ(SHARDS, [OkPacket(1, info=changed % 1), OkPacket(1, info=changed % 0)])


def test_the_session_select_limit_caps_a_read_when_it_is_a_number() -> None:
    assert [rows_cap(v) for v in (None, "DEFAULT", "default", "4", "0")] == [None, None, None, 4, 0]
    assert rows_cap("99999999999999999999") == 18446744073709551615
    with pytest.raises(Refused, match="only a number or DEFAULT"):
        rows_cap("@x + 1")
