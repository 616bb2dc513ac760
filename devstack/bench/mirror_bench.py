"""The field note's mirroring test through ProxyFleet, and what mirroring costs the primary path, in one run.

``.venv/bin/python -m devstack.bench.mirror_bench [--threads 40] [--inserts 3000] [--seconds 20] [--rounds 3]``
(``--quick`` for a small run) starts a primary and a mirror (two MariaDB sandboxes under ``var/bench-mirror``, the
mirror not replicating from the primary) and a proxy routing the ``app`` user to the primary with the note's rule
(every statement mirrored to hostgroup 700), then:

1. **The note's test**, in ProxySQL mode and in ordered lossless mode: the four tables, ``--threads`` clients x
   ``--inserts`` inserts each, ``mysql-mirror_max_concurrency=16``; it waits for the mirror to drain and reports
   the rows on the primary and on the mirror, ``CHECKSUM TABLE`` on both, the mirror's counters (mirrored,
   completed, failed, dropped by reason, spilled) and the peaks of its queue, concurrency and oldest entry's age.
2. **Primary-path throughput**: the same inserts for ``--seconds`` (after a warm-up) with the mirror off, on in
   ProxySQL mode and on in ordered lossless mode, interleaved over ``--rounds`` rounds, each step on a fresh proxy
   and empty tables; inserts per second the clients saw, the proxy's CPU per insert (its process tree's CPU time
   over the inserts), and the machine's other load.

The clients run in several processes (threads in each), so the Python client's lock is not what limits them. It
writes the raw results to ``var/bench-mirror/results.json`` and the ``## Mirroring`` section of
``docs/benchmarks.md``.

Why one file of this size: one program, its steps sharing the sandboxes, the proxy and the report they fill.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pymysql

from devstack.bench.mirror_workload import SCHEMA, TABLES, create_schema, insert_one, table_checks
from devstack.bench.run_bench import CpuSnapshot, descendants, write_report
from devstack.proxy import ProxyProcess
from devstack.sandbox import APP_PASSWORD, APP_USER, Sandbox
from devstack.stack import REPO
from fleet.core.mirrorcheck import Endpoint

WORK = REPO / "var" / "bench-mirror"
SECTION = "Mirroring"
PRIMARY_HG, MIRROR_HG = 10, 700
MODES = {"off": "mirror off", "proxysql": "ProxySQL mode", "ordered": "ordered lossless"}
#: ProxySQL's queue per worker in the note's test's second ProxySQL-mode run: small enough to overflow here.
NOTE_SMALL_QUEUE = 1000
#: How long the note's test may take to drain after its load, per mode.
DRAIN_LIMIT_S = 1800.0


@dataclass(frozen=True)
class Settings:
    """What a run does."""

    threads: int
    inserts: int
    seconds: float
    warmup: float
    rounds: int
    client_processes: int
    throughput_threads: int


def proxy_config(
    primary: Endpoint, mirror: Endpoint, mode: str, spill_dir: Path, queue_length: int | None = None
) -> dict[str, Any]:
    """The note's setup (rule 202: the app user's statements to the primary, mirrored to 700) in ``mode``, with
    ProxySQL's queue per worker at ``queue_length`` when given (its default 32000 otherwise)."""
    rule: dict[str, Any] = {"rule_id": 202, "active": 1, "username": APP_USER, "destination_hostgroup": PRIMARY_HG}
    if mode != "off":
        rule["mirror_hostgroup"] = MIRROR_HG
    variables = {"mysql-threads": "4", "mysql-mirror_max_concurrency": "16", "mysql-mirror_spill_dir": str(spill_dir)}
    if mode == "ordered":
        variables["mysql-mirror_ordered_hostgroups"] = f"{MIRROR_HG}:lossless"
    if queue_length is not None:
        variables["mysql-mirror_max_queue_length"] = str(queue_length)
    return {
        "mysql_servers": [
            {"hostgroup_id": PRIMARY_HG, "hostname": primary.host, "port": primary.port, "max_connections": 400},
            {"hostgroup_id": MIRROR_HG, "hostname": mirror.host, "port": mirror.port, "max_connections": 400},
        ],
        "mysql_users": [{"username": APP_USER, "password": APP_PASSWORD, "default_hostgroup": PRIMARY_HG}],
        "mysql_query_rules": [rule],
        "global_variables": [{"variable_name": k, "variable_value": v} for k, v in variables.items()],
    }


def start_proxy(config: dict[str, Any], name: str) -> ProxyProcess:
    """A proxy from ``config``, working in ``var/bench-mirror/NAME``."""
    workdir = WORK / name
    workdir.mkdir(parents=True, exist_ok=True)
    return ProxyProcess(config, workdir).start(timeout=60)


# ---------------------------------------------------------------------------------------------- clients


def _client_group(port: int, threads: list[int], inserts: int, start_at: float, stop_at: float) -> int:
    """One client process: a thread per id in ``threads``, each inserting ``inserts`` rows (0: until ``stop_at``,
    wall time); returns the inserts completed between ``start_at`` and ``stop_at`` (all of them with a count)."""
    counts = [0] * len(threads)

    def work(slot: int, thread: int) -> None:
        rng = random.Random(thread)
        conn = pymysql.connect(
            host="127.0.0.1", port=port, user=APP_USER, password=APP_PASSWORD, database=SCHEMA, autocommit=True
        )
        with conn, conn.cursor() as cur:
            step = 0
            while (inserts and step < inserts) or (not inserts and time.time() < stop_at):
                insert_one(cur, rng, thread, step)
                step += 1
                if inserts or start_at <= time.time() < stop_at:
                    counts[slot] += 1

    pool = [threading.Thread(target=work, args=(slot, t)) for slot, t in enumerate(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    return sum(counts)


def run_clients(port: int, settings: Settings, threads: int, inserts: int, start_at: float, stop_at: float) -> int:
    """``threads`` clients spread over the client processes; the inserts they counted."""
    groups = [list(range(p, threads, settings.client_processes)) for p in range(settings.client_processes)]
    with ProcessPoolExecutor(len(groups)) as pool:
        futures = [pool.submit(_client_group, port, g, inserts, start_at, stop_at) for g in groups if g]
        return sum(f.result() for f in futures)


# ---------------------------------------------------------------------------------------------- the note's test


class Peaks:
    """Polls a proxy's mirror while a test runs and keeps the highest queue, concurrency and oldest age seen."""

    def __init__(self, proxy: ProxyProcess) -> None:
        self.proxy = proxy
        self.queue = self.disk = self.concurrency = 0
        self.oldest = 0.0
        self.last: dict[str, Any] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._thread.start()

    def _poll(self) -> None:
        while not self._stop.wait(0.5):
            self.sample()

    def sample(self) -> dict[str, Any]:
        """The stats now (peaks updated)."""
        stats = self.proxy.stats()
        m = stats["mirror"]
        self.queue = max(self.queue, m["queue_length"])
        self.disk = max(self.disk, m["queue_disk"])
        self.concurrency = max(self.concurrency, m["concurrency"])
        self.oldest = max(self.oldest, m["oldest_age_s"])
        self.last = stats
        return stats

    def stop(self) -> None:
        """Stop polling."""
        self._stop.set()
        self._thread.join()


def note_test(
    primary: Endpoint, mirror: Endpoint, mode: str, settings: Settings, queue_length: int | None = None
) -> dict[str, Any]:
    """The note's insert test in ``mode``: rows and checksums on both sides, the mirror's counters and peaks."""
    create_schema(primary, mirror)
    name = f"note-{mode}" + (f"-queue{queue_length}" if queue_length is not None else "")
    proxy = start_proxy(proxy_config(primary, mirror, mode, WORK / name / "spill", queue_length), name)
    try:
        peaks = Peaks(proxy)
        started = time.monotonic()
        total = run_clients(proxy.port, settings, settings.threads, settings.inserts, 0.0, 0.0)
        loaded = time.monotonic() - started
        deadline = time.monotonic() + DRAIN_LIMIT_S
        while True:
            m = peaks.sample()["mirror"]
            if m["queue_length"] == m["concurrency"] == m["lanes"] == 0 or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        drained = time.monotonic() - started - loaded
        peaks.stop()
        stats = peaks.last
    finally:
        proxy.stop()
    checks = table_checks(primary, mirror)
    m = stats["mirror"]
    label = MODES[mode] + (f", mysql-mirror_max_queue_length={queue_length}" if queue_length is not None else "")
    return {
        "mode": mode,
        "label": label,
        "inserts": total,
        "load_s": round(loaded, 1),
        "drain_s": round(drained, 1),
        "tables": [
            {
                "table": c.table,
                "primary_rows": c.primary_rows,
                "mirror_rows": c.mirror_rows,
                "checksums_equal": c.primary_checksum == c.mirror_checksum,
                "equal": c.equal,
            }
            for c in checks
        ],
        "primary_rows": sum(c.primary_rows or 0 for c in checks),
        "mirror_rows": sum(c.mirror_rows or 0 for c in checks),
        "mirrored": m["mirrored"],
        "completed": m["completed"],
        "failed": m["failed"],
        "dropped": m["dropped"],
        "retried": m["retried"],
        "spilled": stats["global"].get("Mirror_queries_spilled", 0),
        "peak_queue": peaks.queue,
        "peak_disk": peaks.disk,
        "peak_concurrency": peaks.concurrency,
        "peak_oldest_age_s": round(peaks.oldest, 1),
        "native": stats.get("native", []),
    }


# ---------------------------------------------------------------------------------------------- throughput


def _truncate(*servers: Endpoint) -> None:
    for server in servers:
        with server.connect() as conn, conn.cursor() as cur:
            for table in TABLES:
                cur.execute(f"TRUNCATE TABLE {SCHEMA}.{table}")


def throughput_step(
    primary: Endpoint, mirror: Endpoint, mode: str, round_no: int, settings: Settings, roles: dict[int, str]
) -> dict[str, Any]:
    """One measured step: fresh tables and proxy, warm-up, then inserts for ``settings.seconds``."""
    _truncate(primary, mirror)
    proxy = start_proxy(proxy_config(primary, mirror, mode, WORK / f"step-{mode}-{round_no}" / "spill"), "step")
    try:
        assert proxy.proc is not None
        proxy_pids = {proxy.proc.pid, *descendants(proxy.proc.pid)}
        start_at = time.time() + settings.warmup
        stop_at = start_at + settings.seconds
        result: dict[str, int] = {}
        clients = threading.Thread(
            target=lambda: result.update(
                n=run_clients(proxy.port, settings, settings.throughput_threads, 0, start_at, stop_at)
            )
        )
        clients.start()
        time.sleep(max(0.0, start_at - time.time()))
        before = CpuSnapshot.take()
        time.sleep(max(0.0, stop_at - time.time()))
        after = CpuSnapshot.take()
        clients.join()
        m = proxy.stats()["mirror"]
    finally:
        proxy.stop()
    step_roles = {**roles, **dict.fromkeys(proxy_pids, "proxy")}
    cpu = before.until(after, step_roles)
    inserts = result["n"]
    proxy_cpu_s = cpu.get("cores_proxy", 0.0) * settings.seconds
    return {
        "mode": mode,
        "round": round_no,
        "inserts": inserts,
        "inserts_per_s": round(inserts / settings.seconds, 1),
        "proxy_cpu_us_per_insert": round(proxy_cpu_s / inserts * 1e6, 1) if inserts else None,
        "cores_proxy": cpu.get("cores_proxy"),
        "cpu_others_pct": cpu.get("cpu_others_pct"),
        "mirror_completed": m["completed"],
        "mirror_queue_at_end": m["queue_length"],
        "mirror_dropped": sum(m["dropped"].values()),
    }


# ---------------------------------------------------------------------------------------------- the report


def machine(primary: Endpoint) -> dict[str, Any]:
    """The machine and the versions the numbers come from."""
    cpu_model = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if "model name" in line
        ),
        "unknown",
    )
    memory = next(line.split()[1] for line in Path("/proc/meminfo").read_text().splitlines() if "MemTotal" in line)
    with primary.connect() as conn, conn.cursor() as cur:
        cur.execute("SELECT VERSION()")
        mariadb = cur.fetchone()[0]
    revision = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return {
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "nproc": len(os.sched_getaffinity(0)),
        "cpu_model": cpu_model,
        "memory": f"{int(memory) / 1024 / 1024:.1f} GiB RAM",
        "kernel": f"{platform.system()} {platform.release()}",
        "mariadb": mariadb,
        "python": platform.python_version(),
        "revision": revision.stdout.strip(),
        "loadavg_before": " / ".join(f"{x:.2f}" for x in os.getloadavg()),
    }


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{k}: {v:,}" for k, v in counts.items()) or "0"


def section(results: dict[str, Any], command: str) -> str:
    """The Markdown section."""
    m, s = results["machine"], results["settings"]
    lines = [
        f"## {SECTION}",
        "",
        f"Written by `{command}` (`devstack/bench/mirror_bench.py`) on {m['date']}, revision {m['revision']}.",
        f"Machine: {m['nproc']} CPUs ({m['cpu_model']}), {m['memory']}, {m['kernel']}; MariaDB {m['mariadb']} "
        f"(primary and mirror: two sandboxes on this machine), Python {m['python']}; load average before "
        f"{m['loadavg_before']}, after {m['loadavg_after']}. The proxy ran its default worker processes "
        "(mysql-threads 4, capped at the CPUs), "
        + (
            f"its mypyc-compiled modules ({len(results['note'][0]['native'])})"
            if results["note"][0]["native"]
            else "as plain Python (the native build was stale)"
        )
        + f"; the clients ran in {s['client_processes']} processes.",
        "",
        f"### The field note's test: {s['threads']} clients x {s['inserts']:,} inserts, "
        "mysql-mirror_max_concurrency=16",
        "",
        "The four tables (AUTO_INCREMENT key, mid-size row, the same partitioned, client-generated UUID key), each "
        "client inserting into them in turn with autocommit, every statement mirrored (the note's rule 202: the "
        "clients' connection set-up statements too, hence 40 more statements than inserts in ProxySQL mode). Counts "
        "once the mirror had drained; the peaks were sampled every 0.5 s.",
        "",
        "| mode | rows on primary | rows on mirror | tables equal (rows and CHECKSUM TABLE) | statements mirrored "
        "/ completed | dropped | failed | spilled to disk | peak queue | peak concurrency | peak oldest age | load | "
        "drain after load |",
        "|---|---:|---:|---|---:|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results["note"]:
        equal = sum(t["equal"] for t in r["tables"])
        lines.append(
            f"| {r['label']} | {r['primary_rows']:,} | {r['mirror_rows']:,} | {equal} of {len(r['tables'])} | "
            f"{r['mirrored']:,} / {r['completed']:,} | {_counts(r['dropped'])} | {_counts(r['failed'])} | "
            f"{r['spilled']:,} | {r['peak_queue']:,} | "
            f"{r['peak_concurrency']} | {r['peak_oldest_age_s']} s | {r['load_s']} s | {r['drain_s']} s |"
        )
    lines += ["", "Per table (rows on primary / on mirror, checksums equal):", ""]
    for r in results["note"]:
        tables = "; ".join(
            f"{t['table']} {t['primary_rows']:,} / {t['mirror_rows']:,}"
            + ("" if t["checksums_equal"] else " (checksums differ)")
            for t in r["tables"]
        )
        lines.append(f"- {r['label']}: {tables}.")
    lines += [
        "",
        f"### Primary-path throughput: {s['throughput_threads']} clients inserting for {s['seconds']:g} s, "
        f"{s['rounds']} interleaved rounds",
        "",
        "Each step on a fresh proxy with empty tables, after a warm-up of "
        f"{s['warmup']:g} s; inserts per second the clients completed (medians of the rounds), the proxy's CPU per "
        "insert (its processes' CPU time over the inserts, background mirroring included), and the ratio to the "
        "mirror off.",
        "",
        "| mode | inserts/s (median) | rounds | proxy CPU per insert | ratio to mirror off | "
        "mirror backlog at the end |",
        "|---|---:|---|---:|---:|---:|",
    ]
    off = results["throughput_median"]["off"]
    for mode, median in results["throughput_median"].items():
        steps = [t for t in results["throughput"] if t["mode"] == mode]
        rounds = ", ".join(f"{t['inserts_per_s']:,.0f}" for t in steps)
        cpu = statistics.median(t["proxy_cpu_us_per_insert"] for t in steps if t["proxy_cpu_us_per_insert"])
        backlog = ", ".join(f"{t['mirror_queue_at_end']:,}" for t in steps)
        lines.append(f"| {MODES[mode]} | {median:,.0f} | {rounds} | {cpu:,.0f} µs | {median / off:.2f} | {backlog} |")
    others = [t["cpu_others_pct"] for t in results["throughput"] if t["cpu_others_pct"] is not None]
    if others:
        lines += ["", f"Other processes on the machine used up to {max(others):.0f}% of its CPUs during the steps."]
    return "\n".join([*lines, "", "Reading the numbers:", "", *_reading(results)]) + "\n"


def _reading(results: dict[str, Any]) -> list[str]:
    """What the tables say, in sentences computed from them."""
    out = []
    for r in results["note"]:
        dropped = sum(r["dropped"].values())
        equal = sum(t["equal"] for t in r["tables"])
        missing = r["primary_rows"] - r["mirror_rows"]
        accounted = "all of them counted as dropped" if dropped == missing else f"{dropped:,} counted as dropped"
        if r["mode"] == "ordered":
            out.append(
                f"- {r['label']}: {r['mirror_rows']:,} of {r['primary_rows']:,} rows on the mirror, {equal} of "
                f"{len(r['tables'])} tables equal by row count and CHECKSUM TABLE, nothing dropped or failed; the "
                f"backlog peaked at {r['peak_queue']:,} statements ({r['peak_oldest_age_s']} s old) and drained "
                f"{r['drain_s']} s after the load."
            )
        elif missing:
            out.append(
                f"- {r['label']}: {missing:,} inserts never reached the mirror, {accounted}; {equal} of "
                f"{len(r['tables'])} tables equal."
            )
        else:
            out.append(
                f"- {r['label']}: every insert reached the mirror here (the queue peaked at {r['peak_queue']:,}), yet "
                f"only {equal} of {len(r['tables'])} tables are equal: out of order, the mirror hands out its own "
                "AUTO_INCREMENT values, so the same rows carry other keys (the UUID table, keyed by the client, "
                "matches)."
            )
    cpu = {
        mode: statistics.median(
            t["proxy_cpu_us_per_insert"]
            for t in results["throughput"]
            if t["mode"] == mode and t["proxy_cpu_us_per_insert"]
        )
        for mode in MODES
    }
    out.append(
        "- The primary path never waits for the mirror (the tap only queues); what the mirror-on steps lose is CPU: "
        f"the proxy spends {cpu['proxysql'] / cpu['off'] - 1:+.0%} (ProxySQL mode) and "
        f"{cpu['ordered'] / cpu['off'] - 1:+.0%} (ordered) per insert doing the mirror's work as well, and the mirror "
        "MariaDB runs every insert a second time, all on the same CPUs as the primary, the proxy and the clients. "
        "Ordered mode also replays each generated key (SET insert_id) and runs each session's statements one after "
        "another."
    )
    return out


# ---------------------------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    """Run everything; returns the exit status."""
    parser = argparse.ArgumentParser(prog="python -m devstack.bench.mirror_bench", description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="a small run: 8 clients x 200, 5 s steps, 1 round")
    parser.add_argument("--threads", type=int, help="clients of the note's test (default 40)")
    parser.add_argument("--inserts", type=int, help="inserts per client (default 3000)")
    parser.add_argument("--seconds", type=float, help="measured seconds per throughput step (default 20)")
    parser.add_argument("--rounds", type=int, help="interleaved throughput rounds (default 3)")
    parser.add_argument("--throughput-threads", type=int, default=16, help="clients of the throughput steps")
    parser.add_argument("--client-processes", type=int, default=4, help="processes the clients run in")
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "benchmarks.md", help="the Markdown report")
    args = parser.parse_args(argv)
    quick = args.quick
    settings = Settings(
        threads=args.threads or (8 if quick else 40),
        inserts=args.inserts or (200 if quick else 3000),
        seconds=args.seconds or (5.0 if quick else 20.0),
        warmup=1.0 if quick else 3.0,
        rounds=args.rounds or (1 if quick else 3),
        client_processes=args.client_processes,
        throughput_threads=args.throughput_threads,
    )
    WORK.mkdir(parents=True, exist_ok=True)
    boxes = [Sandbox(WORK / "primary"), Sandbox(WORK / "mirror")]
    try:
        for box in boxes:
            box.up(replicas=0)
        primary = Endpoint("127.0.0.1", boxes[0].primary().port)
        mirror = Endpoint("127.0.0.1", boxes[1].primary().port)
        roles = {boxes[0].primary().pid or 0: "primary", boxes[1].primary().pid or 0: "mirror"}
        results: dict[str, Any] = {
            "settings": asdict(settings),
            "machine": machine(primary),
            "note": [],
            "throughput": [],
        }
        # ProxySQL's default queue, then one small enough to overflow (its drops must all be counted), then ordered.
        for mode, queue_length in (("proxysql", None), ("proxysql", NOTE_SMALL_QUEUE), ("ordered", None)):
            print(f"the note's test, {MODES[mode]}: {settings.threads} x {settings.inserts} inserts", flush=True)
            results["note"].append(note_test(primary, mirror, mode, settings, queue_length))
            print(json.dumps(results["note"][-1]), flush=True)
        create_schema(primary, mirror)
        for round_no in range(1, settings.rounds + 1):
            for mode in MODES:
                step = throughput_step(primary, mirror, mode, round_no, settings, roles)
                print(json.dumps(step), flush=True)
                results["throughput"].append(step)
        results["throughput_median"] = {
            mode: statistics.median(t["inserts_per_s"] for t in results["throughput"] if t["mode"] == mode)
            for mode in MODES
        }
        results["machine"]["loadavg_after"] = " / ".join(f"{x:.2f}" for x in os.getloadavg())
    finally:
        for box in boxes:
            box.down()
    (WORK / "results.json").write_text(json.dumps(results, indent=2))
    command = "python -m devstack.bench.mirror_bench " + " ".join(argv if argv is not None else sys.argv[1:])
    write_report(args.out, section(results, command.strip()), SECTION)
    print(f"report written to {args.out} (## {SECTION}); raw results in {WORK / 'results.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
