"""Compare a primary and its mirror table by table: row counts and ``CHECKSUM TABLE`` (``manage.py mirror-check``).

Plain Python (no Django): the command wraps it, and the mirroring tests and benchmark use it directly. Tables are
the base tables of the schemas asked for (all but the server's own schemas by default), on either side: a table
that exists on one side only is a difference.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import pymysql

#: Schemas that belong to the server, never compared unless named.
SYSTEM_SCHEMAS = frozenset({"mysql", "information_schema", "performance_schema", "sys"})


@dataclass(frozen=True)
class Endpoint:
    """Where a server listens and who to log in as."""

    host: str
    port: int
    user: str = "root"
    password: str = ""

    @classmethod
    def parse(cls, text: str, user: str, password: str) -> Endpoint:
        """``host:port`` (or ``:port``, or ``host``: port 3306); ValueError naming what is wrong."""
        host, sep, port = text.rpartition(":")
        if not sep:
            host, port = text, "3306"
        if not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"{text!r} is not HOST:PORT (the port must be a number from 1 to 65535)")
        return cls(host.strip("[]") or "127.0.0.1", int(port), user, password)

    def __str__(self) -> str:
        return f"{self.host}:{self.port}"

    def connect(self) -> pymysql.Connection:
        """A connection with autocommit on, so each statement sees the latest committed data."""
        return pymysql.connect(
            host=self.host,
            port=self.port,
            user=self.user,
            password=self.password,
            autocommit=True,
            connect_timeout=10,
            read_timeout=600,
        )


@dataclass(frozen=True)
class TableCheck:
    """One table on both sides; ``None`` for a side that does not have it."""

    schema: str
    table: str
    primary_rows: int | None
    mirror_rows: int | None
    primary_checksum: int | None
    mirror_checksum: int | None

    @property
    def name(self) -> str:
        """``schema.table``."""
        return f"{self.schema}.{self.table}"

    @property
    def equal(self) -> bool:
        """Both sides have the table, with as many rows and the same checksum."""
        return (
            self.primary_rows is not None
            and self.mirror_rows is not None
            and (self.primary_rows, self.primary_checksum) == (self.mirror_rows, self.mirror_checksum)
        )

    @property
    def verdict(self) -> str:
        """'equal', or what differs."""
        if self.primary_rows is None:
            return "missing on the primary"
        if self.mirror_rows is None:
            return "missing on the mirror"
        if self.primary_rows != self.mirror_rows:
            return f"row counts differ by {self.mirror_rows - self.primary_rows:+d}"
        if self.primary_checksum != self.mirror_checksum:
            return "checksums differ"
        return "equal"


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _tables(cur: pymysql.cursors.Cursor, schemas: Iterable[str] | None) -> set[tuple[str, str]]:
    """(schema, table) of the base tables of ``schemas`` (None: every non-system schema)."""
    cur.execute("SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.TABLES WHERE TABLE_TYPE = 'BASE TABLE'")
    wanted = set(schemas) if schemas is not None else None
    return {
        (schema, table)
        for schema, table in cur.fetchall()
        if (schema in wanted if wanted is not None else schema not in SYSTEM_SCHEMAS)
    }


def _measure(cur: pymysql.cursors.Cursor, schema: str, table: str) -> tuple[int, int | None]:
    """A table's row count and ``CHECKSUM TABLE`` (EXTENDED: read from the rows, never a stored live checksum)."""
    name = f"{_quote(schema)}.{_quote(table)}"
    cur.execute(f"SELECT COUNT(*) FROM {name}")
    rows = int(cur.fetchone()[0])
    cur.execute(f"CHECKSUM TABLE {name} EXTENDED")
    checksum = cur.fetchone()[1]
    return rows, None if checksum is None else int(checksum)


def compare(
    primary: Endpoint, mirror: Endpoint, schemas: Iterable[str] | None = None, tables: Iterable[str] | None = None
) -> list[TableCheck]:
    """Every table of ``schemas`` (only those named ``tables``, when given) on both servers, sorted by name.

    Raises ``pymysql.Error`` when a server cannot be reached or read.
    """
    only = set(tables) if tables is not None else None
    with primary.connect() as p_conn, mirror.connect() as m_conn, p_conn.cursor() as p, m_conn.cursor() as m:
        schemas = list(schemas) if schemas is not None else None
        on_primary = _tables(p, schemas)
        on_mirror = _tables(m, schemas)
        checks = []
        for schema, table in sorted(on_primary | on_mirror):
            if only is not None and table not in only:
                continue
            p_rows, p_sum = _measure(p, schema, table) if (schema, table) in on_primary else (None, None)
            m_rows, m_sum = _measure(m, schema, table) if (schema, table) in on_mirror else (None, None)
            checks.append(TableCheck(schema, table, p_rows, m_rows, p_sum, m_sum))
    return checks


def report(checks: list[TableCheck], primary: Endpoint, mirror: Endpoint) -> str:
    """The checks as an aligned table with a summary line."""
    header = ("table", "primary rows", "mirror rows", "primary checksum", "mirror checksum", "")
    rows = [header] + [
        (
            c.name,
            _shown(c.primary_rows),
            _shown(c.mirror_rows),
            _shown(c.primary_checksum),
            _shown(c.mirror_checksum),
            c.verdict.upper() if not c.equal else "equal",
        )
        for c in checks
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = [f"primary {primary}  mirror {mirror}"]
    for row in rows:
        cells = [row[0].ljust(widths[0])] + [row[i].rjust(widths[i]) for i in range(1, 5)] + [row[5]]
        lines.append("  ".join(cells).rstrip())
    differing = sum(not c.equal for c in checks)
    if not checks:
        lines.append("no tables to compare")
    elif differing:
        lines.append(f"{differing} of {len(checks)} tables differ")
    else:
        lines.append(f"all {len(checks)} tables are equal")
    return "\n".join(lines)


def _shown(value: int | None) -> str:
    return "-" if value is None else str(value)
