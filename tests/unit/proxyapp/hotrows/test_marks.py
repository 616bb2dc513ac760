"""Which keys a statement asks for (``proxyapp.hotrows.marks``), and a query rule's trx_queue columns in the rule
engine: one validation for the control plane, the API, an import and the node."""

from __future__ import annotations

import pytest

from proxyapp.config.document import ConfigError, parse_config
from proxyapp.config.tables import MysqlQueryRule
from proxyapp.hotrows.marks import MarkError, column_keys, hinted
from proxyapp.rules.engine import QueryContext, RuleEngine


def test_a_hint_names_a_queue_and_one_or_more_keys_in_the_queues_order() -> None:
    assert hinted("t1:42") == [("t1", "42")]
    assert hinted("acct:7|3|7") == [("acct", "3"), ("acct", "7")]


@pytest.mark.parametrize(
    "value", ["t1", "t1:", ":4", "t 1:4", "t1:4||5", "t1:" + "|".join(["1"] * 17), "q:" + "x" * 300]
)
def test_a_malformed_hint_says_what_is_expected(value: str) -> None:
    with pytest.raises(MarkError, match="malformed trx_queue hint"):
        hinted(value)


@pytest.mark.parametrize(
    ("sql", "keys"),
    [
        ("UPDATE t1 SET n = n - 1 WHERE id = 42", ["42"]),
        ("update t1 set n = 1 where 42 = id and x > 3", ["42"]),
        ("SELECT * FROM t1 WHERE `ID` IN (3, 5) FOR UPDATE", ["3", "5"]),
        ("DELETE FROM t1 WHERE t1.id = 'ab''c'", ["ab'c"]),
        ("UPDATE t1 SET n = 1 WHERE (id = 7 AND n > 0)", ["7"]),
        ("UPDATE t1 SET n = 1 WHERE id = 7 OR id = 8", []),  # an OR at the top: no key
        ("UPDATE t1 SET n = 1 WHERE id > 7", []),
        ("UPDATE t1 SET id = 7", []),
        ("UPDATE t1 SET n = 1 WHERE id = _utf8mb4 X'6869'", ["hi"]),  # a prepared statement's string parameter
    ],
)
def test_a_column_s_keys_are_the_values_the_where_clause_compares_it_with(sql: str, keys: list[str]) -> None:
    assert column_keys(sql, "id") == keys


def rule(**columns: object) -> MysqlQueryRule:
    return MysqlQueryRule(rule_id=1, active=True, **columns)  # type: ignore[arg-type]


def evaluate(engine: RuleEngine, sql: str) -> tuple[str | None, str | None, str | None]:
    outcome = engine.evaluate(QueryContext("u", "s", "127.0.0.1", "", 0, sql, "0x0", sql))
    return outcome.trx_queue, outcome.trx_queue_key, outcome.trx_queue_column


def test_a_rule_takes_its_key_from_a_group_of_its_match_pattern_or_names_a_column() -> None:
    grouped = RuleEngine([rule(match_pattern=r"WHERE id = (\d+)", trx_queue="hot", trx_queue_key="\\1")])
    assert evaluate(grouped, "UPDATE t SET n = 1 WHERE id = 42") == ("hot", "42", None)
    assert evaluate(grouped, "UPDATE t SET n = 1 WHERE n = 42") == (None, None, None)
    column = RuleEngine([rule(match_digest="^UPDATE", trx_queue="hot", trx_queue_key="ID")])
    assert evaluate(column, "UPDATE t SET n = 1 WHERE id = 42") == ("hot", None, "id")


@pytest.mark.parametrize(
    ("columns", "message"),
    [
        ({"trx_queue": "hot"}, "set both trx_queue and trx_queue_key, or neither"),
        ({"trx_queue_key": "id"}, "set both trx_queue and trx_queue_key, or neither"),
        ({"trx_queue": "h o t", "trx_queue_key": "id"}, "is not a queue name"),
        ({"trx_queue": "hot", "trx_queue_key": "\\1"}, "needs a match_pattern"),
        ({"trx_queue": "hot", "trx_queue_key": "\\2", "match_pattern": "(a)"}, "a group match_pattern does not have"),
        (
            {"trx_queue": "hot", "trx_queue_key": "\\1", "match_pattern": "(a)", "negate_match_pattern": True},
            "needs a match_pattern (not negated)",
        ),
        ({"trx_queue": "hot", "trx_queue_key": "id = 1"}, "is neither \\1..\\9"),
    ],
)
def test_a_rule_s_queue_columns_that_cannot_work_are_refused_naming_the_rule(
    columns: dict[str, object], message: str
) -> None:
    with pytest.raises(ValueError, match="rule 1: ") as raised:
        RuleEngine([rule(**columns)])
    assert message in str(raised.value)


@pytest.mark.parametrize(
    ("columns", "error"),
    [
        (
            {"trx_queue": "hot"},
            "mysql_query_rules[0] (rule_id=1): trx_queue_key: set both trx_queue and trx_queue_key, or neither",
        ),
        (
            {"trx_queue": "hot", "trx_queue_key": "\\2", "match_pattern": "(a)"},
            "mysql_query_rules[0] (rule_id=1): trx_queue_key: \\2 refers to a group match_pattern does not have",
        ),
    ],
)
def test_a_node_refuses_such_a_rule_in_its_config_inactive_too(columns: dict[str, object], error: str) -> None:
    with pytest.raises(ConfigError) as refused:
        parse_config({"mysql_query_rules": [{"rule_id": 1, "active": 0, **columns}]})
    assert refused.value.errors == [error]


def test_blank_queue_columns_mean_unset() -> None:
    engine = RuleEngine([rule(match_digest="^UPDATE", trx_queue="", trx_queue_key="")])
    assert evaluate(engine, "UPDATE t SET n = 1 WHERE id = 1") == (None, None, None)
