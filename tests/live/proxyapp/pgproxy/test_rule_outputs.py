"""What a ``pgsql_query_rules`` row does beside routing, rewriting and blocking: ``cache_ttl`` answers a simple Query
from the proxy's cache (outside transactions, until the TTL passes on the proxy's clock), ``timeout`` and
``pgsql-default_query_timeout`` have the server cancel a statement that runs too long, and the session goes on."""

from __future__ import annotations

from collections.abc import Callable

import psycopg
import pytest

from tests.live.proxyapp.pgproxy.conftest import Pooler, pool_config

StartPooler = Callable[..., Pooler]


def _reload(pooler: Pooler, rules: list[dict[str, object]], **variables: object) -> None:
    config = pool_config(pooler.port, **variables)
    config["pgsql_query_rules"] = rules
    answer = pooler.proxy.admin("POST", "/reload", config)
    assert answer["ok"], answer


def test_a_cache_ttl_rule_answers_from_the_cache_outside_transactions(start_pooler: StartPooler) -> None:
    pooler = start_pooler()
    _reload(pooler, [{"rule_id": 1, "active": 1, "match_pattern": "FROM cached_price", "cache_ttl": 60_000}])
    with pooler.connect(autocommit=True) as writer:
        writer.execute("DROP TABLE IF EXISTS cached_price")
        writer.execute("CREATE TABLE cached_price (id int PRIMARY KEY, price text)")
        writer.execute("INSERT INTO cached_price VALUES (1, 'old')")
    query = "SELECT price FROM cached_price WHERE id = 1"
    with pooler.connect(autocommit=True) as one, pooler.connect(autocommit=True) as two:
        assert one.execute(query).fetchone() == ("old",)  # from the server, and kept
        one.execute("UPDATE cached_price SET price = 'new' WHERE id = 1")
        assert two.execute(query).fetchone() == ("old",)  # another client, from the cache
        with pooler.connect() as in_transaction:  # a transaction reads the server
            assert in_transaction.execute(query).fetchone() == ("new",)
            in_transaction.rollback()
        cursor = two.execute(query)
        assert cursor.description is not None and cursor.description[0].name == "price"
        assert (cursor.fetchall(), cursor.rowcount) == ([("old",)], 1)  # the whole answer: columns, rows, tag
        stats = pooler.stats()
        assert (stats["query_cache_stored"], stats["query_cache_hits"], stats["query_cache_entries"]) == (1, 2, 1)
        pooler.proxy.advance_clock(61)
        assert one.execute(query).fetchone() == ("new",)  # the entry expired
    digests = {(r["hostgroup"], r["digest_text"]): r for r in pooler.proxy.stats()["pgsql_query_digest"]}
    assert digests[(-1, "SELECT price FROM cached_price WHERE id = ?")]["count_star"] == 2  # hostgroup -1: the cache


def test_errors_and_empty_answers_are_not_cached_unless_asked(start_pooler: StartPooler) -> None:
    pooler = start_pooler()
    rules = [
        {"rule_id": 1, "active": 1, "match_pattern": "nothing_here|no_such_table", "cache_ttl": 60_000},
        {"rule_id": 2, "active": 1, "match_pattern": "empty_kept", "cache_ttl": 60_000, "cache_empty_result": 1},
    ]
    _reload(pooler, rules, **{"pgsql-query_cache_stores_empty_result": "false"})
    with pooler.connect(autocommit=True) as conn:
        for _ in range(2):
            with pytest.raises(psycopg.errors.UndefinedTable):
                conn.execute("SELECT * FROM no_such_table")
            assert conn.execute("SELECT 1 AS nothing_here WHERE false").fetchall() == []
            assert conn.execute("SELECT 1 AS empty_kept WHERE false").fetchall() == []
    stats = pooler.stats()
    assert (stats["query_cache_stored"], stats["query_cache_hits"]) == (1, 1)  # only the rule that asked


def test_a_rule_timeout_has_the_server_cancel_the_statement(start_pooler: StartPooler) -> None:
    pooler = start_pooler()
    _reload(pooler, [{"rule_id": 1, "active": 1, "match_pattern": "pg_sleep", "timeout": 300}])
    with pooler.connect(autocommit=True) as conn:
        assert conn.execute("SELECT pg_sleep(0), 1").fetchone() == ("", 1)  # in time
        with pytest.raises(psycopg.errors.QueryCanceled, match="ran past 300 ms"):
            conn.execute("SELECT pg_sleep(30)")  # the simple protocol
        with pytest.raises(psycopg.errors.QueryCanceled, match="ran past 300 ms"):
            conn.execute("SELECT pg_sleep(%s)", (30,))  # the extended protocol
        assert conn.execute("SELECT %s::int", (5,)).fetchone() == (5,)  # the session goes on
    assert pooler.stats()["timed_out"] == 2


def test_the_default_query_timeout_applies_without_a_rule(start_pooler: StartPooler) -> None:
    pooler = start_pooler(**{"pgsql-default_query_timeout": 1000})
    with pooler.connect() as conn:
        with pytest.raises(psycopg.errors.QueryCanceled, match="ran past 1000 ms"):
            conn.execute("SELECT pg_sleep(30)")
        conn.rollback()
        assert conn.execute("SELECT 2").fetchone() == (2,)
        conn.rollback()


def test_an_answer_that_leaves_a_transaction_open_is_not_cached(start_pooler: StartPooler) -> None:
    """Replayed from the cache, ``BEGIN; SELECT ...`` would tell the client its transaction began while none did."""
    pooler = start_pooler()
    _reload(pooler, [{"rule_id": 1, "active": 1, "match_pattern": "opens_a_transaction", "cache_ttl": 60_000}])
    with pooler.connect(autocommit=True) as conn:
        for _ in range(2):
            cursor = conn.execute("BEGIN; SELECT 1 AS opens_a_transaction")
            assert cursor.nextset() and cursor.fetchall() == [(1,)]
            assert conn.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS
            assert conn.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = pg_backend_pid()").fetchone() == (1,)
            conn.execute("ROLLBACK")
    stats = pooler.stats()
    assert (stats["query_cache_stored"], stats["query_cache_hits"]) == (0, 0)
