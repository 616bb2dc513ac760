"""Bench scripts in mydbtest's spirit: options, declared variables, a transaction block, setup and cleanup.

::

    option
      name    transfer
      loop    100000            # transactions per step (or: time 30, seconds per step)
      connections 1,16,64       # a sweep: a list, or FIRST..LAST/STEP as in 50..500/50
      warmup  2                 # seconds not recorded before each step
      rate    500               # transactions per second, all connections together
    declare
      id1 int 2 1000            # drawn once per transaction: int LOW HIGH, char MINLEN MAXLEN,
      id2 int 1 1000            # date FIRST_YEAR LAST_YEAR, enum A B C, seq [START], template ${...}
    prepare
      create table t1 (id int primary key, n int not null default 0);
      [repeat 10] [batch 100] insert into t1 (id) values (:row);
    begin
      start;
      update t1 set n = n - 1 where id = :id1;
      update t1 set n = n + 1 where id = :id2;
      commit;
    end
    cleanup
      delete from audit_log where source = 'bench';

Statements end with ``;`` (the last one of a block may omit it) and may span lines; ``:name`` is a declared
variable (an SQL literal), ``${...}`` a MyCat template (``fleet.bench.engine.generators``). Variables are replaced
outside quotes and ``--``/``#`` comments, so inside ``/* ... */`` comments too; ``:name`` right after a letter, digit
or colon stays as it is (``a::int``), and ``{:name}`` is the variable wherever it stands, as in the hot-row hint
``/* trx_queue=acct:{:id1}|{:id2} */`` (sent as ``/* trx_queue=acct:17|942 */``). ``[repeat N]`` runs a
statement N times, ``[batch N]`` sends an ``INSERT ... VALUES (...)`` with N rows; each repetition and row draws
fresh values. ``prepare`` runs once before the steps, ``cleanup`` once after them, and the tables ``prepare``
created are dropped at the end whatever happens. Every error names its line.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field

from fleet.bench.engine.generators import Draw, Sequence, TemplateError, declared, template

SECTIONS = ("option", "declare", "prepare", "begin", "cleanup")
#: First words of statements that change nothing (a workload made only of these may run against any target).
READ_VERBS = frozenset(
    {"select", "show", "start", "begin", "commit", "rollback", "set", "use", "do", "explain", "describe", "desc"}
)
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_CREATE_TABLE = re.compile(r"^\s*create\s+table\s+(?:if\s+not\s+exists\s+)?(`[^`]+`|[\w.$]+)", re.IGNORECASE)
_DIRECTIVE = re.compile(r"\s*\[\s*(\w+)\s+(\d+)\s*\]")
#: A variable: ``{:name}`` anywhere, or ``:name`` not right after a letter, digit or colon.
_VARIABLE = re.compile(r"\{:([A-Za-z_]\w*)\}|(?<![:\w]):([A-Za-z_]\w*)")
_VALUES = re.compile(r"^\s*insert\b.*?\bvalues\s*(?=\()", re.IGNORECASE | re.DOTALL)
MAX_REPEAT = 100_000
#: How each block's statements are named in reports: SQL01, SQL02, ... for the transaction, as mydbtest does.
_PREFIXES = {"prepare": "prepare", "begin": "SQL", "cleanup": "cleanup"}


class ScriptError(ValueError):
    """A script that cannot run; ``line`` is where the problem is (0 when it is about the whole script)."""

    def __init__(self, line: int, message: str) -> None:
        super().__init__(f"line {line}: {message}" if line else message)
        self.line = line


class Var(str):
    """A declared variable's name inside a compiled statement."""

    __slots__ = ()


#: A compiled piece of statement text: literal text, a variable's name, or a template's generator.
Piece = str | Var | Draw


def parse_sweep(text: str) -> list[int]:
    """Connection counts: ``1,8,64`` or ``50..500/50`` (or a mix); ValueError naming the bad part."""
    counts: list[int] = []
    for part in text.replace(" ", "").split(","):
        ranged = re.fullmatch(r"(\d+)\.\.(\d+)(?:/(\d+))?", part)
        if ranged:
            first, last, step = int(ranged.group(1)), int(ranged.group(2)), int(ranged.group(3) or 1)
            if first > last or step < 1:
                raise ValueError(f"connections: {part!r} is not a range FIRST..LAST/STEP")
            counts.extend(range(first, last + 1, step))
        elif part.isdigit():
            counts.append(int(part))
        else:
            raise ValueError(f"connections: {part!r} is not a number or a range FIRST..LAST/STEP")
    if not counts or min(counts) < 1:
        raise ValueError("connections: expected counts of 1 or more, as in 1,8,64 or 50..500/50")
    return counts


def _mask(text: str, line_of: dict[int, int] | None = None) -> tuple[str, list[tuple[int, int]]]:
    """``text`` with quoted strings, comments and ``${...}`` templates blanked out (same length), and the
    templates' spans; ScriptError for an unterminated quote or template."""
    spans: list[tuple[int, int]] = []
    chars = list(text)
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == "$" and text.startswith("${", i):
            end = text.find("}", i)
            if end < 0:
                raise ScriptError(_line_at(text, i, line_of), "a ${ template is not closed with }")
            spans.append((i, end + 1))
            chars[i : end + 1] = "\0" * (end + 1 - i)
            i = end + 1
        elif c in "'\"`":
            j = i + 1
            while j < n:
                if text[j] == "\\" and c != "`":
                    j += 2
                    continue
                if text[j] == c:
                    if j + 1 < n and text[j + 1] == c:  # a doubled quote stays inside
                        j += 2
                        continue
                    break
                if text.startswith("${", j):  # a template inside a string: keep its span
                    end = text.find("}", j)
                    if end < 0:
                        raise ScriptError(_line_at(text, j, line_of), "a ${ template is not closed with }")
                    spans.append((j, end + 1))
                    j = end + 1
                    continue
                j += 1
            if j >= n:
                raise ScriptError(_line_at(text, i, line_of), f"the quote {c} opened here is not closed")
            chars[i + 1 : j] = "_" * (j - i - 1)
            i = j + 1
        elif (c == "-" and text.startswith("-- ", i)) or c == "#":
            end = text.find("\n", i)
            end = n if end < 0 else end
            chars[i:end] = " " * (end - i)
            i = end
        else:
            i += 1
    return "".join(chars), spans


def _line_at(text: str, offset: int, line_of: dict[int, int] | None) -> int:
    """The script line of ``offset`` in a block (``line_of`` maps the block's line index to the script's)."""
    index = text.count("\n", 0, offset)
    return (line_of or {}).get(index, index + 1)


@dataclass
class Statement:
    """One statement of a block, compiled: rendered afresh with each transaction's values."""

    name: str
    line: int
    text: str
    repeat: int = 1
    batch: int = 1
    head: list[Piece] = field(default_factory=list)  # INSERT ... VALUES, for a batch
    row: list[Piece] = field(default_factory=list)  # the whole statement, or a batch's row
    variables: tuple[str, ...] = ()
    verb: str = ""

    @property
    def writes(self) -> bool:
        """Whether the statement may change data (its first word is not a read)."""
        return self.verb not in READ_VERBS

    def render(self, rng: random.Random, values: dict[str, str], draws: dict[str, Draw]) -> list[str]:
        """The SQL texts to send: one, ``repeat`` of them, or one holding ``batch`` rows (fresh values each)."""
        if self.repeat == 1 and self.batch == 1:
            return [_join(self.row, rng, values)]
        texts = []
        for _ in range(self.repeat):
            rows = []
            for _ in range(self.batch):
                fresh = {name: draws[name](rng) for name in self.variables}
                rows.append(_join(self.row, rng, fresh))
            texts.append(_join(self.head, rng, values) + ",".join(rows) if self.head else rows[0])
        return texts


def _join(pieces: list[Piece], rng: random.Random, values: dict[str, str]) -> str:
    out = []
    for piece in pieces:
        kind = type(piece)
        if kind is str:
            out.append(piece)  # type: ignore[arg-type]
        elif kind is Var:
            out.append(values[piece])  # type: ignore[index]
        else:
            out.append(piece(rng))  # type: ignore[operator]
    return "".join(out)


@dataclass
class Script:
    """A parsed bench script."""

    text: str
    name: str = "script"
    events: int | None = None
    duration: float | None = None
    connections: list[int] | None = None
    warmup: float | None = None
    rate: float | None = None
    user: str | None = None
    draws: dict[str, Draw] = field(default_factory=dict)
    prepare: list[Statement] = field(default_factory=list)
    transaction: list[Statement] = field(default_factory=list)
    cleanup: list[Statement] = field(default_factory=list)

    @property
    def first_write(self) -> Statement | None:
        """The first statement that may change data (setup and cleanup included), or None for a read-only script."""
        return next((s for s in (*self.prepare, *self.transaction, *self.cleanup) if s.writes), None)

    def created_tables(self) -> list[str]:
        """The tables ``prepare``'s CREATE TABLE statements name (backquotes removed)."""
        names = []
        for statement in self.prepare:
            match = _CREATE_TABLE.match(statement.text)
            if match:
                names.append(match.group(1).strip("`"))
        return names

    def sequences(self) -> dict[str, Sequence]:
        """The ``seq`` variables by name."""
        return {name: draw for name, draw in self.draws.items() if isinstance(draw, Sequence)}

    def draw_values(self, rng: random.Random, statements: list[Statement]) -> dict[str, str]:
        """Values of the variables ``statements`` share (those of repeated and batched statements are drawn per
        repetition and row instead)."""
        draws = self.draws
        names = dict.fromkeys(n for s in statements if s.repeat == 1 and s.batch == 1 for n in s.variables)
        return {name: draws[name](rng) for name in names}


def parse_script(text: str) -> Script:
    """Parse a bench script; ScriptError naming the line of the first problem."""
    script = Script(text=text)
    section: str | None = None
    block: list[tuple[int, str]] = []
    block_kind: str | None = None
    begin_line = 0

    def close_block() -> None:
        nonlocal block, block_kind
        if block_kind is not None:
            statements = _statements(block, script.draws, _PREFIXES[block_kind])
            getattr(script, {"begin": "transaction"}.get(block_kind, block_kind)).extend(statements)
        block, block_kind = [], None

    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#") or line.startswith("--"):
            if block_kind is not None:
                block.append((number, ""))
            continue
        word = line.split()[0].lower()
        if section == "begin":
            if word == "end" and line.lower() == "end":
                close_block()
                section = "ended"
                continue
            block.append((number, raw))
            continue
        if word in SECTIONS and line.lower() == word:
            close_block()
            if word == "begin":
                if script.transaction or begin_line:
                    raise ScriptError(number, "a second begin block (a script has one transaction block)")
                begin_line = number
            if word in ("prepare", "begin", "cleanup"):
                block_kind = word
            section = word
            continue
        if word == "end":
            raise ScriptError(number, "end without begin")
        if section in (None, "ended"):
            raise ScriptError(number, f"{line.split()[0]!r} is outside any section ({', '.join(SECTIONS)} ... end)")
        if section == "option":
            _option(script, number, _without_comment(line))
        elif section == "declare":
            _declare(script, number, _without_comment(line))
        else:
            block.append((number, raw))
    if section == "begin":
        raise ScriptError(begin_line, "the begin block is not closed with end")
    close_block()
    if not begin_line:
        raise ScriptError(0, "no begin ... end block: a script needs the transaction it measures")
    if not script.transaction:
        raise ScriptError(begin_line, "the begin block holds no statement")
    return script


def _without_comment(line: str) -> str:
    """An option or declare line without its trailing ``# ...`` or ``-- ...`` comment."""
    return re.split(r"\s+(?:#|--\s)", line, maxsplit=1)[0]


def _option(script: Script, number: int, line: str) -> None:
    name, _, value = line.partition(" ")
    name, value = name.lower(), value.strip()
    if not value:
        raise ScriptError(number, f"option {name}: no value")
    try:
        if name == "name":
            script.name = value
        elif name == "loop":
            script.events = _positive_int(value)
        elif name == "time":
            script.duration = _positive_number(value)
        elif name == "connections":
            script.connections = parse_sweep(value)
        elif name == "warmup":
            script.warmup = _positive_number(value, zero=True)
        elif name == "rate":
            script.rate = _positive_number(value)
        elif name == "user":
            script.user = value
        else:
            raise ValueError("unknown option (name, loop, time, connections, warmup, rate, user)")
    except ValueError as exc:
        raise ScriptError(number, f"option {name}: {exc}") from None


def _positive_int(value: str) -> int:
    if not value.isdigit() or int(value) < 1:
        raise ValueError(f"expected a whole number of 1 or more, got {value!r}")
    return int(value)


def _positive_number(value: str, zero: bool = False) -> float:
    try:
        number = float(value)
    except ValueError:
        raise ValueError(f"expected a number, got {value!r}") from None
    if number < 0 or (number == 0 and not zero) or number != number or number == float("inf"):
        raise ValueError(f"expected a number above {'or equal to ' if zero else ''}0, got {value!r}")
    return number


def _declare(script: Script, number: int, line: str) -> None:
    parts = line.split()
    if len(parts) < 2:
        raise ScriptError(number, f"declare: expected NAME TYPE ARGUMENTS, got {line!r}")
    name, kind, args = parts[0], parts[1].lower(), parts[2:]
    if not _NAME.fullmatch(name):
        raise ScriptError(number, f"declare: {name!r} is not a variable name (letters, digits, _)")
    if name in script.draws:
        raise ScriptError(number, f"declare: {name} is declared twice")
    if kind == "template":
        args = [line.split(None, 2)[2]] if len(parts) > 2 else []
    try:
        script.draws[name] = declared(kind, args, name)
    except TemplateError as exc:
        raise ScriptError(number, f"declare: {exc}") from None


def _statements(block: list[tuple[int, str]], draws: dict[str, Draw], prefix: str) -> list[Statement]:
    """Split a block's lines into compiled statements."""
    if not block:
        return []
    text = "\n".join(raw for _, raw in block)
    line_of = {index: number for index, (number, _) in enumerate(block)}
    masked, spans = _mask(text, line_of)
    out: list[Statement] = []
    start = 0
    for end in [m.start() for m in re.finditer(";", masked)] + [len(text)]:
        if masked[start:end].strip():
            name = f"{prefix}{len(out) + 1:02d}"
            out.append(_statement(text, masked, spans, start, end, line_of, draws, name))
        start = end + 1
    return out


def _statement(
    text: str,
    masked: str,
    spans: list[tuple[int, int]],
    start: int,
    end: int,
    line_of: dict[int, int],
    draws: dict[str, Draw],
    name: str,
) -> Statement:
    """Compile ``text[start:end]``: directives, variables, templates, the batch split."""
    lead = len(masked[start:end]) - len(masked[start:end].lstrip())
    start += lead
    line = _line_at(text, start, line_of)
    statement = Statement(name=name, line=line, text="")
    while True:
        directive = _DIRECTIVE.match(masked, start, end)
        if directive is None:
            break
        kind, count = directive.group(1).lower(), int(directive.group(2))
        if kind not in ("repeat", "batch"):
            raise ScriptError(line, f"unknown directive [{kind} ...] (repeat, batch)")
        if not 1 <= count <= MAX_REPEAT:
            raise ScriptError(line, f"[{kind} {count}]: expected 1 to {MAX_REPEAT:,}")
        setattr(statement, kind, count)
        start = directive.end()
        start += len(masked[start:end]) - len(masked[start:end].lstrip())
    body = text[start:end].rstrip()
    if not body:
        raise ScriptError(line, "a directive with no statement after it")
    statement.text = body
    statement.line = line = _line_at(text, start, line_of)
    first = masked[start:end].split(None, 1)[0].lower() if masked[start:end].split() else ""
    statement.verb = first
    if first == "start" and body.lower() == "start":
        body = "START TRANSACTION"  # mydbtest's "start;"
        statement.row = [body]
        return statement
    pieces = _compile(text, masked, spans, start, start + len(body), line_of, draws)
    statement.variables = tuple(dict.fromkeys(p for p in pieces if type(p) is Var))
    if statement.batch > 1:
        values = _VALUES.match(masked[start : start + len(body)])
        if values is None:
            raise ScriptError(line, "[batch N] needs INSERT ... VALUES (...) with one row of values")
        split = start + values.end()
        statement.head = _compile(text, masked, spans, start, split, line_of, draws)
        statement.row = _compile(text, masked, spans, split, start + len(body), line_of, draws)
        if any(type(p) is Var for p in statement.head):
            raise ScriptError(line, "[batch N]: variables belong in the VALUES row")
    else:
        statement.row = pieces
    return statement


def _compile(
    text: str,
    masked: str,
    spans: list[tuple[int, int]],
    start: int,
    end: int,
    line_of: dict[int, int],
    draws: dict[str, Draw],
) -> list[Piece]:
    """``text[start:end]`` as pieces: literal text, variables (``:name`` or ``{:name}`` outside quotes), templates."""
    marks: list[tuple[int, int, Piece]] = []
    for first, last in spans:
        if start <= first < end:
            try:
                marks.append((first, last, template(text[first + 2 : last - 1])))
            except TemplateError as exc:
                raise ScriptError(_line_at(text, first, line_of), str(exc)) from None
    for match in _VARIABLE.finditer(masked[start:end]):
        first = start + match.start()
        variable = match.group(1) or match.group(2)
        if variable not in draws:
            known = ", ".join(sorted(draws)) or "none"
            raise ScriptError(_line_at(text, first, line_of), f":{variable} is not declared (declared: {known})")
        marks.append((first, start + match.end(), Var(variable)))
    pieces: list[Piece] = []
    at = start
    for first, last, piece in sorted(marks, key=lambda m: m[0]):
        if first > at:
            pieces.append(text[at:first])
        pieces.append(piece)
        at = last
    if at < end:
        pieces.append(text[at:end])
    return pieces
