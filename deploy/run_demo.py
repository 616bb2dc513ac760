"""`make run`: the whole product on one machine, until Ctrl-C.

For now: a sandbox primary and replica, and a proxy node on 127.0.0.1:6033 (admin 127.0.0.1:6070) with a
read/write-split demo config. The control plane joins here as it is built.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from fleet.sandbox import Sandbox  # noqa: E402

DEMO_USER, DEMO_PASSWORD = "app", "app-pass"


def demo_config(primary_port: int, replica_ports: list[int]) -> dict:
    """Writer hostgroup 10, reader hostgroup 20, the classic two routing rules."""
    servers = [{"hostgroup_id": 10, "hostname": "127.0.0.1", "port": primary_port, "comment": "primary"}]
    servers += [{"hostgroup_id": 20, "hostname": "127.0.0.1", "port": p, "comment": "replica"} for p in replica_ports]
    return {
        "mysql_servers": servers,
        "mysql_users": [{"username": DEMO_USER, "password": DEMO_PASSWORD, "default_hostgroup": 10}],
        "mysql_query_rules": [
            {"rule_id": 1, "active": 1, "match_digest": "^SELECT.*FOR UPDATE", "destination_hostgroup": 10, "apply": 1},
            {"rule_id": 2, "active": 1, "match_digest": "^SELECT", "destination_hostgroup": 20, "apply": 1},
        ],
        "mysql_replication_hostgroups": [{"writer_hostgroup": 10, "reader_hostgroup": 20}],
    }


def main() -> int:
    """Bring everything up, wait for Ctrl-C, bring it down."""
    sandbox = Sandbox("var/sandbox")
    print("starting the MariaDB sandbox (primary + 1 replica)...", flush=True)
    sandbox.up(replicas=1)
    with sandbox.primary().connect() as conn, conn.cursor() as cur:
        cur.execute(f"CREATE USER IF NOT EXISTS '{DEMO_USER}'@'%' IDENTIFIED BY '{DEMO_PASSWORD}'")
        cur.execute(f"GRANT ALL ON *.* TO '{DEMO_USER}'@'%'")
        cur.execute("CREATE DATABASE IF NOT EXISTS app")
    config_path = REPO / "var" / "demo-config.json"
    config_path.write_text(
        json.dumps(demo_config(sandbox.primary().port, [r.port for r in sandbox.replicas()]), indent=2)
    )
    proxy = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "proxyapp",
            "run",
            "--config",
            str(config_path),
            "--listen",
            "127.0.0.1:6033",
            "--admin",
            "127.0.0.1:6070",
        ],
        cwd=REPO,
    )
    print(
        f"\nProxyFleet is up:\n  mysql -h 127.0.0.1 -P 6033 -u {DEMO_USER} -p{DEMO_PASSWORD} app\n"
        "  stats: http://127.0.0.1:6070/stats   metrics: http://127.0.0.1:6070/metrics\n"
        "Ctrl-C stops everything.",
        flush=True,
    )
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        while proxy.poll() is None:
            time.sleep(0.5)
        print(f"the proxy exited with status {proxy.returncode}", file=sys.stderr)
    except KeyboardInterrupt:
        pass
    finally:
        proxy.terminate()
        proxy.wait(10)
        sandbox.down()
        print("stopped.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
