"""ProxySQL-style query digests: the query with its literals replaced, and a stable 64-bit hash of that.

Normalization keeps the query's own text (keywords keep their case) except that:

- string and number literals (hex and bit literals included, and a sign right before a number where the
  sign can't be subtraction: ``id = -5``) become ``?``; NULL stays NULL;
- comments disappear (the content of executable comments ``/*! ... */`` is SQL and stays) and every run of
  whitespace and comments becomes one space; there is no space between ``(`` or ``,`` and a ``?``, or
  between a ``?`` and ``,`` or ``)``, so ``IN ( 1 , 2 )`` and ``IN (1,2)`` agree; trailing ``;`` go;
- ``IN (?,?,?)`` becomes ``IN (?,...)`` and ``VALUES (?,?),(?,?)`` becomes ``VALUES (?,?),...``;
- the text is cut to ``max_length`` characters, and only the first ``MAX_QUERY_LENGTH`` characters of a
  query are read (ProxySQL's ``mysql-query_digests_max_query_length``).

The hash is BLAKE2b (8 bytes) of the digest text's UTF-8 bytes, as ``'0x'`` and 16 uppercase hex digits:
the same in every process, unlike ``hash()``. Digests of queries up to ``CACHEABLE_LENGTH`` characters are
kept in an LRU cache of ``CACHE_SIZE`` entries, since applications (and prepared statements) repeat text.

``compute_pg_digest`` is the same normalization over PostgreSQL's tokens (``lex.PGSQL``), with its own cache:
``$1`` parameters, dollar-quoted, escape (``E'...'``), Unicode and bit strings become ``?`` like the other
literals; ``::`` casts and ``"quoted"`` names stay as written. Where the normalized texts agree, so do the hashes
of the two dialects.
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from proxyapp.sql.lex import MYSQL, PGSQL, Dialect, TokenKind, tokenize

MAX_QUERY_LENGTH = 65000
CACHE_SIZE = 4096
CACHEABLE_LENGTH: Final = 2048


@dataclass(frozen=True, slots=True)
class Digest:
    """A query's digest: ``hash`` ('0x' + 16 uppercase hex digits) and the normalized ``text``."""

    hash: str
    text: str


def compute_digest(sql: str, max_length: int = 2048) -> Digest:
    """The digest of ``sql`` (see the module docstring), its text at most ``max_length`` characters."""
    if len(sql) <= CACHEABLE_LENGTH:
        # When only bare numbers can be literals, digest the query's shape, which the cache has seen.
        return _cached_digest(simple_shape(sql) or sql, max_length)
    return _digest(sql, max_length)


def compute_pg_digest(sql: str, max_length: int = 2048) -> Digest:
    """The digest of the PostgreSQL statement ``sql``, its text at most ``max_length`` characters.

    ``SELECT * FROM t WHERE id = $1::int AND tag IN ('a', 'b')`` gives the text
    ``SELECT * FROM t WHERE id = ?::int AND tag IN (?,...)``: ``$n`` parameters and literals (dollar-quoted, escape,
    Unicode and bit strings, numbers) become ``?``, casts and quoted names stay, comments go (nested ones too), and
    the rest is ``compute_digest``'s normalization (the module docstring). Linear in the text, whatever it holds.
    """
    if len(sql) <= CACHEABLE_LENGTH:
        # Bare numbers become 0, which PostgreSQL reads as a number ('?' is an operator there); '$' may be a parameter.
        return _cached_pg_digest(sql if "$" in sql else simple_shape(sql, "0") or sql, max_length)
    return _pg_digest(sql, max_length)


#: Quotes, comments, signs and escapes: with any of them a literal may be more than a bare number.
_NOT_SIMPLE = frozenset("'\"`#/\\+-")

#: What ``simple_shape`` sees of each character: a decimal digit; a character that makes the text not simple; one
#: that glues to a following number (``$``, ``?``); ``.``; ``e`` or ``E`` (an exponent after digits); another word
#: character; anything else. Every class from ``_C_PREFIX`` up glues to a number that follows it.
_C_OTHER: Final = 0
_C_DIGIT: Final = 1
_C_REFUSED: Final = 2
_C_PREFIX: Final = 3
_C_DOT: Final = 4
_C_EXPONENT: Final = 5
_C_WORD: Final = 6


def _class_of(c: str) -> int:
    """``c``'s class for ``simple_shape``."""
    if c.isdecimal():
        return _C_DIGIT
    if c in _NOT_SIMPLE:
        return _C_REFUSED
    if c == "$" or c == "?":
        return _C_PREFIX
    if c == ".":
        return _C_DOT
    if c == "e" or c == "E":
        return _C_EXPONENT
    if c.isalnum() or c == "_":
        return _C_WORD
    return _C_OTHER


#: The classes of the 128 ASCII characters, as a ``bytes.translate`` table (the upper half is never used).
_ASCII_CLASSES: Final = bytes(_class_of(chr(c)) if c < 128 else _C_OTHER for c in range(256))


def _load_shape() -> Callable[[str, str, Callable[[str, str], str | None]], str | None] | None:
    try:
        from proxyapp.sql import _shape
    except ImportError:  # not built (``make build``), or PROXYFLEET_NATIVE=0: ``python_shape`` reads every text
        return None
    return _shape.shape


#: ``python_shape`` in C for ASCII texts (``_shape``), when it is built; it calls the function it is given for others.
SHAPE: Final = _load_shape()


def simple_shape(sql: str, literal: str = "?") -> str | None:
    """``sql`` with each bare number literal replaced by ``literal``, when bare numbers are its only literals; else
    None (``python_shape``'s rules; an ASCII text is read by the C shape when it is built, which hands any other to
    ``python_shape``)."""
    shape = SHAPE
    if shape is not None:
        return shape(sql, literal, _PYTHON_SHAPE)
    return python_shape(sql, literal)


def python_shape(sql: str, literal: str = "?") -> str | None:
    """``sql`` with each bare number literal replaced by ``literal``, when bare numbers are its only literals; else
    None.

    None when the text holds a quote, a comment, a sign, a backslash or an exponent (a digit followed by
    ``e``/``E``). A bare number is a run of decimal digits, with an optional fraction, that does not follow a
    word character, '.', '$' or '?' and is not followed by a word character or '.': so ``t1``, ``0x1F`` and
    ``1.2.3`` are left alone. One pass over the characters' classes (a regex pair did this at three times the
    cost); an ASCII text's classes come from one ``bytes.translate``, with no character object made.
    """
    kinds = sql.encode("ascii").translate(_ASCII_CLASSES) if sql.isascii() else bytes(_class_of(c) for c in sql)
    n = len(kinds)
    parts: list[str] = []
    copied = 0
    glued = False  # the previous character glues to a number that follows it
    i = 0
    while i < n:
        kind = kinds[i]
        if kind != _C_DIGIT:
            if kind == _C_REFUSED:
                return None
            glued = kind >= _C_PREFIX
            i += 1
            continue
        end = _digits_end(kinds, i + 1, n)
        if end < 0:
            return None
        if not glued and end + 1 < n and kinds[end] == _C_DOT and kinds[end + 1] == _C_DIGIT:
            end = _digits_end(kinds, end + 1, n)
            if end < 0:
                return None
        if not glued and (end >= n or kinds[end] < _C_DOT):  # not followed by '.' or a word character
            parts.append(sql[copied:i])
            parts.append(literal)
            copied = end
        glued = True  # a digit is a word character
        i = end
    if not parts:
        return sql
    parts.append(sql[copied:])
    return "".join(parts)


#: ``python_shape`` as the C shape is handed it (a Final name: no module lookup per query).
_PYTHON_SHAPE: Final = python_shape


def _digits_end(kinds: bytes, i: int, n: int) -> int:
    """The end of the run of digits at ``i``; -1 if an exponent (``e``/``E``) follows it."""
    while i < n and kinds[i] == _C_DIGIT:
        i += 1
    if i < n and kinds[i] == _C_EXPONENT:
        return -1
    return i


def digest_text(sql: str, dialect: Dialect = MYSQL) -> str:
    """The normalized text of ``sql`` read by ``dialect``'s rules, uncut."""
    tokens = tokenize(sql[:MAX_QUERY_LENGTH], dialect)
    if not tokens.kinds:
        return ""
    out: list[str] = []
    append = out.append
    string, number, placeholder = _STRING, _NUMBER, _PLACEHOLDER
    prev = ""  # the previous token as emitted ('?' for a literal)
    prev_kind: TokenKind | None = None
    before, before_kind = "", prev_kind  # the token before that one
    prev_end = tokens.starts[0]
    for kind, text, start, end in zip(tokens.kinds, tokens.texts, tokens.starts, tokens.ends, strict=False):
        spaced = start != prev_end
        if kind is string or kind is number or kind is placeholder:
            signed = (prev == "-" or prev == "+") and not spaced and kind is not placeholder
            if signed and _unary(before_kind, before):
                spaced = out.pop()[0] == " "  # the sign belongs to the number
                prev, prev_kind = before, before_kind
            text = "?"
            if prev == "(" or prev == ",":
                spaced = False
        elif prev == "?" and (text == "," or text == ")"):
            spaced = False
        append(" " + text if spaced else text)
        before, before_kind = prev, prev_kind
        prev, prev_kind, prev_end = text, kind, end
    while out and out[-1].lstrip() == ";":
        out.pop()
    text = "".join(out)
    if "?," in text:
        text = _IN_LIST.sub("(?,...)", text)
    if "?)," in text or "?) ," in text:
        text = _VALUES_ROWS.sub(r"\1,...", text)
    return text


_STRING, _NUMBER, _PLACEHOLDER, _OPERATOR, _WORD = (
    TokenKind.STRING,
    TokenKind.NUMBER,
    TokenKind.PLACEHOLDER,
    TokenKind.OPERATOR,
    TokenKind.WORD,
)
_CLOSERS = frozenset({")", "]", "}"})
# Keywords after which a '-' or '+' is a sign, not subtraction or addition.
_UNARY_AFTER_WORDS = frozenset(
    {"SELECT", "WHERE", "AND", "OR", "NOT", "XOR", "ON", "HAVING", "WHEN", "THEN", "ELSE", "CASE", "IN", "IS"}
    | {"LIKE", "BETWEEN", "LIMIT", "OFFSET", "INTERVAL", "RETURN", "SET", "VALUES", "VALUE", "DEFAULT"}
)
# Both start with '(' so that the regex engine can jump between parentheses; the keyword is looked behind.
_IN_LIST = re.compile(r"\((?:(?<=(?i:\bIN) \()|(?<=(?i:\bIN)\())\?(?:,\?)+\)")
_ROW = r"\(\?(?:,\?)*\)"
_AFTER_VALUES = r"(?:(?<=(?i:\bVALUES) \()|(?<=(?i:\bVALUES)\()|(?<=(?i:\bVALUE) \()|(?<=(?i:\bVALUE)\())"
# Rows of placeholders after VALUES; a row cut off by MAX_QUERY_LENGTH at the very end goes too.
_VALUES_ROWS = re.compile(rf"(\({_AFTER_VALUES}\?(?:,\?)*\))(?: ?, ?{_ROW})+(?: ?,(?: ?\((?:\?,?)*)?\Z)?")


def _unary(kind: TokenKind | None, text: str) -> bool:
    """Whether a sign after the token ``kind``/``text`` (None at the start) is unary."""
    if kind is _OPERATOR:
        return text not in _CLOSERS
    return kind is None or (kind is _WORD and text.upper() in _UNARY_AFTER_WORDS)


def _digest(sql: str, max_length: int, dialect: Dialect = MYSQL) -> Digest:
    text = digest_text(sql, dialect)[:max_length]
    raw = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()
    return Digest("0x" + raw.upper(), text)


def _pg_digest(sql: str, max_length: int) -> Digest:
    return _digest(sql, max_length, PGSQL)


_cached_digest = functools.lru_cache(maxsize=CACHE_SIZE)(_digest)
_cached_pg_digest = functools.lru_cache(maxsize=CACHE_SIZE)(_pg_digest)
