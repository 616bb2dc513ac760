"""Several worker processes behind one port: sessions spread over them, statistics and reloads span them all."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pymysql
import pytest

from devstack.proxy import ProxyProcess, rw_split_config
from devstack.sandbox import Sandbox


def test_two_workers_serve_merge_stats_and_reload_together(
    sandbox: Sandbox, start_proxy: Callable[[dict[str, Any]], ProxyProcess]
) -> None:
    config = rw_split_config(
        sandbox.primary().port,
        [r.port for r in sandbox.replicas()],
        global_variables=[{"variable_name": "mysql-threads", "variable_value": "2"}],
    )
    proxy = start_proxy(config)
    connections = [proxy.connect(database="app", autocommit=True) for _ in range(12)]
    try:
        for conn in connections:
            with conn.cursor() as cur:
                cur.execute("SELECT 1 + 1")
                assert cur.fetchone() == (2,)
        stats = proxy.stats()
        assert stats["workers"] == 2
        assert stats["global"]["Questions"] >= 12
        assert stats["global"]["Client_Connections_connected"] == 12
        digests = [r for r in stats["query_digest"] if r["digest_text"] == "SELECT ? + ?"]
        assert len(digests) == 1 and digests[0]["count_star"] == 12  # merged across workers
        # A rule loaded by one reload reaches every worker: each connection now gets the rule's error.
        blocking = {"rule_id": 1, "active": 1, "match_digest": r"^SELECT \? \+", "error_msg": "blocked by rule"}
        result = proxy.admin("POST", "/reload", {**config, "mysql_query_rules": [blocking]})
        assert result["ok"], result
        for conn in connections:
            with conn.cursor() as cur, pytest.raises(pymysql.err.MySQLError) as info:
                cur.execute("SELECT 1 + 1")
            assert info.value.args == (1148, "blocked by rule")
    finally:
        for conn in connections:
            conn.close()
