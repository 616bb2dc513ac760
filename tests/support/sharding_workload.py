"""A seeded random workload for the differential test of the sharding proxy (issue 14,
``tests.support.sharding_diff`` runs it): a schema, its rows and statements, each statement tagged with its class.

``generate(seed, statements, key_kind)`` draws everything from ``random.Random(seed)``, so a seed names one workload:

- the schema: a sharded table whose shard key is an integer, a varchar in ``utf8mb4_general_ci`` or a date, with
  NULLable int, varchar (ci), decimal and date columns; sometimes a second table sharded by the same rule (joined
  on the key) and a global table (whole on every shard, filled directly on each server: the proxy does not write
  to all shards yet);
- rows whose keys come in the spellings MariaDB holds equal (``'abc'``, ``'ABC'``, ``'abc  '``, ``'äbc'``; an
  integer as ``'0401'``; a date with a time of midnight), with NULLs, case variants and trailing spaces in the
  other columns too;
- statements of about a hundred classes (``tests.support.sharding_statements``): inserts, point and range reads by
  the key, scatter reads with ORDER BY, LIMIT, DISTINCT, GROUP BY, HAVING and aggregates, co-located and global
  joins, updates and deletes by the key, other spellings of them, and statements the proxy must refuse.

Each statement says how its result compares with one server's: in order when its ORDER BY orders rows totally,
else as a multiset; ``fold`` names the result columns where the server may return any of several spellings it
holds equal (the value naming a case-insensitive group, DISTINCT, MIN and MAX of such strings).
"""

from __future__ import annotations

import datetime
import random
from dataclasses import dataclass

from tests.support.sharding_statements import CLASSES, WEIGHTS, Statement

#: The types a shard key may have.
KEY_KINDS = ("integer", "string", "date")
#: The first day a date key may hold (a date rule starts there).
DATE_START = datetime.date(2024, 1, 1)
#: The integer keys' domain (a range rule covers it).
INT_KEYS = range(-40, 700)
#: The sharded tables a workload may have and their shard keys (a proxy config names them all up front).
SHARDED_TABLES = {"items": "k", "orders": "city_id", "shops": "sk", "visits": "ref_key"}
#: The global table a workload may have.
GLOBAL_TABLE = "cities"

_KEY_TYPES = {
    "integer": "int NOT NULL",
    "string": "varchar(24) COLLATE utf8mb4_general_ci NOT NULL",
    "date": "date NOT NULL",
}
_COLUMN_TYPES = {
    "int": "int NULL",
    "str": "varchar(16) COLLATE utf8mb4_general_ci NULL",
    "dec": "decimal(8,2) NULL",
    "date": "date NULL",
}
#: Base words of string keys; a workload takes some, and spells them as MariaDB's ci collation holds equal.
KEY_WORDS = ("abc", "apple", "banana", "zebra", "mañana", "sauce", "x", "7", "07", "k1", "ärger", "éclair", "a b",
             "", "Oslo", "q")  # fmt: skip
#: Base words of the other string columns.
_WORDS = ("red", "blue", "green", "a", "b", "ä", "", "a\t", "z z", "Émile")
#: Letters and the letters utf8mb4_general_ci holds equal to them (and the proxy's fold knows: not 'ß').
_ACCENTS = {"a": "äáà", "e": "éè", "o": "öó", "u": "ü", "n": "ñ", "c": "ç"}


@dataclass(frozen=True)
class Table:
    """A table of the workload: its name, its shard key column ("": a global table), its columns (name, kind)
    in order: ``id`` (the primary key, unique over all shards), the key, then int, str, dec and date ones."""

    name: str
    key: str
    columns: tuple[tuple[str, str], ...]

    def create(self, key_kind: str) -> str:
        """Its CREATE TABLE (no schema: the runner runs it in each schema)."""
        types = {**_COLUMN_TYPES, "id": "int NOT NULL", "key": _KEY_TYPES[key_kind]}
        parts = [f"{name} {types[kind]}" for name, kind in self.columns]
        index = f", KEY ({self.key})" if self.key else ""
        return (
            f"CREATE TABLE {self.name} ({', '.join(parts)}, PRIMARY KEY (id){index}) "
            "ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci"
        )

    def column(self, kind: str) -> str:
        """The first column of ``kind``."""
        return next(name for name, k in self.columns if k == kind)

    def kinds(self, kind: str) -> list[str]:
        """Every column of ``kind``."""
        return [name for name, k in self.columns if k == kind]


@dataclass
class Workload:
    """A generated workload: its seed and key type, its tables (the main sharded one first, then a second sharded
    one and a global one when it has them), the global table's INSERTs (run on every shard and the reference),
    and the statements to compare."""

    seed: int
    key_kind: str
    tables: list[Table]
    global_rows: list[str]
    statements: list[Statement]

    @property
    def sharded(self) -> list[Table]:
        """The sharded tables (with a key)."""
        return [table for table in self.tables if table.key]


def generate(seed: int, statements: int = 250, key_kind: str | None = None) -> Workload:
    """The workload of ``seed``: ``statements`` statements over a schema whose shard key is of ``key_kind`` (drawn
    from the seed when None)."""
    return Generator(seed, key_kind).workload(statements)


def quote(text: str) -> str:
    """``text`` as a SQL string literal."""
    return "'" + text.replace("\\", "\\\\").replace("'", "''") + "'"


# --- keys ------------------------------------------------------------------------------------------------------

Value = int | str | datetime.date


class _Keys:
    """The shard key's values for one workload: fresh ones, their canonical literal and the other literals MariaDB
    holds equal (its variants)."""

    def __init__(self, rng: random.Random, kind: str) -> None:
        self.rng = rng
        self.kind = kind
        if kind == "integer":
            self.pool: list[Value] = sorted([*rng.sample(INT_KEYS, 30), 0, 1, 401])
        elif kind == "string":
            self.pool = rng.sample(KEY_WORDS, 9)
        else:
            self.pool = [DATE_START + datetime.timedelta(days=rng.randrange(0, 900)) for _ in range(30)]

    def fresh(self) -> Value:
        """A key from the workload's pool."""
        return self.rng.choice(self.pool)

    def literal(self, value: Value) -> str:
        """``value`` as written canonically: a number, the string as stored, a 'YYYY-MM-DD' date."""
        if isinstance(value, int):
            return str(value)
        if isinstance(value, datetime.date):
            return quote(value.isoformat())
        return quote(value)

    def spelling(self, value: Value) -> Value:
        """Another value MariaDB holds equal to ``value`` (a string key: its case, accents, trailing spaces)."""
        if isinstance(value, str):
            return _respell(self.rng, value)
        return value

    def variant(self, value: Value) -> str:
        """A literal MariaDB holds equal to ``value`` written otherwise: ``'0401'`` for 401, ``'ABC '`` for 'abc',
        ``'2024-03-05 00:00:00'`` or ``'20240305'`` for a date."""
        rng = self.rng
        if isinstance(value, int):
            sign = "-" if value < 0 else ""
            return quote(sign + "0" * rng.randint(0, 2) + str(abs(value)))
        if isinstance(value, datetime.date):
            return quote(rng.choice([f"{value.isoformat()} 00:00:00", value.strftime("%Y%m%d")]))
        return quote(_respell(rng, value))

    def folded(self, value: Value) -> str:
        """``value`` written as a constant expression MariaDB folds to it (``(v)``, ``+v``, ``v - 3 + 3``, a hex or
        bit number, a hex string, a DATE literal)."""
        rng = self.rng
        if isinstance(value, int):
            forms = [f"({value})", f"+{value}", f"{value - 3} + 3", f"-(0 - {value})", f"({value} * 2) DIV 2"]
            if value >= 0:
                forms += [f"0x{value:X}", f"b'{value:b}'", f"0b{value:b} + 0"]
            return rng.choice(forms)
        if isinstance(value, datetime.date):
            return rng.choice((f"DATE'{value.isoformat()}'", f"({quote(value.isoformat())})"))
        hexed = value.encode().hex().upper()
        return rng.choice([f"({quote(value)})", f"X'{hexed}'", *([f"0x{hexed}"] if hexed else [])])

    def unplaceable(self) -> str:
        """A key literal the algorithm cannot place though MariaDB may take it: NULL, a date written as a number, a
        string with a character the proxy's fold does not know ('ß', which general_ci holds equal to 's')."""
        value = self.fresh()
        if self.rng.random() < 0.3:
            return "NULL"
        if isinstance(value, datetime.date):
            return value.strftime("%Y%m%d")
        if isinstance(value, str):
            return quote(_eszett(self.rng, value))
        return "NULL"

    def unplaceable_read(self, value: Value) -> str:
        """A literal the planner cannot place that MariaDB compares equal to ``value``: ``'401.0'``, ``'4.01e2'``,
        ``'2024/03/05'``, ``'Oßlo'`` for 'Oslo'."""
        if isinstance(value, int):
            return quote(self.rng.choice((f"{value}.0", f"{value}e0")))
        if isinstance(value, datetime.date):
            return quote(value.strftime("%Y/%m/%d"))
        return quote(_eszett(self.rng, value))


def _eszett(rng: random.Random, text: str) -> str:
    """``text`` with its s written 'ß' (general_ci holds them equal), or a word of its own with one."""
    return text.replace("s", "ß") if "s" in text else rng.choice(("straße", "ßauce", "Oßlo"))


def _respell(rng: random.Random, text: str) -> str:
    """``text`` spelled another way utf8mb4_general_ci holds equal: case, accents, trailing spaces."""
    out = []
    for char in text:
        roll = rng.random()
        if char.lower() in _ACCENTS and roll < 0.3:
            char = rng.choice(_ACCENTS[char.lower()])
        if roll > 0.5:
            char = char.upper() if char.islower() else char.lower()
        out.append(char)
    spelled = "".join(out) + " " * rng.choice((0, 0, 1, 2))
    return spelled if spelled != text else text.upper() + " "


# --- the generator ---------------------------------------------------------------------------------------------


@dataclass
class _Row:
    """What the generator remembers of a row it inserted: its id and key."""

    id: int
    key: Value


class Generator:
    """Draws one workload from its seed."""

    def __init__(self, seed: int, key_kind: str | None) -> None:
        self.seed = seed
        self.rng = rng = random.Random(seed)
        self.kind = key_kind or rng.choice(KEY_KINDS)
        self.keys = _Keys(rng, self.kind)
        self.words = rng.sample(_WORDS, 5)
        name = rng.choice(("items", "orders", "shops"))
        key = SHARDED_TABLES[name]
        columns = [("id", "id"), (key, "key"), (rng.choice(("qty", "units")), "int"),
                   (rng.choice(("name", "tag")), "str"), (rng.choice(("price", "amount")), "dec"),
                   (rng.choice(("made", "due")), "date")]  # fmt: skip
        if rng.random() < 0.5:
            columns.append(("note", "str"))
        self.t = Table(name, key, tuple(columns))
        self.u: Table | None = None
        self.g: Table | None = None
        if rng.random() < 0.7:
            self.u = Table("visits", "ref_key", (("id", "id"), ("ref_key", "key"), ("hits", "int"), ("who", "str"),
                                                 ("spent", "dec")))  # fmt: skip
        if rng.random() < 0.7:
            self.g = Table(GLOBAL_TABLE, "", (("id", "id"), ("gk", "key"), ("label", "str"), ("pop", "int")))
        # The rows inserted per table (refused inserts too: the generator only picks keys that exist).
        self.rows: dict[str, list[_Row]] = {table.name: [] for table in self.sharded}
        self.next_id = 1

    @property
    def sharded(self) -> list[Table]:
        """The workload's sharded tables."""
        return [table for table in (self.t, self.u) if table is not None]

    def workload(self, count: int) -> Workload:
        """``count`` statements: inserts to fill the tables first, then classes drawn by their weights."""
        global_rows = self._global_rows()
        statements: list[Statement] = []
        load = min(count, max(count // 5, 10))
        while len(statements) < load:  # fill the tables first
            cls = self.rng.choices(("insert_one", "insert_one_variant", "insert_multi_same_key", "insert_second"),
                                   (6, 3, 1, 3))[0]  # fmt: skip
            made = CLASSES[cls](self)
            if isinstance(made, Statement):
                statements.append(made)
        names = list(CLASSES)
        weights = [WEIGHTS.get(name, 2) for name in names]
        while len(statements) < count:
            made = CLASSES[self.rng.choices(names, weights)[0]](self)
            if isinstance(made, Statement):
                statements.append(made)
            elif made is not None:  # a sequence (a transaction)
                statements.extend(made)
        tables = [table for table in (self.t, self.u, self.g) if table is not None]
        return Workload(self.seed, self.kind, tables, global_rows, statements)

    # --- values ---

    def new_id(self) -> int:
        """An id no row has had."""
        self.next_id += 1
        return self.next_id - 1

    def value(self, kind: str) -> str:
        """A literal for a column of ``kind`` (NULL now and then)."""
        rng = self.rng
        if rng.random() < 0.15:
            return "NULL"
        if kind == "int":
            return str(rng.randint(-3, 12))
        if kind == "str":
            word = rng.choice(self.words)
            return quote(_respell(rng, word) if rng.random() < 0.3 else word)
        if kind == "dec":
            return f"{rng.randint(-500, 5000) / 100:.2f}"
        return quote((datetime.date(2026, 1, 1) + datetime.timedelta(days=rng.randrange(0, 12))).isoformat())

    def existing(self) -> Value:
        """A key of a row inserted into the main table, or now and then a fresh one."""
        rows = self.rows[self.t.name]
        if rows and self.rng.random() < 0.8:
            return self.rng.choice(rows).key
        return self.keys.fresh()

    def key_literal(self) -> str:
        """An existing key (now and then a fresh one) written canonically."""
        return self.keys.literal(self.existing())

    def insert(self, table: Table, keys: list[Value], literals: list[str]) -> str:
        """An INSERT of one row per key (written as ``literals``) into ``table``, the model updated."""
        names = [name for name, _ in table.columns]
        rows = []
        for key, literal in zip(keys, literals, strict=True):
            row_id = self.new_id()
            self.rows[table.name].append(_Row(row_id, key))
            values = [str(row_id) if kind == "id" else literal if kind == "key" else self.value(kind)
                      for _, kind in table.columns]  # fmt: skip
            rows.append(f"({', '.join(values)})")
        return f"INSERT INTO {table.name} ({', '.join(names)}) VALUES {', '.join(rows)}"

    def _global_rows(self) -> list[str]:
        if self.g is None:
            return []
        rows = []
        for n in range(1, 13):
            key = self.keys.literal(self.keys.fresh())
            rows.append(
                f"INSERT INTO {self.g.name} (id, gk, label, pop) VALUES ({n}, {key}, {self.value('str')}, "
                f"{self.value('int')})"
            )
        return rows

    def where_key(self, alias: str = "") -> str:
        """``key = v`` in one of the spellings the planner narrows by."""
        column = f"{alias}.{self.t.key}" if alias else self.t.key
        literal = self.key_literal()
        return f"{literal} = {column}" if self.rng.random() < 0.2 else f"{column} = {literal}"

    def filter(self) -> str:
        """A condition on the non-key columns, or nothing."""
        t, rng = self.t, self.rng
        choices = [
            "",
            f" WHERE {t.column('int')} > {rng.randint(-2, 8)}",
            f" WHERE {t.column('dec')} < {rng.randint(0, 40)}",
            f" WHERE {t.column('str')} IS NOT NULL",
            f" WHERE {t.column('date')} >= '2026-01-0{rng.randint(1, 9)}'",
            " WHERE id < 0",
        ]
        return rng.choice(choices)

    def limit(self) -> str:
        """`` LIMIT n``, `` LIMIT o, n`` or `` LIMIT n OFFSET o``."""
        rng = self.rng
        n, offset = rng.randint(1, 8), rng.randint(0, 6)
        return rng.choice((f" LIMIT {n}", f" LIMIT {offset}, {n}", f" LIMIT {n} OFFSET {offset}"))
