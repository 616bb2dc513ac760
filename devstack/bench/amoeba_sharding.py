"""Amoeba's tb_Shop on two shards by ``City_ID % 2`` (issue 14), with the bench tool: direct on one server, through
ProxyFleet unsharded, and through ProxyFleet sharding the table over two servers, interleaved step by step, into
``docs/benchmarks.md`` (its section "Sharding: Amoeba's tb_Shop on two shards") with a PNG per statement.

``.venv/bin/python -m devstack.bench.amoeba_sharding [--quick]`` builds the proxy (it runs compiled), starts two
MariaDB servers (``var/bench-amoeba-shards``), a proxy in front of server 0 (one hostgroup) and a proxy sharding
``shards.tb_Shop`` over servers 0 and 1 (``mod`` on City_ID, Shop_ID numbered by the proxy's sequence so that ids
are unique across the shards, as Amoeba's statements by Shop_ID need), then runs Amoeba's four statements
(``fleet.bench.engine``'s ``shop-insert``, ``shop-update``, ``shop-select``, ``shop-delete``) at 50 to 500
connections. The update, select and delete name Shop_ID, not the shard key: on two shards each is a statement over
both (Amoeba's case too); the insert names City_ID and goes to one shard. Everything it started is stopped.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import random
import shlex
import subprocess
import sys
from typing import Any

import pymysql

from devstack.bench.field_notes import POOL, load
from devstack.bench.run_bench import write_report
from devstack.proxy import ProxyProcess
from devstack.sandbox import APP_PASSWORD, APP_USER, SandboxServer, shard_sandboxes
from devstack.stack import REPO
from fleet.bench.engine.plot import draw
from fleet.bench.engine.results import RunResult, sweep_table
from fleet.bench.engine.script import parse_script
from fleet.bench.engine.workloads import BUILTINS

OUT = REPO / "var" / "bench-amoeba-shards"
PLOTS = REPO / "docs" / "bench"
DOC = REPO / "docs" / "benchmarks.md"
SECTION = "## Sharding: Amoeba's tb_Shop on two shards"
TARGETS = ("direct", "proxyfleet", "shards2")
#: Each statement's load average before and after it.
LOADS: dict[str, tuple[str, str]] = {}
_ONE_WORKER = {"variable_name": "mysql-threads", "variable_value": "1"}
_MANY_CLIENTS = {"variable_name": "mysql-max_connections", "variable_value": "5000"}


def dsn(name: str, port: int, database: str = "test") -> str:
    """A target: ``database`` on ``port``, marked safe (the workloads create their tables)."""
    return f"mysql://{APP_USER}:{APP_PASSWORD}@127.0.0.1:{port}/{database}?name={name}&safe=1"


def plain_config(server: SandboxServer) -> dict[str, Any]:
    """The unsharded proxy: the app user to one hostgroup holding server 0."""
    return {
        "mysql_servers": [{"hostgroup_id": 0, "hostname": server.host, "port": server.port, "max_connections": POOL}],
        "mysql_users": [{"username": APP_USER, "password": APP_PASSWORD, "default_hostgroup": 0}],
        "global_variables": [_MANY_CLIENTS, _ONE_WORKER],
    }


def sharded_config(servers: list[SandboxServer]) -> dict[str, Any]:
    """The sharding proxy: ``shards.tb_Shop`` by City_ID mod 2 over hostgroups 100 (server 0) and 101 (server 1)."""
    return {
        "mysql_servers": [
            {"hostgroup_id": 100 + n, "hostname": s.host, "port": s.port, "max_connections": POOL}
            for n, s in enumerate(servers)
        ],
        "mysql_users": [{"username": APP_USER, "password": APP_PASSWORD, "default_hostgroup": 100}],
        "mysql_shards": [{"shard_group": "shops", "shard": n, "hostgroup_id": 100 + n} for n in range(len(servers))],
        "mysql_sharded_tables": [
            {
                "schemaname": "shards",
                "tablename": "tb_Shop",
                "shard_group": "shops",
                "algorithm": "mod",
                "shard_key": "City_ID",
                "sequence_column": "Shop_ID",
            }
        ],
        "global_variables": [_MANY_CLIENTS, _ONE_WORKER],
    }


def prepare_servers(servers: list[SandboxServer]) -> None:
    """The ``shards`` schema on both servers (and ``test`` on server 0), open to the app user; the sequence's
    table is the proxy's to create."""
    for n, server in enumerate(servers):
        with server.connect() as conn, conn.cursor() as cur:
            for schema in ("shards", "proxyfleet", *(("test",) if n == 0 else ())):
                cur.execute(f"CREATE DATABASE IF NOT EXISTS {schema}")
                cur.execute(f"GRANT ALL ON {schema}.* TO '{APP_USER}'@'%'")
            cur.execute("DROP TABLE IF EXISTS shards.tb_Shop")
            cur.execute("DROP TABLE IF EXISTS proxyfleet.sequences")


def _connect(port: int) -> pymysql.Connection:
    return pymysql.connect(
        host="127.0.0.1", port=port, user=APP_USER, password=APP_PASSWORD, database="shards", autocommit=True
    )


def prepare_through(script: str, port: int) -> None:
    """Run the script's ``prepare`` (its table created and filled) through the sharding proxy on ``port``: the bench
    tool prepares through its first target only (direct), whose database the sharded target does not share."""
    rng = random.Random(14)
    with _connect(port) as conn, conn.cursor() as cur:
        cur.execute("DROP TABLE IF EXISTS tb_Shop")
        for statement in parse_script(script).prepare:
            for sql in statement.render(rng, {}, {}):
                cur.execute(sql)


def run_op(op: str, sweep: str, seconds: str, warmup: str, ports: dict[str, int]) -> tuple[RunResult, str]:
    """Run one statement's sweep over the three targets; its result and the command as the docs show it."""
    key = f"amoeba-shards-{op}"
    result_path = OUT / f"{key}.json"
    builtin = BUILTINS[f"shop-{op}"]  # its table named tb_Shop, as the sharding proxy's config knows it
    script = OUT / f"shop-{op}.bench"
    script.write_text(builtin.make("tb_Shop", builtin.default_rows, builtin.default_batch))
    prepare_through(script.read_text(), ports["shards2"])
    args = ["--script", str(script.relative_to(REPO)), "--connections", sweep, "--time", seconds, "--warmup", warmup]
    targets = [
        "--target", dsn("direct", ports["direct"]),
        "--target", dsn("proxyfleet", ports["proxyfleet"]),
        "--target", dsn("shards2", ports["shards2"], "shards"),
    ]  # fmt: skip
    argv = [sys.executable, "-m", "fleet.bench.engine", "run", *targets, *args]
    argv += ["--json", str(result_path.relative_to(REPO)), "--quiet"]
    print(f"== Amoeba tb_Shop {op}", flush=True)
    before = load()
    done = subprocess.run(argv, cwd=REPO, env=dict(os.environ, PYTHONPATH=str(REPO)), text=True, capture_output=True)
    LOADS[key] = (before, load())
    (OUT / f"{key}.log").write_text(done.stdout + done.stderr)
    if not result_path.exists():
        raise RuntimeError(f"{key} wrote no result (exit {done.returncode}):\n{done.stdout[-2000:]}{done.stderr}")
    with _connect(ports["shards2"]) as conn, conn.cursor() as cur:
        cur.execute("DROP TABLE IF EXISTS tb_Shop")
    result = RunResult.from_dict(json.loads(result_path.read_text()))
    draw(result, "sweep", PLOTS / f"{key}.png", f"Amoeba tb_Shop {op}: direct, ProxyFleet, 2 shards")
    shown = [*args, "--json", f"{key}.json", "--plot", f"docs/bench/{key}.png"]
    shown[1] = f"shop-{op}.bench"
    command = 'python manage.py bench run --target "$DIRECT" --target "$PROXY" --target "$SHARDS2" '
    return result, command + shlex.join(shown)


def _fmt(value: float | None, spec: str = ",.0f") -> str:
    return "-" if value is None else format(value, spec)


def table(result: RunResult) -> list[str]:
    """tps per target per connection count, the ratios, p95 and errors."""
    lines = [
        "| connections | direct tps | ProxyFleet tps | 2 shards tps | ProxyFleet/direct | 2 shards/direct "
        "| 2 shards/ProxyFleet | p95 ms (d/P/2) | errors (d/P/2) |",
        "|---:|---:|---:|---:|---:|---:|---:|---|---|",
    ]
    for row in sweep_table(result):
        tps, p95, ratio, n = row["tps"], row["p95"], row["ratio"], row["connections"]
        plain, sharded = tps.get("proxyfleet"), tps.get("shards2")
        errors = "/".join(
            str(sum(s.error_count for s in result.steps if s.target == t and s.connections == n)) for t in TARGETS
        )
        lines.append(
            f"| {n} | {_fmt(tps.get('direct'))} | {_fmt(plain)} | {_fmt(sharded)} "
            f"| {_fmt(ratio.get('proxyfleet'), '.2f')} | {_fmt(ratio.get('shards2'), '.2f')} "
            f"| {_fmt(sharded / plain if sharded and plain else None, '.2f')} "
            f"| {'/'.join(_fmt(p95.get(t), '.1f') for t in TARGETS)} | {errors} |"
        )
    return lines


def machine(server: SandboxServer) -> str:
    """One line about the machine, the server and the proxies."""
    with server.connect() as conn, conn.cursor() as cur:
        cur.execute("SELECT VERSION()")
        version = cur.fetchone()[0]
    revision = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True)
    return (
        f"{datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC · {len(os.sched_getaffinity(0))} CPUs, "
        f"{platform.system()} {platform.release()} · MariaDB {version} (two sandbox servers) · ProxyFleet "
        f"{revision.stdout.strip()} compiled, mysql-threads 1, pool {POOL} backend connections per server · "
        f"Python {platform.python_version()}"
    )


def render(results: list[tuple[str, RunResult, str]], machine_line: str, command: str) -> str:
    """The docs section."""
    lines = [
        SECTION,
        "",
        f"Written by `{command}` (`devstack/bench/amoeba_sharding.py`): Amoeba's four tb_Shop statements (the field "
        "note's sharding test: `City_ID % 2` over two servers) run by the bench tool on three targets interleaved "
        "step by step; `shop-OP.bench` is the built-in workload `shop-OP` with its table named `tb_Shop` (prepared "
        "through the first target, and through the sharding proxy by the script). `$DIRECT` is server 0's `test` "
        "database; `$PROXY` the same through a proxy with one hostgroup (server 0); `$SHARDS2` the `shards` "
        "database through a proxy that shards `shards.tb_Shop` by City_ID mod 2 over servers 0 and 1, Shop_ID "
        "numbered by its sequence (`docs/sharding.md`). The update, select and delete name Shop_ID, not the shard "
        "key, so on two shards each runs on both (a scatter; an XA write over both, shard 0 then shard 1, when it "
        "changes rows); the insert goes to its City_ID's shard. Raw results in `var/bench-amoeba-shards/`.",
        "",
        f"- Machine: {machine_line}",
        "- Both servers, both proxies and the client share the machine's two cores: a second shard adds no CPU "
        "here, only work (the fan-out, the merge, two-phase commit), so the sharded ratios are a floor. Amoeba's "
        "note measured its sharded mode at up to 70 % below direct at low load.",
        "",
    ]
    for op, result, shown in results:
        key = f"amoeba-shards-{op}"
        before, after = LOADS.get(key, ("?", "?"))
        lines += [f"### Amoeba tb_Shop {op}, two shards", "", f"`{shown}`", "", *table(result), ""]
        lines += [f"Load average (1 min) before / after: {before} / {after}.", ""]
        lines += [f"![Amoeba tb_Shop {op} on two shards](bench/{key}.png)", ""]
        if result.unfinished():
            lines += [result.unfinished(), ""]
    return "\n".join(lines).rstrip() + "\n"


def main(argv: list[str] | None = None) -> int:
    """Start the servers and the proxies, run every statement's sweep, write the docs; always stop all of it."""
    parser = argparse.ArgumentParser(
        prog="python -m devstack.bench.amoeba_sharding", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--quick", action="store_true", help="fewer, shorter steps (to try the harness)")
    args = parser.parse_args(argv)
    sweep = "50..150/100" if args.quick else "50..500/150"
    seconds, warmup = ("2", "0.5") if args.quick else ("5", "1")
    OUT.mkdir(parents=True, exist_ok=True)
    PLOTS.mkdir(parents=True, exist_ok=True)
    build = subprocess.run([sys.executable, "-m", "proxyapp", "build"], cwd=REPO, text=True, capture_output=True)
    if build.returncode != 0:
        print(f"make build failed: the proxy would run uncompiled\n{build.stderr[-3000:]}", file=sys.stderr)
        return 1
    boxes = shard_sandboxes(2, OUT / "servers")
    proxies: list[ProxyProcess] = []
    try:
        for box in boxes:
            box.down()
            box.up(replicas=0)
        servers = [box.primary() for box in boxes]
        prepare_servers(servers)
        for name, document in (("plain", plain_config(servers[0])), ("shards2", sharded_config(servers))):
            workdir = OUT / name
            workdir.mkdir(exist_ok=True)
            proxies.append(ProxyProcess(document, workdir).start())
        ports = {"direct": servers[0].port, "proxyfleet": proxies[0].port, "shards2": proxies[1].port}
        results = []
        for op in ("insert", "update", "select", "delete"):
            result, shown = run_op(op, sweep, seconds, warmup, ports)
            results.append((op, result, shown))
            for row in sweep_table(result):
                print(f"   {row['connections']:>4} conns  {row['tps']}", flush=True)
        command = ".venv/bin/python -m devstack.bench.amoeba_sharding" + (" --quick" if args.quick else "")
        write_report(DOC, render(results, machine(servers[0]), command), SECTION.removeprefix("## "))
        print(f"wrote {DOC.relative_to(REPO)} and {PLOTS.relative_to(REPO)}/", flush=True)
        return 0
    finally:
        for proxy in proxies:
            proxy.stop()
        for box in boxes:
            box.down()


if __name__ == "__main__":
    sys.exit(main())
