"""The query events log: rule ``log=1`` writes one JSON line per query, with ProxySQL's field names."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from devstack.proxy import ProxyProcess, rw_split_config
from devstack.sandbox import Sandbox
from devstack.stack import wait_until


def test_rule_log_writes_json_events(
    sandbox: Sandbox, start_proxy: Callable[[dict[str, Any]], ProxyProcess], tmp_path: Path
) -> None:
    events = tmp_path / "events.jsonl"
    config = rw_split_config(
        sandbox.primary().port,
        [r.port for r in sandbox.replicas()],
        global_variables=[{"variable_name": "mysql-eventslog_filename", "variable_value": str(events)}],
    )
    config["mysql_query_rules"].insert(0, {"rule_id": 1, "active": 1, "match_pattern": "^SELECT 42", "log": 1})
    config["mysql_query_rules"][1]["rule_id"] = 2
    config["mysql_query_rules"][2]["rule_id"] = 3
    proxy = start_proxy(config)
    with proxy.connect(database="app", autocommit=True) as conn, conn.cursor() as cur:
        cur.execute("SELECT 42")
        cur.execute("SELECT 43")  # not logged: the log rule does not match
        cur.execute("SELECT 42, 'x'")
    lines: list[dict[str, Any]] = []

    def logged() -> bool:  # the proxy logs right after it answers
        lines[:] = [json.loads(line) for line in events.read_text().splitlines()] if events.exists() else []
        return len(lines) >= 2

    wait_until(logged, "two events logged", 5, interval=0.02)
    assert [e["query"] for e in lines] == ["SELECT 42", "SELECT 42, 'x'"]
    first = lines[0]
    assert first["event"] == "COM_QUERY" and first["username"] == "app" and first["schemaname"] == "app"
    assert first["hostgroup_id"] == 20 and first["rows_sent"] == 1
    assert first["server"] == f"127.0.0.1:{sandbox.replicas()[0].port}"
    assert first["endtime_timestamp_us"] >= first["starttime_timestamp_us"]
