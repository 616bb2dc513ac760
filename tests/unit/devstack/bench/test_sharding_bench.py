"""The sharding benchmark's configs, statements, summary and report (no servers needed)."""

from __future__ import annotations

from devstack.bench.sharding_bench import (
    SECTION_TITLE,
    STATEMENTS,
    TARGETS,
    RunResult,
    Settings,
    percentile,
    proxy_config,
    render_markdown,
    summarize,
)
from devstack.sandbox import SandboxServer
from proxyapp.config.document import parse_config
from proxyapp.sharding.plan import plan
from proxyapp.sharding.shardmap import ShardMap

SERVERS = [
    SandboxServer(f"shard{n}", "primary", "127.0.0.1", 40000 + n, None, f"/tmp/d{n}", f"/tmp/s{n}", 1) for n in range(4)
]


def _settings() -> Settings:
    return Settings(
        rounds=1, seconds=5, warmup_seconds=0, rows=1000, cities=100, span=50, connections=50, many_connections=500
    )


def test_percentile_reads_the_histogram_cumulatively() -> None:
    histogram = [(1.0, 90), (2.0, 5), (3.0, 4), (9.0, 1)]
    assert (percentile(histogram, 90), percentile(histogram, 95), percentile(histogram, 99)) == (1.0, 2.0, 3.0)
    assert percentile(histogram, 100) == 9.0 and percentile([], 95) is None


def test_the_configs_are_valid_and_shard_only_their_own_layout() -> None:
    assert not ShardMap.build(parse_config(proxy_config(SERVERS, 0)))
    for shards in (2, 4):
        shard_map = ShardMap.build(parse_config(proxy_config(SERVERS, shards)))
        table = shard_map.find(f"shop{shards}", "tb_Shop")
        assert table is not None and [s.hostgroup_id for s in table.shards] == [100 + n for n in range(shards)]
        assert shard_map.find("shop1", "tb_Shop") is None  # the unsharded-traffic target's table


def test_point_selects_go_to_one_shard_and_the_scatters_to_every_one_merged() -> None:
    shard_map = ShardMap.build(parse_config(proxy_config(SERVERS, 4)))
    point = plan(STATEMENTS["point"] % 7, "shop4", shard_map)
    assert point is not None and point.shards == frozenset({3}) and not point.every and not point.refused
    for name, numbers in (("orderby", (10,)), ("groupby", (1, 50))):
        scatter = plan(STATEMENTS[name] % numbers, "shop4", shard_map)
        assert scatter is not None and scatter.every and scatter.gather is not None and not scatter.refused, name
    assert plan(STATEMENTS["point"] % 7, "shop1", shard_map) is None


def test_summary_and_report_give_medians_ratios_and_cpu_per_statement() -> None:
    settings = _settings()
    results = []
    tps = {"direct": 1000.0, "proxy": 500.0, "shards2": 250.0, "shards4": 200.0, "sharded_config": 400.0}
    for workload in settings.workloads():
        for key in workload.targets:
            result = RunResult(workload.key, key, 1, ["sysbench"], "var/x.log", 5.0, 0, tps=tps[key])
            result.transactions, result.ignored_errors = int(tps[key] * 5), 0
            result.cpu = {"cpu_others_pct": 0.0, "cores_sysbench": 0.1}
            if TARGETS[key].proxy:
                result.cpu[f"cores_proxy-{TARGETS[key].proxy}"] = 0.05  # 0.05 CPUs over 200 tps: 250 µs each
            result.server_statements = [int(tps[key] * 5)] * (4 if key == "shards4" else 1)
            results.append(result)
    summary = summarize(settings.workloads(), results)
    shards4 = summary["orderby"]["targets"]["shards4"]
    assert shards4["proxy_cpu_us_median"] == 250 and shards4["server_statements_median"] == 4
    doc = {
        "settings": settings.__dict__,
        "machine": {"nproc": 2},
        "checks": ["every target answered the probes as server 0 directly"],
        "runs": [],
        "summary": summary,
    }
    section = render_markdown(doc, "make bench-sharding")
    assert section.startswith(f"## {SECTION_TITLE}\n")
    title = summary["point"]["title"]
    row = f"| {title} | 1,000 | 500 | 250 | 200 | 0.50 | 0.25 | 0.20 | 0.50 | 0.40 | 100/200/250 | 0/0/0/0 |"
    assert row in section
    assert "| 500 | 400 | 0.80 | 100/125 | 0/0 |" in section
