"""What a PostgreSQL statement does to its session under transaction pooling: settings read and replayed, pins."""

from __future__ import annotations

import pytest

from proxyapp.pgproxy.settings import (
    apply_change,
    deallocated,
    pin_reason,
    read_change,
    replay,
    startup_settings,
    vacated_database,
)
from proxyapp.pgsql.messages import cstring_body, tag_rows


@pytest.mark.parametrize(
    ("sql", "change"),
    [
        ("SET search_path TO a, b;", ("search_path", "a, b")),
        ("set session statement_timeout = '5s'", ("statement_timeout", "'5s'")),
        ("SET TIME ZONE 'UTC'", ("timezone", "'UTC'")),
        ("SET NAMES 'UTF8'", ("client_encoding", "'UTF8'")),
        ("RESET work_mem", ("work_mem", None)),
        ("RESET ALL", ("*", None)),
        ("DISCARD ALL", ("*", None)),
        ("SET LOCAL work_mem = '1MB'", None),
        ("SELECT 1", None),
        ("SET a = 1; SET b = 2", None),
    ],
)
def test_a_statements_change_of_settings_is_read(sql: str, change: tuple[str, str | None] | None) -> None:
    assert read_change(sql) == change


@pytest.mark.parametrize(
    ("sql", "reason"),
    [
        ("LISTEN jobs", "LISTEN"),
        ("CREATE TEMP TABLE t (a int)", "a temporary table"),
        ("create global temporary table t (a int)", "a temporary table"),
        ("SELECT pg_advisory_lock(1)", "a session advisory lock"),
        ("PREPARE q AS SELECT 1", "a text PREPARE"),
        ("DECLARE c CURSOR WITH HOLD FOR SELECT 1", "a cursor WITH HOLD"),
        ("SET ROLE admin", "SET ROLE or SESSION AUTHORIZATION"),
        ("SET a = 1; SET b = 2", "a SET the proxy cannot read"),
        ("SELECT pg_advisory_xact_lock(1)", None),
        ("SET LOCAL work_mem = '1MB'", None),
        ("UPDATE t SET a = 1", None),
        ("SELECT 'listen' FROM t", "LISTEN"),  # a word in a literal pins too: safe, never wrong
        ("SELECT set_config('search_path', 'app', false)", "set_config(..., false)"),
        ("select SET_CONFIG('a.b', $1, $2)", "set_config(..., false)"),  # is_local unknown: pinned, to be safe
        ("SELECT set_config('search_path', 'app', true)", None),
        ("SELECT set_config('a.b', 'x', TRUE )", None),
        ("SELECT set_config('a.b', upper('x'), true)", "set_config(..., false)"),  # not read through calls: pinned
    ],
)
def test_what_pins_a_session(sql: str, reason: str | None) -> None:
    assert pin_reason(sql) == reason


def test_startup_parameters_become_settings() -> None:
    settings = startup_settings(
        {"user": "u", "database": "d", "application_name": "it's", "options": "-c search_path=s1 --work-mem=4MB"}
    )
    assert settings == {"application_name": "'it''s'", "search_path": "'s1'", "work_mem": "'4MB'"}
    with pytest.raises(ValueError, match="only -c name=value"):
        startup_settings({"options": "-O"})


def test_replay_sets_what_differs_and_resets_what_is_gone() -> None:
    defaults = {"application_name": "'app'"}
    session = dict(defaults)
    apply_change(session, ("work_mem", "'8MB'"), defaults)
    apply_change(session, ("application_name", None), defaults)  # RESET: back to the startup value
    assert session == {"application_name": "'app'", "work_mem": "'8MB'"}
    assert replay({"statement_timeout": "'1s'"}, session) == (
        "SET application_name = 'app';SET work_mem = '8MB';RESET statement_timeout"
    )
    assert replay(session, session) == ""
    apply_change(session, ("*", None), defaults)
    assert session == defaults


def test_deallocate_and_drop_database_name_what_they_drop() -> None:
    assert deallocated('DEALLOCATE PREPARE "P_1";') == "P_1"
    assert deallocated("deallocate stmt") == "stmt"
    assert deallocated("DEALLOCATE ALL") is None
    assert vacated_database("DROP DATABASE IF EXISTS Test_DB") == "test_db"
    assert vacated_database('drop database "MixedCase"') == "MixedCase"
    assert vacated_database("DROP TABLE t") is None
    assert vacated_database("ALTER DATABASE Old RENAME TO new") == "old"
    assert vacated_database('alter database "x" set tablespace pg_default') == "x"
    assert vacated_database("ALTER DATABASE x SET work_mem = '1MB'") is None


def test_command_tags_give_rows_sent_or_changed() -> None:
    assert tag_rows(b"SELECT 5") == (5, 0)
    assert tag_rows(b"INSERT 0 3") == (0, 3)
    assert tag_rows(b"UPDATE 2") == (0, 2)
    assert tag_rows(b"BEGIN") == (0, 0)


def test_a_long_blank_run_is_read_in_one_pass() -> None:
    """400 kB of blanks around a value: a backtracking pattern would take hours here (the patterns match the
    statement stripped of its blanks and final ";", and nothing in them can backtrack over a run of blanks)."""
    hostile = "SET a = " + " " * 200_000 + "b" + " " * 200_000 + ";"
    assert read_change(hostile) == ("a", "b")
    assert pin_reason(hostile) is None
    commas = "SELECT set_config(" + ", " * 100_000 + "x"
    assert pin_reason(commas) == "set_config(..., false)"


def test_an_empty_body_reads_as_empty_text() -> None:
    assert cstring_body(b"Q\0\0\0\x04") == b""
    assert cstring_body(b"Q\0\0\0\x05\0") == b""
    assert cstring_body(b"C\0\0\0\x0bSELECT 5\0") == b"SELECT 5"
