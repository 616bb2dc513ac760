"""What a WHERE clause compares a column with: the literals of ``column = v``, ``v = column`` and
``column IN (v, ...)`` in its top-level AND chain (parenthesized AND parts opened; an OR at the top reads nothing).

The sharding planner narrows a statement to the shards of its key's values with it (``proxyapp.sharding.plan``); the
hot-row queue takes a transaction's keys with it (``proxyapp.hotrows.marks``). Which tokens name the column is the
caller's: a ``ColumnAt``.
"""

from __future__ import annotations

from collections.abc import Callable

from proxyapp.sql.lex import TokenKind, Tokens, find_top, statement_ranges, tokenize, top_level, unquote, unwrap

_T = TokenKind
#: A literal's value: an integer or a string.
Value = int | str
#: Where the column is named: given the tokens, a position and the end of the range, the index after the column's
#: name when it stands there, else -1.
ColumnAt = Callable[[Tokens, int, int], int]
#: Where a condition's values are: each literal's token index and the end of the range it is read in (``literal``).
Spans = tuple[tuple[int, int], ...]
#: The comparisons of a WHERE clause's AND-ed parts: each part's values.
Where = tuple[Spans, ...]
#: Words that end a WHERE clause at its own depth.
WHERE_ENDS = frozenset({"GROUP", "ORDER", "LIMIT", "HAVING", "FOR", "LOCK", "WINDOW", "INTO", "RETURNING", "UNION"})


def literal(tokens: Tokens, i: int, hi: int) -> tuple[Value, int] | None:
    """A literal a column can be compared with at ``i`` (an integer, maybe negative, or a string, quoted or in hex
    after a character set introducer; also ``LAST_INSERT_ID(integer)``, which is that integer: how a sequence's first
    value is written), and the index after it; None for anything else (an expression, a placeholder, a decimal, a
    hex number...)."""
    if tokens.word(i) == "LAST_INSERT_ID" and tokens.text(i + 1) == "(" and tokens.text(i + 3) == ")" and i + 3 < hi:
        inner = literal(tokens, i + 2, i + 3)
        return (inner[0], i + 4) if inner is not None and isinstance(inner[0], int) else None
    negative = tokens.text(i) == "-" and i + 1 < hi
    j = i + 1 if negative else i
    if j >= hi:
        return None
    kind, text = tokens.kinds[j], tokens.texts[j]
    if kind is _T.NUMBER and text.isdigit():
        return (-int(text) if negative else int(text)), j + 1
    if kind is _T.STRING and not negative:
        quote = min((text.find(q) for q in "'\"" if q in text), default=0)
        return unquote(text[quote:], tokens.backslash_escapes), j + 1
    if kind is _T.WORD and text[:1] == "_" and not negative and j + 1 < hi and tokens.kinds[j + 1] is _T.NUMBER:
        hexed = tokens.texts[j + 1]  # _utf8mb4 X'..': a string in hex (a prepared statement's, sharding.params)
        if hexed[:2] in ("X'", "x'") and len(hexed) % 2 == 1:
            return bytes.fromhex(hexed[2:-1]).decode("utf-8", "surrogateescape"), j + 2
    return None


def conjuncts(tokens: Tokens, lo: int, hi: int) -> list[tuple[int, int]] | None:
    """The top-level AND-ed parts of a condition ``[lo, hi)``; None when an OR (or XOR) joins them at the top."""
    parts: list[tuple[int, int]] = []
    start, between = lo, False
    for i in top_level(tokens, lo, hi):
        text = tokens.texts[i]
        word = tokens.word(i)
        if word in ("OR", "XOR") or text == "||":
            return None
        if word == "BETWEEN":
            between = True
        elif word == "AND" or text == "&&":
            if between:  # BETWEEN x AND y
                between = False
                continue
            parts.append((start, i))
            start = i + 1
    parts.append((start, hi))
    return parts


def parts(tokens: Tokens, lo: int, hi: int) -> list[tuple[int, int]] | None:
    """The AND-ed parts of a condition, parenthesized ones opened (``(a = 1 AND b = 2) AND c = 3`` has three);
    None when an OR joins them at the top. A parenthesized part joined inside by OR stays one part."""
    found = conjuncts(tokens, *unwrap(tokens, lo, hi))
    if found is None:
        return None
    opened: list[tuple[int, int]] = []
    for part in found:
        inner = unwrap(tokens, *part)
        within = parts(tokens, *inner) if inner != part else None
        opened.extend(within if within is not None else [part])
    return opened


def compared(tokens: Tokens, lo: int, hi: int, column_at: ColumnAt) -> Spans | None:
    """Where the values are that one condition part compares the column with: ``column = v``, ``v = column``,
    ``column IN (v, ...)``; None when it is no such comparison with literals."""
    after = column_at(tokens, lo, hi)
    if after >= 0:
        if tokens.text(after) == "=":
            value = literal(tokens, after + 1, hi)
            return ((after + 1, hi),) if value is not None and value[1] == hi else None
        if tokens.word(after) == "IN" and tokens.text(after + 1) == "(" and tokens.text(hi - 1) == ")":
            spans: list[tuple[int, int]] = []
            i = after + 2
            while i < hi - 1:
                value = literal(tokens, i, hi - 1)
                if value is None:
                    return None
                spans.append((i, hi - 1))
                i = value[1]
                if tokens.text(i) == ",":
                    i += 1
                elif i != hi - 1:
                    return None
            return tuple(spans) or None
        return None
    value = literal(tokens, lo, hi)
    if value is not None and tokens.text(value[1]) == "=" and column_at(tokens, value[1] + 1, hi) == hi:
        return ((lo, hi),)
    return None


def first_statement(sql: str) -> tuple[Tokens, int, int] | None:
    """The tokens of ``sql`` and the range of its first statement (``(SELECT ...)`` opened); None when it has none."""
    tokens = tokenize(sql)
    ranges = statement_ranges(tokens)
    if not ranges:
        return None
    lo, hi = unwrap(tokens, *ranges[0])
    return tokens, lo, hi


def where_parts(tokens: Tokens, lo: int, hi: int) -> list[tuple[int, int]] | None:
    """The AND-ed parts (``parts``) of the WHERE clause of the statement ``[lo, hi)``; None when it has no WHERE or
    an OR at its top."""
    where = find_top(tokens, lo, hi, frozenset({"WHERE"}))
    if where < 0:
        return None
    end = find_top(tokens, where + 1, hi, WHERE_ENDS)
    return parts(tokens, where + 1, hi if end < 0 else end)


def comparisons(tokens: Tokens, lo: int, hi: int, column_at: ColumnAt) -> Where | None:
    """The comparisons of the column in the WHERE clause of the statement ``[lo, hi)`` that narrow the rows it
    reaches; None when none does (no WHERE, an OR at its top, no comparison with literals)."""
    found = where_parts(tokens, lo, hi)
    if found is None:
        return None
    spans = [s for s in (compared(tokens, a, b, column_at) for a, b in found) if s is not None]
    return tuple(spans) or None


def values(tokens: Tokens, where: Where) -> list[Value]:
    """The values ``where``'s comparisons narrow the rows to: those all of them allow (the first's when they have
    none in common: no row matches)."""
    narrowed: list[Value] = []
    for n, spans in enumerate(where):
        found = [_value(tokens, i, hi) for i, hi in spans]
        narrowed = found if n == 0 else [v for v in narrowed if v in found] or narrowed
    return narrowed


def _value(tokens: Tokens, i: int, hi: int) -> Value:
    """The literal at ``i`` where the statement's shape has one (``compared``)."""
    value = literal(tokens, i, hi)
    assert value is not None, "a literal where the statement's shape has one"
    return value[0]
