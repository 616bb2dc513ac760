"""PostgreSQL digests in reports (issue 16): a worker's ``pgsql_query_digest`` rows (``DigestStats`` keyed by
database), merged across workers by the supervisor and read back by the control plane's reader."""

from __future__ import annotations

from typing import Any

import pytest

from proxyapp.report.merge import digest_key, merge_snapshots
from proxyapp.report.reader import PgsqlDigestRow, ReportError, read_digests, read_pgsql_digests
from proxyapp.report.stats import PGSQL_DIGEST_COLUMNS, DigestStats, GlobalCounters
from proxyapp.sql.digest import compute_pg_digest
from tests.support.node_messages import digest_row, pgsql_digest_row

PG = pgsql_digest_row("0xC3", "SELECT ?::int", 4, 200)


def worker_snapshot(**sections: Any) -> dict[str, Any]:
    """A worker's snapshot with what merge_snapshots requires and ``sections``."""
    return {
        "global": GlobalCounters().snapshot(),
        "connection_pool": [],
        "query_digest": [],
        "query_rules": [],
        "config": {"checksum": "c", "loaded_at": 1.0, "source": "test"},
        **sections,
    }


def test_a_worker_rows_read_back_as_typed_rows() -> None:
    stats = DigestStats(schema_column="database")
    digest = compute_pg_digest("SELECT * FROM t WHERE id = $1::int")
    stats.record(-1, "shop", "app", "10.0.0.9", digest.hash, digest.text, 120, 1, 0)
    stats.record(-1, "shop", "app", "10.0.0.9", digest.hash, digest.text, 80, 1, 0)
    [row] = read_pgsql_digests({"pgsql_query_digest": stats.rows()})
    assert (row.hostgroup, row.database, row.username, row.client_address) == (-1, "shop", "app", "10.0.0.9")
    assert (row.digest, row.digest_text) == (digest.hash, "SELECT * FROM t WHERE id = ?::int")
    assert (row.count_star, row.sum_time, row.min_time, row.max_time, row.sum_rows_sent) == (2, 200, 80, 120, 2)
    assert tuple(PgsqlDigestRow.__dataclass_fields__) == PGSQL_DIGEST_COLUMNS
    assert read_pgsql_digests({"pgsql_query_digest": [PG]}) == [
        PgsqlDigestRow(10, "app", "app", "", "0xC3", "SELECT ?::int", 4, 1, 2, 200, 1, 200, 0, 4)
    ]


def test_a_report_without_postgresql_digests_has_none() -> None:
    assert read_pgsql_digests(worker_snapshot()) == []


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        ({}, "stats.pgsql_query_digest: expected a list of rows"),
        ([7], r"stats.pgsql_query_digest\[0\]: expected an object"),
        ([{**PG, "hostgroup": "10"}], r"pgsql_query_digest\[0\].hostgroup: expected a whole number"),
        ([PG, {**PG, "count_star": -1}], r"pgsql_query_digest\[1\].count_star: expected a whole number"),
        ([{**PG, "database": None}], r"pgsql_query_digest\[0\].database: expected text"),
        ([digest_row("0xA1", "SELECT ?", 3, 90)], r"pgsql_query_digest\[0\].database: expected text"),  # a MySQL row
    ],
)
def test_a_malformed_section_is_refused_naming_the_path(rows: object, message: str) -> None:
    with pytest.raises(ReportError, match=message):
        read_pgsql_digests({"pgsql_query_digest": rows})


def test_the_mysql_reader_reads_its_own_section_only() -> None:
    report = worker_snapshot(query_digest=[digest_row("0xA1", "SELECT ?", 3, 90)], pgsql_query_digest=[PG])
    assert [row.digest for row in read_digests(report)] == ["0xA1"]
    assert [row.digest for row in read_pgsql_digests(report)] == ["0xC3"]
    with pytest.raises(ReportError, match=r"query_digest\[0\].schemaname: expected text"):
        read_digests({"query_digest": [PG]})


def test_workers_postgresql_digests_merge_by_their_key() -> None:
    elsewhere = {**PG, "database": "other"}
    one = worker_snapshot(pgsql_query_digest=[PG, elsewhere], pgsql_query_digest_overflow=2)
    two = worker_snapshot(
        pgsql_query_digest=[{**PG, "count_star": 6, "sum_time": 50, "min_time": 0, "max_time": 20, "last_seen": 9}],
        pgsql_query_digest_overflow=3,
    )
    merged = merge_snapshots([one, two])
    rows = {row["database"]: row for row in merged["pgsql_query_digest"]}
    assert set(rows) == {"app", "other"}
    app = rows["app"]
    assert (app["count_star"], app["sum_time"], app["min_time"], app["max_time"]) == (10, 250, 0, 200)
    assert (app["first_seen"], app["last_seen"], app["sum_rows_sent"]) == (1, 9, 8)
    assert rows["other"] == elsewhere
    assert merged["pgsql_query_digest_overflow"] == 5
    assert merged["query_digest"] == []
    assert read_pgsql_digests(merged)  # the merged section reads
    assert digest_key(app, "database") == (10, "app", "app", "", "0xC3")


def test_workers_without_postgresql_digests_merge_to_none() -> None:
    merged = merge_snapshots([worker_snapshot(), worker_snapshot()])
    assert (merged["pgsql_query_digest"], merged["pgsql_query_digest_overflow"]) == ([], 0)
