"""The field note's mirroring test as a workload the tests and ``devstack/bench/mirror_bench.py`` share.

Four tables as in the note (``mirtabAUTOINC``: an AUTO_INCREMENT key and a small row; ``mirtabMID``: a mid-size
row; ``mirtabMIDPart``: the same, partitioned; ``mirtabMIDUUID``: a UUID key the client generates), many client
threads inserting into them in turn through the proxy, and a CRUD mix in transactions with rollbacks, savepoints,
``autocommit=0``, user variables and prepared statements, each thread on rows of its own. Values are derived from
(thread, step), so a run is repeatable; nothing nondeterministic (``UUID()``, ``NOW()``) is left to the server.
"""

from __future__ import annotations

import random
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import mysql.connector
import pymysql

from fleet.core.mirrorcheck import Endpoint, TableCheck, compare

SCHEMA = "mirrortest"
_MID_COLUMNS = (
    "thread INT NOT NULL, step INT NOT NULL, name VARCHAR(100) NOT NULL, city VARCHAR(64) NOT NULL, "
    "amount DECIMAL(12,2) NOT NULL, visits INT NOT NULL DEFAULT 0, born DATE NOT NULL, updated DATETIME NOT NULL, "
    "note VARCHAR(255) NOT NULL, body TEXT NOT NULL, KEY by_thread (thread, step)"
)
TABLES = {
    "mirtabAUTOINC": (
        "id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY, thread INT NOT NULL, step INT NOT NULL, "
        "val VARCHAR(64) NOT NULL, KEY by_thread (thread, step)"
    ),
    "mirtabMID": f"id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY, {_MID_COLUMNS}",
    "mirtabMIDPart": f"id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY, {_MID_COLUMNS}",
    "mirtabMIDUUID": f"uuid CHAR(36) NOT NULL PRIMARY KEY, {_MID_COLUMNS}",
}
_PARTITIONS = {"mirtabMIDPart": " PARTITION BY HASH (id) PARTITIONS 8"}
#: The clients' isolation (each works on rows of its own; no gap locks between them), carried to the mirror too.
READ_COMMITTED = "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED"
_CITIES = ("Lisbon", "Porto", "Braga", "Faro", "Coimbra", "Aveiro", "Evora", "Viseu")


def create_schema(*servers: Endpoint) -> None:
    """The schema and its four empty tables on each server (as it was dropped first)."""
    for server in servers:
        with server.connect() as conn, conn.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS {SCHEMA}")
            cur.execute(f"CREATE DATABASE {SCHEMA}")
            for table, columns in TABLES.items():
                cur.execute(f"CREATE TABLE {SCHEMA}.{table} ({columns}) ENGINE=InnoDB{_PARTITIONS.get(table, '')}")


def table_checks(primary: Endpoint, mirror: Endpoint) -> list[TableCheck]:
    """The four tables compared on both servers."""
    return compare(primary, mirror, [SCHEMA])


def _mid_values(rng: random.Random, thread: int, step: int) -> tuple[Any, ...]:
    return (
        thread,
        step,
        f"name-{thread}-{step}-{rng.randrange(10**6)}",
        rng.choice(_CITIES),
        f"{rng.randrange(10**8) / 100:.2f}",
        rng.randrange(1000),
        f"19{rng.randrange(50, 99)}-{rng.randrange(1, 13):02d}-{rng.randrange(1, 29):02d}",
        f"2024-{rng.randrange(1, 13):02d}-{rng.randrange(1, 29):02d} {rng.randrange(24):02d}:00:00",
        "note " * rng.randrange(5, 40),
        "".join(rng.choice("abcdefghij ") for _ in range(rng.randrange(200, 700))),
    )


_MID_INSERT = (
    "INSERT INTO {table} ({key}thread, step, name, city, amount, visits, born, updated, note, body) "
    "VALUES ({marks}%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
)


def insert_one(cur: pymysql.cursors.Cursor, rng: random.Random, thread: int, step: int) -> None:
    """The note's statement: one row into the four tables in turn (``step`` picks the table)."""
    table = tuple(TABLES)[step % 4]
    if table == "mirtabAUTOINC":
        cur.execute(
            f"INSERT INTO {SCHEMA}.mirtabAUTOINC (thread, step, val) VALUES (%s, %s, %s)",
            (thread, step, f"v{rng.randrange(10**9)}"),
        )
    elif table == "mirtabMIDUUID":
        key = str(uuid.UUID(int=rng.getrandbits(128), version=4))
        cur.execute(
            _MID_INSERT.format(table=f"{SCHEMA}.{table}", key="uuid, ", marks="%s, "),
            (key, *_mid_values(rng, thread, step)),
        )
    else:
        cur.execute(_MID_INSERT.format(table=f"{SCHEMA}.{table}", key="", marks=""), _mid_values(rng, thread, step))


def run_threads(threads: int, work: Callable[[int], None]) -> float:
    """Run ``work(thread)`` on ``threads`` threads; re-raises the first failure; returns the seconds taken."""
    errors: list[BaseException] = []

    def guarded(thread: int) -> None:
        try:
            work(thread)
        except BaseException as exc:
            errors.append(exc)

    started = time.monotonic()
    pool = [threading.Thread(target=guarded, args=(t,), name=f"client-{t}") for t in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    if errors:
        raise errors[0]
    return time.monotonic() - started


def insert_load(connect: Callable[[], pymysql.Connection], threads: int, inserts: int) -> float:
    """``threads`` clients each inserting ``inserts`` rows over the four tables (autocommit); returns seconds."""

    def work(thread: int) -> None:
        rng = random.Random(thread)
        with connect() as conn, conn.cursor() as cur:
            for step in range(inserts):
                insert_one(cur, rng, thread, step)

    return run_threads(threads, work)


def crud_mix(connect: Callable[[], pymysql.Connection], thread: int, rounds: int) -> None:
    """One client's CRUD mix on its own rows: transactions that commit or roll back, savepoints, autocommit=0,
    user variables, and statements of every kind, with a read in between."""
    rng = random.Random(1000 + thread)
    step = 0
    with connect() as conn, conn.cursor() as cur:
        cur.execute(READ_COMMITTED)
        for round_ in range(rounds):
            choice = round_ % 4
            if choice == 0:  # a transaction: insert, update, delete, read; commit or roll back
                cur.execute("BEGIN")
                for _ in range(3):
                    insert_one(cur, rng, thread, step)
                    step += 1
                cur.execute(
                    f"UPDATE {SCHEMA}.mirtabMID SET visits = visits + 1, city = %s "
                    "WHERE thread = %s AND step %% 3 = %s",
                    (rng.choice(_CITIES), thread, round_ % 3),
                )
                cur.execute(
                    f"DELETE FROM {SCHEMA}.mirtabAUTOINC WHERE thread = %s AND step %% 7 = %s ORDER BY id LIMIT 1",
                    (thread, round_ % 7),
                )
                cur.execute(f"SELECT COUNT(*) FROM {SCHEMA}.mirtabMIDPart WHERE thread = %s", (thread,))
                cur.fetchall()
                cur.execute("ROLLBACK" if rng.random() < 0.3 else "COMMIT")
            elif choice == 1:  # savepoints: the part rolled back to never reaches the mirror
                cur.execute("START TRANSACTION")
                insert_one(cur, rng, thread, step)
                cur.execute("SAVEPOINT before_more")
                insert_one(cur, rng, thread, step + 1)
                cur.execute(f"UPDATE {SCHEMA}.mirtabMIDUUID SET amount = amount + 2 WHERE thread = %s", (thread,))
                cur.execute("ROLLBACK TO SAVEPOINT before_more")
                insert_one(cur, rng, thread, step + 2)
                step += 3
                cur.execute("COMMIT")
            elif choice == 2:  # autocommit=0: every statement is in a transaction until COMMIT or ROLLBACK
                cur.execute("SET autocommit = 0")
                insert_one(cur, rng, thread, step)
                cur.execute(f"UPDATE {SCHEMA}.mirtabMIDPart SET note = %s WHERE thread = %s", (f"r{round_}", thread))
                cur.execute("COMMIT")
                insert_one(cur, rng, thread, step + 1)
                cur.execute(f"DELETE FROM {SCHEMA}.mirtabMID WHERE thread = %s ORDER BY step LIMIT 1", (thread,))
                cur.execute("ROLLBACK")
                step += 2
                cur.execute("SET autocommit = 1")
            else:  # a user variable carried to the mirror, and plain autocommit statements
                cur.execute("SET @tag = %s", (f"tag-{thread}-{round_}",))
                cur.execute(
                    f"INSERT INTO {SCHEMA}.mirtabAUTOINC (thread, step, val) VALUES (%s, %s, @tag)", (thread, step)
                )
                cur.execute(f"UPDATE {SCHEMA}.mirtabMID SET amount = amount + 1.5 WHERE thread = %s", (thread,))
                step += 1


def prepared_mix(server: Endpoint, thread: int, rounds: int) -> None:
    """One client's prepared statements (binary protocol, mysql-connector) on rows of its own: inserts with
    generated keys, updates and deletes, in transactions of which every fifth rolls back."""
    conn = mysql.connector.connect(
        host=server.host, port=server.port, user=server.user, password=server.password, use_pure=True
    )
    try:
        conn.cmd_query(READ_COMMITTED)
        cur = conn.cursor(prepared=True)
        for round_ in range(rounds):
            conn.start_transaction()
            cur.execute(
                f"INSERT INTO {SCHEMA}.mirtabAUTOINC (thread, step, val) VALUES (?, ?, ?)",
                (thread, round_, f"ps-{thread}-{round_}"),
            )
            cur.execute(
                f"UPDATE {SCHEMA}.mirtabAUTOINC SET val = CONCAT(val, ?) WHERE thread = ? AND step < ?",
                (f"+{round_}", thread, round_),
            )
            cur.execute(f"DELETE FROM {SCHEMA}.mirtabAUTOINC WHERE thread = ? AND step = ?", (thread, round_ - 3))
            if round_ % 5 == 4:
                conn.rollback()
            else:
                conn.commit()
        cur.close()
    finally:
        conn.close()


@contextmanager
def server_locked(server: Endpoint) -> Iterator[None]:
    """Hold every table of ``server`` read-locked (FLUSH TABLES WITH READ LOCK): writes wait until the block ends."""
    with server.connect() as conn, conn.cursor() as cur:
        cur.execute("FLUSH TABLES WITH READ LOCK")
        try:
            yield
        finally:
            cur.execute("UNLOCK TABLES")
