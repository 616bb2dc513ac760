"""Merging the reports of several worker processes into the one report of their node: counters summed (a few
maxed), pool rows summed per server, digests combined by their key, the sharded tables' rows kept (worker 0 asks),
rule hits summed, server transitions kept once however many workers recorded them, mirror sections merged, the
PostgreSQL forwarding and pooling sections merged (figures summed per listener and per server). The
supervisor merges its workers' snapshots with it, and the control plane merges its nodes' digests with the same key.
"""

from __future__ import annotations

from typing import Any

from proxyapp.report.sharding import merge_rows as merge_sharding_rows

_SUMMED_POOL = (
    "ConnUsed",
    "ConnFree",
    "ConnOK",
    "ConnERR",
    "MaxConnUsed",
    "Queries",
    "Bytes_data_sent",
    "Bytes_data_recv",
)
_SUMMED_DIGEST = ("count_star", "sum_time", "sum_rows_affected", "sum_rows_sent")


def digest_key(row: dict[str, Any], schema_column: str = "schemaname") -> tuple[Any, ...]:
    """A digest row's key (stats_mysql_query_digest's; with ``schema_column="database"``, stats_pgsql_query_digest's):
    rows with the same key are one digest."""
    return (row["hostgroup"], row[schema_column], row["username"], row["client_address"], row["digest"])


_MAXED_COUNTERS = ("ProxySQL_Uptime", "Mirror_oldest_entry_age_ms")  # the others are summed
_TRANSITION_KEY = ("hostgroup", "srv_host", "srv_port", "from", "to", "reason")
#: Workers record the same transition when they apply the same monitor state: within this many seconds, one row.
SAME_TRANSITION_SECONDS = 5.0

_SUMMED_MIRROR = (
    "mirrored",
    "completed",
    "retried",
    "concurrency",
    "max_concurrency",
    "queue_length",
    "queue_proxysql",
    "queue_memory",
    "queue_disk",
    "memory_bytes",
    "memory_limit",
    "lanes",
    "lanes_waiting",
)


def merge_snapshots(snapshots: list[dict[str, Any]]) -> dict[str, Any]:
    """One snapshot from several workers': counters and pool figures summed, digests merged by key."""
    first = snapshots[0]
    counters: dict[str, int] = {}
    for snap in snapshots:
        for name, value in snap["global"].items():
            counters[name] = (
                max(counters.get(name, 0), value) if name in _MAXED_COUNTERS else counters.get(name, 0) + value
            )
    pools: dict[tuple[Any, ...], dict[str, Any]] = {}
    for snap in snapshots:
        for row in snap["connection_pool"]:
            key = (row["hostgroup"], row["srv_host"], row["srv_port"])
            merged = pools.get(key)
            if merged is None:
                pools[key] = dict(row)
                continue
            for name in _SUMMED_POOL:
                merged[name] += row[name]
            merged["Latency_us"] = max(merged["Latency_us"], row["Latency_us"])
    hits: dict[int, int] = {}
    for snap in snapshots:
        for row in snap["query_rules"]:
            hits[row["rule_id"]] = hits.get(row["rule_id"], 0) + row["hits"]
    out = dict(first)
    out["global"] = counters
    out["connection_pool"] = list(pools.values())
    out["query_digest"] = merge_digest_rows([row for snap in snapshots for row in snap["query_digest"]])
    out["query_digest_overflow"] = sum(snap.get("query_digest_overflow", 0) for snap in snapshots)
    pg_digests = [row for snap in snapshots for row in snap.get("pgsql_query_digest", [])]
    out["pgsql_query_digest"] = merge_digest_rows(pg_digests, "database")
    out["pgsql_query_digest_overflow"] = sum(snap.get("pgsql_query_digest_overflow", 0) for snap in snapshots)
    out["sharding_digest"] = merge_sharding_rows([row for snap in snapshots for row in snap.get("sharding_digest", [])])
    out["sharding_tables"] = [row for snap in snapshots for row in snap.get("sharding_tables", [])]  # worker 0's
    out["query_rules"] = [{"rule_id": k, "hits": v} for k, v in sorted(hits.items())]
    transitions = [row for snap in snapshots for row in snap.get("server_transitions", [])]
    out["server_transitions"] = merge_transitions(transitions)
    out["pgsql_forward"] = merge_forward_sections([snap.get("pgsql_forward", {}) for snap in snapshots])
    pooling = [snap["pgsql"] for snap in snapshots if "pgsql" in snap]
    if pooling:
        out["pgsql"] = merge_pgsql_sections(pooling)
    if all("mirror" in snap for snap in snapshots):
        out["mirror"] = merge_mirror_sections([snap["mirror"] for snap in snapshots])
    out["memory"] = {"workers": [row for snap in snapshots for row in snap.get("memory", {}).get("workers", [])]}
    out["workers"] = len(snapshots)
    return out


_SUMMED_FORWARD = {
    "listeners": (
        "connections_active",
        "connections_total",
        "connections_refused",
        "connections_spliced",
        "bytes_from_clients",
        "bytes_to_clients",
    ),
    "servers": ("connections_active", "connections_total", "connect_errors", "bytes_sent", "bytes_recv"),
}
_FORWARD_KEY = {"listeners": ("port",), "servers": ("hostgroup_id", "hostname", "port")}


def merge_forward_sections(sections: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """The forwarding listeners' sections of several workers as one: figures summed per listener and per server; a
    listener is "listening" only if every worker listens (else the first worker's error)."""
    out: dict[str, list[dict[str, Any]]] = {}
    for part, summed in _SUMMED_FORWARD.items():
        merged: dict[tuple[Any, ...], dict[str, Any]] = {}
        for section in sections:
            for row in section.get(part, []):
                key = tuple(row[k] for k in _FORWARD_KEY[part])
                into = merged.get(key)
                if into is None:
                    merged[key] = dict(row)
                    continue
                for name in summed:
                    into[name] += row[name]
                if part == "listeners" and into["state"] == "listening":
                    into["state"] = row["state"]
        out[part] = [merged[key] for key in sorted(merged)]
    return out


#: The counts of a worker's ``pgsql`` section, summed across workers.
PGSQL_COUNTS = (
    "clients_connected",
    "clients_total",
    "logins_failed",
    "transactions",
    "queries",
    "blocked",
    "timed_out",
    "waiting_clients",
    "query_cache_lookups",
    "query_cache_hits",
    "query_cache_stored",
    "query_cache_entries",
    "query_cache_bytes",
)
_SUMMED_PGSQL_POOL = ("ConnUsed", "ConnFree", "ConnOK", "ConnERR", "MaxConnUsed")


def merge_pgsql_sections(sections: list[dict[str, Any]]) -> dict[str, Any]:
    """The pooling proxy's sections of several workers as one: counts summed, pool rows summed per server (the first
    worker's status and reason); the listener is "listening" only if every worker listens (else the first worker's
    other state: "off", or its error)."""
    merged: dict[str, Any] = dict(sections[0])
    for name in PGSQL_COUNTS:
        merged[name] = sum(section[name] for section in sections)
    states = [section["listener"]["state"] for section in sections]
    state = next((state for state in states if state != "listening"), "listening")
    merged["listener"] = {**sections[0]["listener"], "state": state}
    pools: dict[tuple[Any, ...], dict[str, Any]] = {}
    for section in sections:
        for row in section["connection_pool"]:
            key = (row["hostgroup"], row["srv_host"], row["srv_port"])
            into = pools.get(key)
            if into is None:
                pools[key] = dict(row)
                continue
            for name in _SUMMED_PGSQL_POOL:
                into[name] += row[name]
    merged["connection_pool"] = [pools[key] for key in sorted(pools)]
    return merged


def merge_transitions(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Transition rows of several workers in time order, the same transition recorded by several workers within
    ``SAME_TRANSITION_SECONDS`` (they all apply the monitor's findings) kept once."""
    merged: list[dict[str, Any]] = []
    last_seen: dict[tuple[Any, ...], float] = {}
    for row in sorted(rows, key=lambda r: r["at"]):
        key = tuple(row[k] for k in _TRANSITION_KEY)
        if key in last_seen and row["at"] - last_seen[key] <= SAME_TRANSITION_SECONDS:
            continue
        last_seen[key] = row["at"]
        merged.append(row)
    return merged


def merge_digest_rows(rows: list[dict[str, Any]], schema_column: str = "schemaname") -> list[dict[str, Any]]:
    """Digest rows with the same key (from different workers) combined into one (``schema_column``: as in
    ``digest_key``)."""
    merged: dict[tuple[Any, ...], dict[str, Any]] = {}
    for row in rows:
        key = digest_key(row, schema_column)
        into = merged.get(key)
        if into is None:
            merged[key] = dict(row)
            continue
        for name in _SUMMED_DIGEST:
            into[name] += row[name]
        into["min_time"] = min(into["min_time"], row["min_time"])
        into["max_time"] = max(into["max_time"], row["max_time"])
        into["first_seen"] = min(into["first_seen"], row["first_seen"])
        into["last_seen"] = max(into["last_seen"], row["last_seen"])
    return list(merged.values())


def merge_mirror_sections(snapshots: list[dict[str, Any]]) -> dict[str, Any]:
    """One ``mirror`` section from several workers': counts summed, by-code and by-reason counts merged, the
    oldest age the largest, the first error found."""
    merged: dict[str, Any] = dict(snapshots[0])
    for name in _SUMMED_MIRROR:
        merged[name] = sum(int(s.get(name, 0)) for s in snapshots)
    for name in ("failed", "dropped"):
        totals: dict[str, int] = {}
        for s in snapshots:
            for key, n in s.get(name, {}).items():
                totals[key] = totals.get(key, 0) + int(n)
        merged[name] = dict(sorted(totals.items()))
    merged["oldest_age_s"] = max(float(s.get("oldest_age_s", 0)) for s in snapshots)
    merged["last_error"] = next((s["last_error"] for s in snapshots if s.get("last_error")), "")
    merged["spill_path"] = next((s["spill_path"] for s in snapshots if s.get("spill_path")), "")
    return merged
