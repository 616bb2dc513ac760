"""The SQL modes a session set, as the proxy reads them from its ``SET sql_mode = expr`` (``SessionState.variables``).

A string or a bare name (``'ANSI,NO_BACKSLASH_ESCAPES'``, ``TRADITIONAL``) is read exactly, combination modes
expanded as MariaDB expands them (``ANSI`` holds ``ANSI_QUOTES`` and ``PIPES_AS_CONCAT``...); ``DEFAULT`` and no
SET at all are the server's global mode, taken to be one without the modes below. Any other expression
(``CONCAT(@@sql_mode, ',NO_BACKSLASH_ESCAPES')``) is read by the mode names it spells: a name it removes
(``REPLACE(@@sql_mode, 'ANSI_QUOTES', '')``) reads as set. ``lexical_dialect`` gives the lexical rules
(``proxyapp.sql.lex.mysql_dialect``) the modes make.
"""

from __future__ import annotations

import functools
import re

from proxyapp.sql.lex import Dialect, TokenKind, mysql_dialect, tokenize, unquote

#: The modes that stand for several (MariaDB's combination modes), those that matter to the proxy among them.
_COMBINATIONS = {
    "ANSI": ("ANSI_QUOTES", "PIPES_AS_CONCAT"),
    "DB2": ("ANSI_QUOTES", "PIPES_AS_CONCAT"),
    "MAXDB": ("ANSI_QUOTES", "PIPES_AS_CONCAT"),
    "MSSQL": ("ANSI_QUOTES", "PIPES_AS_CONCAT"),
    "ORACLE": ("ANSI_QUOTES", "PIPES_AS_CONCAT"),
    "POSTGRESQL": ("ANSI_QUOTES", "PIPES_AS_CONCAT"),
}
_NAME = re.compile(r"[A-Z_0-9]+")


@functools.lru_cache(maxsize=64)
def sql_modes(expr: str | None) -> frozenset[str]:
    """The modes ``SET sql_mode = expr`` gives a session (uppercase names, combinations expanded); none for None
    (never set) and ``DEFAULT``."""
    if expr is None:
        return frozenset()
    tokens = tokenize(expr)
    if len(tokens) == 1 and tokens.kinds[0] in (TokenKind.STRING, TokenKind.WORD, TokenKind.QUOTED_IDENT):
        text = tokens.texts[0]
        quote = next((n for n, c in enumerate(text) if c in "'\"`"), 0)  # past an introducer (_utf8mb4'..')
        listed = "" if tokens.word(0) == "DEFAULT" else unquote(text[quote:])
    else:  # an expression: the names it spells
        strings = [text for kind, text in zip(tokens.kinds, tokens.texts, strict=True) if kind is TokenKind.STRING]
        listed = ",".join(unquote(text) for text in strings)
    names = set(_NAME.findall(listed.upper()))
    for name in list(names):
        names.update(_COMBINATIONS.get(name, ()))
    return frozenset(names)


def lexical_dialect(expr: str | None) -> Dialect:
    """The lexical rules a session reads statements by after ``SET sql_mode = expr`` (None: never set)."""
    if expr is None:
        return mysql_dialect(False, False)
    modes = sql_modes(expr)
    return mysql_dialect("ANSI_QUOTES" in modes, "NO_BACKSLASH_ESCAPES" in modes)
