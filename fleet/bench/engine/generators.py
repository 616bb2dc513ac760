"""Random values for bench statements: MyCat testtool's templates and mydbtest's declared variables.

Templates are written inside a statement and drawn afresh at each occurrence; their text goes in as it is (the
script quotes it, as in ``'${char([a-f,0-9]8:45)}'``):

- ``${int(15-1015)}``: a whole number from 15 to 1015; ``${int(10,999)}``: one of 10 or 999 (any count of values);
- ``${char([a-f,0-9]8:45)}``: 8 to 45 characters from the ranges and single characters in brackets;
- ``${date(yyyyMMddHHmmssSSS-[2014-2015]y)}``: a moment in those years, in a Java date pattern;
- ``${enum(0000,0001)}``: one of the listed texts.

Declared variables (``declare`` in a script: ``id1 int 2 1000``) are drawn once per transaction and go in as SQL
literals: numbers bare, text quoted.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from datetime import datetime, timedelta

#: Draws a value's SQL text from a random generator.
Draw = Callable[[random.Random], str]


class TemplateError(ValueError):
    """A template or declaration that cannot be understood; the message names what is wrong."""


_JAVA_FIELDS = {
    "yyyy": "%Y",
    "yy": "%y",
    "MM": "%m",
    "dd": "%d",
    "HH": "%H",
    "mm": "%M",
    "ss": "%S",
}
_JAVA_TOKEN = re.compile(r"'[^']*'|y+|M+|d+|H+|m+|s+|S+|[A-Za-z]+|[^A-Za-z']+")


def _whole(text: str, what: str) -> int:
    text = text.strip()
    if not re.fullmatch(r"-?\d+", text):
        raise TemplateError(f"{what}: expected a whole number, got {text!r}")
    return int(text)


def int_range(low: int, high: int, what: str) -> Draw:
    """A whole number from ``low`` to ``high`` inclusive."""
    if low > high:
        raise TemplateError(f"{what}: the low end {low} is above the high end {high}")

    def draw(rng: random.Random) -> str:
        return str(rng.randint(low, high))

    return draw


def one_of(values: list[str], what: str) -> Draw:
    """One of ``values``, uniformly."""
    if not values:
        raise TemplateError(f"{what}: no values to choose from")
    choices = tuple(values)

    def draw(rng: random.Random) -> str:
        return rng.choice(choices)

    return draw


def char_string(alphabet: str, low: int, high: int, what: str) -> Draw:
    """``low`` to ``high`` characters drawn from ``alphabet``."""
    if not alphabet:
        raise TemplateError(f"{what}: no characters to draw from")
    if low < 0 or low > high:
        raise TemplateError(f"{what}: lengths {low}:{high} are not a range (0 <= low <= high)")
    if high > 65535:
        raise TemplateError(f"{what}: length {high} is over 65535")

    def draw(rng: random.Random) -> str:
        return "".join(rng.choices(alphabet, k=rng.randint(low, high)))

    return draw


def _alphabet(spec: str, what: str) -> str:
    """The characters of ``a-f,0-9,_``: ranges and single characters separated by commas."""
    chars: list[str] = []
    for item in spec.split(","):
        if len(item) == 3 and item[1] == "-":
            first, last = ord(item[0]), ord(item[2])
            if first > last:
                raise TemplateError(f"{what}: the range {item!r} runs backwards")
            chars.extend(chr(c) for c in range(first, last + 1))
        elif len(item) == 1:
            chars.append(item)
        else:
            raise TemplateError(f"{what}: {item!r} is neither a character nor a range like a-f")
    return "".join(dict.fromkeys(chars))


def date_between(pattern: str, first_year: int, last_year: int, what: str) -> Draw:
    """A moment from the start of ``first_year`` to the end of ``last_year``, formatted by a Java date pattern
    (``yyyy yy MM dd HH mm ss SSS``, other characters as they are, text in single quotes)."""
    if first_year > last_year:
        raise TemplateError(f"{what}: the year {first_year} is after {last_year}")
    if not 1 <= first_year <= 9998 or last_year > 9998:
        raise TemplateError(f"{what}: years must be from 1 to 9998")
    parts: list[str] = []
    millis = False
    for token in _JAVA_TOKEN.findall(pattern):
        if token.startswith("'"):
            parts.append(token[1:-1].replace("%", "%%") or "'")
        elif token in _JAVA_FIELDS:
            parts.append(_JAVA_FIELDS[token])
        elif token == "SSS":
            parts.append("\x1f")  # milliseconds, filled in after strftime (which stops at a NUL)
            millis = True
        elif token[0].isalpha():
            raise TemplateError(f"{what}: {token!r} is not a date field (yyyy, yy, MM, dd, HH, mm, ss, SSS)")
        else:
            parts.append(token.replace("%", "%%"))
    layout = "".join(parts)
    start = datetime(first_year, 1, 1)
    span_ms = int((datetime(last_year + 1, 1, 1) - start).total_seconds() * 1000)

    def draw(rng: random.Random) -> str:
        at = start + timedelta(milliseconds=rng.randrange(span_ms))
        text = at.strftime(layout)
        return text.replace("\x1f", f"{at.microsecond // 1000:03d}") if millis else text

    return draw


def template(body: str) -> Draw:
    """The generator of one ``${...}`` template, given its body (``int(15-1015)``); TemplateError naming it."""
    what = "${" + body + "}"
    match = re.fullmatch(r"\s*(\w+)\s*\((.*)\)\s*", body, re.DOTALL)
    if match is None:
        raise TemplateError(f"{what}: expected NAME(ARGUMENTS), as in ${{int(1-100)}}")
    name, args = match.group(1).lower(), match.group(2).strip()
    if name == "int":
        if "," in args:
            return one_of([str(_whole(v, what)) for v in args.split(",")], what)
        bounds = re.fullmatch(r"\s*(-?\d+)\s*-\s*(-?\d+)\s*", args)
        if bounds is None:
            raise TemplateError(f"{what}: expected int(LOW-HIGH) or int(A,B,...)")
        return int_range(int(bounds.group(1)), int(bounds.group(2)), what)
    if name == "char":
        spec = re.fullmatch(r"\[([^\]]+)\]\s*(\d+)\s*:\s*(\d+)", args)
        if spec is None:
            raise TemplateError(f"{what}: expected char([CHARACTERS]MIN:MAX), as in char([a-f,0-9]8:45)")
        return char_string(_alphabet(spec.group(1), what), int(spec.group(2)), int(spec.group(3)), what)
    if name == "date":
        spec = re.fullmatch(r"(.+?)-\[(\d+)-(\d+)\]y", args)
        if spec is None:
            raise TemplateError(f"{what}: expected date(PATTERN-[FIRST-LAST]y), as in date(yyyyMMdd-[2014-2015]y)")
        return date_between(spec.group(1), int(spec.group(2)), int(spec.group(3)), what)
    if name == "enum":
        return one_of([v.strip() for v in args.split(",") if v.strip()], what)
    raise TemplateError(f"{what}: unknown generator {name!r} (int, char, date, enum)")


def sql_quote(text: str) -> str:
    """``text`` as a single-quoted SQL string literal."""
    return "'" + text.replace("\\", "\\\\").replace("'", "''") + "'"


class Sequence:
    """A counter: ``start``, ``start + stride``, ... (each process of a run counts its own residue class)."""

    __slots__ = ("next", "stride")

    def __init__(self, start: int, stride: int = 1) -> None:
        self.next = start
        self.stride = stride

    def __call__(self, rng: random.Random) -> str:
        value = self.next
        self.next = value + self.stride
        return str(value)


#: Declarable types and the arguments each takes, for messages.
DECLARE_FORMS = {
    "int": "NAME int LOW HIGH",
    "char": "NAME char MINLEN MAXLEN",
    "date": "NAME date FIRST_YEAR LAST_YEAR",
    "enum": "NAME enum VALUE [VALUE ...]",
    "seq": "NAME seq [START]",
    "template": "NAME template ${...}",
}
_LETTERS_DIGITS = "abcdefghijklmnopqrstuvwxyz0123456789"


def declared(kind: str, args: list[str], name: str) -> Draw:
    """The generator of a declared variable (``declare`` line ``NAME KIND ARGS``); TemplateError naming it."""
    what = f"{name} {kind}"
    form = DECLARE_FORMS.get(kind)
    if form is None:
        raise TemplateError(f"{name}: unknown type {kind!r} (one of {', '.join(DECLARE_FORMS)})")

    def arity(*counts: int) -> None:
        if len(args) not in counts:
            raise TemplateError(f"{what}: expected {form}")

    if kind == "int":
        arity(2)
        return int_range(_whole(args[0], what), _whole(args[1], what), what)
    if kind == "char":
        arity(2)
        inner = char_string(_LETTERS_DIGITS, _whole(args[0], what), _whole(args[1], what), what)
        return lambda rng: sql_quote(inner(rng))
    if kind == "date":
        arity(2)
        inner = date_between("yyyy-MM-dd HH:mm:ss", _whole(args[0], what), _whole(args[1], what), what)
        return lambda rng: sql_quote(inner(rng))
    if kind == "enum":
        if not args:
            raise TemplateError(f"{what}: expected {form}")
        inner = one_of(args, what)
        return lambda rng: sql_quote(inner(rng))
    if kind == "seq":
        arity(0, 1)
        return Sequence(_whole(args[0], what) if args else 1)
    text = " ".join(args)
    match = re.fullmatch(r"\$\{(.*)\}", text, re.DOTALL)
    if match is None:
        raise TemplateError(f"{what}: expected {form}")
    return template(match.group(1))
