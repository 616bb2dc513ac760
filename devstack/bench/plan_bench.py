"""The sharding planner's CPU per statement, cold (each statement's shape analyzed) and warm (its shape's cached
template finished with its literals): ``.venv/bin/python -m devstack.bench.plan_bench [--calls N] [--repeat R]``.

A micro-benchmark of ``proxyapp.sharding.plan.plan`` alone, on the shard map of the planner's unit tests (tb_Shop on
4 shards by City_ID mod 4); it prints microseconds per call and whether the planner ran compiled (mypyc) or as
Python. Nothing is asserted: the numbers depend on the machine.
"""

from __future__ import annotations

import argparse
import time

from proxyapp.config.document import parse_config
from proxyapp.sharding import plan as planner
from proxyapp.sharding.shardmap import ShardMap

#: (what, statement): each call with its own literals, so that warm calls vary their values (a SELECT over several
#: shards also builds its gather, per statement).
STATEMENTS = (
    ("point select", "SELECT * FROM tb_Shop WHERE City_ID = {n}"),
    ("IN, one shard", "SELECT * FROM tb_Shop WHERE City_ID IN ({n}, {n4}, {n8})"),
    ("IN, 2 shards", "SELECT * FROM tb_Shop WHERE City_ID IN ({n}, {m}, {n4})"),
    ("scatter SELECT", "SELECT name, COUNT(*) FROM tb_Shop WHERE n > {n} GROUP BY name ORDER BY name LIMIT 10"),
    ("point UPDATE", "UPDATE tb_Shop SET name = 'x' WHERE City_ID = {n}"),
    ("INSERT of 2 rows", "INSERT INTO tb_Shop (City_ID, name) VALUES ({n}, 'a'), ({m}, 'b')"),
)


def shard_map() -> ShardMap:
    """tb_Shop in schema shop on 4 shards (hostgroups 100-103) by City_ID mod 4."""
    shards = [{"shard_group": "shops", "shard": n, "hostgroup_id": 100 + n} for n in range(4)]
    table = {"schemaname": "shop", "tablename": "tb_Shop", "shard_group": "shops", "algorithm": "mod"}
    table["shard_key"] = "City_ID"
    servers = [{"hostgroup_id": 100 + n, "hostname": "db"} for n in range(4)]
    return ShardMap.build(
        parse_config({"mysql_servers": servers, "mysql_shards": shards, "mysql_sharded_tables": [table]})
    )


def per_call(template: str, shard_map: ShardMap, calls: int, repeat: int, cold: bool) -> float:
    """Microseconds per ``plan`` call of ``template``'s statements, the cache cleared before each (``cold``) or not:
    the best of ``repeat`` runs of ``calls`` calls (the others were slowed by the rest of the machine)."""
    statements = [template.format(n=n, m=n + 1, n4=n + 4, n8=n + 8) for n in range(calls)]
    plans = shard_map.plans
    best = float("inf")
    for _ in range(repeat):
        plans.clear()
        planner.plan(statements[0], "shop", shard_map)
        started = time.perf_counter()
        for sql in statements:
            if cold:
                plans.clear()
            planner.plan(sql, "shop", shard_map)
        best = min(best, time.perf_counter() - started)
    return best / calls * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=5000, help="statements per run (default 5000)")
    parser.add_argument("--repeat", type=int, default=5, help="runs per measurement, the best counts (default 5)")
    args = parser.parse_args()
    calls, repeat = args.calls, args.repeat
    compiled = not (planner.__file__ or "").endswith(".py")
    print(f"proxyapp.sharding.plan {'compiled (mypyc)' if compiled else 'as Python'}: best of {repeat} runs of {calls}")
    shard_map_ = shard_map()
    for what, template in STATEMENTS:
        cold = per_call(template, shard_map_, calls, repeat, True)
        warm = per_call(template, shard_map_, calls, repeat, False)
        print(f"{what:18} cold {cold:7.1f} µs   warm {warm:7.1f} µs   ({cold / warm:.1f}x)")


if __name__ == "__main__":
    main()
