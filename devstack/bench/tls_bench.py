"""What TLS between clients and the proxy costs: point selects and new connections through one ProxyFleet, without
and with TLS, in interleaved rounds of the same run, reported as ratios (this machine is too noisy for absolutes).

``.venv/bin/python -m devstack.bench.tls_bench [--rounds 3] [--time 10] [--threads 8]`` starts a MariaDB sandbox
(primary only, ``var/bench-tls-sandbox``) filled by ``sysbench oltp_point_select prepare``, a CA and the proxy's
certificate signed by it, and one proxy process (``mysql-threads=1``); then per round: sysbench
``oltp_point_select`` with ``--mysql-ssl=off`` and ``on`` (libmariadb), and a PyMySQL loop of connect,
``SELECT 1``, close, in clear text and over TLS. The proxy's ``Client_Connections_tls`` counter is checked after
each run, so a run that did not use TLS as labelled is an error, not a number. Everything started is stopped at the
end; the Markdown table goes to stdout.
"""

from __future__ import annotations

import argparse
import os
import platform
import ssl
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from devstack.bench.run_bench import SB_DB, SB_PASSWORD, SB_USER, proxy_config, sysbench_connection_args
from devstack.proxy import ProxyProcess
from devstack.sandbox import Sandbox
from fleet.bench.engine.sysbench import parse_sysbench
from proxyapp.mysql.tls import make_certificate

SANDBOX_DIR = "var/bench-tls-sandbox"
TABLE_SIZE = 10_000


def tls_connections(proxy: ProxyProcess) -> int:
    """How many client connections the proxy upgraded to TLS so far."""
    return int(proxy.stats()["global"]["Client_Connections_tls"])


def make_certificates(directory: Path) -> dict[str, str]:
    """A CA, the proxy's certificate and a client's, signed by it, into ``directory`` under the file names sysbench
    1.0 reads from its working directory (``cacert.pem``, ``client-cert.pem``, ``client-key.pem``); returns the
    proxy's TLS variables."""
    ca = make_certificate("bench CA", is_ca=True)
    files = {
        "cacert.pem": ca[0],
        **dict(zip(("proxy-cert.pem", "proxy-key.pem"), make_certificate("bench proxy", issuer=ca), strict=True)),
        **dict(zip(("client-cert.pem", "client-key.pem"), make_certificate("bench client", issuer=ca), strict=True)),
    }
    for name, pem in files.items():
        (directory / name).write_bytes(pem)
    return {"mysql-ssl_cert": str(directory / "proxy-cert.pem"), "mysql-ssl_key": str(directory / "proxy-key.pem")}


def point_selects(proxy: ProxyProcess, tls: bool, threads: int, seconds: int) -> float:
    """Queries per second of sysbench oltp_point_select through ``proxy``, over TLS or not (its certificates are in
    the proxy's working directory)."""
    before = tls_connections(proxy)
    command = ["sysbench", "oltp_point_select", *sysbench_connection_args("127.0.0.1", proxy.port)]
    command += [f"--mysql-ssl={'on' if tls else 'off'}", f"--threads={threads}", f"--time={seconds}", "run"]
    command += [f"--table-size={TABLE_SIZE}"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=seconds + 60, cwd=proxy.workdir)
    report = parse_sysbench(done.stdout)
    if done.returncode != 0 or "qps" not in report or report["fatal"]:
        raise RuntimeError(f"sysbench failed ({done.returncode}):\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    upgraded = tls_connections(proxy) - before
    if upgraded < threads if tls else upgraded:
        raise RuntimeError(f"a run labelled tls={tls} made {upgraded} TLS connections for {threads} threads")
    return float(report["qps"])


def connections(proxy: ProxyProcess, tls: bool, seconds: float) -> float:
    """New connections per second (connect, ``SELECT 1``, close, one after the other) through ``proxy``."""
    context = ssl.create_default_context(cafile=str(proxy.workdir / "cacert.pem"))
    options = {"ssl": context} if tls else {"ssl_disabled": True}
    before = tls_connections(proxy)
    count = 0
    began = time.perf_counter()
    while time.perf_counter() - began < seconds:
        with proxy.connect(SB_USER, SB_PASSWORD, database=SB_DB, **options) as conn, conn.cursor() as cur:
            cur.execute("SELECT 1")
        count += 1
    rate = count / (time.perf_counter() - began)
    if (tls_connections(proxy) - before == count) != tls:
        raise RuntimeError(f"a connection run labelled tls={tls} did not use TLS as labelled")
    return rate


def main() -> int:
    """Run the rounds and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--time", type=int, default=10, dest="seconds", help="seconds per run")
    parser.add_argument("--threads", type=int, default=8, help="sysbench threads")
    args = parser.parse_args()
    box = Sandbox(SANDBOX_DIR)
    box.down()
    box.up(replicas=0)
    proxy: ProxyProcess | None = None
    try:
        primary = box.primary()
        with primary.connect() as conn, conn.cursor() as cur:
            cur.execute(f"CREATE USER IF NOT EXISTS '{SB_USER}'@'%' IDENTIFIED BY '{SB_PASSWORD}'")
            cur.execute(f"GRANT ALL ON *.* TO '{SB_USER}'@'%'")
            cur.execute(f"CREATE DATABASE IF NOT EXISTS {SB_DB}")
        prepare = ["sysbench", "oltp_point_select", *sysbench_connection_args(primary.host, primary.port)]
        subprocess.run([*prepare, f"--table-size={TABLE_SIZE}", "prepare"], check=True, capture_output=True)
        workdir = Path(tempfile.mkdtemp(prefix="tls-bench-"))
        config = proxy_config(primary, threads=1)
        tls_variables = make_certificates(workdir)
        config["global_variables"] += [{"variable_name": k, "variable_value": v} for k, v in tls_variables.items()]
        proxy = ProxyProcess(config, workdir)
        proxy.start()
        results: dict[str, list[float]] = {"qps plain": [], "qps tls": [], "conn plain": [], "conn tls": []}
        for round_no in range(1, args.rounds + 1):
            for tls in (False, True):
                label = "tls" if tls else "plain"
                results[f"qps {label}"].append(point_selects(proxy, tls, args.threads, args.seconds))
                results[f"conn {label}"].append(connections(proxy, tls, args.seconds / 2))
            print(f"round {round_no}: " + ", ".join(f"{k} {v[-1]:,.0f}" for k, v in results.items()), flush=True)
    finally:
        if proxy is not None:
            proxy.stop()
        box.down()
    print(render(results, args))
    return 0


def render(results: dict[str, list[float]], args: argparse.Namespace) -> str:
    """The Markdown table: medians, each round's TLS/plain ratio, and where it was measured."""

    def ratios(kind: str) -> list[float]:
        return [tls / plain for plain, tls in zip(results[f"{kind} plain"], results[f"{kind} tls"], strict=True)]

    lines = [
        f"`python -m devstack.bench.tls_bench --rounds {args.rounds} --time {args.seconds} --threads {args.threads}`"
        f" on {platform.node()} ({os.cpu_count()} CPUs, {platform.platform()}), load average after the runs: "
        f"{' '.join(Path('/proc/loadavg').read_text().split()[:3])}",
        "",
        "| measure | plain (median) | TLS (median) | TLS / plain, each round | median ratio |",
        "|---|---:|---:|---|---:|",
    ]
    for kind, name in (("qps", f"point select, {args.threads} threads (q/s)"), ("conn", "connect + SELECT 1 (conn/s)")):
        each = ratios(kind)
        lines.append(
            f"| {name} | {statistics.median(results[f'{kind} plain']):,.0f} | "
            f"{statistics.median(results[f'{kind} tls']):,.0f} | {', '.join(f'{r:.2f}' for r in each)} | "
            f"{statistics.median(each):.2f} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
