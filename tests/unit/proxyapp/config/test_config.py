"""The config document parser (proxyapp.config.document) and the global variables registry
(proxyapp.config.variables)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from proxyapp.config.document import (
    ConfigError,
    listener_port_error,
    parse_config,
    parse_re_modifiers,
    validate_row,
)
from proxyapp.config.document import load_config_file as load
from proxyapp.config.jsontext import DuplicateKey, read_json
from proxyapp.config.tables import GlobalVariable, MysqlQueryRule, MysqlServer, MysqlUser
from proxyapp.config.variables import VARIABLES, Variables, parse_variable_value

SERVER = {"hostgroup_id": 10, "hostname": "db1", "port": 3306}


def errors_of(doc: object) -> list[str]:
    """The errors parse_config reports for ``doc`` (which must be refused)."""
    with pytest.raises(ConfigError) as info:
        parse_config(doc)
    return info.value.errors


def only_error(doc: object) -> str:
    """The single error parse_config reports for ``doc``."""
    errors = errors_of(doc)
    assert len(errors) == 1, errors
    return errors[0]


def sample_doc() -> dict[str, list[dict[str, object]]]:
    """A valid document using every table."""
    return {
        "mysql_servers": [
            {"hostgroup_id": 10, "hostname": "db1", "port": 3306, "weight": 5},
            {"hostgroup_id": 20, "hostname": "db2", "port": 3307, "status": "OFFLINE_SOFT"},
        ],
        "mysql_users": [{"username": "app", "password": "secret", "default_hostgroup": 10}],
        "mysql_query_rules": [
            {"rule_id": 20, "active": 1, "match_digest": "^SELECT", "destination_hostgroup": 20, "apply": 1},
            {"rule_id": 5, "active": 1, "match_pattern": "FOR UPDATE$", "destination_hostgroup": 10},
        ],
        "mysql_replication_hostgroups": [{"writer_hostgroup": 10, "reader_hostgroup": 20}],
        "global_variables": [
            {"variable_name": "mysql-threads", "variable_value": "8"},
            {"variable_name": "mysql-multiplexing", "variable_value": "false"},
        ],
    }


# --- variables -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "default"),
    [
        ("mysql-threads", 4),
        ("mysql-max_connections", 10000),
        ("mysql-server_version", ""),
        ("mysql-default_authentication_plugin", "mysql_native_password"),
        ("mysql-connect_timeout_server", 1000),
        ("mysql-connect_timeout_server_max", 10000),
        ("mysql-connect_retries_on_failure", 10),
        ("mysql-connect_retries_delay", 1),
        ("mysql-shun_on_failures", 5),
        ("mysql-shun_recovery_time_sec", 10),
        ("mysql-free_connections_pct", 10),
        ("mysql-connection_max_age_ms", 0),
        ("mysql-default_query_timeout", 86_400_000),
        ("mysql-default_query_delay", 0),
        ("mysql-query_retries_on_failure", 1),
        ("mysql-multiplexing", True),
        ("mysql-query_cache_size_MB", 256),
        ("mysql-query_digests", True),
        ("mysql-query_digests_max_digest_length", 2048),
        ("mysql-query_digests_max_query_length", 65000),
        ("mysql-long_query_time", 1000),
        ("mysql-enable_load_data_local_infile", True),
        ("mysql-max_allowed_packet", 67_108_864),
        ("mysql-interfaces", "127.0.0.1:6033"),
        ("mysql-set_query_lock_on_hostgroup", 1),
        ("mysql-keep_multiplexing_variables", "tx_isolation,transaction_isolation,version"),
        ("mysql-autocommit_false_is_transaction", True),
        ("mysql-max_transaction_time", 14_400_000),
        ("mysql-wait_timeout", 28_800_000),
        ("mysql-ping_interval_server_msec", 10000),
        ("mysql-ping_timeout_server", 200),
        ("mysql-connection_wait_timeout", 10000),
        ("mysql-mirror_max_concurrency", 16),
        ("mysql-mirror_max_queue_length", 32000),
        ("mysql-monitor_enabled", True),
        ("mysql-monitor_username", "monitor"),
        ("mysql-monitor_password", "monitor"),
        ("mysql-monitor_connect_interval", 120_000),
        ("mysql-monitor_connect_timeout", 600),
        ("mysql-monitor_ping_interval", 8000),
        ("mysql-monitor_ping_timeout", 1000),
        ("mysql-monitor_ping_max_failures", 3),
        ("mysql-monitor_read_only_interval", 1000),
        ("mysql-monitor_read_only_timeout", 800),
        ("mysql-monitor_read_only_max_timeout_count", 3),
        ("mysql-monitor_replication_lag_interval", 10000),
        ("mysql-monitor_replication_lag_timeout", 1000),
        ("mysql-monitor_replication_lag_count", 1),
        ("mysql-monitor_slave_lag_when_null", 60),
        ("mysql-monitor_writer_is_also_reader", True),
        ("mysql-monitor_history", 7_200_000),
        ("admin-restapi_enabled", True),
        ("admin-restapi_port", 6070),
        ("admin-restapi_interface", "127.0.0.1"),
        ("admin-stats_report_interval_ms", 5000),
    ],
)
def test_variable_defaults(name: str, default: object) -> None:
    assert Variables()[name] == default
    assert type(Variables()[name]) is type(default)


def test_every_variable_is_well_formed() -> None:
    for name, spec in VARIABLES.items():
        assert spec.name == name
        assert name.startswith(("mysql-", "pgsql-", "admin-"))
        assert spec.type in (int, bool, str)
        assert type(spec.default) is spec.type
        assert spec.help, name
        assert spec.parse(spec.default) == spec.default  # the default passes its own checks
        assert spec.parse(spec.format(spec.default)) == spec.default  # and survives its text form


def test_proxyfleet_defaults_explain_themselves() -> None:
    assert "client" in VARIABLES["mysql-enable_load_data_local_infile"].help
    assert "ProxySQL" in VARIABLES["mysql-autocommit_false_is_transaction"].help


def test_mirror_variable_ranges() -> None:
    assert (VARIABLES["mysql-mirror_max_concurrency"].minimum, VARIABLES["mysql-mirror_max_concurrency"].maximum) == (
        1,
        8192,
    )
    assert VARIABLES["mysql-mirror_max_queue_length"].maximum == 1_048_576
    with pytest.raises(ValueError, match="below the minimum 1"):
        parse_variable_value("mysql-mirror_max_concurrency", 0)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [(True, True), (False, False), (1, True), (0, False), ("true", True), ("FALSE", False), ("1", True), ("0", False)],
)
def test_boolean_variable_values(raw: object, expected: bool) -> None:
    assert parse_variable_value("mysql-multiplexing", raw) is expected


@pytest.mark.parametrize("raw", ["yes", 2, "", None, 1.5])
def test_bad_boolean_variable_values(raw: object) -> None:
    with pytest.raises(ValueError, match=r"^mysql-multiplexing: expected a boolean"):
        parse_variable_value("mysql-multiplexing", raw)


def test_integer_variable_values() -> None:
    assert parse_variable_value("mysql-threads", 8) == 8
    assert parse_variable_value("mysql-threads", "16") == 16
    assert parse_variable_value("mysql-threads", 8.0) == 8
    for bad in (True, "1.5", 1.5, "8 ", "eight", None):
        with pytest.raises(ValueError, match=r"^mysql-threads: expected an integer"):
            parse_variable_value("mysql-threads", bad)


def test_integer_variable_range() -> None:
    with pytest.raises(ValueError, match=r"^mysql-threads: 0 is below the minimum 1$"):
        parse_variable_value("mysql-threads", "0")
    with pytest.raises(ValueError, match=r"^mysql-free_connections_pct: 101 is above the maximum 100$"):
        parse_variable_value("mysql-free_connections_pct", 101)
    with pytest.raises(ValueError, match="far too large"):
        parse_variable_value("mysql-threads", "9" * 5000)


def test_string_variable_values_and_choices() -> None:
    plugin = "mysql-default_authentication_plugin"
    assert parse_variable_value(plugin, "caching_sha2_password") == "caching_sha2_password"
    with pytest.raises(ValueError, match=r"'sha256_password' is not one of 'mysql_native_password', "):
        parse_variable_value(plugin, "sha256_password")
    with pytest.raises(ValueError, match=r"^mysql-server_version: expected a string, got 8$"):
        parse_variable_value("mysql-server_version", 8)


def test_unknown_variable_suggests_a_close_name() -> None:
    with pytest.raises(ValueError, match=r"unknown variable 'mysql-thread'; did you mean 'mysql-threads'\?"):
        parse_variable_value("mysql-thread", 4)
    with pytest.raises(ValueError, match=r"unknown variable 'zzz'$"):
        parse_variable_value("zzz", 4)


def test_variables_mapping() -> None:
    v = Variables({"mysql-threads": "8", "mysql-multiplexing": "0"})
    assert v["mysql-threads"] == 8
    assert v["mysql-multiplexing"] is False
    assert v["mysql-max_connections"] == 10000  # a default
    assert v.overrides() == {"mysql-multiplexing": False, "mysql-threads": 8}
    assert len(v) == len(VARIABLES) and set(v) == set(VARIABLES)
    assert "mysql-threads" in v and "mysql-thread" not in v
    with pytest.raises(KeyError, match="did you mean 'mysql-threads'"):
        v["mysql-thread"]
    with pytest.raises(TypeError):
        v["mysql-threads"] = 2  # type: ignore[index]
    v.overrides()["mysql-threads"] = 2
    assert v["mysql-threads"] == 8  # overrides() is a copy


def test_variables_equality_is_by_overrides() -> None:
    assert Variables({"mysql-threads": 8}) == Variables({"mysql-threads": "8"})
    assert hash(Variables({"mysql-threads": 8})) == hash(Variables({"mysql-threads": "8"}))
    assert Variables({"mysql-threads": 8}) != Variables({"mysql-threads": 9})
    assert Variables({"mysql-threads": 4}) != Variables()  # explicitly set, even to the default


def test_variables_from_rows() -> None:
    v = Variables.from_rows([GlobalVariable("mysql-threads", "2"), GlobalVariable("mysql-query_digests", "false")])
    assert v.overrides() == {"mysql-query_digests": False, "mysql-threads": 2}
    assert v.rows() == [
        {"variable_name": "mysql-query_digests", "variable_value": "false"},
        {"variable_name": "mysql-threads", "variable_value": "2"},
    ]
    with pytest.raises(ValueError, match="set twice"):
        Variables.from_rows([GlobalVariable("mysql-threads", "2"), GlobalVariable("mysql-threads", "3")])
    with pytest.raises(ValueError, match="mysql-threads: 0 is below"):
        Variables.from_rows([GlobalVariable("mysql-threads", "0")])


# --- parse_config: a valid document ----------------------------------------------------------------------------


def test_empty_document_is_an_empty_config() -> None:
    config = parse_config({})
    assert config.mysql_servers == config.mysql_users == config.mysql_query_rules == ()
    assert config.mysql_replication_hostgroups == ()
    assert config.variables.overrides() == {}
    assert config.warnings == (  # accepted (a node may start before its first config) but never silently
        "mysql_users is empty: no client can log in",
        "mysql_servers is empty: every query will fail (no hostgroup has a server)",
    )
    assert len(config.checksum) == 64


def test_defaults_applied() -> None:
    config = parse_config(
        {
            "mysql_servers": [{"hostname": "db1"}],
            "mysql_users": [{"username": "app", "password": "pw"}],
            "mysql_query_rules": [{"rule_id": 1}],
        }
    )
    assert config.mysql_servers == (MysqlServer(hostname="db1"),)
    server = config.mysql_servers[0]
    assert (server.hostgroup_id, server.port, server.status, server.weight, server.max_connections) == (
        0,
        3306,
        "ONLINE",
        1,
        1000,
    )
    user = config.mysql_users[0]
    assert user.active is True and user.transaction_persistent is True and user.default_schema is None
    rule = config.mysql_query_rules[0]
    assert rule.active is False and rule.re_modifiers == "CASELESS" and rule.destination_hostgroup is None


def test_booleans_and_strings_accepted() -> None:
    config = parse_config(
        {
            "mysql_servers": [
                {"hostname": "db1", "port": "3307", "use_ssl": "1", "compression": 1, "weight": 10.0},
            ],
            "mysql_users": [{"username": "app", "password": "pw", "active": "0", "fast_forward": True}],
            "mysql_query_rules": [{"rule_id": "7", "active": 1, "apply": False, "cache_empty_result": None}],
        }
    )
    server = config.mysql_servers[0]
    assert (server.port, server.use_ssl, server.compression, server.weight) == (3307, True, True, 10)
    user = config.mysql_users[0]
    assert user.active is False and user.fast_forward is True
    rule = config.mysql_query_rules[0]
    assert (rule.rule_id, rule.active, rule.apply, rule.cache_empty_result) == (7, True, False, None)


def test_query_rules_sorted_by_rule_id() -> None:
    config = parse_config(sample_doc())
    assert [r.rule_id for r in config.mysql_query_rules] == [5, 20]


def test_config_lookups() -> None:
    doc = sample_doc()
    doc["mysql_users"] += [
        {"username": "off", "password": "x", "active": 0},
        {"username": "front", "password": "x", "backend": 0},
        {"username": "back", "password": "x", "frontend": 0},
    ]
    config = parse_config(doc)
    assert config.hostgroups() == {0, 10, 20}  # 0: the added users' default_hostgroup
    assert config.servers_in(20) == (MysqlServer(hostname="db2", hostgroup_id=20, port=3307, status="OFFLINE_SOFT"),)
    assert config.servers_in(99) == ()
    app = config.frontend_user("app")
    assert isinstance(app, MysqlUser) and app.password == "secret"
    assert config.backend_user("app") == app
    assert config.frontend_user("off") is None and config.backend_user("off") is None
    assert config.frontend_user("front") is not None and config.backend_user("front") is None
    assert config.frontend_user("back") is None and config.backend_user("back") is not None
    assert config.frontend_user("nobody") is None


def test_hostgroups_include_every_reference() -> None:
    config = parse_config(
        {
            "mysql_users": [{"username": "u", "password": "p", "default_hostgroup": 1}],
            "mysql_query_rules": [
                {"rule_id": 1, "destination_hostgroup": 2, "mirror_hostgroup": 3, "gtid_from_hostgroup": 4}
            ],
            "mysql_replication_hostgroups": [{"writer_hostgroup": 5, "reader_hostgroup": 6}],
        }
    )
    assert config.hostgroups() == {1, 2, 3, 4, 5, 6}


def test_global_variables_as_json_scalars() -> None:
    config = parse_config(
        {
            "global_variables": [
                {"variable_name": "mysql-threads", "variable_value": 8},
                {"variable_name": "mysql-multiplexing", "variable_value": False},
                {"variable_name": "mysql-server_version", "variable_value": "5.7.44"},
            ]
        }
    )
    assert config.variables["mysql-threads"] == 8
    assert config.variables["mysql-multiplexing"] is False
    assert config.variables["mysql-server_version"] == "5.7.44"
    assert config.variables["mysql-max_connections"] == 10000


def test_re_modifiers() -> None:
    assert parse_re_modifiers("CASELESS") == {"CASELESS"}
    assert parse_re_modifiers("caseless, GLOBAL") == {"CASELESS", "GLOBAL"}
    assert parse_re_modifiers("") == frozenset()
    with pytest.raises(ValueError, match="unknown modifier 'MULTILINE'"):
        parse_re_modifiers("CASELESS,MULTILINE")


# --- to_document, checksum, round trip -------------------------------------------------------------------------


def test_to_document_shows_every_column_with_booleans_as_integers() -> None:
    doc = parse_config(sample_doc()).to_document()
    assert list(doc) == [
        "mysql_servers",
        "mysql_users",
        "mysql_query_rules",
        "mysql_replication_hostgroups",
        "global_variables",
    ]
    server = doc["mysql_servers"][0]
    assert server == {
        "hostname": "db1",
        "hostgroup_id": 10,
        "port": 3306,
        "gtid_port": 0,
        "status": "ONLINE",
        "weight": 5,
        "compression": 0,
        "max_connections": 1000,
        "max_replication_lag": 0,
        "use_ssl": 0,
        "max_latency_ms": 0,
        "comment": "",
    }
    assert type(server["compression"]) is int
    assert doc["mysql_users"][0]["active"] == 1 and type(doc["mysql_users"][0]["active"]) is int
    assert doc["mysql_query_rules"][0]["cache_empty_result"] is None
    assert doc["global_variables"] == [
        {"variable_name": "mysql-multiplexing", "variable_value": "false"},
        {"variable_name": "mysql-threads", "variable_value": "8"},
    ]
    json.dumps(doc)  # plain JSON


def test_round_trip() -> None:
    config = parse_config(sample_doc())
    again = parse_config(config.to_document())
    assert again == config
    assert again.checksum == config.checksum
    assert again.to_document() == config.to_document()
    assert parse_config(json.loads(json.dumps(config.to_document()))) == config


def test_checksum_ignores_key_order_row_order_and_explicit_defaults() -> None:
    doc = sample_doc()
    base = parse_config(doc).checksum
    reordered = {table: [dict(reversed(row.items())) for row in reversed(rows)] for table, rows in doc.items()}
    assert parse_config(dict(reversed(reordered.items()))).checksum == base
    spelled_out = sample_doc()
    spelled_out["mysql_servers"][0].update({"status": "ONLINE", "max_connections": "1000", "use_ssl": False})
    spelled_out["mysql_users"][0].update({"active": 1, "attributes": "", "default_schema": None})
    assert parse_config(spelled_out).checksum == base


def test_checksum_changes_with_content() -> None:
    base = parse_config(sample_doc()).checksum
    changed = sample_doc()
    changed["mysql_servers"][0]["weight"] = 6
    assert parse_config(changed).checksum != base
    more = sample_doc()
    more["global_variables"].append({"variable_name": "mysql-max_connections", "variable_value": "10000"})
    assert parse_config(more).checksum != base  # an explicitly set variable is part of the config


# --- parse_config: refusals ---------------------------------------------------------------------------------------


def test_document_must_be_an_object() -> None:
    assert only_error([]) == "the config document must be a JSON object, not a list"
    assert only_error({"mysql_servers": {"hostname": "db1"}}) == (
        "mysql_servers: must be a list of row objects, not an object"
    )
    assert only_error({"mysql_servers": [SERVER, "db2"]}) == "mysql_servers[1]: a row must be an object, not 'db2'"


def test_unknown_table_suggests() -> None:
    assert only_error({"mysql_server": []}) == "unknown table 'mysql_server'; did you mean 'mysql_servers'?"
    assert only_error({"servers_of_doom_xyz": []}) == "unknown table 'servers_of_doom_xyz'"


def test_unknown_column_suggests() -> None:
    error = only_error({"mysql_servers": [{**SERVER, "wieght": 3}]})
    assert error == (
        "mysql_servers[0] (hostgroup_id=10, hostname='db1', port=3306): wieght: unknown column; did you mean 'weight'?"
    )
    assert only_error({"mysql_query_rules": [{"rule_id": 1, "flagin": 2}]}) == (
        "mysql_query_rules[0] (rule_id=1): flagin: unknown column; did you mean 'flagIN'?"
    )


def test_missing_required_column() -> None:
    assert only_error({"mysql_servers": [{"hostgroup_id": 1}]}) == (
        "mysql_servers[0] (hostgroup_id=1): hostname: missing required column"
    )
    assert (
        only_error({"mysql_query_rules": [{"active": 1}]}) == "mysql_query_rules[0]: rule_id: missing required column"
    )


def test_range_error_names_row_and_field() -> None:
    error = only_error({"mysql_servers": [SERVER, {**SERVER, "hostname": "db2", "port": 70000}]})
    assert (
        error
        == "mysql_servers[1] (hostgroup_id=10, hostname='db2', port=70000): port: 70000 is above the maximum 65535"
    )
    assert only_error({"mysql_servers": [{**SERVER, "weight": -1}]}).endswith("weight: -1 is below the minimum 0")
    assert only_error({"mysql_query_rules": [{"rule_id": 0}]}) == (
        "mysql_query_rules[0] (rule_id=0): rule_id: 0 is below the minimum 1"
    )


def test_choices() -> None:
    error = only_error({"mysql_servers": [{**SERVER, "status": "UP"}]})
    assert error.endswith("status: 'UP' is not one of 'ONLINE', 'SHUNNED', 'OFFLINE_SOFT', 'OFFLINE_HARD'")
    assert only_error({"mysql_query_rules": [{"rule_id": 1, "multiplex": 3}]}) == (
        "mysql_query_rules[0] (rule_id=1): multiplex: 3 is not one of 0, 1, 2"
    )
    error = only_error(
        {"mysql_replication_hostgroups": [{"writer_hostgroup": 1, "reader_hostgroup": 2, "check_type": "x"}]}
    )
    assert error.startswith("mysql_replication_hostgroups[0] (writer_hostgroup=1): check_type: 'x' is not one of")


@pytest.mark.parametrize(
    ("column", "raw", "message"),
    [
        ("use_ssl", "yes", "expected a boolean (true, false, 0, 1, '0' or '1'), got 'yes'"),
        ("use_ssl", 2, "expected a boolean (true, false, 0, 1, '0' or '1'), got 2"),
        ("use_ssl", "true", "expected a boolean (true, false, 0, 1, '0' or '1'), got 'true'"),
        ("use_ssl", 1.0, "expected a boolean (true, false, 0, 1, '0' or '1'), got 1.0"),
        ("use_ssl", None, "null is not allowed"),
        ("weight", True, "expected an integer, got true"),
        ("weight", 1.5, "expected an integer, got 1.5"),
        ("weight", "1.5", "expected an integer, got '1.5'"),
        ("weight", "ten", "expected an integer, got 'ten'"),
        ("weight", [1], "expected an integer, got a list"),
        ("comment", 5, "expected a string, got 5"),
        ("comment", None, "null is not allowed"),
    ],
)
def test_bad_types(column: str, raw: object, message: str) -> None:
    error = only_error({"mysql_servers": [{**SERVER, column: raw}]})
    assert error == f"mysql_servers[0] (hostgroup_id=10, hostname='db1', port=3306): {column}: {message}"


def test_optional_columns_accept_null() -> None:
    rule = parse_config({"mysql_query_rules": [{"rule_id": 1, "username": None, "timeout": None}]}).mysql_query_rules[0]
    assert rule.username is None and rule.timeout is None
    assert only_error({"mysql_query_rules": [{"rule_id": 1, "re_modifiers": None}]}) == (
        "mysql_query_rules[0] (rule_id=1): re_modifiers: null is not allowed"
    )


def test_regex_columns_must_compile() -> None:
    error = only_error({"mysql_query_rules": [{"rule_id": 3, "match_digest": "^SELECT (.*"}]})
    assert error.startswith(
        "mysql_query_rules[0] (rule_id=3): match_digest: invalid regular expression '^SELECT (.*': "
    )
    assert "missing )" in error
    error = only_error({"mysql_query_rules": [{"rule_id": 3, "match_pattern": "[a-"}]})
    assert error.startswith("mysql_query_rules[0] (rule_id=3): match_pattern: invalid regular expression")


def test_re_modifiers_column() -> None:
    rule = parse_config({"mysql_query_rules": [{"rule_id": 1, "re_modifiers": "CASELESS,GLOBAL"}]}).mysql_query_rules[0]
    assert rule.re_modifiers == "CASELESS,GLOBAL"
    assert only_error({"mysql_query_rules": [{"rule_id": 1, "re_modifiers": "CASELESS,DOTALL"}]}) == (
        "mysql_query_rules[0] (rule_id=1): re_modifiers: unknown modifier 'DOTALL' (known: CASELESS, GLOBAL)"
    )


def test_replace_pattern_requires_match_pattern() -> None:
    assert only_error({"mysql_query_rules": [{"rule_id": 4, "replace_pattern": "SELECT 1"}]}) == (
        "mysql_query_rules[0] (rule_id=4): replace_pattern: requires match_pattern"
    )
    ok = {"rule_id": 4, "match_pattern": "^SELECT 2", "replace_pattern": "SELECT 1"}
    assert parse_config({"mysql_query_rules": [ok]}).mysql_query_rules[0].replace_pattern == "SELECT 1"


@pytest.mark.parametrize("digest", ["0x", "0xG1", "1234", "0x" + "1" * 17, "0X12"])
def test_bad_digest(digest: str) -> None:
    assert only_error({"mysql_query_rules": [{"rule_id": 1, "digest": digest}]}) == (
        f"mysql_query_rules[0] (rule_id=1): digest: {digest!r} is not a digest: '0x' and 1 to 16 hex digits"
    )


def test_good_digest() -> None:
    rules = parse_config(
        {"mysql_query_rules": [{"rule_id": 1, "digest": "0x3F2A"}, {"rule_id": 2, "digest": "0x" + "aB" * 8}]}
    ).mysql_query_rules
    assert [r.digest for r in rules] == ["0x3F2A", "0x" + "aB" * 8]


def test_attributes_must_be_empty_or_a_json_object() -> None:
    user = {"username": "app", "password": "pw", "attributes": '{"default-transaction_isolation": "READ-COMMITTED"}'}
    assert parse_config({"mysql_users": [user]}).mysql_users[0].attributes.startswith("{")
    assert only_error({"mysql_users": [{**user, "attributes": "[1, 2]"}]}) == (
        "mysql_users[0] (username='app'): attributes: must be '' or a JSON object, not a list"
    )
    error = only_error({"mysql_query_rules": [{"rule_id": 1, "attributes": "{oops"}]})
    assert error.startswith("mysql_query_rules[0] (rule_id=1): attributes: must be '' or a JSON object; invalid JSON")


def test_gtid_port_must_differ_from_port() -> None:
    assert only_error({"mysql_servers": [{**SERVER, "gtid_port": 3306}]}).endswith(
        "gtid_port: 3306 is also the port; use another port, or 0 for none"
    )


def test_duplicate_server() -> None:
    errors = errors_of({"mysql_servers": [SERVER, {**SERVER, "hostgroup_id": 11}, {**SERVER, "weight": 9}]})
    assert errors == [
        "mysql_servers[2] (hostgroup_id=10, hostname='db1', port=3306): "
        "duplicate hostgroup_id=10, hostname='db1', port=3306, already in mysql_servers[0]"
    ]


def test_user_keys_follow_proxysql() -> None:
    # A frontend-only and a backend-only row of one name is ProxySQL's way to split them.
    split = [{"username": "u", "password": "a", "backend": 0}, {"username": "u", "password": "b", "frontend": 0}]
    config = parse_config({"mysql_users": split})
    assert config.frontend_user("u").password == "a"  # type: ignore[union-attr]
    assert config.backend_user("u").password == "b"  # type: ignore[union-attr]
    # A row with backend=1 and frontend=1 takes both keys.
    both = {"username": "u", "password": "x"}
    assert only_error({"mysql_users": [both, {"username": "u", "password": "y", "backend": 0}]}) == (
        "mysql_users[1] (username='u'): duplicate username='u', frontend=1, already in mysql_users[0]"
    )
    assert only_error({"mysql_users": [both, {"username": "u", "password": "y", "frontend": 0}]}) == (
        "mysql_users[1] (username='u'): duplicate username='u', backend=1, already in mysql_users[0]"
    )
    assert len(errors_of({"mysql_users": [both, both]})) == 2
    assert len(parse_config({"mysql_users": [both, {"username": "v", "password": "x"}]}).mysql_users) == 2


def test_duplicate_rule_id() -> None:
    assert only_error({"mysql_query_rules": [{"rule_id": 1}, {"rule_id": 2}, {"rule_id": "1"}]}) == (
        "mysql_query_rules[2] (rule_id=1): duplicate rule_id=1, already in mysql_query_rules[0]"
    )


def test_replication_hostgroups() -> None:
    table = "mysql_replication_hostgroups"
    assert only_error({table: [{"writer_hostgroup": 1, "reader_hostgroup": 1}]}) == (
        "mysql_replication_hostgroups[0] (writer_hostgroup=1): reader_hostgroup: "
        "1 is also the writer_hostgroup; they must differ"
    )
    assert only_error(
        {table: [{"writer_hostgroup": 1, "reader_hostgroup": 2}, {"writer_hostgroup": 1, "reader_hostgroup": 3}]}
    ) == (
        "mysql_replication_hostgroups[1] (writer_hostgroup=1): duplicate writer_hostgroup=1, "
        "already in mysql_replication_hostgroups[0]"
    )
    assert only_error(
        {table: [{"writer_hostgroup": 1, "reader_hostgroup": 2}, {"writer_hostgroup": 3, "reader_hostgroup": 2}]}
    ) == (
        "mysql_replication_hostgroups[1] (writer_hostgroup=3): duplicate reader_hostgroup=2, "
        "already in mysql_replication_hostgroups[0]"
    )
    assert only_error(
        {table: [{"writer_hostgroup": 1, "reader_hostgroup": 2}, {"writer_hostgroup": 2, "reader_hostgroup": 3}]}
    ) == (
        "mysql_replication_hostgroups[1] (writer_hostgroup=2): writer_hostgroup: "
        "2 is the reader_hostgroup of mysql_replication_hostgroups[0]"
    )
    assert only_error(
        {table: [{"writer_hostgroup": 2, "reader_hostgroup": 3}, {"writer_hostgroup": 1, "reader_hostgroup": 2}]}
    ) == (
        "mysql_replication_hostgroups[1] (writer_hostgroup=1): reader_hostgroup: "
        "2 is the writer_hostgroup of mysql_replication_hostgroups[0]"
    )
    pairs = [{"writer_hostgroup": 1, "reader_hostgroup": 2}, {"writer_hostgroup": 3, "reader_hostgroup": 4}]
    assert len(parse_config({table: pairs}).mysql_replication_hostgroups) == 2


def test_global_variable_errors() -> None:
    assert only_error({"global_variables": [{"variable_name": "mysql-max_connection", "variable_value": "5"}]}) == (
        "global_variables[0] (variable_name='mysql-max_connection'): variable_name: "
        "unknown variable 'mysql-max_connection'; did you mean 'mysql-max_connections'?"
    )
    assert only_error({"global_variables": [{"variable_name": "mysql-threads", "variable_value": "lots"}]}) == (
        "global_variables[0] (variable_name='mysql-threads'): variable_value: expected an integer, got 'lots'"
    )
    assert only_error({"global_variables": [{"variable_name": "mysql-threads", "variable_value": 1000}]}) == (
        "global_variables[0] (variable_name='mysql-threads'): variable_value: 1000 is above the maximum 256"
    )
    assert only_error({"global_variables": [{"variable_name": "mysql-threads"}]}) == (
        "global_variables[0] (variable_name='mysql-threads'): variable_value: missing required column"
    )
    row = {"variable_name": "mysql-threads", "variable_value": "2"}
    assert only_error({"global_variables": [row, {**row, "variable_value": 3}]}) == (
        "global_variables[1] (variable_name='mysql-threads'): duplicate variable_name='mysql-threads', "
        "already in global_variables[0]"
    )


def test_all_errors_are_collected() -> None:
    doc = {
        "mysql_servers": [{"hostname": "db1", "port": -5, "status": "BAD"}, {"port": 1}],
        "mysql_query_rules": [{"rule_id": 1, "replace_pattern": "x", "digest": "nope"}],
        "mysql_userz": [],
    }
    with pytest.raises(ConfigError) as info:
        parse_config(doc)
    errors = info.value.errors
    assert errors == [
        "mysql_servers[0] (hostname='db1', port=-5): port: -5 is below the minimum 0",
        "mysql_servers[0] (hostname='db1', port=-5): status: 'BAD' is not one of "
        "'ONLINE', 'SHUNNED', 'OFFLINE_SOFT', 'OFFLINE_HARD'",
        "mysql_servers[1] (port=1): hostname: missing required column",
        "mysql_query_rules[0] (rule_id=1): digest: 'nope' is not a digest: '0x' and 1 to 16 hex digits",
        "mysql_query_rules[0] (rule_id=1): replace_pattern: requires match_pattern",
        "unknown table 'mysql_userz'; did you mean 'mysql_users'?",
    ]
    text = str(info.value)
    assert text.startswith("6 config errors:\n")
    assert all(error in text for error in errors)


# --- warnings ------------------------------------------------------------------------------------------------------


def test_no_warnings_for_a_complete_config() -> None:
    assert parse_config(sample_doc()).warnings == ()


def test_hostgroup_without_servers_warns() -> None:
    config = parse_config(
        {
            "mysql_servers": [{"hostname": "db1", "hostgroup_id": 10}],
            "mysql_users": [{"username": "app", "password": "pw", "default_hostgroup": 10}],
            "mysql_query_rules": [{"rule_id": 10, "destination_hostgroup": 20}],
        }
    )
    assert config.warnings == (
        "hostgroup 20 has no servers (referenced by mysql_query_rules[0] rule_id=10 destination_hostgroup)",
    )


def test_warnings_gather_every_reference() -> None:
    config = parse_config(
        {
            "mysql_servers": [{"hostname": "db1", "hostgroup_id": 1}],
            "mysql_users": [{"username": "app", "password": "pw", "default_hostgroup": 3}],
            "mysql_query_rules": [{"rule_id": 7, "mirror_hostgroup": 3}],
            "mysql_replication_hostgroups": [{"writer_hostgroup": 1, "reader_hostgroup": 2}],
        }
    )
    assert config.warnings == (
        "hostgroup 2 has no servers "
        "(referenced by mysql_replication_hostgroups[0] writer_hostgroup=1 reader_hostgroup)",
        "hostgroup 3 has no servers (referenced by mysql_users[0] username='app' default_hostgroup; "
        "mysql_query_rules[0] rule_id=7 mirror_hostgroup)",
    )


def test_empty_password_warns() -> None:
    config = parse_config({"mysql_servers": [{"hostname": "db1"}], "mysql_users": [{"username": "anon"}]})
    assert config.warnings == ("mysql_users[0] username='anon' has an empty password",)


def test_a_proxysql_variable_proxyfleet_does_not_act_on_warns_when_set_away_from_its_default() -> None:
    rows = [
        {"variable_name": "mysql-query_digests_lowercase", "variable_value": "true"},  # not acted on: warned
        {"variable_name": "mysql-query_digests_no_digits", "variable_value": "false"},  # its default: quiet
        {"variable_name": "mysql-max_transaction_time", "variable_value": "5000"},  # acted on: quiet
    ]
    users = [{"username": "app", "password": "pw"}]
    config = parse_config({"mysql_servers": [{"hostname": "db1"}], "mysql_users": users, "global_variables": rows})
    assert config.warnings == (
        "global_variables[0] mysql-query_digests_lowercase: accepted for ProxySQL compatibility, but ProxyFleet does "
        "not act on it (it behaves as with the default, false)",
    )


def test_warnings_do_not_change_equality_or_checksum() -> None:
    warned = parse_config({"mysql_users": [{"username": "anon"}]})
    assert warned.warnings
    assert warned == parse_config(warned.to_document())


# --- validate_row ----------------------------------------------------------------------------------------------------


def test_validate_row() -> None:
    row, errors = validate_row("mysql_query_rules", {"rule_id": "3", "active": "1", "match_digest": "^SELECT"})
    assert errors == []
    assert row == MysqlQueryRule(rule_id=3, active=True, match_digest="^SELECT")
    row, errors = validate_row("mysql_query_rules", {"rule_id": -1, "active": "maybe", "bogus": 1})
    assert row is None
    assert errors == [
        ("bogus", "unknown column"),
        ("rule_id", "-1 is below the minimum 1"),
        ("active", "expected a boolean (true, false, 0, 1, '0' or '1'), got 'maybe'"),
    ]
    assert validate_row("mysql_servers", ["db1"]) == (None, [("", "a row must be an object, not a list")])
    assert validate_row("global_variables", {"variable_name": "mysql-threads", "variable_value": True}) == (
        None,
        [("variable_value", "expected an integer, got 'true'")],
    )
    with pytest.raises(ValueError, match="unknown table 'mysql_user'; did you mean 'mysql_users'"):
        validate_row("mysql_user", {})


# --- load_config_file -----------------------------------------------------------------------------------------------


def test_load_config_file(tmp_path: Path) -> None:
    path = tmp_path / "proxy.json"
    path.write_text(json.dumps(sample_doc(), indent=2))
    assert load(path) == parse_config(sample_doc())
    assert load(str(path)).checksum == parse_config(sample_doc()).checksum


def test_load_config_file_bad_json(tmp_path: Path) -> None:
    path = tmp_path / "proxy.json"
    path.write_text('{\n  "mysql_servers": [\n    {"hostname": "db1",}\n  ]\n}\n')
    with pytest.raises(ConfigError) as info:
        load(path)
    assert info.value.errors == [
        f"{path}: invalid JSON at line 3 column 24: Expecting property name enclosed in double quotes"
    ]


def test_load_config_file_errors_name_the_file(tmp_path: Path) -> None:
    path = tmp_path / "proxy.json"
    path.write_text(json.dumps({"mysql_servers": [{"hostname": "db1", "port": 70000}]}))
    with pytest.raises(ConfigError) as info:
        load(path)
    assert info.value.errors == [
        f"{path}: mysql_servers[0] (hostname='db1', port=70000): port: 70000 is above the maximum 65535"
    ]
    missing = tmp_path / "nope.json"
    with pytest.raises(ConfigError, match=r"nope\.json: cannot read the config: .*No such file"):
        load(missing)


def test_blank_means_null_in_nullable_text_columns() -> None:
    row, errors = validate_row(
        "mysql_query_rules",
        {"rule_id": 1, "digest": "", "schemaname": "", "match_digest": "", "client_addr": "", "comment": ""},
    )
    assert errors == []
    assert (row.digest, row.schemaname, row.match_digest, row.client_addr, row.comment) == (None,) * 5
    row, errors = validate_row(
        "mysql_query_rules", {"rule_id": 1, "match_pattern": "/\\*hint\\*/", "replace_pattern": ""}
    )
    assert errors == [] and row.replace_pattern == ""  # an empty replacement deletes the match, as in ProxySQL


@pytest.mark.parametrize("column", ["error_msg", "OK_msg"])
@pytest.mark.parametrize("blank", ["", "   "])
def test_an_empty_message_is_refused(column: str, blank: str) -> None:
    _, errors = validate_row("mysql_query_rules", {"rule_id": 1, column: blank})
    assert errors == [(column, "an empty message; leave it null for none (a blank message would still answer)")]


@pytest.mark.parametrize(
    "hostname", ["db2", "db-2.internal", "db_2.example.com.", "10.0.0.5", "::1", "fe80::1", "x" * 63]
)
def test_good_hostnames(hostname: str) -> None:
    assert validate_row("mysql_servers", {"hostgroup_id": 1, "hostname": hostname})[1] == []


@pytest.mark.parametrize(
    ("hostname", "says"),
    [
        ("bad host name!", "is not a host name"),
        ("<script>alert(1)</script>", "is not a host name"),
        ("a/b", "is not a host name"),
        ("-db", "is not a host name"),
        ("x" * 64, "is not a host name"),
        ("", "is not a host name"),
        ("/var/run/mysqld/mysqld.sock", "unix socket path"),
        ("[::1]", "without brackets"),
    ],
)
def test_bad_hostnames_are_refused(hostname: str, says: str) -> None:
    [(column, message)] = validate_row("mysql_servers", {"hostgroup_id": 1, "hostname": hostname})[1]
    assert column == "hostname" and says in message


def test_a_duplicate_key_is_refused_wherever_it_is(tmp_path: Path) -> None:
    path = tmp_path / "proxy.json"
    path.write_text('{"mysql_users": [{"username": "app", "password": "pw"}], "mysql_users": []}')
    with pytest.raises(ConfigError) as refused:
        load(path)
    assert refused.value.errors == [f"{path}: invalid config: the key 'mysql_users' appears twice in one object"]
    path.write_text('{"mysql_users": [{"username": "app", "username": "other"}]}')
    with pytest.raises(ConfigError, match="the key 'username' appears twice"):
        load(path)
    with pytest.raises(DuplicateKey):
        read_json(b'{"a": 1, "b": {"c": 1, "c": 2}}')


def test_json_nested_too_deeply_is_a_decode_error_not_a_crash() -> None:
    with pytest.raises(json.JSONDecodeError, match="nested too deeply"):
        read_json("[" * 100_000)
    with pytest.raises(json.JSONDecodeError, match="nested too deeply"):
        read_json(b'{"a": ' * 100_000)


@pytest.mark.parametrize("password", ["*", "*ABC", "*" + "G" * 40, "*" + "A" * 41])
def test_a_malformed_native_hash_is_refused(password: str) -> None:
    with pytest.raises(
        ConfigError, match=r"mysql_users\[0\] \(username='app'\): password: starts with '\*'.*40 hex digits"
    ):
        parse_config({"mysql_users": [{"username": "app", "password": password}]})


def test_a_native_hash_and_clear_text_are_accepted() -> None:
    hashed = "*" + "a1" * 20
    config = parse_config({"mysql_users": [{"username": "a", "password": hashed}, {"username": "b", "password": "x*"}]})
    assert [u.password for u in config.mysql_users] == [hashed, "x*"]


def test_a_forwarding_listener_may_not_take_a_port_of_the_node() -> None:
    """The MySQL listener's ports (every one of mysql-interfaces), the PostgreSQL listener's (pgsql-interfaces) and
    the admin endpoint's are the node's own."""
    variables = Variables(
        {
            "mysql-interfaces": "127.0.0.1:6033;0.0.0.0:6034",
            "admin-restapi_port": "6071",
            "pgsql-interfaces": "0.0.0.0:6133",
        }
    )
    assert [listener_port_error(port, variables) for port in (6033, 6034, 6071, 6133)] == [
        "6033 is the port of mysql-interfaces; give the listener a port of its own",
        "6034 is the port of mysql-interfaces; give the listener a port of its own",
        "6071 is the port of admin-restapi_port; give the listener a port of its own",
        "6133 is the port of pgsql-interfaces; give the listener a port of its own",
    ]
    assert listener_port_error(6133, Variables()) is None  # no PostgreSQL listener by default
    assert listener_port_error(6070, variables) is None and listener_port_error(6070, Variables()) is not None
    document = {
        "pgsql_servers": [{"hostname": "127.0.0.1", "hostgroup_id": 100}],
        "pgsql_forward_listeners": [{"port": 15432, "hostgroup_id": 100}, {"port": 6033, "hostgroup_id": 100}],
    }
    with pytest.raises(ConfigError) as refused:
        parse_config(document)
    assert refused.value.errors == [
        "pgsql_forward_listeners[1] (port=6033): port: 6033 is the port of mysql-interfaces; give the listener a port "
        "of its own"
    ]
    document["pgsql_forward_listeners"].pop()
    assert [listener.port for listener in parse_config(document).pgsql_forward_listeners] == [15432]
    document["global_variables"] = [{"variable_name": "pgsql-interfaces", "variable_value": "127.0.0.1:15432"}]
    assert only_error(document) == (
        "pgsql_forward_listeners[0] (port=15432): port: 15432 is the port of pgsql-interfaces; give the listener a "
        "port of its own"
    )
