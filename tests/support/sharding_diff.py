"""The differential test of the sharding proxy (issue 14): a workload (``tests.support.sharding_workload``) runs
through a proxy over N independent shard servers and on one unsharded reference server, statement by statement,
and every answer must be the same: the same rows (in order when the statement orders them totally, else as a
multiset; strings the server may spell either way compared by collation), the same affected-row counts, the same
error, or from the proxy a refusal (1235, ER_NOT_SUPPORTED_YET) of a statement whose class it refuses by design
(``EXPECTED_REFUSALS``). Anything else is a ``Mismatch``, reported with its seed, statement and both answers.

Each (algorithm, key type, shard count) is a ``Combo`` with a schema of its own, sharded by that algorithm over the
first N shard servers; one proxy serves them all (``Rig``). A write the proxy refuses is not run on the reference
either; after a write the proxy ran, each row must be on the shard its key maps to by the table's rule (a row
elsewhere is a mismatch, and is moved there); after a write whose answers differ the reference takes the shards'
rows. So later statements compare on the same data, and each mismatch is the statement's own.

A long run from the command line, on shard servers of its own and the reference at 127.0.0.1:3306::

    python -m tests.support.sharding_diff --seed 1 --seeds 50 --statements 1000 --shards 2 4
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import random
import shutil
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pymysql

from devstack.proxy import ProxyProcess
from devstack.sandbox import APP_PASSWORD, APP_USER, Sandbox
from devstack.stack import REPO
from proxyapp.config.sharding import build
from tests.support.proxy_rig import ProxyRig
from tests.support.sharding_workload import (
    DATE_START,
    GLOBAL_TABLE,
    INT_KEYS,
    KEY_KINDS,
    KEY_WORDS,
    SHARDED_TABLES,
    Statement,
    Workload,
    generate,
)

#: ER_NOT_SUPPORTED_YET: the proxy's refusal.
REFUSED = 1235
#: The statement classes the proxy refuses by design (for now), each with why; a refusal of any other is a mismatch.
EXPECTED_REFUSALS = {
    "update_key": "changing the shard key would move the row to another shard",
    "insert_unplaceable": "a key the algorithm cannot place: NULL, a date written as a number, 'ß' in a string",
    "refuse_group_concat": "GROUP_CONCAT without ORDER BY (each server's own order) or with DISTINCT over several "
    "shards",
    "refuse_window": "window functions over several shards",
    "refuse_nested_aggregate": "an expression over aggregates over several shards",
    "refuse_noncolocated_join": "a join of sharded tables not on their keys",
    "refuse_subquery": "a sharded table in a subquery",
    "refuse_straight_join": "a STRAIGHT_JOIN of sharded tables not on their keys",
    "refuse_union": "UNION over a sharded table",
    "refuse_write_order_limit": "ORDER BY or LIMIT in a write over several shards",
    "refuse_multi_table_write": "a write joining several tables, over several shards",
    "refuse_global_and_sharded_write": "a write naming both a global and a sharded table",
    "refuse_unsteady_global_write": "a write to a global table with a function whose value differs between servers",
    "refuse_rollup": "WITH ROLLUP over several shards",
    "aggregate_division": "SUM or AVG of a division with GROUP BY over several shards (its digits depend on the plan)",
    "refuse_calc_found_rows": "SQL_CALC_FOUND_ROWS over several shards",
    "refuse_distinct_star": "SELECT DISTINCT * over several shards",
    "having_other": "HAVING beyond comparisons of aggregates and group keys with numbers, over several shards",
    "update_key_spelling": "changing the shard key, its column spelled any way (qualified by the table, an alias or "
    "the schema too, quoted, upper case), would move the row to another shard",
    "refuse_global_outer_join": "a global table as the preserved side of a LEFT/RIGHT JOIN with a sharded table, "
    "over several shards: each shard would keep the global rows that match none of its own",
}


@dataclass(frozen=True)
class Defect:
    """A known wrong answer (or needless refusal), being fixed: ``slug`` names it, ``text`` says what goes wrong,
    and it explains the mismatches of its statement ``classes``."""

    slug: str
    text: str
    classes: frozenset[str]

    def explains(self, mismatch: Mismatch) -> bool:
        """Whether ``mismatch`` is this defect's."""
        return mismatch.statement.cls in self.classes


#: The wrong answers known and being fixed: the differential test has a strict xfail for each (it fails once the
#: defect no longer shows: drop it from here), the long run counts their mismatches apart.
OPEN_DEFECTS: list[Defect] = []
#: The algorithms that can shard a key of each type.
ALGORITHMS = {
    "integer": ("mod", "hash", "consistent_hash", "range", "list"),
    "string": ("hash", "consistent_hash", "list"),
    "date": ("date",),
}
_WRITES = ("INSERT", "UPDATE", "DELETE", "REPLACE")
#: What opens a transaction, and what ends one (the rows written are then on the shards for all to see).
_OPENS = ("BEGIN", "START TRANSACTION", "SET AUTOCOMMIT = 0")
_ENDS = ("COMMIT", "ROLLBACK", "SET AUTOCOMMIT = 1")
_SHOWN_ROWS = 12


@dataclass(frozen=True)
class Combo:
    """A table layout to compare: ``algorithm`` over ``shards`` shards, for a key of ``key_kind``."""

    algorithm: str
    key_kind: str
    shards: int

    @property
    def schema(self) -> str:
        """The schema the proxy shards this way (the reference's is ``<schema>_ref``)."""
        return f"diff_{self.algorithm}_{self.key_kind}_{self.shards}"

    def __str__(self) -> str:
        return f"{self.algorithm}/{self.key_kind}/{self.shards} shards"


def combos(shard_counts: Iterable[int], kinds: Iterable[str] = KEY_KINDS) -> list[Combo]:
    """Every algorithm that fits each key type, over each shard count."""
    return [Combo(a, kind, n) for n in shard_counts for kind in kinds for a in ALGORITHMS[kind]]


def parameters(combo: Combo) -> dict[str, Any]:
    """The algorithm's parameters for ``combo``: fixed per combo (drawn from its name), covering the workloads'
    keys."""
    rng = random.Random(str(combo))
    n = combo.shards
    shards = list(range(n))
    rng.shuffle(shards)
    if combo.algorithm in ("hash", "consistent_hash"):
        params: dict[str, Any] = {"key_type": combo.key_kind}
        if combo.algorithm == "consistent_hash":
            cuts = sorted(rng.sample(range(1, 64), n - 1))
            bounds = [0, *cuts, 64]
            params |= {"buckets": 64, "assignment": [[bounds[i], bounds[i + 1] - 1, shards[i]] for i in range(n)]}
        return params
    if combo.algorithm == "range":
        cuts = sorted(rng.sample(range(INT_KEYS.start + 1, INT_KEYS.stop), n - 1))
        edges: list[int | None] = [None, *cuts, None]
        return {"ranges": [[edges[i], edges[i + 1], shards[i]] for i in range(n)]}
    if combo.algorithm == "list":
        values: list[int | str] = list(INT_KEYS) if combo.key_kind == "integer" else list(KEY_WORDS)
        lists: dict[str, list[int | str]] = {}
        for value in values:
            if rng.random() < 0.85:  # the rest go to the default shard
                lists.setdefault(str(rng.randrange(n)), []).append(value)
        return {"lists": lists, "default": shards[0]}
    if combo.algorithm == "date":
        return {"unit": rng.choice(("day", "month", "year")), "start": DATE_START.isoformat(),
                "per_shard": rng.randint(1, 3)}  # fmt: skip
    return {}


@dataclass(frozen=True)
class Endpoint:
    """A MariaDB server the rig reaches directly (as root)."""

    host: str
    port: int

    def connect(self, **kwargs: Any) -> pymysql.Connection:
        """A root connection in autocommit, utf8mb4, with PyMySQL's own flags: the reference session is opened
        exactly as the client opens its session through the proxy (``_Run._connect_proxy``), nothing of the proxy's
        in it."""
        return pymysql.connect(host=self.host, port=self.port, user="root", password="",
                               autocommit=True, charset="utf8mb4",
                               connect_timeout=10, read_timeout=60, **kwargs)  # fmt: skip


@dataclass
class Outcome:
    """What one side answered: rows (with their columns' names and types), an affected-row count and its OK's info
    text (``Records: 3  Duplicates: 1  Warnings: 0``, as sent, length prefix and all), or an error."""

    columns: tuple[tuple[str, int], ...] = ()
    rows: list[tuple[Any, ...]] | None = None
    affected: int | None = None
    info: bytes = b""
    error: tuple[int, str] | None = None

    @property
    def refused(self) -> bool:
        """Whether it is the proxy's refusal."""
        return self.error is not None and self.error[0] == REFUSED

    def __str__(self) -> str:
        if self.error is not None:
            return f"error {self.error[0]}: {self.error[1]}"
        if self.rows is None:
            return f"{self.affected} rows affected" + (f", info {self.info!r}" if self.info else "")
        shown = ", ".join(repr(row) for row in self.rows[:_SHOWN_ROWS])
        more = f", ... ({len(self.rows)} rows)" if len(self.rows) > _SHOWN_ROWS else ""
        return f"columns {[name for name, _ in self.columns]}: [{shown}{more}]"


#: The reference's answer to a write the proxy refused (it is not run there, so the data stays the same).
NOT_RUN = Outcome(error=(0, "not run: the proxy refused the write"))


@dataclass
class Mismatch:
    """A statement whose answers differ: where (seed, combo, position), what, and both answers."""

    seed: int
    combo: Combo
    index: int
    statement: Statement
    why: str
    proxy: Outcome
    reference: Outcome

    def __str__(self) -> str:
        return (
            f"MISMATCH seed {self.seed}, {self.combo}, statement {self.index} ({self.statement.cls}): {self.why}\n"
            f"  {self.statement.sql}\n  proxy:     {self.proxy}\n  reference: {self.reference}"
        )


@dataclass
class Report:
    """The outcome of runs: each class's statements counted by verdict (same, refused, mismatch), the mismatches,
    and the runs cut short (their data could not be brought back together)."""

    verdicts: Counter[tuple[str, str]] = field(default_factory=Counter)
    mismatches: list[Mismatch] = field(default_factory=list)
    cut_short: list[str] = field(default_factory=list)

    def add(self, other: Report) -> None:
        """Count ``other``'s statements and mismatches in too."""
        self.verdicts.update(other.verdicts)
        self.mismatches.extend(other.mismatches)
        self.cut_short.extend(other.cut_short)

    def new(self) -> list[Mismatch]:
        """The mismatches no open defect explains."""
        return [m for m in self.mismatches if not _known(m)]

    def summary(self) -> str:
        """A table of the classes and their verdicts, then the mismatches by class."""
        classes = sorted({cls for cls, _ in self.verdicts})
        lines = [f"{'class':28} {'same':>6} {'refused':>8} {'mismatch':>9}"]
        for cls in classes:
            counts = [self.verdicts[(cls, verdict)] for verdict in ("same", "refused", "mismatch")]
            lines.append(f"{cls:28} {counts[0]:6} {counts[1]:8} {counts[2]:9}")
        total = sum(self.verdicts.values())
        lines.append(f"{total} statements, {len(self.mismatches)} mismatches ({len(self.new())} of no open defect)")
        by_kind = Counter((m.combo.algorithm, m.combo.key_kind, m.statement.cls, _known(m)) for m in self.mismatches)
        lines += [
            f"  {n:4} x {cls} under {algorithm}/{kind}{' (open defect)' if known else ''}"
            for (algorithm, kind, cls, known), n in sorted(by_kind.items())
        ]
        lines += [f"cut short: {why}" for why in self.cut_short]
        return "\n".join(lines)


def _known(mismatch: Mismatch) -> bool:
    return any(defect.explains(mismatch) for defect in OPEN_DEFECTS)


def execute(conn: pymysql.Connection, sql: str) -> Outcome:
    """Run ``sql`` and take down its answer."""
    try:
        with conn.cursor() as cur:
            cur.execute(sql)
            if cur.description is None:
                result = getattr(cur, "_result", None)
                return Outcome(affected=cur.rowcount, info=bytes(getattr(result, "message", None) or b""))
            columns = tuple((str(d[0]), int(d[1])) for d in cur.description)
            return Outcome(columns=columns, rows=list(cur.fetchall()))
    except pymysql.err.MySQLError as exc:
        code = exc.args[0] if exc.args and isinstance(exc.args[0], int) else -1
        return Outcome(error=(code, str(exc.args[1]) if len(exc.args) > 1 else str(exc)))


class _Folder:
    """Strings replaced by their weight in utf8mb4_general_ci (trailing spaces aside), as the server compares them:
    asked of the reference server once per string."""

    def __init__(self, conn: pymysql.Connection) -> None:
        self.conn = conn
        self.known: dict[str, bytes] = {}

    def __call__(self, value: Any) -> Any:
        if not isinstance(value, str):
            return value
        if value not in self.known:
            with self.conn.cursor() as cur:
                cur.execute("SELECT WEIGHT_STRING(RTRIM(%s) COLLATE utf8mb4_general_ci)", (value,))
                self.known[value] = cur.fetchone()[0]
        return self.known[value]

    def rows(self, statement: Statement, rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
        """``rows`` with the statement's ``fold`` columns folded."""
        if not statement.fold:
            return rows
        return [tuple(self(v) if n in statement.fold else v for n, v in enumerate(row)) for row in rows]


def compare(statement: Statement, proxy: Outcome, reference: Outcome, fold: _Folder) -> str:
    """Why the answers differ ("" when they do not; "refused" for an expected refusal)."""
    if proxy.refused and not reference.refused:
        return "refused" if statement.cls in EXPECTED_REFUSALS else "the proxy refused it"
    if proxy.error is not None or reference.error is not None:
        if proxy.error is not None and reference.error is not None and proxy.error[0] == reference.error[0]:
            return ""
        return "one side failed" if proxy.error is None or reference.error is None else "different errors"
    if (proxy.rows is None) != (reference.rows is None):
        return "rows on one side, an affected count on the other"
    if proxy.rows is None or reference.rows is None:
        if proxy.affected != reference.affected:
            return "different affected-row counts"
        return "" if proxy.info == reference.info else "different OK info"
    if proxy.columns != reference.columns:
        return "different columns"
    ours, theirs = fold.rows(statement, proxy.rows), fold.rows(statement, reference.rows)
    if statement.ordered:
        return "" if ours == theirs else "different rows or order"
    return "" if Counter(ours) == Counter(theirs) else "different rows"


class Rig(ProxyRig):
    """Shard servers, a reference server and one proxy over the shards, sharding one schema per combo."""

    def __init__(self, shards: list[Endpoint], reference: Endpoint, combos: list[Combo], workdir: Path) -> None:
        super().__init__(workdir)
        self.shards = shards
        self.reference = reference
        self.combos = combos

    def config(self) -> dict[str, Any]:
        """The proxy's config: a shard group per shard count (hostgroup 100 N + i for shard i of N), every sharded
        and global table of every combo's schema."""
        counts = sorted({combo.shards for combo in self.combos})
        if counts[-1] > len(self.shards):
            raise ValueError(f"{counts[-1]} shards asked, {len(self.shards)} shard servers")
        servers, shards = [], []
        for n in counts:
            for i in range(n):
                servers.append({"hostgroup_id": 100 * n + i, "hostname": self.shards[i].host,
                                "port": self.shards[i].port})  # fmt: skip
                shards.append({"shard_group": f"g{n}", "shard": i, "hostgroup_id": 100 * n + i})
        tables = []
        for combo in self.combos:
            rule = {"shard_group": f"g{combo.shards}", "algorithm": combo.algorithm,
                    "parameters": json.dumps(parameters(combo))}  # fmt: skip
            for name, key in SHARDED_TABLES.items():
                tables.append({"schemaname": combo.schema, "tablename": name, "shard_key": key, **rule})
            tables.append({"schemaname": combo.schema, "tablename": GLOBAL_TABLE, "shard_group": f"g{combo.shards}",
                           "algorithm": "global"})  # fmt: skip
        return {
            "mysql_servers": servers,
            "mysql_users": [{"username": APP_USER, "password": APP_PASSWORD, "default_hostgroup": 100 * counts[0]}],
            "mysql_shards": shards,
            "mysql_sharded_tables": tables,
        }

    def prepare(self, combo: Combo, workload: Workload) -> None:
        """The workload's tables, empty but for the global one, in the combo's schema on its shards and in the
        reference schema."""
        places = [(server, combo.schema) for server in self.shards[: combo.shards]]
        places.append((self.reference, f"{combo.schema}_ref"))
        names = [*SHARDED_TABLES, GLOBAL_TABLE]
        for server, schema in places:
            with server.connect() as conn, conn.cursor() as cur:
                cur.execute(f"CREATE DATABASE IF NOT EXISTS {schema} CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci")
                cur.execute(f"USE {schema}")
                cur.execute(f"DROP TABLE IF EXISTS {', '.join(names)}")
                for table in workload.tables:
                    cur.execute(table.create(workload.key_kind))
                for row in workload.global_rows:
                    cur.execute(row)

    def drop(self, combo: Combo) -> None:
        """The combo's schemas, dropped everywhere."""
        for server, schema in [*((s, combo.schema) for s in self.shards[: combo.shards]),
                               (self.reference, f"{combo.schema}_ref")]:  # fmt: skip
            with server.connect() as conn, conn.cursor() as cur:
                cur.execute(f"DROP DATABASE IF EXISTS {schema}")

    def run(self, combo: Combo, workload: Workload) -> Report:
        """Run ``workload`` through the proxy in ``combo``'s schema and on the reference, comparing each answer."""
        assert self.proxy is not None
        self.prepare(combo, workload)
        with _Run(self.proxy, self.shards[: combo.shards], self.reference, combo, workload) as run:
            for index, statement in enumerate(workload.statements):
                if not run.step(index, statement):
                    break
            return run.report


class _Run:
    """One workload's run in one combo: its connections (to the proxy, the reference and each shard directly) and
    its report."""

    def __init__(
        self, proxy: ProxyProcess, shards: list[Endpoint], reference: Endpoint, combo: Combo, workload: Workload
    ) -> None:
        self.proxy_process = proxy
        self.combo = combo
        self.workload = workload
        self.report = Report()
        self.proxy = self._connect_proxy()
        self.reference = reference.connect(database=f"{combo.schema}_ref")
        self.shards = [server.connect(database=combo.schema) for server in shards]
        self.fold = _Folder(self.reference)
        self.algorithm = build(combo.algorithm, json.dumps(parameters(combo)), combo.shards)
        self.in_transaction = False

    def _connect_proxy(self) -> pymysql.Connection:
        return self.proxy_process.connect(database=self.combo.schema, autocommit=True, charset="utf8mb4")

    def __enter__(self) -> _Run:
        return self

    def __exit__(self, *exc: object) -> None:
        for conn in [self.proxy, self.reference, *self.shards]:
            conn.close()

    def step(self, index: int, statement: Statement) -> bool:
        """Run one statement on both sides and judge it; False when the run cannot go on."""
        write = statement.sql.lstrip().upper().startswith(_WRITES)
        ours = execute(self.proxy, statement.text(self.combo.schema))
        theirs = (
            NOT_RUN if write and ours.refused else execute(self.reference, statement.text(f"{self.combo.schema}_ref"))
        )
        if not self.proxy.open:
            self.proxy = self._connect_proxy()
        if theirs is NOT_RUN:
            why = "refused" if statement.cls in EXPECTED_REFUSALS else "the proxy refused it"
        else:
            why = compare(statement, ours, theirs, self.fold)
        text = " ".join(statement.sql.upper().split())
        if text.startswith(_OPENS):
            self.in_transaction = True
        ends = text.startswith(_ENDS)
        if ends:
            self.in_transaction = False
        if (write or ends) and not self.in_transaction and ours.error is None and not why:
            why = self._misplaced() or self._global_apart()  # outside a transaction: the committed rows
        verdict = "same" if not why else "refused" if why == "refused" else "mismatch"
        self.report.verdicts[(statement.cls, verdict)] += 1
        if verdict != "mismatch":
            return True
        self.report.mismatches.append(Mismatch(self.workload.seed, self.combo, index, statement, why, ours, theirs))
        if write and not self._resync():
            self.report.cut_short.append(f"seed {self.workload.seed}, {self.combo}: the shards' rows no longer fit "
                                         f"the reference's keys after statement {index}")  # fmt: skip
            return False
        return True

    def _misplaced(self) -> str:
        """The rows a write left on a shard their key does not map to (moved where they belong), or ""."""
        found = []
        for table in self.workload.sharded:
            for number, conn in enumerate(self.shards):
                with conn.cursor() as cur:
                    cur.execute(f"SELECT id, {table.key} FROM {table.name}")
                    for row_id, key in cur.fetchall():
                        stored = key.isoformat() if isinstance(key, datetime.date) else key
                        belongs = self.algorithm.shard_of_stored(stored)
                        if belongs != number:
                            found.append(f"{table.name} id {row_id} (key {key!r}) on shard {number}, not {belongs}")
                            self._move(table.name, row_id, number, belongs)
        return f"rows on a shard their key does not map to: {'; '.join(found)}" if found else ""

    def _global_apart(self) -> str:
        """Whether the global table's copies differ between shards (then each takes shard 0's), or ""."""
        table = next((table.name for table in self.workload.tables if not table.key), None)
        if table is None:
            return ""
        copies = []
        for conn in self.shards:
            with conn.cursor() as cur:
                cur.execute(f"SELECT * FROM {table} ORDER BY id")
                copies.append(list(cur.fetchall()))
        apart = [number for number, rows in enumerate(copies) if rows != copies[0]]
        for number in apart:
            with self.shards[number].cursor() as cur:
                cur.execute(f"DELETE FROM {table}")
                if copies[0]:
                    marks = ", ".join(["%s"] * len(copies[0][0]))
                    cur.executemany(f"INSERT INTO {table} VALUES ({marks})", copies[0])
        return f"the global table's copy on shards {apart} differs from shard 0's" if apart else ""

    def _move(self, table: str, row_id: int, source: int, target: int) -> None:
        with self.shards[source].cursor() as cur:
            cur.execute(f"SELECT * FROM {table} WHERE id = %s", (row_id,))
            row = cur.fetchone()
            cur.execute(f"DELETE FROM {table} WHERE id = %s", (row_id,))
        with self.shards[target].cursor() as cur:
            cur.execute(f"REPLACE INTO {table} VALUES ({', '.join(['%s'] * len(row))})", row)

    def _resync(self) -> bool:
        """Make the reference hold the shards' rows (after a write whose answers differed); False when it cannot
        (the shards hold rows the reference's keys refuse)."""
        with self.reference.cursor() as cur:
            for table in self.workload.sharded:
                rows: list[tuple[Any, ...]] = []
                for conn in self.shards:
                    with conn.cursor() as shard:
                        shard.execute(f"SELECT * FROM {table.name}")
                        rows.extend(shard.fetchall())
                cur.execute(f"DELETE FROM {table.name}")
                if rows:
                    marks = ", ".join(["%s"] * len(rows[0]))
                    try:
                        cur.executemany(f"INSERT INTO {table.name} VALUES ({marks})", rows)
                    except pymysql.err.MySQLError:  # a duplicate key, or a table a write changed apart
                        return False
        return True


def run_seeds(rig: Rig, seeds: Iterable[int], statements: int, shard_counts: Iterable[int]) -> Iterator[Report]:
    """For each seed: its workload (its key type drawn from the seed) under every algorithm that fits, over each
    shard count."""
    counts = list(shard_counts)
    for seed in seeds:
        workload = generate(seed, statements)
        for combo in combos(counts, [workload.key_kind]):
            yield rig.run(combo, workload)


def main(argv: list[str] | None = None) -> int:
    """The differential test at length, on shard servers of its own (taken down at the end)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=1, help="the first seed")
    parser.add_argument("--seeds", type=int, default=1, help="how many seeds from --seed")
    parser.add_argument("--statements", type=int, default=250, help="statements per workload")
    parser.add_argument("--shards", type=int, nargs="+", default=[2], help="shard counts")
    parser.add_argument("--reference", default="127.0.0.1:3306", help="the unsharded server (root, no password)")
    parser.add_argument("--all", action="store_true", help="print the open defects' mismatches too")
    args = parser.parse_args(argv)
    host, _, port = args.reference.rpartition(":")
    reference = Endpoint(host, int(port))
    base = REPO / "var" / "sharding-diff" / str(os.getpid())
    boxes = [Sandbox(base / f"shard{n}") for n in range(max(args.shards))]
    started = time.monotonic()
    report = Report()
    try:
        shards = []
        for box in boxes:
            box.up(replicas=0)
            server = box.primary()
            shards.append(Endpoint(server.host, server.port))
        with Rig(shards, reference, combos(args.shards), base / "proxy") as rig:
            for part in run_seeds(rig, range(args.seed, args.seed + args.seeds), args.statements, args.shards):
                report.add(part)
                for mismatch in part.mismatches if args.all else part.new():
                    print(mismatch, flush=True)
            for combo in rig.combos:
                with contextlib.suppress(pymysql.err.MySQLError):
                    rig.drop(combo)
    finally:
        for box in boxes:
            box.down()
    print(report.summary())
    print(f"{time.monotonic() - started:.1f} s")
    if report.new():
        print(f"the proxy's log: {base / 'proxy' / 'proxy.log'}")
        return 1
    shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
