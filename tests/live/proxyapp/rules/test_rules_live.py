"""Query rules through a real proxy: each mysql_query_rules column's effect, shown on the servers themselves.

Routing is proved either by the servers' own ``Com_select`` counters or by ``@@server_id`` in the result (the
sandbox primary is server 1, its replica server 2). Hostgroup 10 is the primary, hostgroup 20 the replica.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pymysql
import pytest

from devstack.proxy import READER_HG, WRITER_HG, ProxyProcess
from devstack.sandbox import APP_PASSWORD, APP_USER, Sandbox, SandboxServer
from devstack.stack import wait_until
from tests.support.harness import StartProxy, backend_thread

OTHER_USER = "reporter"
OTHER_PASSWORD = "reporter-pass"
OTHER_SCHEMA = "rules_other"
SERVER_NAMES = {1: "primary", 2: "replica"}


@pytest.fixture(scope="module", autouse=True)
def backend_objects(sandbox: Sandbox) -> None:
    """A second user and a second schema on the servers (the replica gets them by replication)."""
    with sandbox.primary().connect() as conn, conn.cursor() as cur:
        cur.execute(f"CREATE USER IF NOT EXISTS '{OTHER_USER}'@'%' IDENTIFIED BY '{OTHER_PASSWORD}'")
        cur.execute(f"GRANT ALL ON *.* TO '{OTHER_USER}'@'%'")
        cur.execute(f"CREATE DATABASE IF NOT EXISTS {OTHER_SCHEMA}")
        cur.execute("CREATE TABLE IF NOT EXISTS app.rl_cache (id INT PRIMARY KEY, v INT)")
        cur.execute("REPLACE INTO app.rl_cache VALUES (1, 10)")
    sandbox.wait_replicated()


def make_config(
    sandbox: Sandbox,
    rules: list[dict[str, Any]],
    *,
    users: list[dict[str, Any]] | None = None,
    variables: dict[str, Any] | None = None,
    max_connections: int = 64,
) -> dict[str, Any]:
    """Writer hostgroup 10 (primary) and reader hostgroup 20 (replica), the given rules, both users."""
    primary, replica = sandbox.primary(), sandbox.replicas()[0]
    if users is None:
        users = [
            {"username": APP_USER, "password": APP_PASSWORD, "default_hostgroup": WRITER_HG},
            {"username": OTHER_USER, "password": OTHER_PASSWORD, "default_hostgroup": WRITER_HG},
        ]
    return {
        "mysql_servers": [
            {
                "hostgroup_id": WRITER_HG,
                "hostname": "127.0.0.1",
                "port": primary.port,
                "max_connections": max_connections,
            },
            {
                "hostgroup_id": READER_HG,
                "hostname": "127.0.0.1",
                "port": replica.port,
                "max_connections": max_connections,
            },
        ],
        "mysql_users": users,
        "mysql_query_rules": [{"active": 1, **rule} for rule in rules],
        "global_variables": [
            {"variable_name": name, "variable_value": str(value)} for name, value in (variables or {}).items()
        ],
    }


_ROOT: dict[int, pymysql.Connection] = {}


def status(server: SandboxServer, *names: str) -> dict[str, int]:
    """Some of the server's global status counters, read on one lasting root connection (a new connection
    would count its own SET NAMES)."""
    conn = _ROOT.get(server.port)
    if conn is None or not conn.open:
        conn = _ROOT[server.port] = server.connect()
    with conn.cursor() as cur:
        cur.execute("SHOW GLOBAL STATUS WHERE Variable_name IN (" + ", ".join(["%s"] * len(names)) + ")", names)
        return {name: int(value) for name, value in cur.fetchall()}


def selects(sandbox: Sandbox) -> tuple[int, int]:
    """(primary, replica) Com_select."""
    return (
        status(sandbox.primary(), "Com_select")["Com_select"],
        status(sandbox.replicas()[0], "Com_select")["Com_select"],
    )


def select_deltas(sandbox: Sandbox, before: tuple[int, int]) -> tuple[int, int]:
    """How many SELECTs each server ran since ``before``."""
    now = selects(sandbox)
    return now[0] - before[0], now[1] - before[1]


def served_by(cur: pymysql.cursors.Cursor, sql: str) -> str:
    """Run a query whose first column is @@server_id; which server answered ('primary' or 'replica')."""
    cur.execute(sql)
    return SERVER_NAMES[int(cur.fetchone()[0])]


def rule_hits(proxy: ProxyProcess) -> dict[int, int]:
    """rule_id -> hits from /stats/query_rules."""
    return {row["rule_id"]: row["hits"] for row in proxy.admin("GET", "/stats/query_rules")}


def test_destination_hostgroup_sends_the_query_to_that_hostgroups_server(
    sandbox: Sandbox, start_proxy: StartProxy
) -> None:
    proxy = start_proxy(
        make_config(
            sandbox,
            [
                {
                    "rule_id": 1,
                    "match_digest": r"^SELECT v FROM rl_cache",
                    "destination_hostgroup": READER_HG,
                    "apply": 1,
                },
                {"rule_id": 2, "match_digest": r"^SELECT ", "destination_hostgroup": WRITER_HG, "apply": 1},
            ],
        )
    )
    with proxy.connect(database="app", autocommit=True) as conn, conn.cursor() as cur:
        before = selects(sandbox)
        for _ in range(15):
            cur.execute("SELECT v FROM rl_cache WHERE id = 1")
            assert cur.fetchall() == ((10,),)
        assert select_deltas(sandbox, before) == (0, 15)
        before = selects(sandbox)
        for i in range(7):
            cur.execute("SELECT %s", (i,))
            assert cur.fetchall() == ((i,),)
        assert select_deltas(sandbox, before) == (7, 0)
    assert rule_hits(proxy) == {1: 15, 2: 7}


def test_username_schemaname_and_client_addr_filters(sandbox: Sandbox, start_proxy: StartProxy) -> None:
    proxy = start_proxy(
        make_config(
            sandbox,
            [
                {"rule_id": 1, "username": OTHER_USER, "destination_hostgroup": READER_HG, "apply": 1},
                {"rule_id": 2, "schemaname": OTHER_SCHEMA, "destination_hostgroup": READER_HG, "apply": 1},
                {"rule_id": 3, "client_addr": "127.0.0.2", "destination_hostgroup": READER_HG, "apply": 1},
            ],
        )
    )
    query = "SELECT @@server_id"
    with proxy.connect(database="app", autocommit=True) as conn, conn.cursor() as cur:
        assert served_by(cur, query) == "primary"
        cur.execute(f"USE {OTHER_SCHEMA}")  # the schema filter follows the session's current schema
        assert served_by(cur, query) == "replica"
        cur.execute("USE app")
        assert served_by(cur, query) == "primary"
    with proxy.connect(database=OTHER_SCHEMA, autocommit=True) as conn, conn.cursor() as cur:
        assert served_by(cur, query) == "replica"
    with (
        proxy.connect(user=OTHER_USER, password=OTHER_PASSWORD, database="app", autocommit=True) as conn,
        conn.cursor() as cur,
    ):
        assert served_by(cur, query) == "replica"
    with proxy.connect(database="app", autocommit=True, bind_address="127.0.0.2") as conn, conn.cursor() as cur:
        assert served_by(cur, query) == "replica"
    hits = rule_hits(proxy)
    assert hits[1] == 2 and hits[3] == 2  # the SELECT and PyMySQL's SET NAMES at connect


def test_client_addr_prefix_with_percent(sandbox: Sandbox, start_proxy: StartProxy) -> None:
    proxy = start_proxy(
        make_config(sandbox, [{"rule_id": 1, "client_addr": "127.0.0.%", "destination_hostgroup": READER_HG}])
    )
    for source in ("127.0.0.1", "127.0.0.3"):
        with proxy.connect(autocommit=True, bind_address=source) as conn, conn.cursor() as cur:
            assert served_by(cur, "SELECT @@server_id") == "replica"


def test_flag_chains_and_apply(sandbox: Sandbox, start_proxy: StartProxy) -> None:
    """flagOUT moves evaluation to the rules of that flagIN; apply stops it; a later match overwrites."""
    proxy = start_proxy(
        make_config(
            sandbox,
            [
                # Every SELECT enters chain 5...
                {"rule_id": 1, "match_digest": r"^SELECT", "flagOUT": 5},
                # ...where only 'chained' queries get a destination.
                {"rule_id": 2, "flagIN": 5, "match_pattern": "chained", "destination_hostgroup": READER_HG, "apply": 1},
                # Flag 0 again: never reached, since every SELECT left flag 0 at rule 1.
                {"rule_id": 3, "match_digest": r"^SELECT", "destination_hostgroup": READER_HG, "apply": 1},
                # In chain 5: 'stop' applies the primary; 'goon' sets it but does not apply...
                {"rule_id": 4, "flagIN": 5, "match_pattern": "stop", "destination_hostgroup": WRITER_HG, "apply": 1},
                {"rule_id": 5, "flagIN": 5, "match_pattern": "goon", "destination_hostgroup": WRITER_HG},
                # ...so this later rule overwrites its destination.
                {"rule_id": 6, "flagIN": 5, "match_pattern": "stop|goon", "destination_hostgroup": READER_HG},
            ],
        )
    )
    with proxy.connect(autocommit=True) as conn, conn.cursor() as cur:
        assert served_by(cur, "SELECT @@server_id, 'chained'") == "replica"
        assert served_by(cur, "SELECT @@server_id, 'plain'") == "primary"  # rule 3 is not on flag 5
        assert served_by(cur, "SELECT @@server_id, 'stop'") == "primary"
        assert served_by(cur, "SELECT @@server_id, 'goon'") == "replica"
    assert rule_hits(proxy) == {1: 4, 2: 1, 3: 0, 4: 1, 5: 1, 6: 1}


def test_match_digest_sees_the_normalized_text_match_pattern_the_raw_query(
    sandbox: Sandbox, start_proxy: StartProxy
) -> None:
    proxy = start_proxy(
        make_config(
            sandbox,
            [
                # The digest text has '?' where the literals were: a literal never matches match_digest...
                {"rule_id": 1, "match_digest": r"WHERE 8 = 8", "destination_hostgroup": READER_HG, "apply": 1},
                # ...and '?' never matches the raw query.
                {"rule_id": 2, "match_pattern": r"WHERE \? = \?", "destination_hostgroup": READER_HG, "apply": 1},
                {"rule_id": 3, "match_digest": r"WHERE \? = \? AND", "destination_hostgroup": READER_HG, "apply": 1},
                {"rule_id": 4, "match_pattern": r"WHERE 5 = 5", "destination_hostgroup": READER_HG, "apply": 1},
            ],
        )
    )
    with proxy.connect(autocommit=True) as conn, conn.cursor() as cur:
        assert served_by(cur, "SELECT @@server_id FROM DUAL WHERE 8 = 8") == "primary"
        assert served_by(cur, "SELECT @@server_id FROM DUAL WHERE 1 = 1 AND 2 = 2") == "replica"
        assert served_by(cur, "SELECT @@server_id FROM DUAL WHERE 5 = 5") == "replica"
    assert rule_hits(proxy) == {1: 0, 2: 0, 3: 1, 4: 1}


def test_negate_match_pattern(sandbox: Sandbox, start_proxy: StartProxy) -> None:
    proxy = start_proxy(
        make_config(
            sandbox,
            [
                {
                    "rule_id": 1,
                    "match_pattern": "stay_home",
                    "negate_match_pattern": 1,
                    "destination_hostgroup": READER_HG,
                    "apply": 1,
                }
            ],
        )
    )
    with proxy.connect(autocommit=True) as conn, conn.cursor() as cur:
        assert served_by(cur, "SELECT @@server_id, 'roam'") == "replica"
        assert served_by(cur, "SELECT @@server_id, 'stay_home'") == "primary"
        assert served_by(cur, "SELECT @@server_id, 'STAY_HOME'") == "primary"  # CASELESS is the default


def test_re_modifiers_case_sensitivity_and_global_replace(sandbox: Sandbox, start_proxy: StartProxy) -> None:
    proxy = start_proxy(
        make_config(
            sandbox,
            [
                # No CASELESS: only the lowercase spelling matches.
                {"rule_id": 1, "match_pattern": "^select @@server_id", "re_modifiers": "", "destination_hostgroup": 20},
                {"rule_id": 2, "match_pattern": "aaa", "replace_pattern": "bbb", "re_modifiers": "CASELESS,GLOBAL"},
                {"rule_id": 3, "match_pattern": "ccc", "replace_pattern": "ddd", "re_modifiers": "CASELESS"},
            ],
        )
    )
    with proxy.connect(autocommit=True) as conn, conn.cursor() as cur:
        assert served_by(cur, "select @@server_id") == "replica"
        assert served_by(cur, "SELECT @@server_id") == "primary"
        cur.execute("SELECT 'aaa' AS a, 'AAA' AS b")
        assert cur.fetchall() == (("bbb", "bbb"),)  # GLOBAL: every occurrence
        cur.execute("SELECT 'ccc' AS a, 'ccc' AS b")
        assert cur.fetchall() == (("ddd", "ccc"),)  # without GLOBAL: the first one only


def test_digest_from_the_stats_routes_every_query_with_that_digest(sandbox: Sandbox, start_proxy: StartProxy) -> None:
    config = make_config(sandbox, [])
    proxy = start_proxy(config)
    with proxy.connect(autocommit=True) as conn, conn.cursor() as cur:
        assert served_by(cur, "SELECT @@server_id, 'learn me'") == "primary"
        rows = [r for r in proxy.admin("GET", "/stats/query_digest") if r["digest_text"] == "SELECT @@server_id,?"]
        assert len(rows) == 1
        digest = rows[0]["digest"]
        config["mysql_query_rules"] = [
            {"rule_id": 1, "active": 1, "digest": digest, "destination_hostgroup": READER_HG, "apply": 1}
        ]
        assert proxy.admin("POST", "/reload", config)["ok"] is True
        assert served_by(cur, "SELECT @@server_id, 'learn me'") == "replica"
        assert served_by(cur, "SELECT @@server_id, 12345") == "replica"  # another literal, the same digest
        assert served_by(cur, "SELECT @@server_id") == "primary"  # another digest
    assert rule_hits(proxy) == {1: 2}


def test_replace_pattern_rewrites_the_query(sandbox: Sandbox, start_proxy: StartProxy) -> None:
    proxy = start_proxy(
        make_config(
            sandbox,
            [
                {
                    "rule_id": 1,
                    "match_pattern": r"^SELECT '(\w+)' AS original$",
                    "replace_pattern": r"SELECT 'rewritten \1' AS original",
                }
            ],
        )
    )
    with proxy.connect(autocommit=True) as conn, conn.cursor() as cur:
        cur.execute("SELECT 'hello' AS original")
        assert cur.fetchall() == (("rewritten hello",),)
        cur.execute("SELECT 'hello' AS untouched")
        assert cur.fetchall() == (("hello",),)


def test_error_msg_blocks_the_query_before_any_server(sandbox: Sandbox, start_proxy: StartProxy) -> None:
    proxy = start_proxy(
        make_config(
            sandbox,
            [
                {"rule_id": 1, "match_pattern": "forbidden", "error_msg": "forbidden by the query rules"},
                {"rule_id": 2, "match_pattern": "^DROP TABLE", "error_msg": "no DROP through the proxy"},
            ],
        )
    )
    with proxy.connect(database="app", autocommit=True) as conn, conn.cursor() as cur:
        before = selects(sandbox)
        drops = status(sandbox.primary(), "Com_drop_table")
        with pytest.raises(pymysql.err.MySQLError) as info:
            cur.execute("SELECT 'forbidden'")
        assert info.value.args == (1148, "forbidden by the query rules")
        with pytest.raises(pymysql.err.MySQLError) as info:
            cur.execute("DROP TABLE rl_cache")
        assert info.value.args == (1148, "no DROP through the proxy")
        assert select_deltas(sandbox, before) == (0, 0)
        assert status(sandbox.primary(), "Com_drop_table") == drops
        cur.execute("SELECT COUNT(*) FROM rl_cache")  # the session goes on; the table is still there
        assert cur.fetchall() == ((1,),)


def test_ok_msg_answers_without_any_server(sandbox: Sandbox, start_proxy: StartProxy) -> None:
    proxy = start_proxy(
        make_config(
            sandbox,
            [
                {"rule_id": 1, "match_pattern": "^SET harmless", "OK_msg": "done"},
                {"rule_id": 2, "match_pattern": "^SELECT 'ok me'", "OK_msg": "fine"},
            ],
        )
    )
    with proxy.connect(autocommit=True) as conn, conn.cursor() as cur:
        before = status(sandbox.primary(), "Com_set_option")
        assert cur.execute("SET harmless = 'this is not even valid SQL'") == 0
        assert conn._result is not None and conn._result.message == b"done"
        assert status(sandbox.primary(), "Com_set_option") == before
        selects_before = selects(sandbox)
        assert cur.execute("SELECT 'ok me'") == 0
        assert cur.description is None  # an OK, no result set
        assert conn._result is not None and conn._result.message == b"fine"
        assert select_deltas(sandbox, selects_before) == (0, 0)
        cur.execute("SELECT 1")
        assert cur.fetchall() == ((1,),)


def test_cache_ttl_answers_repeats_from_the_cache(sandbox: Sandbox, start_proxy: StartProxy) -> None:
    # The TTL's expiry is decided on a clock the test holds in tests/unit/proxyapp/rules/test_cache.py; here a TTL
    # no loaded machine can outrun shows the rule's wiring.
    proxy = start_proxy(
        make_config(
            sandbox,
            [
                {
                    "rule_id": 1,
                    "match_digest": r"^SELECT v FROM rl_cache",
                    "cache_ttl": 60_000,
                    "destination_hostgroup": 20,
                }
            ],
        )
    )
    query = "SELECT v FROM rl_cache WHERE id = 1"
    with proxy.connect(database="app", autocommit=True) as conn, conn.cursor() as cur:
        hits0 = proxy.stats()["global"]["Query_Cache_count_GET_OK"]
        before = selects(sandbox)
        cur.execute(query)
        assert cur.fetchall() == ((10,),)
        assert select_deltas(sandbox, before) == (0, 1)
        for _ in range(3):
            cur.execute(query)
            assert cur.fetchall() == ((10,),)
        assert select_deltas(sandbox, before) == (0, 1)  # answered by the proxy
        assert proxy.stats()["global"]["Query_Cache_count_GET_OK"] == hits0 + 3
        cur.execute("SELECT v FROM rl_cache WHERE id = 2")  # another query is not a hit
        assert cur.fetchall() == ()
        assert select_deltas(sandbox, before) == (0, 2)


def test_timeout_kills_the_query_and_the_session_goes_on(sandbox: Sandbox, start_proxy: StartProxy) -> None:
    proxy = start_proxy(make_config(sandbox, [{"rule_id": 1, "match_pattern": r"SLEEP\(5\)", "timeout": 300}]))
    with proxy.connect(autocommit=True) as conn, conn.cursor() as cur:
        with pytest.raises(pymysql.err.OperationalError) as info:
            cur.execute("SELECT SLEEP(5)")
        assert info.value.args[0] == 1317  # interrupted: the rule's timeout killed it on the server
        wait_until(
            lambda: proxy.stats()["global"]["mysql_killed_backend_queries"] == 1, "the timed-out query counted", 15
        )
        cur.execute("SELECT SLEEP(0.4), 'not matched: no timeout'")
        assert cur.fetchall() == ((0, "not matched: no timeout"),)
        assert served_by(cur, "SELECT @@server_id") == "primary"
    assert proxy.stats()["global"]["mysql_killed_backend_queries"] == 1


def test_retries_rerun_a_read_whose_backend_connection_died(sandbox: Sandbox, start_proxy: StartProxy) -> None:
    """A read whose backend connection is killed before it answered: retried with retries=1, not with 0."""
    proxy = start_proxy(
        make_config(
            sandbox,
            [
                {"rule_id": 1, "match_pattern": "retry_me", "retries": 1},
                {"rule_id": 2, "match_pattern": "no_retry", "retries": 0},
            ],
        )
    )
    primary = sandbox.primary()

    def run_and_kill(sql: str, marker: str) -> tuple[Any, float]:
        """Run ``sql`` through the proxy, killing its backend connection as soon as the server runs it."""
        outcome: dict[str, Any] = {}

        def client() -> None:
            """The client side: the statement, then one more query on the same session."""
            with proxy.connect(autocommit=True) as conn, conn.cursor() as cur:
                try:
                    cur.execute(sql)
                    outcome["rows"] = cur.fetchall()
                except pymysql.err.MySQLError as exc:
                    outcome["error"] = exc.args
                cur.execute("SELECT 'still usable'")
                outcome["after"] = cur.fetchall()

        thread = threading.Thread(target=client)
        started = time.monotonic()
        thread.start()
        victim = backend_thread(primary, marker)
        with primary.connect() as root, root.cursor() as cur:
            cur.execute(f"KILL {victim}")
        thread.join(10)
        assert outcome["after"] == (("still usable",),)
        return outcome.get("rows", outcome.get("error")), time.monotonic() - started

    result, elapsed = run_and_kill("SELECT SLEEP(0.6), 'retry_me'", "retry_me")
    assert result == ((0, "retry_me"),)  # re-run on a new connection: the full sleep, and its result
    assert elapsed >= 0.6
    result, _ = run_and_kill("SELECT SLEEP(3), 'no_retry'", "no_retry")
    assert result[0] == 2013
    assert "hostgroup 10" in result[1]


def test_multiplex_0_keeps_the_backend_connection(sandbox: Sandbox, start_proxy: StartProxy) -> None:
    proxy = start_proxy(
        make_config(
            sandbox,
            [{"rule_id": 1, "match_pattern": "pin_me", "multiplex": 0}],
            max_connections=8,
        )
    )
    with proxy.connect(autocommit=True) as a, proxy.connect(autocommit=True) as b:
        ca, cb = a.cursor(), b.cursor()
        # Control: without the rule, a session's next query may run on another connection.
        ca.execute("SELECT CONNECTION_ID()")
        first = ca.fetchone()[0]
        cb.execute("BEGIN")
        cb.execute("SELECT CONNECTION_ID()")
        assert cb.fetchone()[0] == first  # b took the connection a had just given back
        ca.execute("SELECT CONNECTION_ID()")
        assert ca.fetchone()[0] != first
        cb.execute("COMMIT")

        ca.execute("SELECT CONNECTION_ID(), 'pin_me'")
        pinned = ca.fetchone()[0]
        cb.execute("BEGIN")
        cb.execute("SELECT CONNECTION_ID()")
        assert cb.fetchone()[0] != pinned
        others = [proxy.connect(autocommit=True) for _ in range(3)]
        try:
            for _ in range(5):
                for other in others:
                    with other.cursor() as cur:
                        cur.execute("SELECT CONNECTION_ID()")
                        assert cur.fetchone()[0] != pinned
                ca.execute("SELECT CONNECTION_ID()")
                assert ca.fetchone()[0] == pinned
        finally:
            for other in others:
                other.close()
        cb.execute("COMMIT")


def test_log_rule_writes_the_query_to_the_events_log(sandbox: Sandbox, start_proxy: StartProxy, tmp_path: Path) -> None:
    events = tmp_path / "events.jsonl"
    proxy = start_proxy(
        make_config(
            sandbox,
            [
                {"rule_id": 1, "match_pattern": "log_me", "log": 1},
                {"rule_id": 2, "match_pattern": "log_me too", "destination_hostgroup": READER_HG},
            ],
            variables={"mysql-eventslog_filename": events},
        )
    )
    with proxy.connect(database="app", autocommit=True) as conn, conn.cursor() as cur:
        cur.execute("SELECT 'log_me'")
        assert cur.fetchall() == (("log_me",),)
        cur.execute("SELECT 'quiet'")
        cur.execute("SELECT 'log_me too'")
        with pytest.raises(pymysql.err.ProgrammingError):
            cur.execute("SELECT log_me FROM no_such_table")
    # the event is written just after the response
    wait_until(lambda: len(events.read_text().splitlines()) >= 3, "three events logged", 5, interval=0.02)
    lines = [json.loads(line) for line in events.read_text().splitlines()]
    assert [e["query"] for e in lines] == ["SELECT 'log_me'", "SELECT 'log_me too'", "SELECT log_me FROM no_such_table"]
    assert [e["hostgroup_id"] for e in lines] == [WRITER_HG, READER_HG, WRITER_HG]
    assert all(e["username"] == APP_USER and e["schemaname"] == "app" for e in lines)
    assert [e["rows_sent"] for e in lines[:2]] == [1, 1]
    assert "error" in lines[2] and "error" not in lines[0]
    with proxy.connect(autocommit=True) as conn, conn.cursor() as cur:
        cur.execute("SELECT 'the proxy still serves'")
        assert cur.fetchall() == (("the proxy still serves",),)


def test_next_query_flag_in_applies_to_the_following_queries(sandbox: Sandbox, start_proxy: StartProxy) -> None:
    """ProxySQL: the session's next_query_flagIN becomes the flagIN of its next queries until a rule changes it."""
    proxy = start_proxy(
        make_config(
            sandbox,
            [
                {"rule_id": 1, "match_pattern": "switch", "next_query_flagIN": 7, "apply": 1},
                {"rule_id": 2, "flagIN": 7, "match_pattern": "back", "next_query_flagIN": 0, "apply": 1},
                {"rule_id": 3, "flagIN": 7, "match_digest": "^SELECT", "destination_hostgroup": READER_HG, "apply": 1},
            ],
        )
    )
    with proxy.connect(autocommit=True) as conn, conn.cursor() as cur:
        assert served_by(cur, "SELECT @@server_id, 'before'") == "primary"
        assert served_by(cur, "SELECT @@server_id, 'switch'") == "primary"  # sets the flag for what follows
        assert served_by(cur, "SELECT @@server_id, 'next'") == "replica"
        assert served_by(cur, "SELECT @@server_id, 'and the next'") == "replica"
        assert served_by(cur, "SELECT @@server_id, 'back'") == "primary"
        assert served_by(cur, "SELECT @@server_id, 'after'") == "primary"
    with proxy.connect(autocommit=True) as conn, conn.cursor() as cur:
        assert served_by(cur, "SELECT @@server_id, 'another session starts at 0'") == "primary"
    assert rule_hits(proxy) == {1: 1, 2: 1, 3: 2}


def test_first_comment_annotations_override_the_rules(sandbox: Sandbox, start_proxy: StartProxy) -> None:
    proxy = start_proxy(
        make_config(sandbox, [{"rule_id": 1, "match_digest": "^SELECT", "destination_hostgroup": WRITER_HG}])
    )
    with proxy.connect(autocommit=True) as conn, conn.cursor() as cur:
        assert served_by(cur, "SELECT @@server_id") == "primary"
        assert served_by(cur, "/* hostgroup=20 */ SELECT @@server_id") == "replica"
        assert served_by(cur, "SELECT /* hostgroup=20;query_timeout=5000 */ @@server_id") == "replica"
        assert served_by(cur, "SELECT @@server_id /* not the first: hostgroup=10 */ /* hostgroup=20 */") == "primary"


def test_transaction_persistent(sandbox: Sandbox, start_proxy: StartProxy) -> None:
    """transaction_persistent=1 keeps a transaction's reads in its hostgroup; with 0 the rules route them."""
    users = [
        {"username": APP_USER, "password": APP_PASSWORD, "default_hostgroup": WRITER_HG},
        {"username": OTHER_USER, "password": OTHER_PASSWORD, "default_hostgroup": 10, "transaction_persistent": 0},
    ]
    proxy = start_proxy(
        make_config(
            sandbox,
            [{"rule_id": 1, "match_digest": "^SELECT", "destination_hostgroup": READER_HG, "apply": 1}],
            users=users,
        )
    )
    with proxy.connect(database="app", autocommit=True) as conn, conn.cursor() as cur:
        assert served_by(cur, "SELECT @@server_id") == "replica"
        cur.execute("BEGIN")
        cur.execute("UPDATE rl_cache SET v = v WHERE id = 1")
        assert served_by(cur, "SELECT @@server_id") == "primary"
        cur.execute("COMMIT")
        assert served_by(cur, "SELECT @@server_id") == "replica"
    with (
        proxy.connect(user=OTHER_USER, password=OTHER_PASSWORD, database="app", autocommit=True) as conn,
        conn.cursor() as cur,
    ):
        cur.execute("BEGIN")
        cur.execute("UPDATE rl_cache SET v = v WHERE id = 1")
        assert served_by(cur, "SELECT @@server_id") == "replica"
        cur.execute("UPDATE rl_cache SET v = v + 0 WHERE id = 1")  # the transaction is still there
        cur.execute("/* hostgroup=10 */ SELECT @@in_transaction, @@server_id")
        assert cur.fetchall() == ((1, 1),)  # the transaction's own connection
        cur.execute("COMMIT")
        cur.execute("SELECT v FROM rl_cache WHERE id = 1")
        assert cur.fetchall() == ((10,),)


def test_fast_routing_sends_a_users_schema_to_its_hostgroup(sandbox: Sandbox, start_proxy: StartProxy) -> None:
    """mysql_query_rules_fast_routing: app on app goes to the replica in one lookup; app on another schema, and a
    query an apply=1 rule ends, keep the rules' (or the user's default) hostgroup."""
    config = make_config(
        sandbox, [{"rule_id": 1, "match_digest": r"FOR UPDATE$", "destination_hostgroup": WRITER_HG, "apply": 1}]
    )
    config["mysql_query_rules_fast_routing"] = [
        {"username": APP_USER, "schemaname": "app", "flagIN": 0, "destination_hostgroup": READER_HG}
    ]
    proxy = start_proxy(config)
    with proxy.connect(database="app", autocommit=True) as conn, conn.cursor() as cur:
        assert served_by(cur, "SELECT @@server_id") == "replica"
        assert served_by(cur, "SELECT @@server_id FROM DUAL FOR UPDATE") == "primary"  # rule 1 applied first
    with proxy.connect(database=OTHER_SCHEMA, autocommit=True) as conn, conn.cursor() as cur:
        assert served_by(cur, "SELECT @@server_id") == "primary"  # no row for this schema: the default
