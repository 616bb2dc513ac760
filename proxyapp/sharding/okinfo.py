"""One OK packet's info text for a statement that ran on several shards, as one server says it for all its rows.

Each shard tells its own part (``Records: 2  Duplicates: 0  Warnings: 0``, ``Rows matched: 3  Changed: 3  Warnings:
0``); the client's OK tells the sums. A shard whose part of a multi-row INSERT or REPLACE is one row tells nothing
(MariaDB gives a one-row insert no info), while one server given all the rows does: that part counts as one record,
its duplicates read from its affected rows (a REPLACE's rows deleted, an INSERT IGNORE's row ignored, an ON DUPLICATE
KEY UPDATE's row updated), its warnings from the OK. The text is sent as the shards sent theirs: MariaDB writes
it with its length before it (``net_store_data``), MySQL without a session-tracking client to the packet's end.
A pure module: no IO.
"""

from __future__ import annotations

import re

from proxyapp.mysql.packets import OkPacket, lenenc_str
from proxyapp.sql.lex import find_top, tokenize

#: The counts an OK packet's info text gives ("Records: 3  Duplicates: 0  Warnings: 0", "Rows matched: ...").
_COUNT = re.compile(rb"([A-Za-z ]+): (\d+)")
_INSERT_INFO = (b"Records", b"Duplicates", b"Warnings")


def summed_info(oks: list[OkPacket], statements: list[str]) -> bytes:
    """The info text of one OK for the OKs the shards answered their ``statements`` with (one each, in order):
    each count added up when they all tell the same ones; b"" when none tells any. One OK (a global table's first
    copy's) is the statement's whole answer: its info as it is (a one-row INSERT tells none)."""
    if len(oks) == 1:
        return oks[0].info
    counts = [_counts(ok, sql) for ok, sql in zip(oks, statements, strict=True)]
    if not counts or not counts[0] or any([name for name, _ in c] != [name for name, _ in counts[0]] for c in counts):
        return b""
    totals = [sum(c[i][1] for c in counts) for i in range(len(counts[0]))]
    text = b"  ".join(b"%s: %d" % (name, total) for (name, _), total in zip(counts[0], totals, strict=True))
    bare = any(ok.info and not _prefixed(ok.info) for ok in oks)
    return text if bare else lenenc_str(text)


def _prefixed(info: bytes) -> bool:
    """Whether an OK's info starts with its length (MariaDB's), a one-byte one for the short texts counts are."""
    return len(info) > 1 and info[0] == len(info) - 1


def _counts(ok: OkPacket, sql: str) -> list[tuple[bytes, int]]:
    """The counts a shard's OK tells of its statement ``sql``: its info's, or a one-row INSERT or REPLACE's."""
    text = ok.info[1:] if _prefixed(ok.info) else ok.info
    told = [(name.strip(), int(value)) for name, value in _COUNT.findall(text)]
    if told:
        return told
    tokens = tokenize(sql)
    verb = tokens.word(0)
    if verb not in ("INSERT", "REPLACE"):
        return told
    n = len(tokens)
    if verb == "REPLACE":
        duplicates = max(ok.affected_rows - 1, 0)
    elif find_top(tokens, 0, n, frozenset({"DUPLICATE"})) >= 0:
        duplicates = int(ok.affected_rows == 2)
    elif find_top(tokens, 0, n, frozenset({"IGNORE"})) >= 0:
        duplicates = 1 - ok.affected_rows
    else:
        duplicates = 0
    return list(zip(_INSERT_INFO, (1, duplicates, ok.warnings), strict=True))
