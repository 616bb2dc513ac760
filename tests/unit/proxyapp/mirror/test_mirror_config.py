"""Mirroring without servers: the ordered-mode settings and their errors, the on-disk unit format, merging
several workers' counters, and how /metrics shows them."""

from __future__ import annotations

import json
import struct
from typing import Any

import pytest

from proxyapp.config.document import ConfigError, parse_config, validate_row
from proxyapp.config.variables import ordered_mirror_hostgroups
from proxyapp.mirror.lanes import IDLE, LANE_STATES, READY, RUNNING, WAITING, Lane, LaneStateError
from proxyapp.mirror.units import EXECUTE, QUERY, MirrorOp, MirrorUnit, decode_unit, encode_unit
from proxyapp.process.admin import render_metrics
from proxyapp.report.merge import merge_mirror_sections, merge_snapshots
from proxyapp.session.state import SessionState


@pytest.mark.parametrize(
    ("text", "modes"),
    [
        ("", {}),
        ("  ", {}),
        ("700", {700: "lossless"}),
        ("700, 701:lossy,702:LOSSLESS", {700: "lossless", 701: "lossy", 702: "lossless"}),
    ],
)
def test_ordered_hostgroups_are_read(text: str, modes: dict[int, str]) -> None:
    assert ordered_mirror_hostgroups(text) == modes


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("seven", "'seven' is not a hostgroup: list HOSTGROUP or HOSTGROUP:lossless or HOSTGROUP:lossy"),
        ("700,", "'' is not a hostgroup"),
        ("700:fast", "hostgroup 700: mode 'fast' is not lossless or lossy"),
        ("700,700:lossy", "hostgroup 700 is listed twice"),
        ("-1", "'-1' is not a hostgroup"),
        ("99999999999", "'99999999999' is not a hostgroup"),
    ],
)
def test_a_bad_ordered_hostgroup_list_names_the_row_and_the_field(text: str, message: str) -> None:
    document = {
        "global_variables": [
            {"variable_name": "mysql-threads", "variable_value": "1"},
            {"variable_name": "mysql-mirror_ordered_hostgroups", "variable_value": text},
        ]
    }
    with pytest.raises(ConfigError) as refused:
        parse_config(document)
    (error,) = refused.value.errors
    assert error.startswith(
        "global_variables[1] (variable_name='mysql-mirror_ordered_hostgroups'): variable_value: "
    ), error
    assert message in error
    _, errors = validate_row("global_variables", document["global_variables"][1])  # the control plane's forms
    assert errors and errors[0][0] == "variable_value" and message in errors[0][1]


def test_the_memory_bound_is_checked_like_any_variable() -> None:
    with pytest.raises(ConfigError, match=r"mysql-mirror_ordered_max_memory.*below the minimum 0"):
        parse_config({"global_variables": [{"variable_name": "mysql-mirror_ordered_max_memory", "variable_value": -1}]})
    config = parse_config({"global_variables": [{"variable_name": "mysql-mirror_spill_dir", "variable_value": "q"}]})
    assert config.variables.text("mysql-mirror_spill_dir") == "q"


def test_a_unit_survives_the_disk_format() -> None:
    ctx = SessionState(schema="app", names="utf8mb4", variables={"sql_mode": "'STRICT_ALL_TABLES'"})
    ctx.user_variables["tag"] = "CONVERT(X'6869' USING utf8mb4)"
    other = SessionState(schema="caf\udce9", multi_statements=False)  # a latin1 client's b"caf\xe9"
    ops = [
        MirrorOp(QUERY, 700, b"\x03INSERT INTO t VALUES (1)", "", [], 41, True, ctx),
        MirrorOp(EXECUTE, 700, b"\x17\0\0\0\0\0\1\0\0\0\0\1\x08\0", "UPDATE t SET a = ?", [b"\x18x"], 0, False, ctx),
        MirrorOp(QUERY, 700, "SELECT 'é'".encode(), "", [], 0, True, other),
    ]
    unit = MirrorUnit(17, ops, True, 1234.5, "app", 999)
    back = decode_unit(encode_unit(unit), 17, 1234.5, "app")
    assert (back.seq, back.transaction, back.created, back.username) == (17, True, 1234.5, "app")
    assert [(o.kind, o.payload, o.sql, o.long_data, o.insert_id, o.plain) for o in back.ops] == [
        (o.kind, o.payload, o.sql, o.long_data, o.insert_id, o.plain) for o in ops
    ]
    first, second, third = (o.ctx for o in back.ops)
    assert first is second  # one context object while it did not change
    assert (first.schema, first.names, first.variables, first.user_variables) == (
        "app",
        "utf8mb4",
        ctx.variables,
        ctx.user_variables,
    )
    assert (first.multi_statements, third.schema, third.multi_statements) == (True, "caf\udce9", False)
    with pytest.raises(ValueError, match="unit 17 is damaged"):
        decode_unit(encode_unit(unit)[:-3], 17, 0.0, "app")


def test_a_unit_spilled_before_the_multi_statement_option_was_kept_reads_with_it_on() -> None:
    ctx = SessionState(schema="app", multi_statements=False)
    unit = MirrorUnit(3, [MirrorOp(QUERY, 700, b"\x03DO 1", "", [], 0, True, ctx)], False, 1.0, "app", 9)
    body = encode_unit(unit)
    (length,) = struct.unpack_from("<I", body, 16)  # after the unit's header (6 bytes) and the op's kind, id, plain
    new = json.loads(body[20 : 20 + length])
    assert new[-1] is False
    old = json.dumps(new[:4]).encode()  # the context as an older proxy wrote it: four items
    body = body[:16] + struct.pack("<I", len(old)) + old + body[20 + length :]
    (op,) = decode_unit(body, 3, 1.0, "app").ops
    assert (op.ctx.schema, op.ctx.multi_statements, op.payload) == ("app", True, b"\x03DO 1")


MOVES = {(IDLE, READY), (READY, RUNNING), (RUNNING, READY), (RUNNING, IDLE), (RUNNING, WAITING), (WAITING, READY)}


@pytest.mark.parametrize("start", [IDLE, READY, RUNNING, WAITING])
@pytest.mark.parametrize("to", [IDLE, READY, RUNNING, WAITING])
def test_a_lane_moves_only_as_its_state_allows(start: int, to: int) -> None:
    lane = Lane("w0.1.700", 700)
    lane.state = start
    if (start, to) in MOVES:
        lane.move(to)
        assert lane.state == to
    else:
        with pytest.raises(LaneStateError, match=f"{LANE_STATES[start]} -> {LANE_STATES[to]} is not a move"):
            lane.move(to)
        assert lane.state == start


def _mirror_section(**values: Any) -> dict[str, Any]:
    section = {
        "mirrored": 10,
        "completed": 7,
        "failed": {"1062": 1},
        "dropped": {"queue_full": 2},
        "retried": 0,
        "concurrency": 1,
        "max_concurrency": 8,
        "queue_length": 0,
        "queue_proxysql": 0,
        "queue_memory": 0,
        "queue_disk": 0,
        "memory_bytes": 0,
        "memory_limit": 100,
        "oldest_age_s": 0.5,
        "lanes": 0,
        "lanes_waiting": 0,
        "last_error": "",
        "ordered_hostgroups": {"700": "lossless"},
        "spill_path": "",
    }
    section.update(values)
    return section


def test_workers_counters_are_merged() -> None:
    one = _mirror_section()
    two = _mirror_section(failed={"1062": 2, "2013": 1}, dropped={}, oldest_age_s=3.0, last_error="lost it")
    merged = merge_mirror_sections([one, two])
    assert (merged["mirrored"], merged["completed"], merged["max_concurrency"]) == (20, 14, 16)
    assert merged["failed"] == {"1062": 3, "2013": 1}
    assert merged["dropped"] == {"queue_full": 2}
    assert (merged["oldest_age_s"], merged["last_error"]) == (3.0, "lost it")


def _snapshot(age_ms: int, mirror: dict[str, Any]) -> dict[str, Any]:
    return {
        "global": {"ProxySQL_Uptime": 5, "Mirror_oldest_entry_age_ms": age_ms, "Mirror_queries_dropped": 2},
        "connection_pool": [],
        "query_digest": [],
        "query_rules": [],
        "config": {"checksum": "c", "loaded_at": 1.0, "source": "test"},
        "mirror": mirror,
    }


def test_the_oldest_age_of_several_workers_is_the_largest_not_the_sum() -> None:
    merged = merge_snapshots([_snapshot(400, _mirror_section()), _snapshot(900, _mirror_section())])
    assert merged["global"]["Mirror_oldest_entry_age_ms"] == 900
    assert merged["global"]["Mirror_queries_dropped"] == 4
    assert merged["mirror"]["dropped"] == {"queue_full": 4}


def test_metrics_show_failures_by_code_and_drops_by_reason() -> None:
    text = render_metrics(_snapshot(400, _mirror_section(dropped={"queue_full": 2, "memory_full": 5})))
    assert 'proxyfleet_mirror_failed_by_code_total{code="1062"} 1' in text
    assert 'proxyfleet_mirror_dropped_by_reason_total{reason="memory_full"} 5' in text
    assert "# TYPE proxyfleet_mirror_dropped_by_reason_total counter" in text
    assert "proxyfleet_mirror_oldest_entry_age_ms 400" in text
