"""The SQL modes a session's SET gives it, and the lexical rules they make (proxyapp.sql.modes)."""

from __future__ import annotations

import pytest

from proxyapp.sql.lex import MYSQL, mysql_dialect
from proxyapp.sql.modes import lexical_dialect, sql_modes


@pytest.mark.parametrize(
    ("expr", "ansi_quotes", "no_backslash_escapes"),
    [
        (None, False, False),
        ("DEFAULT", False, False),
        ("''", False, False),
        ("'STRICT_TRANS_TABLES,NO_ENGINE_SUBSTITUTION'", False, False),
        ("'NO_BACKSLASH_ESCAPES'", False, True),
        ('"ansi_quotes,no_backslash_escapes"', True, True),
        ("ANSI", True, False),  # a bare name; ANSI holds ANSI_QUOTES
        ("'ORACLE'", True, False),
        ("_utf8mb4'POSTGRESQL'", True, False),
        ("'TRADITIONAL'", False, False),
        ("CONCAT(@@sql_mode, ',NO_BACKSLASH_ESCAPES')", False, True),  # an expression: the names it spells
    ],
)
def test_the_modes_that_change_the_lexical_rules(
    expr: str | None, ansi_quotes: bool, no_backslash_escapes: bool
) -> None:
    modes = sql_modes(expr)
    assert ("ANSI_QUOTES" in modes, "NO_BACKSLASH_ESCAPES" in modes) == (ansi_quotes, no_backslash_escapes)
    assert lexical_dialect(expr) is mysql_dialect(ansi_quotes, no_backslash_escapes)


def test_combinations_expand() -> None:
    assert {"ANSI_QUOTES", "PIPES_AS_CONCAT"} <= sql_modes("'ANSI'")
    assert "NO_AUTO_VALUE_ON_ZERO" in sql_modes("CONCAT(@@sql_mode, ',NO_AUTO_VALUE_ON_ZERO')")
    assert lexical_dialect("'STRICT_ALL_TABLES'") is MYSQL
