"""Import of a ProxySQL proxysql.cnf: the libconfig parser, the mapping onto the config document, line numbers."""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User as Account
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from django.test import Client
from rest_framework.test import APIClient

from fleet.core import publishing, roles
from fleet.core.models import (
    AuditEntry,
    Cluster,
    Hostgroup,
    PgsqlQueryRule,
    PgsqlReplicationHostgroup,
    PgsqlServer,
    PgsqlUser,
    QueryRule,
    Server,
    User,
    Variable,
)
from fleet.core.proxysql_cnf import CnfError, cnf_to_document, import_cnf, parse_libconfig
from proxyapp.config.document import ConfigError
from tests.support.control_plane import LOGIN_PASSWORD, make_account, make_cluster
from tests.unit.fleet.core.test_shard_tester import sharded_document

PROXYSQL_CNF = r"""
# ProxySQL config file, as shipped and then edited by hand
datadir="/var/lib/proxysql"
errorlog="/var/lib/proxysql/proxysql.log"

admin_variables=
{
    admin_credentials="admin:admin;radmin:radmin"
    mysql_ifaces="0.0.0.0:6032"
}

mysql_variables=
{
    threads=4
    max_connections=2048
    default_query_delay=0
    default_query_timeout=36000000
    stacksize=1048576           # ProxyFleet has no such variable: a note
    interfaces="0.0.0.0:6033"
    monitor_username="monitor"
    monitor_password: "monitor-pass";
    multiplexing=false
    connect_timeout_server=3000
}

// the backends: one writer, two readers
mysql_servers =
(
    {
        address = "10.0.0.1"   # no default, required
        port = 3306
        hostgroup = 10
        max_connections = 200
        comment = "primary"
    },
    {
        address = "10.0.0.2" , port = 3306 , hostgroup = 20 , weight = 100 , max_replication_lag = 10
    },
    { address="10.0.0.3"; port=3307; hostgroup=20; status="OFFLINE_SOFT"; compression=1; },
)

mysql_users:
(
    {
        username = "app"
        password = "app-\"pass\""
        default_hostgroup = 10
        active = 1
        transaction_persistent = 1
    },
    { username = "report", password = "*8CC1E2ECF0D3ED4F4DE3A5FB1F5BA2A89DE6BC38", default_hostgroup = 20,
      default_schema = "reports" "_db", max_connections = 0x40 }
)

mysql_query_rules:
(
    /* writes that look like reads go to the writer */
    {
        rule_id=1
        active=1
        match_pattern="^SELECT .* FOR UPDATE$"
        destination_hostgroup=10
        apply=1
    },
    {
        rule_id=2
        active=1
        match_digest="^SELECT"
        destination_hostgroup=20
        cache_ttl=5000
        apply=1
    }
)

scheduler=
(
)

mysql_replication_hostgroups=
(
    {
        writer_hostgroup=10
        reader_hostgroup=20
        check_type="read_only"
        comment="main pair"
    }
)
"""


def line_of(text: str, needle: str) -> int:
    """The number of the first line of ``text`` holding ``needle``."""
    return next(n for n, line in enumerate(text.splitlines(), 1) if needle in line)


def test_libconfig_values() -> None:
    cnf = parse_libconfig(
        'a = 1; b: -2L, c = 0x1f\nd = 1.5e3 e = TRUE f = false g = "x\\ty" "z"\n'
        'h = [1, 2,] i = ( {j = 1}, ( ), [] ) k = { l = { m = "n" } }'
    )
    assert cnf == {
        "a": 1,
        "b": -2,
        "c": 31,
        "d": 1500.0,
        "e": True,
        "f": False,
        "g": "x\tyz",
        "h": [1, 2],
        "i": [{"j": 1}, [], []],
        "k": {"l": {"m": "n"}},
    }
    assert (cnf.lines["a"], cnf.lines["d"], cnf["k"]["l"].line) == (1, 2, 3)


def test_realistic_cnf_maps_onto_the_document() -> None:
    mapped = cnf_to_document(PROXYSQL_CNF)
    doc = mapped.document
    assert [(s["hostname"], s["hostgroup_id"], s["port"]) for s in doc["mysql_servers"]] == [
        ("10.0.0.1", 10, 3306),
        ("10.0.0.2", 20, 3306),
        ("10.0.0.3", 20, 3307),
    ]
    assert doc["mysql_servers"][2] == {
        "hostname": "10.0.0.3",
        "port": 3307,
        "hostgroup_id": 20,
        "status": "OFFLINE_SOFT",
        "compression": 1,
    }
    assert doc["mysql_users"][0]["password"] == 'app-"pass"'
    assert doc["mysql_users"][1]["default_schema"] == "reports_db"
    assert doc["mysql_users"][1]["max_connections"] == 64
    assert doc["mysql_query_rules"][0]["match_pattern"] == "^SELECT .* FOR UPDATE$"
    assert doc["mysql_replication_hostgroups"] == [
        {"writer_hostgroup": 10, "reader_hostgroup": 20, "check_type": "read_only", "comment": "main pair"}
    ]
    variables = {row["variable_name"]: row["variable_value"] for row in doc["global_variables"]}
    assert variables["mysql-threads"] == "4"
    assert variables["mysql-multiplexing"] == "false"
    assert variables["mysql-monitor_password"] == "monitor-pass"
    assert "mysql-stacksize" not in variables
    assert mapped.lines[("mysql_servers", 1)] == line_of(PROXYSQL_CNF, '"10.0.0.2"') - 1  # its opening brace
    notes = "\n".join(mapped.notes)
    for left_out in ("datadir", "errorlog", "admin_variables", "scheduler", "mysql_variables.stacksize"):
        assert left_out in notes
    assert f"line {line_of(PROXYSQL_CNF, 'stacksize')}: mysql_variables.stacksize not imported" in notes


@pytest.mark.django_db
def test_import_cnf_replaces_the_draft_and_publishes() -> None:
    cluster = Cluster.objects.create(name="migrated")
    Server.objects.create(cluster=cluster, hostgroup_id=99, hostname="old", port=3306)
    author = Account.objects.create_user("migrator")
    with pytest.raises(ConfigError) as refused:  # its scheduler would be dropped: routing could change
        import_cnf(cluster, PROXYSQL_CNF, author)
    assert "scheduler not imported" in refused.value.errors[0] and "force" in refused.value.errors[-1]
    assert list(Server.objects.filter(cluster=cluster).values_list("hostname", flat=True)) == ["old"]
    config, notes = import_cnf(cluster, PROXYSQL_CNF, author, force=True)
    assert notes and len(config.mysql_servers) == 3
    assert sorted(Server.objects.filter(cluster=cluster).values_list("hostname", flat=True)) == [
        "10.0.0.1",
        "10.0.0.2",
        "10.0.0.3",
    ]
    assert User.objects.get(cluster=cluster, username="app").password == 'app-"pass"'
    assert QueryRule.objects.get(cluster=cluster, rule_id=2).cache_ttl == 5000
    assert Variable.objects.get(cluster=cluster, variable_name="mysql-threads").variable_value == "4"
    assert set(Hostgroup.objects.filter(cluster=cluster).values_list("hostgroup_id", flat=True)) == {10, 20}
    assert AuditEntry.objects.get(cluster=cluster, action=AuditEntry.Action.IMPORT).user == author
    assert publishing.publish(cluster, author).number == 1


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('mysql_servers = (\n  { address = "a"\n    port = }\n)', "line 3: expected a value"),
        ('mysql_servers = (\n  { address = "a" }\n', "line 3: missing ')' to close the list opened on line 1"),
        ("a = 1\nmysql_variables = {\n threads 4\n}", "line 3: expected '=' or ':' after 'threads', got '4'"),
        ('a = 1\nb = "open\nc = 2', "line 2: unterminated string"),
        ("a = 1\n/* never closed\nb = 2", "line 2: unterminated /* comment"),
        ('a = 1\n@include "other.cnf"', "line 2: @include is not supported"),
        ("a = 1\n\na = 2", "line 3: 'a' is already set on line 1"),
        ("a = 1 $", "line 1: unexpected character '$'"),
        ('mysql_servers = { address = "a" }', "line 1: mysql_servers must be a list of groups"),
        ('\nmysql_servers = ( { address = "a", hostname = "b" } )', "line 2: mysql_servers: 'hostname' sets"),
        ("mysql_variables = {\n threads = (1)\n}", "line 2: mysql_variables.threads must be a single value"),
    ],
)
def test_malformed_cnf_names_the_line(text: str, message: str) -> None:
    with pytest.raises(CnfError) as refused:
        cnf_to_document(text)
    assert str(refused.value).startswith(f"proxysql.cnf {message}")


@pytest.mark.django_db
def test_invalid_values_name_their_line_and_change_nothing() -> None:
    cluster = Cluster.objects.create(name="refused")
    text = PROXYSQL_CNF.replace("port=3307", "port=70000").replace("threads=4", "threads=0")
    with pytest.raises(ConfigError) as refused:
        import_cnf(cluster, text, None)
    errors = refused.value.errors
    server = f"proxysql.cnf line {line_of(text, 'port=70000')}: mysql_servers[2]"
    assert any(e.startswith(server) and "port: 70000 is above" in e for e in errors)
    assert any(e.startswith(f"proxysql.cnf line {line_of(text, 'threads=0')}: global_variables[0]") for e in errors)
    assert not Server.objects.filter(cluster=cluster).exists()


@pytest.mark.django_db
def test_fleetconfig_command(tmp_path: Path) -> None:
    cnf = tmp_path / "proxysql.cnf"
    cnf.write_text(PROXYSQL_CNF)
    out, err = StringIO(), StringIO()
    call_command(
        "fleetconfig", "import-cnf", str(cnf), "--cluster", "cli", "--publish", "--force", stdout=out, stderr=err
    )
    assert "imported 17 rows into the draft of cli" in out.getvalue()
    assert "published version 1" in out.getvalue()
    assert "note: line 3: datadir not imported" in err.getvalue()
    exported = tmp_path / "cli.json"
    call_command("fleetconfig", "export", str(exported), "--cluster", "cli")
    assert json.loads(exported.read_text())["mysql_users"][0]["password"] == 'app-"pass"'
    call_command("fleetconfig", "import", str(exported), "--cluster", "copy", "--publish", stdout=StringIO())
    copy, original = (Cluster.objects.get(name=name).latest_version() for name in ("copy", "cli"))
    assert copy.checksum == original.checksum
    cnf.write_text("mysql_servers = (\n { address = 1 port = 3306 }\n)")
    with pytest.raises(CommandError, match=r"proxysql.cnf line 2: mysql_servers\[0\].*hostname: expected a string"):
        call_command("fleetconfig", "import-cnf", str(cnf), "--cluster", "refused")
    assert not Cluster.objects.filter(name="refused").exists()
    with pytest.raises(CommandError, match="no cluster named 'nope'"):
        call_command("fleetconfig", "export", "--cluster", "nope")


@pytest.mark.django_db
def test_fleetconfig_as_the_readme_writes_it(tmp_path: Path) -> None:
    """Options between the action and the file (``import-cnf --cluster X FILE``) once failed: unrecognized."""
    cnf = tmp_path / "proxysql.cnf"
    cnf.write_text(PROXYSQL_CNF)
    out = StringIO()
    call_command(
        "fleetconfig",
        "import-cnf",
        "--cluster",
        "readme",
        str(cnf),
        "--publish",
        "--force",
        stdout=out,
        stderr=StringIO(),
    )
    assert "published version 1" in out.getvalue()
    exported = tmp_path / "readme.json"
    call_command("fleetconfig", "export", "--cluster", "readme", str(exported))
    assert json.loads(exported.read_text())["mysql_users"][0]["password"] == 'app-"pass"'


@pytest.mark.django_db
def test_import_cnf_through_the_ui_and_the_api() -> None:
    cluster = Cluster.objects.create(name="migrated-ui")
    operator = make_account(roles.OPERATOR)
    browser = Client()
    assert browser.login(username=operator.username, password=LOGIN_PASSWORD)
    browser.get("/cluster/", {"cluster": cluster.pk})
    upload = SimpleUploadedFile("proxysql.cnf", PROXYSQL_CNF.encode())
    refused = browser.post("/import/", {"file": upload}).content.decode()
    assert "Refused: nothing changed" in refused and "scheduler not imported" in refused
    upload = SimpleUploadedFile("proxysql.cnf", PROXYSQL_CNF.encode())
    page = browser.post("/import/", {"file": upload, "force": "on"}).content.decode()
    assert "<code>mysql_servers</code>: 3" in page and "mysql_variables.stacksize not imported" in page
    assert Server.objects.filter(cluster=cluster).count() == 3
    refused = browser.post("/import/", {"text": "mysql_servers = (\n { address = 1 port = 3306 }\n)"}).content.decode()
    assert "Refused: nothing changed" in refused and "proxysql.cnf line 2" in refused
    assert Server.objects.filter(cluster=cluster).count() == 3
    api = APIClient()
    api.force_authenticate(operator)
    answer = api.post("/api/v1/import-cnf/?cluster=migrated-ui", {"cnf": PROXYSQL_CNF, "force": True}, format="json")
    assert answer.status_code == 200 and answer.json()["rows"]["mysql_servers"] == 3
    assert any("stacksize" in note for note in answer.json()["notes"])


@pytest.mark.django_db
def test_fast_routing_is_imported() -> None:
    cnf = """
mysql_query_rules_fast_routing =
(
    { username = "app"; schemaname = "shop"; flagIN = 0; destination_hostgroup = 20; comment = "shop reads" }
)
"""
    cluster = Cluster.objects.create(name="fast")
    config, notes = import_cnf(cluster, cnf, None)
    assert [(r.username, r.schemaname, r.destination_hostgroup) for r in config.mysql_query_rules_fast_routing] == [
        ("app", "shop", 20)
    ]
    assert not any("fast_routing" in note for note in notes)


PROXYSQL_3_CNF = """
pgsql_variables =
{
    threads = 4
    monitor_username = "pgmonitor"
    interfaces = "0.0.0.0:6133"
}

pgsql_servers =
(
    { address = "10.0.1.1"; port = 5432; hostgroup = 100; max_connections = 200; comment = "primary" },
    { hostname = "10.0.1.2"; hostgroup_id = 101; weight = 10; status = "OFFLINE_SOFT" }
)

pgsql_users =
(
    { username = "app"; password = "app-pass"; default_hostgroup = 100 },
    {
        username = "reports"
        password = "SCRAM-SHA-256$4096:c2FsdA==$c3RvcmVka2V5:c2VydmVya2V5"
        default_hostgroup = 101
        active = 0
        max_connections = 20
        transaction_persistent = 0
        comment = "nightly"
        default_schema = "reports"
    }
)
"""


@pytest.mark.django_db
def test_proxysql_3_pgsql_servers_users_and_variables_are_imported() -> None:
    """ProxySQL 3.0's pgsql_servers (either spelling of its columns), pgsql_users (its columns as they are, a
    verifier kept as the password, pool_mode transaction) and the pgsql_variables ProxyFleet has; no force needed."""
    cluster = Cluster.objects.create(name="postgres")
    config, notes = import_cnf(cluster, PROXYSQL_3_CNF, None)
    assert [
        (s.hostname, s.port, s.hostgroup_id, s.max_connections, s.weight, s.status) for s in config.pgsql_servers
    ] == [
        ("10.0.1.1", 5432, 100, 200, 1, "ONLINE"),
        ("10.0.1.2", 5432, 101, 1000, 10, "OFFLINE_SOFT"),
    ]
    assert [
        (u.username, u.password, u.default_hostgroup, u.active, u.max_connections, u.transaction_persistent)
        for u in config.pgsql_users
    ] == [
        ("app", "app-pass", 100, True, 10000, True),
        ("reports", "SCRAM-SHA-256$4096:c2FsdA==$c3RvcmVka2V5:c2VydmVya2V5", 101, False, 20, False),
    ]
    assert {(u.pool_mode, u.backend, u.frontend, u.fast_forward) for u in config.pgsql_users} == {
        ("transaction", True, True, False)
    }
    stored = PgsqlUser.objects.get(cluster=cluster, username="reports")
    assert (stored.comment, stored.password.startswith("SCRAM-SHA-256$")) == ("nightly", True)
    assert config.variables.text("pgsql-monitor_username") == "pgmonitor"
    assert PgsqlServer.objects.get(cluster=cluster, hostgroup_id=100).comment == "primary"
    said = "\n".join(notes)
    threads = line_of(PROXYSQL_3_CNF, "threads")
    assert f"line {threads}: pgsql_variables.threads not imported: ProxyFleet has no pgsql-threads" in said
    assert config.variables.text("pgsql-interfaces") == "0.0.0.0:6133"
    assert f"line {line_of(PROXYSQL_3_CNF, 'pgsql_servers')}: pgsql_servers imported: clients reach them" in said
    users = line_of(PROXYSQL_3_CNF, "pgsql_users")
    assert f"line {users}: pgsql_users imported with pool_mode transaction" in said
    schema = line_of(PROXYSQL_3_CNF, "default_schema")
    assert f"line {schema}: pgsql_users.default_schema not imported: ProxyFleet has no such column" in said


@pytest.mark.django_db
def test_a_bad_pgsql_user_is_refused_naming_its_line_and_the_rest_still_needs_force() -> None:
    """A pgsql_users row the proxy refuses (a verifier nobody could log in with, a pool_mode it has not) names its
    line and column; ProxySQL 3.0's pgsql_hostgroup_attributes still need force to be dropped."""
    cluster = Cluster.objects.create(name="postgres")
    bad = (
        '\npgsql_servers = ( { address = "10.0.1.1"; hostgroup = 100 } )\n'
        "pgsql_users =\n(\n"
        '    { username = "app"; default_hostgroup = 100; password = "SCRAM-SHA-256$4096:c2FsdA==" },\n'
        '    { username = "batch"; default_hostgroup = 100; pool_mode = "statement" }\n'
        ")\n"
    )
    with pytest.raises(ConfigError) as refused:
        import_cnf(cluster, bad, None)
    first, second = refused.value.errors
    assert first.startswith("proxysql.cnf line 5: pgsql_users[0]") and "password: starts with 'SCRAM-SHA-256$'" in first
    assert second.startswith("proxysql.cnf line 6: pgsql_users[1]") and "pool_mode: 'statement' is not one of" in second
    assert not PgsqlUser.objects.filter(cluster=cluster).exists()
    attributes = "\npgsql_hostgroup_attributes = ( { hostgroup_id = 100; max_num_online_servers = 2 } )\n"
    with pytest.raises(ConfigError) as refused:
        import_cnf(cluster, PROXYSQL_3_CNF + attributes, None)
    dropped = line_of(PROXYSQL_3_CNF + attributes, "pgsql_hostgroup_attributes")
    assert refused.value.errors[0].startswith(f"line {dropped}: pgsql_hostgroup_attributes not imported")
    assert not PgsqlUser.objects.filter(cluster=cluster).exists()
    config, _ = import_cnf(cluster, PROXYSQL_3_CNF + attributes, None, force=True)
    assert [u.username for u in config.pgsql_users] == ["app", "reports"]
    with pytest.raises(CnfError, match="line 2: pgsql_variables must be a group"):
        import_cnf(cluster, "\npgsql_variables = ( 1 )\n", None)


PGSQL_ROUTING_CNF = """
pgsql_query_rules =
(
    {
        rule_id = 10
        active = 1
        username = "app"
        database = "shop"
        match_digest = "^SELECT"
        destination_hostgroup = 101
        apply = 1
        comment = "reads to the replicas"
    },
    { rule_id = 20; active = 1; match_pattern = "^DELETE FROM orders"; error_msg = "no"; apply = 1 },
    { rule_id = 30; active = 0; match_pattern = "^UPDATE"; replace_pattern = ""; schemaname = "shop" }
)

pgsql_replication_hostgroups =
(
    { writer_hostgroup = 100; reader_hostgroup = 101; check_type = "read_only"; comment = "main pair" }
)
"""


@pytest.mark.django_db
def test_proxysql_3_pgsql_query_rules_and_replication_hostgroups_are_imported() -> None:
    """ProxySQL 3.0's pgsql_query_rules (database, error_msg, an empty replace_pattern kept as empty) and
    pgsql_replication_hostgroups are imported as they are, without force; a column ProxySQL's PostgreSQL rules have
    not (schemaname) is named in a note, not taken for database."""
    cluster = Cluster.objects.create(name="postgres")
    text = PROXYSQL_3_CNF + PGSQL_ROUTING_CNF
    config, notes = import_cnf(cluster, text, None)
    assert [
        (r.rule_id, r.active, r.username, r.database, r.match_digest, r.match_pattern, r.destination_hostgroup)
        for r in config.pgsql_query_rules
    ] == [
        (10, True, "app", "shop", "^SELECT", None, 101),
        (20, True, None, None, None, "^DELETE FROM orders", None),
        (30, False, None, None, None, "^UPDATE", None),
    ]
    assert [(r.error_msg, r.replace_pattern, r.apply) for r in config.pgsql_query_rules] == [
        (None, None, True),
        ("no", None, True),
        (None, "", False),
    ]
    assert [
        (p.writer_hostgroup, p.reader_hostgroup, p.check_type, p.comment) for p in config.pgsql_replication_hostgroups
    ] == [(100, 101, "read_only", "main pair")]
    stored = PgsqlQueryRule.objects.get(cluster=cluster, rule_id=10)
    assert (stored.database, stored.comment) == ("shop", "reads to the replicas")
    assert PgsqlReplicationHostgroup.objects.get(cluster=cluster).reader_hostgroup == 101
    schemaname = line_of(text, 'schemaname = "shop"')
    assert f"line {schemaname}: pgsql_query_rules.schemaname not imported: ProxyFleet has no such column" in notes
    assert not any("pgsql_replication_hostgroups" in note for note in notes)
    assert publishing.publish(cluster, None).document["pgsql_query_rules"][1]["error_msg"] == "no"


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        ('pgsql_query_rules = ( { rule_id = 1; match_pattern = "(unclosed" } )', "match_pattern:"),
        ("pgsql_query_rules = ( { rule_id = 1; multiplex = 3 } )", "multiplex:"),
        ("pgsql_replication_hostgroups = ( { writer_hostgroup = 100; reader_hostgroup = 100 } )", "reader_hostgroup"),
        (
            "pgsql_replication_hostgroups = (\n"
            '  { writer_hostgroup = 100; reader_hostgroup = 101; check_type = "innodb_read_only" }\n)',
            "check_type: 'innodb_read_only' is not one of",
        ),
    ],
)
@pytest.mark.django_db
def test_a_refused_pgsql_rule_or_pair_names_its_line_and_changes_nothing(rows: str, message: str) -> None:
    """A PostgreSQL rule or replication pair the proxy refuses (a bad regex, a multiplex it has not, a reader that is
    the writer, a check_type other than read_only) names its cnf line and column; the draft is left as it was."""
    cluster = Cluster.objects.create(name="postgres")
    text = PROXYSQL_3_CNF + "\n" + rows + "\n"
    with pytest.raises(ConfigError) as refused:
        import_cnf(cluster, text, None)
    (error,) = refused.value.errors
    table = rows.split()[0]
    row = line_of(text, "rule_id = 1;" if table == "pgsql_query_rules" else "writer_hostgroup = 100;")
    assert error.startswith(f"proxysql.cnf line {row}: {table}[0]"), error
    assert message in error, error
    assert not PgsqlUser.objects.filter(cluster=cluster).exists()


#: A MySQL-only proxysql.cnf: servers, users, an emptied rules table and variables, nothing of PostgreSQL's.
MYSQL_ONLY_CNF = """
mysql_variables = { threads = 2 interfaces = "0.0.0.0:6033" }
mysql_servers = ( { address = "10.0.0.9" hostgroup = 10 } )
mysql_users = ( { username = "app" password = "app-pass" default_hostgroup = 10 } )
mysql_query_rules = ()
"""


def mixed_document() -> dict[str, Any]:
    """The sharded seed config with PostgreSQL's tables and its listener set too."""
    document = sharded_document()
    document["pgsql_servers"] = [{"hostname": "10.0.2.1", "hostgroup_id": 30, "port": 5432}]
    document["pgsql_users"] = [{"username": "pg_app", "password": "pg-pass", "default_hostgroup": 30}]
    document["global_variables"].append({"variable_name": "pgsql-interfaces", "variable_value": "127.0.0.1:6133"})
    return document


@pytest.mark.django_db
def test_a_mysql_only_cnf_keeps_the_drafts_other_tables_and_publishing_warns_of_what_it_takes_away() -> None:
    cluster = make_cluster("mixed", mixed_document())
    publishing.publish(cluster, None, "before the migration")
    config, notes = import_cnf(cluster, MYSQL_ONLY_CNF, None)
    assert [(s.hostname, s.hostgroup_id) for s in config.mysql_servers] == [("10.0.0.9", 10)]
    assert not config.mysql_query_rules  # the file holds the table, empty
    assert [s.hostname for s in config.pgsql_servers] == ["10.0.2.1"]
    assert [u.username for u in config.pgsql_users] == ["pg_app"]
    assert len(config.mysql_shards) == 2 and len(config.mysql_sharded_tables) == len(
        sharded_document()["mysql_sharded_tables"]
    )
    variables = dict(Variable.objects.filter(cluster=cluster).values_list("variable_name", "variable_value"))
    assert variables == {"mysql-threads": "2", "mysql-interfaces": "0.0.0.0:6033", "pgsql-interfaces": "127.0.0.1:6133"}
    assert "pgsql_servers: the draft's 1 row kept (the file has none of this table)" in notes
    assert "mysql_shards: the draft's 2 rows kept (the file has none of this table)" in notes
    assert "global_variables: the draft's pgsql-interfaces kept (the file does not set them)" in notes
    _, warnings, _ = publishing.draft_preview(cluster)
    assert "removes the whole of mysql_query_rules: v1 has 2 rows, this version none" in warnings
    assert (
        "mysql-interfaces changes from '127.0.0.1:6033' to '0.0.0.0:6033': clients must connect to the new address"
        in warnings
    )
