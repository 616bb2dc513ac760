"""String literals decoded as the server decodes them under each SQL mode that changes MySQL's lexical rules: for
each mode and literal, the value the proxy reads (``proxyapp.sql.lex`` by ``proxyapp.sql.modes.lexical_dialect``,
``proxyapp.sql.where.literal``: what the sharding planner places a key by) is the one ``SELECT HEX(<literal>)``
returns on a direct connection with that ``sql_mode``; a ``"..."`` the proxy reads as a name, the server does too."""

from __future__ import annotations

from collections.abc import Callable

import pymysql
import pytest

from proxyapp.sql.lex import TokenKind, tokenize
from proxyapp.sql.modes import lexical_dialect
from proxyapp.sql.where import literal

MODES = ["", "NO_BACKSLASH_ESCAPES", "ANSI_QUOTES", "ANSI_QUOTES,NO_BACKSLASH_ESCAPES", "ANSI", "ORACLE"]
LITERALS = [
    r"'x\y'", r"'a\_b'", r"'50\%'", r"'\Z'", r"'\z'", r"'\0'", r"'\b\n\r\t'", r"'\\'", r"'\''", "'it''s'",
    r"'a\\''b'", r"'\N\B'", r"'é\ü'", r'"x\y"', r'"q""\""', "_utf8mb4'k\\_'", "N'\\%'", r"'\'", r"'a\'", "\"a\\\"",
]  # fmt: skip


@pytest.mark.parametrize("mode", MODES)
def test_literals_read_as_the_server_reads_them(primary_conn: Callable[..., pymysql.Connection], mode: str) -> None:
    dialect = lexical_dialect(f"'{mode}'")
    checked = 0
    with primary_conn(charset="utf8mb4") as conn, conn.cursor() as cur:
        cur.execute("SET SESSION sql_mode = %s", (mode,))
        for text in LITERALS:
            tokens = tokenize(f"SELECT HEX({text})", dialect)
            if tokens.texts[-1] != ")" or len(tokens) != 5:
                continue  # not one literal under this mode (an unterminated string)
            if tokens.kinds[3] is TokenKind.QUOTED_IDENT:  # a name: the server reads a column, there is none
                with pytest.raises(pymysql.err.OperationalError) as raised:
                    cur.execute(tokens.sql)
                assert raised.value.args[0] == 1054, (mode, text)
                continue
            read = literal(tokens, 3, 4)
            assert read is not None and isinstance(read[0], str), (mode, text)
            cur.execute(tokens.sql)
            (hexed,) = cur.fetchone()
            assert read[0].encode("utf-8").hex().upper() == hexed, (mode, text)
            checked += 1
    assert checked >= 12
