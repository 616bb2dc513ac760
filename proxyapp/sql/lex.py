"""The one SQL tokenizer: a dialect's lexical rules as a single compiled pattern, MySQL/MariaDB's by default.

``tokenize`` turns query text into parallel lists of significant tokens (kind, text, start, end). Whitespace
and comments are dropped, except that the content of executable comments (``/*! ... */``, ``/*!50100 ...
*/``, ``/*M! ... */``) counts as SQL, as the server runs it. A gap between one token's end and the next one's
start means whitespace or a comment stood there. ``split_statements`` cuts a multi-statement COM_QUERY at
the ``;`` that end statements: semicolons inside strings, comments and the ``BEGIN ... END`` bodies of stored
programs and compound statements do not.

``tokenize(sql, PGSQL)`` reads PostgreSQL's lexical rules with the same loop: ``$1`` parameters are
PLACEHOLDERs; dollar-quoted (``$$...$$``, ``$tag$...$tag$``), escape (``E'...'``, backslashes escape),
Unicode (``U&'...'``) and national strings are STRINGs, and standard strings ``'...'`` know no backslash
escape (``standard_conforming_strings``: ``''`` is the only one); bit strings (``B'...'``, ``X'...'``) and
``0x``/``0o``/``0b`` numbers with ``_`` separators are NUMBERs; ``"..."`` and ``U&"..."`` are QUOTED_IDENTs;
``--`` comments run to the line's end and ``/* */`` comments nest; ``?``, ``#``, ``@`` and ``::`` are operators.
The other functions of this module read MySQL's tokens.

MySQL's SQL modes that change its lexical rules have dialects of their own (``mysql_dialect``): under
``ANSI_QUOTES`` ``"..."`` is a QUOTED_IDENT, under ``NO_BACKSLASH_ESCAPES`` a backslash in a string is itself, not
an escape; ``unquote`` decodes a string by the same rule (``Tokens.backslash_escapes``). Not modelled: nested
comments in MySQL (MariaDB does not nest them either); PostgreSQL's ``standard_conforming_strings = off`` and string
constants continued across lines (``'a'\n'b'`` is two).
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterator
from dataclasses import dataclass


class TokenKind(enum.IntEnum):
    """What a token is."""

    WORD = 1  # keyword or unquoted identifier
    QUOTED_IDENT = 2  # `backquoted`
    STRING = 3  # '...' or "...", with an optional N or _charset introducer
    NUMBER = 4  # 42, 4.2, 4e2, .5, 0x2A, X'2A', 0b101, b'101'
    USER_VAR = 5  # @x, @`x`, @'x'
    SYS_VAR = 6  # @@x, @@session.x, @@global.x
    HOST = 7  # the @host of 'user'@'host' (an @ right after a name or string)
    PLACEHOLDER = 8  # ?
    SEMICOLON = 9
    OPERATOR = 10  # punctuation and operators: = , ( ) . := <=> ...
    OTHER = 11  # any other single character
    COMMENT = 12  # dropped by tokenize
    EXEC_OPEN = 13  # /*! or /*M! with its optional version; dropped by tokenize
    EXEC_CLOSE = 14  # the */ ending an executable comment; dropped by tokenize
    NESTED_COMMENT = 15  # the /* of a comment that nests (PostgreSQL); dropped with the comment by tokenize


_T = TokenKind
_STRING_BODY_SQ = r"'[^'\\]*+(?:(?:\\[\s\S]?|'')[^'\\]*+)*+(?:'|\Z)"
_STRING_BODY_DQ = r'"[^"\\]*+(?:(?:\\[\s\S]?|"")[^"\\]*+)*+(?:"|\Z)'
_WORD_CHARS = r"[\w$]"
_QUOTED_IDENT = r"`[^`]*+(?:``[^`]*+)*+(?:`|\Z)"
_QUOTED = f"{_STRING_BODY_SQ}|{_STRING_BODY_DQ}|{_QUOTED_IDENT}"
_PLAIN_COMMENT = r"--(?=\s|\Z)[^\n]*+|#[^\n]*+|/\*(?!M?!)[\s\S]*?(?:\*/|\Z)"

_STRING_PLAIN_SQ = r"'[^']*+(?:''[^']*+)*+(?:'|\Z)"  # under NO_BACKSLASH_ESCAPES
_STRING_PLAIN_DQ = r'"[^"]*+(?:""[^"]*+)*+(?:"|\Z)'


def _mysql_alternatives(ansi_quotes: bool, backslash_escapes: bool) -> tuple[tuple[TokenKind, str], ...]:
    """MySQL's alternatives in the order they are tried (the frequent ones first, where order doesn't matter),
    ``"..."`` a name under ``ansi_quotes``, backslashes escaping in strings unless ``NO_BACKSLASH_ESCAPES``. A word
    can't be an introducer or hex/bit prefix directly before a quote (N'..', _utf8mb4'..', X'..', b'..')."""
    single = _STRING_BODY_SQ if backslash_escapes else _STRING_PLAIN_SQ
    double = _STRING_BODY_DQ if backslash_escapes else _STRING_PLAIN_DQ
    strings = rf"(?:[nN]|_\w+)?{single}" if ansi_quotes else rf"(?:[nN]|_\w+)?{single}|{double}"
    names = f"{_QUOTED_IDENT}|{_STRING_PLAIN_DQ}" if ansi_quotes else _QUOTED_IDENT
    return (
        (_T.WORD, r"(?!(?:[xXbBnN]|_\w+)')(?:[^\W\d]|\$)[\w$]*+"),
        (_T.OPERATOR, r"[=,()]"),
        (
            _T.NUMBER,
            rf"(?:\d++(?:\.\d*+)?|\.\d++)(?:[eE][-+]?\d++)?(?!{_WORD_CHARS})|0[xX][0-9a-fA-F]++(?!{_WORD_CHARS})"
            rf"|0[bB][01]++(?!{_WORD_CHARS})|[xX]'[0-9a-fA-F]*'|[bB]'[01]*'",
        ),
        (_T.STRING, strings),
        (_T.WORD, r"[\w$]++"),  # identifiers may start with a digit (1st_col), and x'zz' is x then 'zz'
        (_T.QUOTED_IDENT, names),
        (_T.PLACEHOLDER, r"\?"),
        (_T.COMMENT, _PLAIN_COMMENT),
        (_T.EXEC_OPEN, r"/\*M?!(?:\d{5,6})?"),
        (_T.EXEC_CLOSE, r"\*/"),
        (_T.SYS_VAR, rf"@@(?:[\w$]+\.)?(?:[\w$]+|{_QUOTED_IDENT})"),
        (_T.HOST, rf"""(?<=[\w$`'"])@(?:[\w$.%-]+|{_QUOTED})"""),
        (_T.USER_VAR, rf"@(?:[\w$.]+|{_QUOTED})"),
        (_T.SEMICOLON, r";"),
        (_T.OPERATOR, r":=|<=>|->>|->|<<|>>|<=|>=|<>|!=|&&|\|\||[-+*/%<>!~^&|.{}\[\]:]"),
        (_T.OTHER, r"\S"),
    )


# PostgreSQL's (``tokenize(sql, PGSQL)``): standard strings without backslash escapes, E'' strings with them
# (MySQL's body), dollar quotes (the closing tag must repeat the opening one), "..." names, nesting comments.
_PG_STANDARD_STRING = r"'[^']*+(?:''[^']*+)*+(?:'|\Z)"
_PG_QUOTED_IDENT = r'"[^"]*+(?:""[^"]*+)*+(?:"|\Z)'
_PG_DIGITS = r"\d++(?:_\d++)*+"
_PG_ALTERNATIVES: tuple[tuple[TokenKind, str], ...] = (
    (_T.WORD, r"(?![eEbBxXnN]'|[uU]&['\"])[^\W\d][\w$]*+"),
    (_T.OPERATOR, r"[=,()]"),
    (
        _T.NUMBER,
        rf"(?:{_PG_DIGITS}(?:\.(?:{_PG_DIGITS})?)?|\.{_PG_DIGITS})(?:[eE][-+]?\d++)?(?!{_WORD_CHARS})"
        rf"|0(?:[xX][0-9a-fA-F_]++|[oO][0-7_]++|[bB][01_]++)(?!{_WORD_CHARS})|[bBxX]'[^']*+(?:'|\Z)",
    ),
    (_T.STRING, rf"(?:[nN]|[uU]&)?{_PG_STANDARD_STRING}|[eE]{_STRING_BODY_SQ}"),
    (_T.PLACEHOLDER, r"\$\d++"),
    (_T.STRING, r"\$(?P<tag>(?:[^\W\d]\w*+)?)\$[\s\S]*?(?:\$(?P=tag)\$|\Z)"),
    (_T.QUOTED_IDENT, rf"(?:[uU]&)?{_PG_QUOTED_IDENT}"),
    (_T.WORD, r"\w[\w$]*+"),
    (_T.COMMENT, r"--[^\n]*+"),
    (_T.NESTED_COMMENT, r"/\*"),
    (_T.SEMICOLON, r";"),
    (_T.OPERATOR, r"::|:=|=>|->>|->|#>>|#>|<=|>=|<>|!=|\|\||[-+*/%<>=~!@#^&|`?:.{}\[\]]"),
    (_T.OTHER, r"\S"),
)


class Dialect:
    """A dialect's lexical rules as ``tokenize`` runs them: ``pattern``, the master pattern (optional whitespace,
    then exactly one alternative, each its own group, or the end), and ``group_kinds``, the token kind of each of
    its groups (``group_kinds[m.lastindex]`` is the kind of a match; an alternative's own groups are OTHER);
    ``backslash_escapes``: whether a backslash escapes the next character in a MySQL string (``unquote``)."""

    __slots__ = ("backslash_escapes", "group_kinds", "name", "pattern")

    def __init__(
        self, name: str, alternatives: tuple[tuple[TokenKind, str], ...], backslash_escapes: bool = True
    ) -> None:
        self.name = name
        self.backslash_escapes = backslash_escapes
        # Trailing whitespace is one match, no group: without it the search would fail at each of its positions in
        # turn, scanning the rest of it each time, and a query ending in a megabyte of spaces would take minutes.
        groups = "|".join(f"(?P<_{i}>{pattern})" for i, (_, pattern) in enumerate(alternatives))
        self.pattern = re.compile(r"\s*+(?:" + groups + r"|\Z)")
        kinds = [_T.OTHER] * (self.pattern.groups + 1)
        for i, (kind, _) in enumerate(alternatives):
            kinds[self.pattern.groupindex[f"_{i}"]] = kind
        self.group_kinds: tuple[TokenKind, ...] = tuple(kinds)


#: MySQL's and MariaDB's lexical rules (the default).
MYSQL = Dialect("mysql", _mysql_alternatives(False, True))
#: Under the SQL modes that change them: ANSI_QUOTES, NO_BACKSLASH_ESCAPES, both.
_MYSQL_MODES = (
    Dialect("mysql ansi_quotes", _mysql_alternatives(True, True)),
    Dialect("mysql no_backslash_escapes", _mysql_alternatives(False, False), backslash_escapes=False),
    Dialect("mysql ansi_quotes no_backslash_escapes", _mysql_alternatives(True, False), backslash_escapes=False),
)
#: PostgreSQL's lexical rules.
PGSQL = Dialect("pgsql", _PG_ALTERNATIVES)


def mysql_dialect(ansi_quotes: bool, no_backslash_escapes: bool) -> Dialect:
    """MySQL's lexical rules under the ``ANSI_QUOTES`` and ``NO_BACKSLASH_ESCAPES`` SQL modes, on or off."""
    if not ansi_quotes and not no_backslash_escapes:
        return MYSQL
    return _MYSQL_MODES[ansi_quotes + 2 * no_backslash_escapes - 1]


_STRING_ESCAPES = {quote: re.compile(rf"\\(.)|{quote}{quote}", re.DOTALL) for quote in "'\""}
#: What MariaDB makes of a backslash and the character after it in a string; any other ``\c`` is ``c``. Outside
#: LIKE ``\%`` and ``\_`` keep their backslash (LIKE reads them as the escaped wildcards).
_ESCAPES = {"0": "\0", "b": "\b", "n": "\n", "r": "\r", "t": "\t", "Z": "\x1a", "%": "\\%", "_": "\\_"}
_HEAD_RE = re.compile(rf"(?:\s++|{_PLAIN_COMMENT})*+([A-Za-z_]\w*+)")
_QUOTED_RE = re.compile(f"{_QUOTED}|{_PLAIN_COMMENT}")
_TRIVIA_FIRST = _T.COMMENT  # kinds from here on are not tokens
_NESTED_COMMENT = _T.NESTED_COMMENT  # a module constant: naming an enum member costs a lookup each time


@dataclass(slots=True)
class Tokens:
    """The significant tokens of a query as parallel lists (index ``i`` is one token)."""

    sql: str
    kinds: list[TokenKind]
    texts: list[str]
    starts: list[int]
    ends: list[int]
    #: Whether a backslash escapes in the strings (the dialect's; off under ``NO_BACKSLASH_ESCAPES``).
    backslash_escapes: bool = True
    #: Where executable comments open (``/*!``, ``/*M!100500``) and close (``*/``), as ``(start, end)``; None if none.
    executable: list[tuple[int, int]] | None = None

    def __len__(self) -> int:
        return len(self.kinds)

    def word(self, i: int) -> str:
        """The uppercased text of token ``i`` if it is a WORD (keyword or plain name), else ''."""
        if 0 <= i < len(self.kinds) and self.kinds[i] is _T.WORD:
            return self.texts[i].upper()
        return ""

    def text(self, i: int) -> str:
        """The text of token ``i``, or '' past either end."""
        return self.texts[i] if 0 <= i < len(self.texts) else ""

    def source(self, lo: int, hi: int) -> str:
        """The query text from token ``lo`` through token ``hi - 1``, exactly as written ('' if empty)."""
        return self.sql[self.starts[lo] : self.ends[hi - 1]] if lo < hi else ""


def tokenize(sql: str, dialect: Dialect = MYSQL) -> Tokens:
    """The significant tokens of ``sql`` read by ``dialect``'s rules (comments and whitespace dropped, executable
    comments opened)."""
    kinds: list[TokenKind] = []
    texts: list[str] = []
    starts: list[int] = []
    ends: list[int] = []
    pattern = dialect.pattern
    group_kind = dialect.group_kinds
    trivia = _TRIVIA_FIRST
    in_exec = False
    executable: list[tuple[int, int]] | None = None
    pos: int | None = 0
    while pos is not None:
        matches, pos = pattern.finditer(sql, pos), None
        for m in matches:
            group = m.lastindex
            if group is None:  # the end of the text
                break
            kind = group_kind[group]
            if kind >= trivia:
                if kind is _T.EXEC_OPEN:
                    in_exec = True
                    executable = executable or []
                    executable.append((m.start(group), m.end()))
                elif kind is _T.EXEC_CLOSE:
                    if in_exec:
                        in_exec = False
                        assert executable is not None
                        executable.append((m.start(group), m.end()))
                    else:  # outside an executable comment '*/' is '*', and the '/' may open a comment
                        start = m.start(group)
                        kinds.append(_T.OPERATOR)
                        texts.append("*")
                        starts.append(start)
                        ends.append(start + 1)
                        pos = start + 1
                        break
                elif kind is _NESTED_COMMENT:  # no regular expression counts nesting: go on after its end
                    pos = _nested_comment_end(sql, m.end())
                    break
                continue
            kinds.append(kind)
            texts.append(m[group])
            starts.append(m.start(group))
            ends.append(m.end())
    return Tokens(sql, kinds, texts, starts, ends, dialect.backslash_escapes, executable)


_COMMENT_MARKS = re.compile(r"/\*|\*/")


def _nested_comment_end(sql: str, pos: int) -> int:
    """Where the nesting comment whose body starts at ``pos`` ends: after its closing ``*/``, else ``len(sql)``."""
    depth = 1
    for mark in _COMMENT_MARKS.finditer(sql, pos):
        depth += 1 if mark[0] == "/*" else -1
        if depth == 0:
            return mark.end()
    return len(sql)


def opened(tokens: Tokens) -> Tokens:
    """``tokens`` over their text with each executable comment's ``/*!``, ``/*M!NNNNNN`` and ``*/`` as spaces, so
    that any part of it (``Tokens.source``) is its SQL as the server runs it: the same tokens at the same places."""
    marks = tokens.executable
    if not marks:
        return tokens
    sql = tokens.sql
    parts: list[str] = []
    done = 0
    for start, end in marks:
        parts.append(sql[done:start])
        parts.append(" " * (end - start))
        done = end
    parts.append(sql[done:])
    return Tokens("".join(parts), tokens.kinds, tokens.texts, tokens.starts, tokens.ends, tokens.backslash_escapes)


def first_word(sql: str) -> str:
    """The first word of ``sql``, uppercased, skipping whitespace and plain comments ('' if none).

    A fast check that does not tokenize; a query opening with an executable comment gives ''.
    """
    if sql[:1] in _WORD_START:  # the usual case, without the regex: the text opens with the word
        end = 1
        n = len(sql)
        while end < n and (sql[end].isalnum() or sql[end] == "_"):
            end += 1
        return sql[:end].upper()
    m = _HEAD_RE.match(sql)
    return m[1].upper() if m else ""


_WORD_START = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_")


def strip_quoted(sql: str) -> str:
    """``sql`` with its strings, backquoted names and plain comments each replaced by one space.

    What is left is the text a keyword or operator search may look at; executable comments stay. Exact
    for text without ``*/``: a ``*/`` may end an executable comment, which only ``tokenize`` can tell.
    """
    return _QUOTED_RE.sub(" ", sql)


def first_block_comment(sql: str) -> str | None:
    """The body of the first ``/* ... */`` comment outside strings, quoted names and line comments (executable
    comments are SQL, not comments); None if there is none or it is never closed. Linear in ``sql``."""
    if "/*" not in sql:
        return None
    for match in _QUOTED_RE.finditer(sql):
        text = match.group()
        if text.startswith("/*"):
            return text[2:-2] if text.endswith("*/") and len(text) >= 4 else None
    return None


def unquote(text: str, backslash_escapes: bool = True) -> str:
    """A name or string token's value: delimiters removed, doubled delimiters undone, and in a string (unless not
    ``backslash_escapes``: ``NO_BACKSLASH_ESCAPES``, or a ``"name"`` under ``ANSI_QUOTES``) backslash escapes
    read as MariaDB reads them (``_ESCAPES``)."""
    if len(text) >= 2 and text[0] in "`'\"" and text[-1] == text[0]:
        quote = text[0]
        body = text[1:-1]
        if quote == "`" or not backslash_escapes or "\\" not in body:
            return body.replace(quote * 2, quote)
        return _STRING_ESCAPES[quote].sub(_unescape, body)  # one pass, left to right, as the server reads it
    return text


def _unescape(match: re.Match[str]) -> str:
    """The character a backslash escape or a doubled quote (``match``) stands for."""
    escaped = match[1]
    if escaped is None:
        return match[0][0]
    return _ESCAPES.get(escaped, escaped)


def user_var_name(text: str) -> str:
    """The canonical (lowercase, unquoted) name of a USER_VAR token: ``@`My Var``` -> 'my var'."""
    return unquote(text[1:]).lower()


def sys_var_parts(text: str) -> tuple[str | None, str]:
    """A SYS_VAR token's scope ('global', 'session', 'local', 'persist', ... or None) and lowercase name."""
    body = text[2:]
    scope: str | None = None
    if not body.startswith("`"):
        head, dot, rest = body.partition(".")
        if dot:
            scope, body = head.lower(), rest
    return scope, unquote(body).lower()


# ----------------------------------------------------------------------------------------- statement split

_STORED_PROGRAMS = frozenset({"PROCEDURE", "FUNCTION", "TRIGGER", "EVENT"})
# Words naming what CREATE/ALTER/DROP acts on; the first one after the verb is the object type.
_OBJECT_TYPES = frozenset(
    {
        "TABLE",
        "TABLES",
        "VIEW",
        "INDEX",
        "DATABASE",
        "SCHEMA",
        "USER",
        "ROLE",
        "SERVER",
        "SEQUENCE",
        "TABLESPACE",
        "LOGFILE",
        "RESOURCE",
        "PREPARE",
        "TEMPORARY",
        *_STORED_PROGRAMS,
    }
)
# Compound statements MariaDB runs outside stored programs; also the words after END closing a block.
_BLOCKS = frozenset({"IF", "CASE", "LOOP", "WHILE", "REPEAT", "FOR"})
_STATEMENT_STARTERS = frozenset({"BEGIN", "THEN", "ELSE", "DO", "LOOP", "REPEAT", ";", ":"})


def object_type(tokens: Tokens, i: int, hi: int) -> int:
    """The index of the word naming the object type in ``[i, hi)`` (after CREATE/ALTER/DROP), or -1.

    Object types: TABLE(S), VIEW, INDEX, DATABASE, ..., PROCEDURE, FUNCTION, TRIGGER, EVENT, PREPARE, and
    TEMPORARY (which comes before TABLE).
    """
    for j in range(i, hi):
        if tokens.word(j) in _OBJECT_TYPES:
            return j
    return -1


def is_compound(tokens: Tokens, lo: int, hi: int) -> bool:
    """Whether the statement at ``lo`` has a ``BEGIN ... END``-style body whose ``;`` don't end it.

    Stored program definitions (CREATE/ALTER PROCEDURE, FUNCTION, TRIGGER, EVENT), ``BEGIN NOT ATOMIC``, and
    MariaDB's top-level IF/CASE/LOOP/WHILE/REPEAT/FOR and labeled blocks.
    """
    first = tokens.word(lo)
    if first in ("CREATE", "ALTER"):
        j = object_type(tokens, lo + 1, hi)
        return j >= 0 and tokens.word(j) in _STORED_PROGRAMS
    if first == "BEGIN":
        return tokens.word(lo + 1) == "NOT" and tokens.word(lo + 2) == "ATOMIC"
    if first in _BLOCKS:
        return True
    return tokens.text(lo + 1) == ":" and tokens.word(lo + 2) in ("BEGIN", "LOOP", "WHILE", "REPEAT", "FOR")


def _opens_if_block(tokens: Tokens, i: int) -> bool:
    """Whether the IF at ``i`` starts an IF statement, not the IF(a, b, c) function or IF [NOT] EXISTS."""
    following = tokens.word(i + 1)
    if following == "EXISTS" or (following == "NOT" and tokens.word(i + 2) == "EXISTS"):
        return False
    if tokens.text(i + 1) != "(":
        return True
    depth = 0
    for j in range(i + 1, len(tokens)):
        text = tokens.texts[j]
        if text == "(":
            depth += 1
        elif text == ")":
            depth -= 1
            if depth == 0:
                return True
        elif text == "," and depth == 1 and tokens.kinds[j] is _T.OPERATOR:
            return False
    return True


def _compound_end(tokens: Tokens, lo: int) -> int:
    """The index of the ``;`` ending the compound statement at ``lo`` (``len(tokens)`` if none)."""
    kinds, n = tokens.kinds, len(tokens)
    depth = 0
    i = lo
    while i < n:
        kind = kinds[i]
        if kind is _T.SEMICOLON:
            if depth == 0:
                return i
        elif kind is _T.WORD:
            word = tokens.texts[i].upper()
            if word == "END":
                depth = max(0, depth - 1)
                if tokens.word(i + 1) in _BLOCKS:
                    i += 1
            elif word in ("BEGIN", "CASE", "LOOP", "WHILE"):
                depth += 1
            elif word == "REPEAT":
                depth += tokens.text(i + 1) != "("
            elif word == "IF":
                depth += _opens_if_block(tokens, i)
            elif word == "FOR":
                before = tokens.word(i - 1) or tokens.text(i - 1)
                depth += i == lo or before in _STATEMENT_STARTERS  # a FOR loop, not FOR UPDATE / EACH ROW
        i += 1
    return n


def statement_ranges(tokens: Tokens) -> list[tuple[int, int]]:
    """Each statement's token index range ``[lo, hi)``, ``hi`` being its ``;`` or the end; none empty."""
    kinds, n = tokens.kinds, len(tokens)
    semicolon = _T.SEMICOLON
    more = semicolon in kinds
    ranges: list[tuple[int, int]] = []
    lo = 0
    while lo < n:
        if kinds[lo] is semicolon:
            lo += 1
            continue
        hi = n
        if more:
            try:
                hi = kinds.index(semicolon, lo)
            except ValueError:
                more = False
        if is_compound(tokens, lo, hi):
            hi = _compound_end(tokens, lo)
        ranges.append((lo, hi))
        lo = hi + 1
    return ranges


def top_level(tokens: Tokens, lo: int, hi: int) -> Iterator[int]:
    """The token indexes in ``[lo, hi)`` outside any parentheses (a closing one included)."""
    depth = 0
    texts = tokens.texts
    for i in range(lo, hi):
        text = texts[i]
        depth += (text == "(") - (text == ")")
        if depth == 0:
            yield i


def closing(tokens: Tokens, i: int, hi: int) -> int:
    """The index of the ``)`` closing the ``(`` at ``i`` (before ``hi``), or -1."""
    depth = 0
    texts = tokens.texts
    for j in range(i, hi):
        text = texts[j]
        if text == "(":
            depth += 1
        elif text == ")":
            depth -= 1
            if depth == 0:
                return j
    return -1


def unwrap(tokens: Tokens, lo: int, hi: int) -> tuple[int, int]:
    """``[lo, hi)`` without the parentheses that enclose all of it: ``((a = 1))`` gives ``a = 1``."""
    while hi - lo > 2 and tokens.texts[lo] == "(" and closing(tokens, lo, hi) == hi - 1:
        lo, hi = lo + 1, hi - 1
    return lo, hi


def find_top(tokens: Tokens, lo: int, hi: int, words: frozenset[str]) -> int:
    """The index of the first of ``words`` in ``[lo, hi)`` outside any parentheses, or -1."""
    return next((i for i in top_level(tokens, lo, hi) if tokens.word(i) in words), -1)


def split_top(tokens: Tokens, lo: int, hi: int) -> list[tuple[int, int]]:
    """The comma-separated parts of ``[lo, hi)`` (commas outside parentheses), each as ``(lo, hi)``."""
    parts: list[tuple[int, int]] = []
    start = lo
    for i in top_level(tokens, lo, hi):
        if tokens.texts[i] == "," and tokens.kinds[i] is _T.OPERATOR:
            parts.append((start, i))
            start = i + 1
    parts.append((start, hi))
    return parts


def split_statements(sql: str) -> list[str]:
    """The statements of a multi-statement query, each stripped, with its comments; empty ones dropped."""
    tokens = tokenize(sql)
    n = len(tokens)
    pieces = []
    for lo, hi in statement_ranges(tokens):
        start = tokens.ends[lo - 1] if lo > 0 else 0
        end = tokens.starts[hi] if hi < n else len(sql)
        pieces.append(sql[start:end].strip())
    return pieces
