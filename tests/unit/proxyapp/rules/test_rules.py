"""The query rule engine: every rule column that takes part in evaluation, annotations, and hit counting."""

from __future__ import annotations

from typing import Any

import pytest

from proxyapp.config.document import parse_config
from proxyapp.config.rulecheck import shadowed_rules
from proxyapp.config.tables import MysqlQueryRule, MysqlQueryRuleFastRouting
from proxyapp.rules.engine import QueryContext, RuleEngine, RuleOutcome, parse_annotations

DIGEST = "0x1A2B3C4D5E6F7081"


def ctx(**overrides: Any) -> QueryContext:
    """A query context for user ``app`` on schema ``shop``, overridable field by field."""
    values: dict[str, Any] = {
        "username": "app",
        "schemaname": "shop",
        "client_addr": "10.0.1.5",
        "proxy_addr": "127.0.0.1",
        "proxy_port": 6033,
        "query": "SELECT id FROM users WHERE id = 42",
        "digest": DIGEST,
        "digest_text": "SELECT id FROM users WHERE id = ?",
    }
    values.update(overrides)
    return QueryContext(**values)


def rule(rule_id: int, **columns: Any) -> MysqlQueryRule:
    """An active rule (rules are inactive by default, as in ProxySQL)."""
    return MysqlQueryRule(rule_id=rule_id, active=columns.pop("active", True), **columns)


def run(rules: list[MysqlQueryRule], context: QueryContext | None = None, **kwargs: Any) -> RuleOutcome:
    """Evaluate ``rules`` once for ``context`` (the default context if omitted)."""
    return RuleEngine(rules).evaluate(context or ctx(), **kwargs)


# --- which rules take part ------------------------------------------------------------------------------------


def test_no_rules_gives_an_empty_outcome() -> None:
    outcome = run([])
    assert outcome == RuleOutcome()
    assert outcome.matched == [] and outcome.annotations == {}


def test_inactive_rules_are_ignored() -> None:
    engine = RuleEngine([rule(1, active=False, destination_hostgroup=5), rule(2, destination_hostgroup=6)])
    outcome = engine.evaluate(ctx())
    assert outcome.matched == [2]
    assert outcome.destination_hostgroup == 6
    assert engine.hits == {2: 1}


def test_rules_are_evaluated_in_rule_id_order_whatever_the_input_order() -> None:
    rules = [rule(30, destination_hostgroup=3), rule(10, destination_hostgroup=1), rule(20, destination_hostgroup=2)]
    outcome = run(rules)
    assert outcome.matched == [10, 20, 30]
    assert outcome.destination_hostgroup == 3


def test_a_rule_without_filters_matches_everything() -> None:
    assert run([rule(1)]).matched == [1]


# --- filters --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("column", "value", "field", "other"),
    [
        ("username", "app", "username", "batch"),
        ("schemaname", "shop", "schemaname", "Shop"),
        ("client_addr", "10.0.1.5", "client_addr", "10.0.1.50"),
        ("proxy_addr", "127.0.0.1", "proxy_addr", "10.9.9.9"),
        ("proxy_port", 6033, "proxy_port", 6034),
    ],
)
def test_exact_filters(column: str, value: Any, field: str, other: Any) -> None:
    rules = [rule(1, **{column: value})]
    assert run(rules, ctx(**{field: value})).matched == [1]
    assert run(rules, ctx(**{field: other})).matched == []


@pytest.mark.parametrize("column", ["username", "schemaname", "client_addr", "proxy_addr"])
def test_an_empty_string_filter_matches_everything(column: str) -> None:
    assert run([rule(1, **{column: ""})]).matched == [1]


@pytest.mark.parametrize(
    ("client_addr", "matches"),
    [("10.0.1.5", True), ("10.0.9.9", True), ("10.0.", True), ("10.1.0.5", False), ("110.0.1.5", False)],
)
def test_client_addr_prefix_wildcard(client_addr: str, matches: bool) -> None:
    outcome = run([rule(1, client_addr="10.0.%")], ctx(client_addr=client_addr))
    assert outcome.matched == ([1] if matches else [])


def test_client_addr_lone_wildcard_matches_every_client() -> None:
    assert run([rule(1, client_addr="%")], ctx(client_addr="192.168.7.7")).matched == [1]


def test_digest_is_an_exact_hash_match_ignoring_hex_case() -> None:
    assert run([rule(1, digest=DIGEST)]).matched == [1]
    assert run([rule(1, digest=DIGEST.lower())]).matched == [1]
    assert run([rule(1, digest="0x1A2B3C4D5E6F7082")]).matched == []
    assert run([rule(1, digest=DIGEST)], ctx(digest="0x" + DIGEST[2:].lower())).matched == [1]


def test_digest_rule_never_matches_a_query_without_digest() -> None:
    assert run([rule(1, digest=DIGEST)], ctx(digest="")).matched == []


def test_match_digest_searches_the_digest_text_not_the_query() -> None:
    rules = [rule(1, match_digest=r"id = \?")]
    assert run(rules).matched == [1]
    assert run(rules, ctx(digest_text="SELECT 1")).matched == []
    assert run([rule(1, match_digest="42")]).matched == []


def test_match_pattern_searches_the_query_unanchored() -> None:
    assert run([rule(1, match_pattern="FROM users")]).matched == [1]
    assert run([rule(1, match_pattern="^FROM users")]).matched == []
    assert run([rule(1, match_pattern="id = 42$")]).matched == [1]


def test_negate_match_pattern_inverts_match_pattern() -> None:
    rules = [rule(1, match_pattern="^SELECT", negate_match_pattern=True)]
    assert run(rules).matched == []
    assert run(rules, ctx(query="UPDATE users SET a = 1")).matched == [1]


def test_negate_match_pattern_also_inverts_match_digest_as_proxysql_does() -> None:
    rules = [rule(1, match_digest="^SELECT", negate_match_pattern=True)]
    assert run(rules).matched == []
    assert run(rules, ctx(digest_text="UPDATE users SET a = ?")).matched == [1]


def test_negate_does_not_invert_the_other_filters() -> None:
    rules = [rule(1, username="batch", match_pattern="^UPDATE", negate_match_pattern=True)]
    assert run(rules).matched == []
    assert run(rules, ctx(username="batch")).matched == [1]


def test_all_filters_must_match() -> None:
    rules = [rule(1, username="app", schemaname="shop", proxy_port=6033, match_pattern="^SELECT")]
    assert run(rules).matched == [1]
    assert run(rules, ctx(schemaname="other")).matched == []
    assert run(rules, ctx(query="DELETE FROM users")).matched == []


# --- re_modifiers ---------------------------------------------------------------------------------------------


def test_caseless_is_the_default() -> None:
    assert run([rule(1, match_pattern="^select")]).matched == [1]
    assert run([rule(1, match_digest="from USERS")]).matched == [1]


def test_without_caseless_regexes_are_case_sensitive() -> None:
    assert run([rule(1, match_pattern="^select", re_modifiers="")]).matched == []
    assert run([rule(1, match_pattern="^SELECT", re_modifiers="")]).matched == [1]
    assert run([rule(1, match_digest="from users", re_modifiers="GLOBAL")]).matched == []


def test_re_modifiers_are_a_case_insensitive_comma_list() -> None:
    outcome = run(
        [rule(1, match_pattern="x", replace_pattern="y", re_modifiers="caseless, global")],
        ctx(query="SELECT X, x FROM t"),
    )
    assert outcome.query == "SELECT y, y FROM t"


def test_unknown_re_modifier_is_rejected() -> None:
    with pytest.raises(ValueError, match="rule 4: unknown re_modifiers"):
        RuleEngine([rule(4, match_pattern="x", re_modifiers="CASELESS,MULTILINE")])


# --- replace_pattern ------------------------------------------------------------------------------------------


def test_replace_pattern_rewrites_the_first_occurrence_without_global() -> None:
    outcome = run([rule(1, match_pattern="users", replace_pattern="people")], ctx(query="SELECT users FROM users"))
    assert outcome.query == "SELECT people FROM users"


def test_replace_pattern_with_global_rewrites_every_occurrence() -> None:
    rules = [rule(1, match_pattern="users", replace_pattern="people", re_modifiers="CASELESS,GLOBAL")]
    assert run(rules, ctx(query="SELECT users FROM USERS")).query == "SELECT people FROM people"


def test_replace_pattern_backreferences_are_backslash_digits() -> None:
    rules = [
        rule(
            1,
            match_pattern=r"^SELECT (\w+) FROM (\w+)",
            replace_pattern=r"SELECT \1 FROM archive.\2 /* was \0 */",
        )
    ]
    outcome = run(rules, ctx(query="SELECT id FROM users WHERE id = 42"))
    assert outcome.query == "SELECT id FROM archive.users /* was SELECT id FROM users */ WHERE id = 42"


def test_dollar_references_are_literal_text() -> None:
    outcome = run([rule(1, match_pattern=r"(\d+)", replace_pattern="$1")])
    assert outcome.query == "SELECT id FROM users WHERE id = $1"


def test_double_backslash_is_a_literal_backslash_and_unmatched_groups_are_empty() -> None:
    rules = [rule(1, match_pattern=r"id = (\d+)(x)?", replace_pattern=r"id = \1\\\2")]
    assert run(rules).query == "SELECT id FROM users WHERE id = 42\\"


@pytest.mark.parametrize(
    ("replace", "message"),
    [(r"\n", "invalid escape"), ("tail\\", "invalid escape"), (r"\g<1>", "invalid escape"), (r"\2", "missing group")],
)
def test_invalid_rewrites_are_rejected(replace: str, message: str) -> None:
    with pytest.raises(ValueError, match=f"rule 9: replace_pattern: .*{message}"):
        RuleEngine([rule(9, match_pattern=r"(\d+)", replace_pattern=replace)])


def test_replace_pattern_requires_match_pattern() -> None:
    with pytest.raises(ValueError, match="rule 3: replace_pattern requires match_pattern"):
        RuleEngine([rule(3, replace_pattern="x")])


def test_query_is_none_without_a_rewrite() -> None:
    assert run([rule(1, match_pattern="^SELECT", destination_hostgroup=1)]).query is None


def test_later_rules_match_against_the_rewritten_query() -> None:
    rules = [
        rule(1, match_pattern="FROM users", replace_pattern="FROM users_v2"),
        rule(2, match_pattern="users_v2", destination_hostgroup=7),
        rule(3, match_pattern="FROM users ", destination_hostgroup=8),
    ]
    outcome = run(rules)
    assert outcome.matched == [1, 2]
    assert outcome.query == "SELECT id FROM users_v2 WHERE id = 42"
    assert outcome.destination_hostgroup == 7


def test_successive_rewrites_compose() -> None:
    rules = [
        rule(1, match_pattern="users", replace_pattern="people"),
        rule(2, match_pattern="42", replace_pattern="43"),
    ]
    assert run(rules).query == "SELECT id FROM people WHERE id = 43"


def test_match_digest_keeps_using_the_original_digest_text_after_a_rewrite() -> None:
    rules = [rule(1, match_pattern="users", replace_pattern="people"), rule(2, match_digest="FROM users")]
    assert run(rules).matched == [1, 2]


# --- flagIN / flagOUT / apply ---------------------------------------------------------------------------------


def test_rules_of_another_flag_are_skipped() -> None:
    rules = [rule(1, flagIN=1, destination_hostgroup=1), rule(2, destination_hostgroup=2)]
    assert run(rules).matched == [2]


def test_evaluation_starts_at_the_given_flag() -> None:
    rules = [rule(1, flagIN=1, destination_hostgroup=1), rule(2, destination_hostgroup=2)]
    outcome = run(rules, flag_in=1)
    assert outcome.matched == [1]
    assert outcome.destination_hostgroup == 1


def test_flag_out_switches_the_chain() -> None:
    rules = [
        rule(1, match_pattern="^SELECT", flagOUT=7),
        rule(2, destination_hostgroup=2),
        rule(3, flagIN=7, destination_hostgroup=3),
        rule(4, flagIN=7, match_pattern="^UPDATE", destination_hostgroup=4),
    ]
    outcome = run(rules)
    assert outcome.matched == [1, 3]
    assert outcome.destination_hostgroup == 3


def test_flag_out_does_not_revisit_earlier_rules() -> None:
    rules = [
        rule(1, flagIN=5, destination_hostgroup=1),
        rule(2, flagOUT=5),
        rule(3, flagIN=5, destination_hostgroup=3),
    ]
    assert run(rules).matched == [2, 3]


def test_flag_out_chains_across_several_flags() -> None:
    rules = [
        rule(1, flagOUT=1),
        rule(2, flagIN=1, flagOUT=2, timeout=100),
        rule(3, flagIN=1, destination_hostgroup=99),
        rule(4, flagIN=2, destination_hostgroup=4),
    ]
    outcome = run(rules)
    assert outcome.matched == [1, 2, 4]
    assert (outcome.timeout, outcome.destination_hostgroup) == (100, 4)


def test_flag_out_equal_to_the_current_flag_keeps_walking() -> None:
    assert run([rule(1, flagOUT=0), rule(2)]).matched == [1, 2]


def test_apply_stops_evaluation() -> None:
    rules = [
        rule(1, match_pattern="^SELECT", destination_hostgroup=1, apply=True),
        rule(2, destination_hostgroup=2),
    ]
    outcome = run(rules)
    assert outcome.matched == [1]
    assert outcome.destination_hostgroup == 1


def test_apply_stops_even_with_flag_out_and_after_the_rewrite() -> None:
    rules = [
        rule(1, match_pattern="users", replace_pattern="people", flagOUT=3, apply=True),
        rule(2, flagIN=3, destination_hostgroup=3),
    ]
    outcome = run(rules)
    assert outcome.matched == [1]
    assert outcome.query == "SELECT id FROM people WHERE id = 42"


def test_a_rule_that_does_not_match_does_not_switch_the_flag() -> None:
    rules = [rule(1, match_pattern="^UPDATE", flagOUT=3), rule(2, flagIN=3), rule(3)]
    assert run(rules).matched == [3]


# --- outputs --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("column", "value"),
    [
        ("destination_hostgroup", 2),
        ("error_msg", "queries on users are blocked"),
        ("OK_msg", "done"),
        ("cache_ttl", 5000),
        ("cache_empty_result", False),
        ("cache_timeout", 200),
        ("timeout", 1500),
        ("retries", 3),
        ("delay", 50),
        ("next_query_flagIN", 4),
        ("mirror_flagOUT", 8),
        ("mirror_hostgroup", 30),
        ("multiplex", 0),
        ("multiplex", 2),
        ("log", True),
        ("reconnect", False),
        ("sticky_conn", True),
        ("gtid_from_hostgroup", 10),
    ],
)
def test_a_matching_rule_sets_each_output_column(column: str, value: Any) -> None:
    outcome = run([rule(1, match_pattern="^SELECT", **{column: value})])
    assert getattr(outcome, column) == value
    assert outcome == RuleOutcome(matched=[1], **{column: value})


def test_a_rule_that_does_not_match_sets_nothing() -> None:
    outcome = run([rule(1, match_pattern="^UPDATE", destination_hostgroup=2, error_msg="no")])
    assert outcome == RuleOutcome()


def test_later_matches_overwrite_only_the_columns_they_set() -> None:
    rules = [
        rule(1, destination_hostgroup=1, timeout=100, cache_ttl=1000),
        rule(2, destination_hostgroup=2, retries=0),
        rule(3, cache_ttl=2000, multiplex=0),
    ]
    outcome = run(rules)
    assert (outcome.destination_hostgroup, outcome.timeout, outcome.cache_ttl) == (2, 100, 2000)
    assert (outcome.retries, outcome.multiplex) == (0, 0)


def test_error_msg_and_ok_msg_do_not_stop_evaluation() -> None:
    rules = [rule(1, error_msg="blocked"), rule(2, OK_msg="fine"), rule(3, destination_hostgroup=3)]
    outcome = run(rules)
    assert outcome.matched == [1, 2, 3]
    assert (outcome.error_msg, outcome.OK_msg, outcome.destination_hostgroup) == ("blocked", "fine", 3)


# --- hits and engine properties -------------------------------------------------------------------------------


def test_hits_count_matches_per_rule() -> None:
    engine = RuleEngine([rule(1, match_pattern="^SELECT"), rule(2, match_pattern="^UPDATE"), rule(3, active=False)])
    assert engine.hits == {1: 0, 2: 0}
    for query in ("SELECT 1", "select 2", "UPDATE t SET a = 1"):
        engine.evaluate(ctx(query=query))
    assert engine.hits == {1: 2, 2: 1}


def test_hits_are_not_counted_for_rules_after_apply() -> None:
    engine = RuleEngine([rule(1, apply=True), rule(2)])
    engine.evaluate(ctx())
    engine.evaluate(ctx())
    assert engine.hits == {1: 2, 2: 0}


def test_needs_digest() -> None:
    assert not RuleEngine([]).needs_digest
    assert not RuleEngine([rule(1, match_pattern="x"), rule(2, active=False, digest=DIGEST)]).needs_digest
    assert RuleEngine([rule(1, digest=DIGEST)]).needs_digest
    assert RuleEngine([rule(1, match_digest="^SELECT")]).needs_digest


def test_each_evaluation_returns_a_fresh_outcome() -> None:
    engine = RuleEngine([rule(1, destination_hostgroup=1)])
    first = engine.evaluate(ctx())
    first.matched.append(99)
    first.destination_hostgroup = 5
    first.annotations["hostgroup"] = "3"
    second = engine.evaluate(ctx())
    assert (second.matched, second.destination_hostgroup, second.annotations) == ([1], 1, {})
    empty = RuleEngine([])
    empty.evaluate(ctx()).matched.append(1)
    assert empty.evaluate(ctx()).matched == []


@pytest.mark.parametrize(
    ("columns", "message"),
    [
        ({"match_pattern": "("}, "rule 6: match_pattern: invalid regex"),
        ({"match_digest": "[a-"}, "rule 6: match_digest: invalid regex"),
        ({"digest": "0xZZ"}, "rule 6: digest"),
        ({"digest": "0x1" + "0" * 16}, "rule 6: digest"),
    ],
)
def test_unusable_rules_are_rejected(columns: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        RuleEngine([rule(6, **columns)])


def test_duplicate_active_rule_ids_are_rejected() -> None:
    with pytest.raises(ValueError, match="rule 2: duplicate rule_id"):
        RuleEngine([rule(2), rule(2, destination_hostgroup=1)])


def test_inactive_rules_are_not_compiled() -> None:
    assert RuleEngine([rule(1, active=False, match_pattern="(")]).hits == {}


# --- annotations ----------------------------------------------------------------------------------------------


def test_parse_annotations_reads_semicolon_separated_pairs() -> None:
    query = "SELECT /* hostgroup=2;query_timeout=500;min_gtid=3E11FA47-71CA-11E1-9E33-C80AA9429562:23 */ 1"
    assert parse_annotations(query) == {
        "hostgroup": "2",
        "query_timeout": "500",
        "min_gtid": "3E11FA47-71CA-11E1-9E33-C80AA9429562:23",
    }


def test_parse_annotations_tolerates_spaces_commas_and_key_case() -> None:
    query = "/*  HostGroup = 3 , query_delay=10  query_retries=2; ; max_lag_ms=100*/ SELECT 1"
    assert parse_annotations(query) == {
        "hostgroup": "3",
        "query_delay": "10",
        "query_retries": "2",
        "max_lag_ms": "100",
    }


def test_parse_annotations_knows_every_proxysql_key_and_drops_the_others() -> None:
    keys = [
        "hostgroup",
        "mirror",
        "cache_ttl",
        "query_timeout",
        "query_delay",
        "query_retries",
        "max_lag_ms",
        "min_epoch_ms",
        "min_gtid",
        "create_new_connection",
    ]
    body = ";".join(f"{key}=1" for key in [*keys, "weight", "my_hostgroup", "hostgroupx"])
    assert parse_annotations(f"SELECT /* {body} */ 1") == dict.fromkeys(keys, "1")


def test_parse_annotations_uses_only_the_first_comment() -> None:
    assert parse_annotations("SELECT /* app=shop */ 1 /* hostgroup=2 */") == {}
    assert parse_annotations("SELECT /* hostgroup=2 */ 1 /* hostgroup=3 */") == {"hostgroup": "2"}


def test_parse_annotations_last_repeated_key_wins() -> None:
    assert parse_annotations("/* hostgroup=1;hostgroup=2 */ SELECT 1") == {"hostgroup": "2"}


@pytest.mark.parametrize(
    "query",
    [
        "SELECT 1",
        "SELECT '/* hostgroup=2 */'",
        'SELECT "it\\"s /* hostgroup=2 */"',
        "SELECT `a/*b` FROM t",
        "SELECT 1 # /* hostgroup=2 */",
        "SELECT 1 -- /* hostgroup=2 */",
        "SELECT 1 /* hostgroup=2",
    ],
)
def test_parse_annotations_finds_no_comment(query: str) -> None:
    assert parse_annotations(query) == {}


def test_parse_annotations_skips_strings_before_the_comment() -> None:
    query = "INSERT INTO t VALUES ('it''s /* no */', 'a\\'b') /* hostgroup=4 */"
    assert parse_annotations(query) == {"hostgroup": "4"}
    assert parse_annotations("SELECT 1--2 /* hostgroup=5 */") == {"hostgroup": "5"}


def test_annotations_override_the_rules() -> None:
    rules = [rule(1, destination_hostgroup=1, timeout=100, delay=5, retries=1, cache_ttl=10, mirror_hostgroup=9)]
    query = (
        "SELECT /* hostgroup=2;query_timeout=500;query_delay=7;query_retries=0;cache_ttl=60;mirror=3;"
        "max_lag_ms=250 */ 1"
    )
    outcome = run(rules, ctx(query=query))
    assert (outcome.destination_hostgroup, outcome.timeout, outcome.delay) == (2, 500, 7)
    assert (outcome.retries, outcome.cache_ttl, outcome.mirror_hostgroup) == (0, 60, 3)
    assert outcome.annotations["max_lag_ms"] == "250"
    assert outcome.matched == [1]


def test_annotations_apply_without_rules() -> None:
    outcome = run([], ctx(query="SELECT /* hostgroup=2 */ 1"))
    assert outcome.destination_hostgroup == 2
    assert outcome.annotations == {"hostgroup": "2"}


def test_annotations_that_are_not_integers_are_ignored() -> None:
    query = "SELECT /* hostgroup=two;query_timeout=-5;cache_ttl=;query_delay=1e3 */ 1"
    outcome = run([rule(1, destination_hostgroup=1, timeout=100)], ctx(query=query))
    assert (outcome.destination_hostgroup, outcome.timeout, outcome.cache_ttl, outcome.delay) == (1, 100, None, None)


def test_annotations_are_parsed_from_the_original_query() -> None:
    rules = [rule(1, match_pattern=r"/\*.*\*/ ", replace_pattern="")]
    outcome = run(rules, ctx(query="/* hostgroup=2 */ SELECT 1"))
    assert outcome.query == "SELECT 1"
    assert outcome.destination_hostgroup == 2


def test_mirrors_ignore_annotations() -> None:
    rules = [rule(1, flagIN=8, destination_hostgroup=30)]
    outcome = run(rules, ctx(query="SELECT /* hostgroup=2;query_timeout=5 */ 1"), flag_in=8, mirror=True)
    assert outcome.matched == [1]
    assert (outcome.destination_hostgroup, outcome.timeout) == (30, None)
    assert outcome.annotations == {}


def test_rules_that_can_never_match_are_found() -> None:
    def rule(rule_id: int, **columns: object) -> MysqlQueryRule:
        return MysqlQueryRule(rule_id=rule_id, active=True, **columns)  # type: ignore[arg-type]

    rules = [
        rule(1, match_digest="^SELECT", destination_hostgroup=20, apply=True),
        rule(2, match_digest="^SELECT.*FOR UPDATE", destination_hostgroup=10, apply=True),  # the classic mistake
        rule(3, match_digest="^SELECT", username="report", destination_hostgroup=30),
        rule(4, match_digest="^SELECT|^SHOW", destination_hostgroup=30),  # matches SHOW: reachable
        rule(5, match_digest="^UPDATE", destination_hostgroup=10),
        rule(6, match_digest="^SELECT", flagIN=1, destination_hostgroup=30),  # another flagIN: reachable
        rule(7, match_digest="^select", re_modifiers="CASELESS", destination_hostgroup=30),  # other modifiers
    ]
    assert shadowed_rules(rules) == [(2, 1), (3, 1)]
    assert shadowed_rules([rule(1, apply=True), rule(2, username="x")]) == [(2, 1)]  # a catch-all first
    assert shadowed_rules([rule(1), rule(2, username="x")]) == []  # without apply the walk goes on


def test_fast_routing_after_a_chain_no_apply_rule_ended() -> None:
    fast = [
        MysqlQueryRuleFastRouting(username="app", schemaname="shop", flagIN=0, destination_hostgroup=30),
        MysqlQueryRuleFastRouting(username="app", schemaname="shop", flagIN=7, destination_hostgroup=40),
    ]
    assert RuleEngine([], fast).evaluate(ctx(), 0).destination_hostgroup == 30
    assert RuleEngine([], fast).evaluate(ctx(schemaname="other"), 0).destination_hostgroup is None
    chained = [rule(1, match_pattern="^SELECT", flagOUT=7)]  # the chain ends at flagIN 7: that row
    assert RuleEngine(chained, fast).evaluate(ctx(), 0).destination_hostgroup == 40
    applied = [rule(1, match_pattern="^SELECT", destination_hostgroup=10, apply=True)]  # apply=1: no fast routing
    assert RuleEngine(applied, fast).evaluate(ctx(), 0).destination_hostgroup == 10
    annotated = RuleEngine([], fast).evaluate(ctx(query="/* hostgroup=50 */ SELECT 1"), 0)
    assert annotated.destination_hostgroup == 50  # an annotation still has the last word
    assert RuleEngine([], fast).active


def test_a_config_without_fast_routing_keeps_its_document_and_checksum() -> None:
    plain = parse_config({"mysql_users": [{"username": "app", "password": "x"}]})
    assert "mysql_query_rules_fast_routing" not in plain.to_document()
    routed = parse_config(
        {
            "mysql_users": [{"username": "app", "password": "x"}],
            "mysql_query_rules_fast_routing": [{"username": "app", "schemaname": "shop", "destination_hostgroup": 3}],
        }
    )
    assert routed.to_document()["mysql_query_rules_fast_routing"][0]["destination_hostgroup"] == 3
    assert routed.checksum != plain.checksum
    assert "hostgroup 3 has no servers" in " ".join(routed.warnings)


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("/* hostgroup = 2; max_lag_ms=5,x=1 y query_delay_ms= */ SELECT 1", {"hostgroup": "2", "max_lag_ms": "5"}),
        ("/* =hostgroup=3 */ SELECT 1", {"hostgroup": "3"}),
        ("/* hostgroup = = 4 */ SELECT 1", {"hostgroup": ""}),
        ("/*! hostgroup=5 */ SELECT 1 /* hostgroup=6 */", {"hostgroup": "6"}),  # an executable comment is SQL
        ("SELECT '/* hostgroup=7 */' /* hostgroup=8 */", {"hostgroup": "8"}),
        ("/* hostgroup=9", {}),  # never closed: not a comment
    ],
)
def test_annotation_pairs_are_read_in_one_pass(query: str, expected: dict[str, str]) -> None:
    assert parse_annotations(query) == expected
