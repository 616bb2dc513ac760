"""``SessionState.set_statement``: the one SET that brings a connection another session used to this session's
state, undoing what the other session set to what this connection's login gave it (its flags included)."""

from __future__ import annotations

import pytest

from proxyapp.mysql.backend import AppliedState, login_default
from proxyapp.mysql.constants import DEFAULT_SESSION_FLAGS, Cap
from proxyapp.session.state import SessionState

IGNORE_SPACE = DEFAULT_SESSION_FLAGS | Cap.IGNORE_SPACE
INTERACTIVE = DEFAULT_SESSION_FLAGS | Cap.INTERACTIVE


def test_nothing_to_send_when_the_connection_has_the_state() -> None:
    assert SessionState().set_statement(AppliedState()) is None


def test_the_session_own_values_are_sent_as_it_wrote_them() -> None:
    state = SessionState(variables={"sql_mode": "'ANSI'", "wait_timeout": "1"}, autocommit=False)
    assert state.set_statement(AppliedState()) == (
        "SET @@session.sql_mode = 'ANSI', @@session.wait_timeout = 1, autocommit = 0"
    )


@pytest.mark.parametrize(
    ("flags", "undo"),
    [
        (DEFAULT_SESSION_FLAGS, "@@session.sql_mode = DEFAULT, @@session.wait_timeout = DEFAULT"),
        (
            IGNORE_SPACE,
            "@@session.sql_mode = CONCAT_WS(',', NULLIF(@@global.sql_mode, ''), 'IGNORE_SPACE'), "
            "@@session.wait_timeout = DEFAULT",
        ),
        (INTERACTIVE, "@@session.sql_mode = DEFAULT, @@session.wait_timeout = @@global.interactive_timeout"),
    ],
)
def test_another_session_values_go_back_to_what_the_login_gave(flags: int, undo: str) -> None:
    left = AppliedState(variables={"sql_mode": "'ANSI'", "wait_timeout": "1"})
    assert SessionState().set_statement(left, flags) == "SET " + undo


def test_only_the_flag_variables_have_a_login_default_of_their_own() -> None:
    every = DEFAULT_SESSION_FLAGS | Cap.IGNORE_SPACE | Cap.INTERACTIVE | Cap.FOUND_ROWS
    assert login_default("time_zone", every) == "DEFAULT"
    assert login_default("sql_mode", Cap.FOUND_ROWS) == "DEFAULT"
