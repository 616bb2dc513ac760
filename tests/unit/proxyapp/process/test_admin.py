"""The HTTP admin endpoint (proxyapp.process.admin), served on a free loopback port and queried with aiohttp's
client."""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import pytest

from proxyapp import credential
from proxyapp.clock import Clock
from proxyapp.process.admin import METRICS_TOP_DIGESTS, AdminServer, ReloadResult
from proxyapp.report.stats import DigestStats, GlobalCounters

Scenario = Callable[[aiohttp.ClientSession], Awaitable[None]]
TOKEN = "test-admin-token-0123456789"
#: The credential every scenario's client shows unless it says otherwise.
AUTH = credential.header(TOKEN)


class Provider:
    """A small in-memory proxy: real counters and digest stats, fixed pool rows, and a config it can reload."""

    def __init__(self) -> None:
        self.counters = GlobalCounters()
        self.digests = DigestStats()
        self.pool_rows: list[dict[str, Any]] = [
            pool_row(10, "127.0.0.1", 3306, "ONLINE", used=2, free=3, latency=150),
            pool_row(20, "::1", 3307, "SHUNNED", used=0, free=1, latency=0),
        ]
        self.rule_hits = {1: 7, 2: 0}
        self.document: dict[str, Any] = {"mysql_servers": [{"hostgroup_id": 10, "hostname": "127.0.0.1"}]}
        self.loaded_at = 1_700_000_000.25
        self.source = "/etc/proxyfleet/config.json"
        self.extra: dict[str, Any] = {}
        self.refusal: list[str] = []
        self.reloads: list[dict[str, Any] | None] = []
        self.clock = Clock()

    @property
    def checksum(self) -> str:
        """The checksum of the current document."""
        return hashlib.sha256(json.dumps(self.document, sort_keys=True).encode()).hexdigest()

    async def stats_snapshot(self) -> dict[str, Any]:
        """The snapshot the admin endpoint serves."""
        return {
            "global": self.counters.snapshot(),
            "connection_pool": [dict(row) for row in self.pool_rows],
            "query_digest": self.digests.rows(),
            "query_rules": [{"rule_id": k, "hits": v} for k, v in sorted(self.rule_hits.items())],
            "config": {"checksum": self.checksum, "loaded_at": self.loaded_at, "source": self.source},
            **self.extra,
        }

    async def config_document(self) -> dict[str, Any]:
        """The running document."""
        return self.document

    async def reset_query_digest(self) -> list[dict[str, Any]]:
        """Rows, then an empty digest table."""
        return self.digests.reset()

    async def reload(self, document: dict[str, Any] | None) -> ReloadResult:
        """Refuse with ``self.refusal`` when set, else adopt ``document`` (None: keep the "file" document)."""
        self.reloads.append(document)
        await asyncio.sleep(0)
        if self.refusal:
            return ReloadResult.refused(self.checksum, self.refusal)
        if document is not None:
            self.document = document
            self.source = "admin"
        return ReloadResult.loaded(self.checksum, ["a warning"])

    async def advance_clock(self, seconds: float) -> dict[str, Any]:
        """Move the clock."""
        self.clock.advance(seconds)
        return {"ok": True, "offset_s": self.clock.offset}


class BrokenProvider(Provider):
    """A provider whose snapshot fails."""

    async def stats_snapshot(self) -> dict[str, Any]:
        """Always raises."""
        raise RuntimeError("snapshot exploded")


class ExtraCountersProvider(Provider):
    """A provider whose global counters hold a variable stats.py does not know and a non-numeric value."""

    async def stats_snapshot(self) -> dict[str, Any]:
        """The usual snapshot plus two odd global variables."""
        snapshot = await super().stats_snapshot()
        snapshot["global"]["Backend_query_time_nsec"] = 99
        snapshot["global"]["not a number"] = "n/a"
        return snapshot


def pool_row(hg: int, host: str, port: int, status: str, used: int, free: int, latency: int) -> dict[str, Any]:
    """A stats_mysql_connection_pool row."""
    return {
        "hostgroup": hg,
        "srv_host": host,
        "srv_port": port,
        "status": status,
        "ConnUsed": used,
        "ConnFree": free,
        "ConnOK": used + free + 1,
        "ConnERR": 4 if status == "SHUNNED" else 0,
        "MaxConnUsed": used + 1,
        "Queries": 1000 + hg,
        "Bytes_data_sent": 5000 + hg,
        "Bytes_data_recv": 9000 + hg,
        "Latency_us": latency,
    }


def serve(provider: Provider, scenario: Scenario, **options: Any) -> None:
    """Start an AdminServer for ``provider`` (with ``options``) on a free port, run ``scenario`` against it, stop
    it."""

    async def main() -> None:
        server = AdminServer(provider, "127.0.0.1", 0, TOKEN, **options)
        await server.start()
        try:
            assert server.port != 0
            async with aiohttp.ClientSession(base_url=f"http://127.0.0.1:{server.port}", headers=AUTH) as http:
                await scenario(http)
        finally:
            await server.stop()

    asyncio.run(main())


async def get_json(http: aiohttp.ClientSession, path: str, status: int = 200) -> Any:
    """GET ``path``, check the status and that the body is JSON, return the body."""
    async with http.get(path) as resp:
        assert resp.status == status, await resp.text()
        assert resp.content_type == "application/json"
        return await resp.json()


async def post(http: aiohttp.ClientSession, path: str, body: bytes | None = None) -> tuple[int, Any]:
    """POST ``body`` to ``path``; (status, JSON body)."""
    async with http.post(path, data=body) as resp:
        assert resp.content_type == "application/json"
        return resp.status, await resp.json()


def busy_provider() -> Provider:
    """A provider with traffic: counters moved and three digests recorded."""
    p = Provider()
    p.counters.Questions = 42
    p.counters.Client_Connections_connected = 3
    p.counters.Mirror_queue_length = 5
    d = p.digests
    d.record(10, "shop", "app", "10.0.0.1", "0xA", "SELECT ?", 500, 1, 0)
    d.record(10, "shop", "app", "10.0.0.1", "0xA", "SELECT ?", 700, 1, 0)
    for _ in range(5):
        d.record(10, "shop", "app", "10.0.0.2", "0xB", "UPDATE t SET x=?", 10, 0, 1)
    d.record(20, "shop", "report", "10.0.0.3", "0xC", "SELECT * FROM big", 9000, 100, 0)
    return p


# --- JSON endpoints -----------------------------------------------------------------------------------------


def test_health() -> None:
    async def scenario(http: aiohttp.ClientSession) -> None:
        assert await get_json(http, "/health") == {"status": "ok"}

    serve(Provider(), scenario)


def test_stats_is_the_whole_snapshot_with_extra_keys() -> None:
    provider = busy_provider()
    provider.extra = {"query_digest_overflow": 0, "mirror": {"dropped": 2}}

    async def scenario(http: aiohttp.ClientSession) -> None:
        body = await get_json(http, "/stats")
        expected = json.loads(json.dumps(await provider.stats_snapshot()))
        uptime = body["global"].pop("ProxySQL_Uptime")
        assert uptime == expected["global"].pop("ProxySQL_Uptime")
        assert body == expected
        assert body["mirror"] == {"dropped": 2}
        assert body["global"]["Questions"] == 42

    serve(provider, scenario)


def test_stats_sections() -> None:
    provider = busy_provider()

    async def scenario(http: aiohttp.ClientSession) -> None:
        counters = await get_json(http, "/stats/global")
        assert counters["Questions"] == 42
        assert counters["Client_Connections_connected"] == 3
        assert "ProxySQL_Uptime" in counters
        assert await get_json(http, "/stats/connection_pool") == provider.pool_rows
        assert await get_json(http, "/stats/query_rules") == [{"rule_id": 1, "hits": 7}, {"rule_id": 2, "hits": 0}]
        provider.counters.Questions += 1
        assert (await get_json(http, "/stats/global"))["Questions"] == 43

    serve(provider, scenario)


def test_query_digest_order_and_limit() -> None:
    async def scenario(http: aiohttp.ClientSession) -> None:
        rows = await get_json(http, "/stats/query_digest")
        assert [r["digest"] for r in rows] == ["0xC", "0xA", "0xB"]
        a = rows[1]
        assert (a["count_star"], a["sum_time"], a["min_time"], a["max_time"]) == (2, 1200, 500, 700)
        assert a["client_address"] == "10.0.0.1"
        by_count = await get_json(http, "/stats/query_digest?order_by=count_star&limit=2")
        assert [r["digest"] for r in by_count] == ["0xB", "0xA"]
        by_max = await get_json(http, "/stats/query_digest?order_by=max_time&limit=1")
        assert [r["digest"] for r in by_max] == ["0xC"]
        assert await get_json(http, "/stats/query_digest?limit=0") == []

    serve(busy_provider(), scenario)


@pytest.mark.parametrize(
    ("query", "needle"),
    [("limit=ten", "limit"), ("limit=-1", "limit"), ("order_by=digest_text", "order_by"), ("order_by=", "order_by")],
)
def test_query_digest_bad_parameters_are_400(query: str, needle: str) -> None:
    async def scenario(http: aiohttp.ClientSession) -> None:
        body = await get_json(http, f"/stats/query_digest?{query}", status=400)
        assert needle in body["error"]

    serve(busy_provider(), scenario)


def test_query_digest_reset_returns_rows_and_clears() -> None:
    provider = busy_provider()

    async def scenario(http: aiohttp.ClientSession) -> None:
        status, rows = await post(http, "/stats/query_digest/reset")
        assert status == 200
        assert [(r["digest"], r["count_star"]) for r in rows] == [("0xC", 1), ("0xA", 2), ("0xB", 5)]
        assert await get_json(http, "/stats/query_digest") == []
        assert provider.digests.rows() == []
        async with http.get("/stats/query_digest/reset") as resp:
            assert resp.status == 405
            assert "POST" in resp.headers["Allow"]
            assert "GET" in (await resp.json())["error"]

    serve(provider, scenario)


def test_config_is_the_document_with_its_checksum() -> None:
    provider = Provider()

    async def scenario(http: aiohttp.ClientSession) -> None:
        body = await get_json(http, "/config")
        assert body == {
            "checksum": provider.checksum,
            "loaded_at": 1_700_000_000.25,
            "source": "/etc/proxyfleet/config.json",
            "document": provider.document,
        }

    serve(provider, scenario)


def test_reload_without_a_body_rereads_the_file() -> None:
    provider = Provider()

    async def scenario(http: aiohttp.ClientSession) -> None:
        status, body = await post(http, "/reload")
        assert status == 200
        assert body == {"ok": True, "checksum": provider.checksum, "errors": [], "warnings": ["a warning"]}
        status, _ = await post(http, "/reload", b"  \n")
        assert status == 200

    serve(provider, scenario)
    assert provider.reloads == [None, None]


def test_reload_with_a_document_loads_it() -> None:
    provider = Provider()
    document = {"mysql_servers": [{"hostgroup_id": 20, "hostname": "db2"}]}

    async def scenario(http: aiohttp.ClientSession) -> None:
        status, body = await post(http, "/reload", json.dumps(document).encode())
        assert status == 200
        assert body["ok"] is True
        config = await get_json(http, "/config")
        assert config["document"] == document
        assert config["checksum"] == body["checksum"]
        assert config["source"] == "admin"

    serve(provider, scenario)
    assert provider.reloads == [document]


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        (b'{"mysql_servers": [', "not valid JSON"),
        (b'{"mysql_users": [{"username": "a"}], "mysql_users": []}', "the key 'mysql_users' appears twice"),
        (b"{'single': 'quotes'}", "Expecting property name"),
        (b"\xff\xfe\xfa", "not valid JSON"),
        (b"[1, 2]", "JSON object"),
        (b'"text"', "JSON object"),
    ],
)
def test_reload_with_a_bad_body_is_400(body: bytes, needle: str) -> None:
    provider = Provider()

    async def scenario(http: aiohttp.ClientSession) -> None:
        status, reply = await post(http, "/reload", body)
        assert status == 400
        assert needle in reply["error"]

    serve(provider, scenario)
    assert provider.reloads == []


def test_a_refused_reload_is_422_with_the_errors() -> None:
    provider = Provider()
    provider.refusal = ["mysql_servers[0].port: 70000 is above 65535", "mysql_users[1]: username is required"]
    before = provider.checksum

    async def scenario(http: aiohttp.ClientSession) -> None:
        status, body = await post(http, "/reload", b'{"mysql_servers": [{"hostname": "x", "port": 70000}]}')
        assert status == 422
        assert body["ok"] is False
        assert body["errors"] == provider.refusal
        assert body["checksum"] == before
        assert body["error"]
        assert (await get_json(http, "/config"))["checksum"] == before

    serve(provider, scenario)
    assert len(provider.reloads) == 1


@pytest.mark.parametrize("path", ["/", "/nope", "/stats/nope", "/metrics/extra"])
def test_unknown_paths_are_404_json(path: str) -> None:
    async def scenario(http: aiohttp.ClientSession) -> None:
        body = await get_json(http, path, status=404)
        assert path in body["error"]

    serve(Provider(), scenario)


def test_a_failing_provider_is_a_500_json_error() -> None:
    async def scenario(http: aiohttp.ClientSession) -> None:
        body = await get_json(http, "/stats", status=500)
        assert "internal error" in body["error"]
        assert await get_json(http, "/health") == {"status": "ok"}

    serve(BrokenProvider(), scenario)


# --- who may drive it ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path", ["/reload", "/runtime/monitor", "/runtime/workers", "/processlist/1/kill", "/stats/query_digest/reset"]
)
@pytest.mark.parametrize("shown", [None, "Bearer wrong-token-0123456789", f"Basic {TOKEN}", f"Bearer {TOKEN}x"])
def test_every_post_needs_the_admin_credential(path: str, shown: str | None) -> None:
    provider = Provider()

    async def scenario(http: aiohttp.ClientSession) -> None:
        headers = {"Authorization": shown} if shown else {}
        async with http.post(path, json={}, headers=headers) as resp:
            assert resp.status == 401
            assert resp.headers["WWW-Authenticate"] == 'Bearer realm="proxyfleet-admin"'
            assert "needs the admin credential" in (await resp.json())["error"]

    async def anonymous(http: aiohttp.ClientSession) -> None:  # a session without the default header
        async with aiohttp.ClientSession(base_url=http._base_url) as bare:
            await scenario(bare)

    serve(provider, anonymous)
    assert provider.reloads == []


def test_the_config_shows_its_secrets_only_to_the_credential() -> None:
    provider = Provider()
    provider.document = {
        "mysql_users": [{"username": "app", "password": "s3cret"}],
        "global_variables": [
            {"variable_name": "mysql-monitor_password", "variable_value": "m0n"},
            {"variable_name": "mysql-threads", "variable_value": "2"},
        ],
    }

    async def scenario(http: aiohttp.ClientSession) -> None:
        full = await get_json(http, "/config")
        assert full["document"] == provider.document
        async with aiohttp.ClientSession(base_url=http._base_url) as anonymous:
            masked = await get_json(anonymous, "/config")
        assert masked["secrets"] == "masked"
        assert masked["document"]["mysql_users"] == [{"username": "app", "password": "********"}]
        assert masked["document"]["global_variables"] == [
            {"variable_name": "mysql-monitor_password", "variable_value": "********"},
            {"variable_name": "mysql-threads", "variable_value": "2"},
        ]
        assert masked["checksum"] == full["checksum"]

    serve(provider, scenario)


@pytest.mark.parametrize(
    ("headers", "error"),
    [
        ({"Origin": "http://evil.example"}, "does not answer browsers"),
        ({"Origin": "null"}, "does not answer browsers"),
        ({"Host": "evil.example:6070"}, "loopback host only, not 'evil.example:6070'"),
        ({"Host": "10.0.0.1"}, "loopback host only"),
    ],
)
def test_browsers_and_foreign_host_names_are_refused_even_with_the_credential(
    headers: dict[str, str], error: str
) -> None:
    provider = Provider()

    async def scenario(http: aiohttp.ClientSession) -> None:
        for method, path in (("GET", "/config"), ("POST", "/reload")):
            async with http.request(method, path, headers=headers, data=b"{}") as resp:
                assert resp.status == 403
                assert error in (await resp.json())["error"]

    serve(provider, scenario)
    assert provider.reloads == []


@pytest.mark.parametrize("host", ["127.0.0.1:6070", "localhost", "LOCALHOST:1", "[::1]:6070", "[::1]", "::1"])
def test_loopback_host_names_are_answered(host: str) -> None:
    async def scenario(http: aiohttp.ClientSession) -> None:
        async with http.get("/health", headers={"Host": host}) as resp:
            assert resp.status == 200

    serve(Provider(), scenario)


def test_an_admin_endpoint_without_a_token_does_not_start() -> None:
    with pytest.raises(ValueError, match="needs an admin token"):
        AdminServer(Provider(), "127.0.0.1", 0)


# --- the test clock -----------------------------------------------------------------------------------------


def test_the_clock_cannot_be_moved_unless_the_proxy_was_started_for_tests() -> None:
    provider = Provider()

    async def scenario(http: aiohttp.ClientSession) -> None:
        async with http.post("/clock", json={"advance_s": 60}) as resp:
            assert resp.status == 404
            assert (await resp.json()) == {"error": "no such endpoint: /clock"}

    serve(provider, scenario)
    assert provider.clock.offset == 0


def test_a_movable_clock_moves_forward_only_by_a_sane_number_of_seconds() -> None:
    provider = Provider()

    async def scenario(http: aiohttp.ClientSession) -> None:
        async with http.post("/clock", json={"advance_s": 90}) as resp:
            assert (resp.status, await resp.json()) == (200, {"ok": True, "offset_s": 90.0})
        for bad, error in (
            (-1, "the clock moves forward by 0 to 86400 s, not -1.0"),
            (1e12, "the clock moves forward by 0 to 86400 s, not 1000000000000.0"),
            ("60", "advance_s must be a number of seconds, not '60'"),
            (True, "advance_s must be a number of seconds, not True"),
            (None, "advance_s must be a number of seconds, not None"),
        ):
            async with http.post("/clock", json={"advance_s": bad}) as resp:
                assert (resp.status, await resp.json()) == (400, {"error": error})

    serve(provider, scenario, clock_movable=True)
    assert provider.clock.offset == 90


# --- server lifecycle ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("host", ["0.0.0.0", "10.1.2.3", "::", "db.example.com", ""])
def test_only_loopback_addresses_are_accepted(host: str) -> None:
    with pytest.raises(ValueError, match="loopback"):
        AdminServer(Provider(), host, 0, TOKEN)


def test_localhost_means_127_0_0_1_and_the_default_port_is_6070() -> None:
    server = AdminServer(Provider(), "localhost", token=TOKEN)
    assert (server.host, server.port) == ("127.0.0.1", 6070)
    assert AdminServer(Provider(), "127.0.0.2", 0, TOKEN).host == "127.0.0.2"


def test_stop_closes_the_port() -> None:
    async def main() -> None:
        server = AdminServer(Provider(), "127.0.0.1", 0, TOKEN)
        await server.start()
        url = f"http://127.0.0.1:{server.port}/health"
        async with aiohttp.ClientSession() as http:
            async with http.get(url) as resp:
                assert resp.status == 200
            await server.stop()
            with pytest.raises(aiohttp.ClientConnectionError):
                async with http.get(url):
                    pass
        await server.stop()

    asyncio.run(main())


# --- /metrics -----------------------------------------------------------------------------------------------

NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
LABEL = r'[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*"'
VALUE = r"[-+]?(?:[0-9]+(?:\.[0-9]*)?(?:[eE][-+]?[0-9]+)?|\.[0-9]+(?:[eE][-+]?[0-9]+)?|Inf)|NaN"
SAMPLE_RE = re.compile(rf"({NAME})(?:\{{((?:{LABEL})(?:,{LABEL})*)?,?\}})? ({VALUE})(?: -?[0-9]+)?")
HELP_RE = re.compile(rf"# HELP ({NAME}) ((?:[^\\\n]|\\[\\n])*)")
TYPE_RE = re.compile(rf"# TYPE ({NAME}) (counter|gauge|histogram|summary|untyped)")
LABEL_RE = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"')


def unescape(text: str) -> str:
    """Undo the exposition format's escapes (backslash, double quote, newline)."""
    return re.sub(r"\\(.)", lambda m: "\n" if m.group(1) == "n" else m.group(1), text)


def parse_metrics(text: str) -> dict[str, dict[str, Any]]:
    """Parse an exposition, asserting the 0.0.4 grammar line by line; family name -> type, help, samples."""
    assert text.endswith("\n")
    families: dict[str, dict[str, Any]] = {}
    current: str | None = None
    for line in text[:-1].split("\n"):
        if m := HELP_RE.fullmatch(line):
            name = m.group(1)
            assert name not in families, f"second HELP for {name}"
            families[name] = {"help": unescape(m.group(2)), "type": None, "samples": []}
            current = name
        elif m := TYPE_RE.fullmatch(line):
            assert m.group(1) == current, f"TYPE {m.group(1)} not right after its HELP"
            assert families[current]["type"] is None and not families[current]["samples"]
            families[current]["type"] = m.group(2)
        elif m := SAMPLE_RE.fullmatch(line):
            assert m.group(1) == current, f"sample {m.group(1)} outside its family ({current})"
            assert families[current]["type"] is not None
            labels = {k: unescape(v) for k, v in LABEL_RE.findall(m.group(2) or "")}
            assert labels not in [s[0] for s in families[current]["samples"]], f"duplicate series: {line}"
            families[current]["samples"].append((labels, float(m.group(3))))
        else:
            pytest.fail(f"line outside the exposition grammar: {line!r}")
    return families


async def metrics(http: aiohttp.ClientSession) -> dict[str, dict[str, Any]]:
    """GET /metrics, check its content type, parse it."""
    async with http.get("/metrics") as resp:
        assert resp.status == 200
        assert resp.headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
        return parse_metrics(await resp.text())


def value(families: dict[str, dict[str, Any]], name: str, **labels: str) -> float:
    """The value of the one sample of ``name`` with exactly ``labels``."""
    matches = [v for lbl, v in families[name]["samples"] if lbl == labels]
    assert len(matches) == 1, (name, labels, families[name]["samples"])
    return matches[0]


def test_metrics_follow_the_grammar_and_report_the_snapshot() -> None:
    provider = busy_provider()
    provider.counters.Queries_backends_bytes_sent = 12345
    provider.counters.Mirror_concurrency = 2

    async def scenario(http: aiohttp.ClientSession) -> None:
        m = await metrics(http)
        assert all(f["type"] and f["help"] for f in m.values())
        assert all(name.startswith("proxyfleet_") for name in m)
        assert (m["proxyfleet_questions_total"]["type"], value(m, "proxyfleet_questions_total")) == ("counter", 42)
        assert m["proxyfleet_client_connections_connected"]["type"] == "gauge"
        assert value(m, "proxyfleet_client_connections_connected") == 3
        assert value(m, "proxyfleet_queries_backends_bytes_sent_total") == 12345
        assert value(m, "proxyfleet_mirror_concurrency") == 2
        assert value(m, "proxyfleet_mirror_queue_length") == 5
        assert m["proxyfleet_mirror_queue_length"]["type"] == "gauge"
        assert m["proxyfleet_uptime_seconds"]["type"] == "gauge"
        assert value(m, "proxyfleet_uptime_seconds") >= 0
        assert m["proxyfleet_com_commit_total"]["type"] == "counter"

        primary = {"hostgroup": "10", "endpoint": "127.0.0.1:3306"}
        replica = {"hostgroup": "20", "endpoint": "[::1]:3307"}
        assert value(m, "proxyfleet_connpool_conns", **primary, status="used") == 2
        assert value(m, "proxyfleet_connpool_conns", **primary, status="free") == 3
        assert value(m, "proxyfleet_connpool_conns", **replica, status="free") == 1
        assert value(m, "proxyfleet_connpool_server_status", **replica, status="SHUNNED") == 1
        assert value(m, "proxyfleet_connpool_conns_ok_total", **primary) == 6
        assert value(m, "proxyfleet_connpool_conns_err_total", **replica) == 4
        assert value(m, "proxyfleet_connpool_queries_total", **primary) == 1010
        assert value(m, "proxyfleet_connpool_latency_us", **primary) == 150
        assert value(m, "proxyfleet_connpool_bytes_data_recv_total", **replica) == 9020

        shop = {"hostgroup": "10", "username": "app", "schemaname": "shop"}
        assert value(m, "proxyfleet_query_digest_count_total", digest="0xA", **shop) == 2
        assert value(m, "proxyfleet_query_digest_count_total", digest="0xB", **shop) == 5
        assert value(m, "proxyfleet_query_digest_time_us_total", digest="0xA", **shop) == 1200
        assert value(m, "proxyfleet_query_digest_info", digest="0xB", digest_text="UPDATE t SET x=?") == 1

        assert value(m, "proxyfleet_query_rule_hits_total", rule_id="1") == 7
        assert value(m, "proxyfleet_query_rule_hits_total", rule_id="2") == 0
        assert value(m, "proxyfleet_config_info", checksum=provider.checksum, source=provider.source) == 1
        assert value(m, "proxyfleet_config_loaded_timestamp_seconds") == 1_700_000_000.25
        assert "proxyfleet_query_digest_overflow_total" not in m

    serve(provider, scenario)


def test_metrics_sum_digests_over_client_addresses_and_keep_the_top() -> None:
    provider = Provider()
    for n in range(150):
        for _ in range(n + 1):
            provider.digests.record(10, "db", "u", "10.0.0.1", f"0x{n:03d}", f"SELECT {n}", 5, 0, 0)
    for addr in ("10.0.0.2", "10.0.0.3"):
        provider.digests.record(10, "db", "u", addr, "0x000", "SELECT 0", 5, 0, 0)
    provider.extra = {"query_digest_overflow": 17}

    async def scenario(http: aiohttp.ClientSession) -> None:
        m = await metrics(http)
        counts = m["proxyfleet_query_digest_count_total"]["samples"]
        assert len(counts) == METRICS_TOP_DIGESTS == 100
        exported = {labels["digest"] for labels, _ in counts}
        assert exported == {f"0x{n:03d}" for n in range(50, 150)}
        assert (
            value(
                m, "proxyfleet_query_digest_count_total", digest="0x149", hostgroup="10", username="u", schemaname="db"
            )
            == 150
        )
        assert len(m["proxyfleet_query_digest_info"]["samples"]) == 100
        assert value(m, "proxyfleet_query_digest_overflow_total") == 17

    serve(provider, scenario)

    few = Provider()
    for addr in ("10.0.0.1", "10.0.0.2", "10.0.0.3"):
        few.digests.record(10, "db", "u", addr, "0xA", "SELECT 1", 5, 0, 0)

    async def aggregated(http: aiohttp.ClientSession) -> None:
        m = await metrics(http)
        assert m["proxyfleet_query_digest_count_total"]["samples"] == [
            ({"digest": "0xA", "hostgroup": "10", "username": "u", "schemaname": "db"}, 3.0)
        ]

    serve(few, aggregated)


def test_metrics_escape_label_values() -> None:
    provider = Provider()
    text = 'SELECT "a\\b" FROM t WHERE c = \'x\\\\y\'\nAND d = "\\n"'
    user = 'we"ird\\user'
    schema = "sch\nema"
    provider.digests.record(10, schema, user, "10.0.0.1", "0xE", text, 5, 0, 0)
    provider.pool_rows = [pool_row(1, 'h"o\\st', 3306, "ONLINE", 1, 1, 1)]

    async def scenario(http: aiohttp.ClientSession) -> None:
        async with http.get("/metrics") as resp:
            raw = await resp.text()
        assert '\\"a\\\\b\\"' in raw
        assert 'username="we\\"ird\\\\user"' in raw
        assert 'schemaname="sch\\nema"' in raw
        m = parse_metrics(raw)
        assert value(m, "proxyfleet_query_digest_info", digest="0xE", digest_text=text) == 1
        assert (
            value(
                m, "proxyfleet_query_digest_count_total", digest="0xE", hostgroup="10", username=user, schemaname=schema
            )
            == 1
        )
        assert value(m, "proxyfleet_connpool_latency_us", hostgroup="1", endpoint='h"o\\st:3306') == 1

    serve(provider, scenario)


def test_texts_that_are_not_utf8_are_served_escaped_by_stats_and_metrics() -> None:
    """A digest of ``SELECT `\\xff``` in schema ``db\\xfe`` (lone surrogates once decoded with surrogateescape): /stats
    and /metrics answer 200 with them as ``\\xff`` (the metrics' UTF-8 encoding refused them: 500 on every scrape
    until the digests were reset); so does a row that reached the snapshot unescaped (a label is shown first)."""
    provider = Provider()
    provider.digests.record(10, "db\udcfe", "app", "10.0.0.1", "0xE", "SELECT `\udcff`", 5, 0, 0)

    async def scenario(http: aiohttp.ClientSession) -> None:
        async with http.get("/stats") as resp:
            assert resp.status == 200
            raw = await resp.read()
        assert b"\\udc" not in raw
        [row] = json.loads(raw)["query_digest"]
        assert (row["schemaname"], row["digest_text"]) == ("db\\xfe", "SELECT `\\xff`")
        async with http.get("/metrics") as resp:
            assert resp.status == 200
            text = (await resp.read()).decode("utf-8")
        assert 'digest_text="SELECT `\\\\xff`"' in text  # the shown backslash, escaped as the format wants
        m = parse_metrics(text)
        assert value(m, "proxyfleet_query_digest_info", digest="0xE", digest_text="SELECT `\\xff`") == 1
        labels = {"hostgroup": "10", "username": "app", "schemaname": "db\\xfe"}
        assert value(m, "proxyfleet_query_digest_count_total", digest="0xE", **labels) == 1

    serve(provider, scenario)
    raw_rows = Provider()
    raw_rows.extra = {
        "query_digest": [{**provider.digests.rows()[0], "digest_text": "SELECT \udcff", "schemaname": "\udcfe"}]
    }

    async def unescaped(http: aiohttp.ClientSession) -> None:
        m = await metrics(http)
        assert value(m, "proxyfleet_query_digest_info", digest="0xE", digest_text="SELECT \\xff") == 1

    serve(raw_rows, unescaped)


def test_metrics_cut_long_digest_texts_and_export_unknown_counters_untyped() -> None:
    provider = ExtraCountersProvider()
    provider.digests.record(10, "db", "u", "10.0.0.1", "0xL", "SELECT " + "x, " * 500, 5, 0, 0)

    async def scenario(http: aiohttp.ClientSession) -> None:
        m = await metrics(http)
        [(labels, _)] = m["proxyfleet_query_digest_info"]["samples"]
        assert len(labels["digest_text"]) == 256
        assert labels["digest_text"].startswith("SELECT x, x, ")
        assert m["proxyfleet_backend_query_time_nsec"]["type"] == "untyped"
        assert value(m, "proxyfleet_backend_query_time_nsec") == 99
        assert not any("not_a_number" in name for name in m)

    serve(provider, scenario)


def test_metrics_of_an_idle_proxy_are_still_well_formed() -> None:
    provider = Provider()
    provider.pool_rows = []
    provider.rule_hits = {}

    async def scenario(http: aiohttp.ClientSession) -> None:
        m = await metrics(http)
        assert m["proxyfleet_connpool_conns"]["samples"] == []
        assert m["proxyfleet_query_digest_count_total"]["samples"] == []
        assert value(m, "proxyfleet_questions_total") == 0

    serve(provider, scenario)
