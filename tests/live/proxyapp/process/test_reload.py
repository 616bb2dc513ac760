"""Config reloads through a real proxy: SIGHUP and POST /reload apply a new config atomically, refuse a broken one
(routing and checksum unchanged, the error naming the row and field), and never disturb an open transaction."""

from __future__ import annotations

import copy
import json
import signal
import urllib.error
import urllib.request
from typing import Any

import pymysql
import pytest

from devstack.proxy import READER_HG, WRITER_HG, ProxyProcess
from devstack.sandbox import APP_PASSWORD, APP_USER, Sandbox, SandboxServer
from devstack.stack import wait_until
from proxyapp import credential
from tests.support.harness import StartProxy

_ROOT: dict[int, pymysql.Connection] = {}


@pytest.fixture(scope="module", autouse=True)
def backend_objects(sandbox: Sandbox) -> None:
    """The table the transaction test writes."""
    with sandbox.primary().connect() as conn, conn.cursor() as cur:
        cur.execute("CREATE TABLE IF NOT EXISTS app.reload_tx (id INT PRIMARY KEY)")
    sandbox.wait_replicated()


def make_config(sandbox: Sandbox, select_to: int) -> dict[str, Any]:
    """Writer 10 (primary), reader 20 (replica); every SELECT goes to ``select_to``."""
    primary, replica = sandbox.primary(), sandbox.replicas()[0]
    return {
        "mysql_servers": [
            {"hostgroup_id": WRITER_HG, "hostname": "127.0.0.1", "port": primary.port, "max_connections": 20},
            {"hostgroup_id": READER_HG, "hostname": "127.0.0.1", "port": replica.port, "max_connections": 20},
        ],
        "mysql_users": [{"username": APP_USER, "password": APP_PASSWORD, "default_hostgroup": WRITER_HG}],
        "mysql_query_rules": [
            {"rule_id": 1, "active": 1, "match_digest": "^SELECT", "destination_hostgroup": select_to, "apply": 1}
        ],
        "global_variables": [{"variable_name": "mysql-threads", "variable_value": "1"}],
    }


def com_select(server: SandboxServer) -> int:
    """The server's Com_select, read on a lasting root connection."""
    conn = _ROOT.get(server.port)
    if conn is None or not conn.open:
        conn = _ROOT[server.port] = server.connect()
    with conn.cursor() as cur:
        cur.execute("SHOW GLOBAL STATUS LIKE 'Com_select'")
        return int(cur.fetchone()[1])


def selects_land_on(sandbox: Sandbox, conn: pymysql.Connection, n: int = 5) -> str:
    """Run ``n`` SELECTs on the session; 'primary' or 'replica' according to the servers' own counters."""
    primary, replica = sandbox.primary(), sandbox.replicas()[0]
    p0, r0 = com_select(primary), com_select(replica)
    with conn.cursor() as cur:
        for i in range(n):
            cur.execute("SELECT %s", (i,))
            assert cur.fetchall() == ((i,),)
    dp, dr = com_select(primary) - p0, com_select(replica) - r0
    assert (dp, dr) in ((n, 0), (0, n)), (dp, dr)
    return "primary" if dp else "replica"


def checksum(proxy: ProxyProcess) -> str:
    """The running config's checksum from /config."""
    return proxy.admin("GET", "/config")["checksum"]


def test_sighup_applies_the_edited_file(sandbox: Sandbox, start_proxy: StartProxy) -> None:
    proxy = start_proxy(make_config(sandbox, WRITER_HG))
    before = checksum(proxy)
    with proxy.connect(autocommit=True) as conn:
        assert selects_land_on(sandbox, conn) == "primary"
        proxy.write_config(make_config(sandbox, READER_HG))
        proxy.signal(signal.SIGHUP)
        wait_until(lambda: checksum(proxy) != before, "the reload", 30)
        assert selects_land_on(sandbox, conn) == "replica"  # the open session follows the new rules
    with proxy.connect(autocommit=True) as conn:
        assert selects_land_on(sandbox, conn) == "replica"
    assert proxy.admin("GET", "/config")["document"]["mysql_query_rules"][0]["destination_hostgroup"] == READER_HG


def broken_configs(sandbox: Sandbox) -> list[tuple[str, dict[str, Any], list[str]]]:
    """(what is wrong, config, words the error must contain) for configs the proxy must refuse."""
    bad_port = make_config(sandbox, READER_HG)
    bad_port["mysql_servers"][1]["port"] = 70000
    bad_regex = make_config(sandbox, READER_HG)
    bad_regex["mysql_query_rules"].append({"rule_id": 2, "active": 1, "match_digest": "(unclosed"})
    unknown_column = make_config(sandbox, READER_HG)
    unknown_column["mysql_query_rules"].append({"rule_id": 3, "active": 1, "destination_hostgroupp": 20})
    return [
        ("bad port", bad_port, ["mysql_servers[1]", "port", "70000"]),
        ("bad regex", bad_regex, ["mysql_query_rules[1]", "rule_id=2", "match_digest", "(unclosed"]),
        ("unknown column", unknown_column, ["mysql_query_rules[1]", "rule_id=3", "destination_hostgroupp"]),
    ]


def refusal_says(proxy: ProxyProcess, n: int, words: list[str]) -> bool:
    """Whether the log holds an ``n``-th "reload refused" whose text names every one of ``words``."""
    parts = proxy.log().split("reload refused")
    return len(parts) > n and all(word in parts[n] for word in words)


def test_sighup_refuses_a_broken_file(sandbox: Sandbox, start_proxy: StartProxy) -> None:
    proxy = start_proxy(make_config(sandbox, WRITER_HG))
    running = checksum(proxy)
    with proxy.connect(autocommit=True) as conn:
        for n, (what, config, words) in enumerate(broken_configs(sandbox), start=1):
            proxy.write_config(config)
            proxy.signal(signal.SIGHUP)
            # The refusal's lines may reach the log one by one: wait for the whole of it.
            wait_until(lambda n=n, w=words: refusal_says(proxy, n, w), f"the refusal of the {what}", 30)
            assert checksum(proxy) == running, what
            assert selects_land_on(sandbox, conn) == "primary", what
    # A good file is taken again afterwards.
    proxy.write_config(make_config(sandbox, READER_HG))
    proxy.signal(signal.SIGHUP)
    wait_until(lambda: checksum(proxy) != running, "the good reload", 30)
    with proxy.connect(autocommit=True) as conn:
        assert selects_land_on(sandbox, conn) == "replica"


def test_post_reload_with_a_document(sandbox: Sandbox, start_proxy: StartProxy) -> None:
    proxy = start_proxy(make_config(sandbox, WRITER_HG))
    running = checksum(proxy)
    with proxy.connect(autocommit=True) as conn:
        for what, config, words in broken_configs(sandbox):
            result = proxy.admin("POST", "/reload", config)
            assert result["ok"] is False and result["checksum"] == running, what
            text = " ".join(result["errors"])
            for word in words:
                assert word in text, f"{what}: {word!r} not in {result['errors']}"
            assert checksum(proxy) == running
            assert selects_land_on(sandbox, conn) == "primary", what
        result = proxy.admin("POST", "/reload", make_config(sandbox, READER_HG))
        assert result["ok"] is True and result["errors"] == []
        assert result["checksum"] == checksum(proxy) != running
        assert selects_land_on(sandbox, conn) == "replica"


def test_post_reload_refusal_is_http_422(sandbox: Sandbox, start_proxy: StartProxy) -> None:
    proxy = start_proxy(make_config(sandbox, WRITER_HG))
    _, config, _ = broken_configs(sandbox)[1]
    request = urllib.request.Request(
        f"http://127.0.0.1:{proxy.admin_port}/reload",
        data=json.dumps(config).encode(),
        method="POST",
        headers=credential.header(credential.read(proxy.token_path)),
    )
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(request, timeout=10)
    assert info.value.code == 422
    body = json.loads(info.value.read())
    assert any("rule_id=2" in e and "match_digest" in e for e in body["errors"])


def test_a_transaction_open_across_reloads_commits(sandbox: Sandbox, start_proxy: StartProxy) -> None:
    primary = sandbox.primary()
    with primary.connect() as root, root.cursor() as cur:
        cur.execute("DELETE FROM app.reload_tx")
    config = make_config(sandbox, READER_HG)
    proxy = start_proxy(config)
    with proxy.connect(database="app", autocommit=True) as conn, conn.cursor() as cur:
        cur.execute("BEGIN")
        cur.execute("INSERT INTO reload_tx VALUES (1)")
        cur.execute("SELECT CONNECTION_ID()")
        backend = cur.fetchone()[0]
        # Reload by document: other rules, and the primary's row changed (weight, max_connections).
        changed = copy.deepcopy(config)
        changed["mysql_query_rules"][0]["destination_hostgroup"] = WRITER_HG
        changed["mysql_servers"][0].update(weight=5, max_connections=30)
        assert proxy.admin("POST", "/reload", changed)["ok"] is True
        cur.execute("INSERT INTO reload_tx VALUES (2)")
        # And by SIGHUP, with the reader hostgroup gone.
        before = checksum(proxy)
        changed["mysql_servers"] = changed["mysql_servers"][:1]
        changed["mysql_query_rules"] = []
        proxy.write_config(changed)
        proxy.signal(signal.SIGHUP)
        wait_until(lambda: checksum(proxy) != before, "the SIGHUP reload", 30)
        cur.execute("SELECT CONNECTION_ID(), @@in_transaction, COUNT(*) FROM reload_tx")
        assert cur.fetchall() == ((backend, 1, 2),)  # the same connection, the same transaction
        assert proxy.stats()["global"]["Active_Transactions"] == 1
        cur.execute("INSERT INTO reload_tx VALUES (3)")
        cur.execute("COMMIT")
        assert proxy.stats()["global"]["Active_Transactions"] == 0
    with primary.connect() as root, root.cursor() as cur:
        cur.execute("SELECT id FROM app.reload_tx ORDER BY id")
        assert cur.fetchall() == ((1,), (2,), (3,))
