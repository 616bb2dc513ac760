"""The value a constant expression stores in a column, as MariaDB computes it: ``(37)``, ``+43``, ``2 + 3``,
``-(5)``, ``7 DIV 2``, ``0x7``, ``b'101'``, ``DATE'2024-01-01'``.

The sharding planner places an INSERT's row by the value its shard key will hold (``proxyapp.sharding.plan``);
a key written as an expression is folded here. Only what is exact is folded: integer arithmetic (``+ - * DIV MOD %``,
unary signs, parentheses) within BIGINT's range, hexadecimal and bit numbers (an integer in an integer column,
their bytes in a string column, as the server stores them), quoted strings alone, and date and time literals.
Anything else (a decimal or float, a string in arithmetic, a division, a function, a column, an overflow, a
division by zero) is ``NotConstant``: the planner refuses rather than guess.
"""

from __future__ import annotations

from proxyapp.sql.lex import TokenKind, Tokens, closing, unquote, unwrap
from proxyapp.sql.where import literal

_T = TokenKind
_LOWEST = -(2**63)
_HIGHEST = 2**63 - 1
#: The typed literals whose string is the value a date or time column stores.
_TEMPORAL = frozenset({"DATE", "TIME", "TIMESTAMP"})


class NotConstant(ValueError):
    """An expression this module does not fold exactly."""


def constant(tokens: Tokens, lo: int, hi: int, strings: bool) -> int | str:
    """The value the constant expression ``[lo, hi)`` stores in a column holding strings (``strings``) or
    integers; ``NotConstant`` for anything not folded exactly."""
    lo, hi = unwrap(tokens, lo, hi)
    if lo >= hi:
        raise NotConstant("an empty expression")
    found = literal(tokens, lo, hi)
    if found is not None and found[1] == hi:
        return found[0]
    if hi - lo == 2 and tokens.word(lo) in _TEMPORAL and tokens.kinds[lo + 1] is _T.STRING:
        return unquote(tokens.texts[lo + 1], tokens.backslash_escapes)
    if hi - lo == 1:
        kind, text = tokens.kinds[lo], tokens.texts[lo]
        if strings and kind is _T.NUMBER and _is_binary(text):
            try:
                return _bytes(text).decode("utf-8")
            except UnicodeDecodeError:
                raise NotConstant(f"{text} is not UTF-8 text") from None
        if kind is _T.NUMBER and text[:1] in ("X", "x"):
            raise NotConstant(f"{text} stored in an integer column is a string, not a number")
    parser = _Parser(tokens, lo, hi)
    value = parser.sum()
    if parser.at != hi:
        raise NotConstant(f"{tokens.source(lo, hi)} is not integer arithmetic")
    return value


def _is_binary(text: str) -> bool:
    """Whether a number token is a hexadecimal or bit literal (``0x1F``, ``X'1F'``, ``0b101``, ``b'101'``)."""
    return text[:2] in ("0x", "0b") or text[:2].upper() in ("X'", "B'")


def _bytes(text: str) -> bytes:
    """The bytes of a hexadecimal or bit literal, as a string column stores them."""
    lower = text.lower()
    if lower.startswith("0x") or lower.startswith("x'"):
        digits = lower[2:].rstrip("'")
        if len(digits) % 2:
            digits = "0" + digits
        return bytes.fromhex(digits)
    digits = lower[2:].rstrip("'")
    if not digits:
        return b""
    return int(digits, 2).to_bytes((len(digits) + 7) // 8, "big")


class _Parser:
    """Integer arithmetic over ``[lo, hi)``, by precedence: sums of products of signed factors."""

    def __init__(self, tokens: Tokens, lo: int, hi: int) -> None:
        self.tokens = tokens
        self.at = lo
        self.hi = hi

    def _peek(self) -> str:
        if self.at >= self.hi:
            return ""
        return self.tokens.word(self.at) or self.tokens.texts[self.at]

    def sum(self) -> int:
        value = self.product()
        while self._peek() in ("+", "-"):
            op = self._peek()
            self.at += 1
            right = self.product()
            value = _checked(value + right if op == "+" else value - right)
        return value

    def product(self) -> int:
        value = self.factor()
        while self._peek() in ("*", "DIV", "MOD", "%"):
            op = self._peek()
            self.at += 1
            right = self.factor()
            if op == "*":
                value = _checked(value * right)
                continue
            if right == 0:
                raise NotConstant("a division by zero")
            quotient = abs(value) // abs(right) * (1 if (value < 0) == (right < 0) else -1)  # toward zero
            value = _checked(quotient) if op == "DIV" else value - quotient * right  # MOD: the dividend's sign
        return value

    def factor(self) -> int:
        tokens = self.tokens
        text = self._peek()
        if text in ("+", "-"):
            self.at += 1
            value = self.factor()
            return _checked(-value if text == "-" else value)
        if text == "(":
            end = closing(tokens, self.at, self.hi)
            if end < 0:
                raise NotConstant("an unclosed parenthesis")
            inner = _Parser(tokens, self.at + 1, end)
            value = inner.sum()
            if inner.at != end:
                raise NotConstant(f"{tokens.source(self.at, end + 1)} is not integer arithmetic")
            self.at = end + 1
            return value
        if self.at < self.hi and tokens.kinds[self.at] is _T.NUMBER:
            raw = tokens.texts[self.at]
            self.at += 1
            if raw.isdigit():
                return _checked(int(raw))
            if _is_binary(raw) and raw[:2].upper() != "X'":
                number = int.from_bytes(_bytes(raw), "big")
                if number.bit_length() > 63:
                    raise NotConstant(f"{raw} is beyond BIGINT")
                return number
        raise NotConstant(f"{text or 'the end'} is not an integer")


def _checked(value: int) -> int:
    """``value`` when BIGINT holds it; NotConstant otherwise (the server's arithmetic would overflow or go
    unsigned)."""
    if not _LOWEST <= value <= _HIGHEST:
        raise NotConstant(f"{value} is beyond BIGINT")
    return value
