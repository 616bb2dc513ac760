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

from fleet.demo import demo_config  # noqa: E402
from fleet.sandbox import APP_PASSWORD, APP_USER, Sandbox  # noqa: E402


def main() -> int:
    """Bring everything up, wait for Ctrl-C, bring it down."""
    sandbox = Sandbox("var/sandbox")
    print("starting the MariaDB sandbox (primary + 1 replica)...", flush=True)
    sandbox.up(replicas=1)
    config_path = REPO / "var" / "demo-config.json"
    config_path.write_text(json.dumps(demo_config(sandbox), indent=2))
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
        f"\nProxyFleet is up:\n  mysql -h 127.0.0.1 -P 6033 -u {APP_USER} -p{APP_PASSWORD} app\n"
        "  stats: http://127.0.0.1:6070/stats   metrics: http://127.0.0.1:6070/metrics\n"
        "Ctrl-C stops everything.",
        flush=True,
    )
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    status = 0
    try:
        while proxy.poll() is None:
            time.sleep(0.5)
        print(f"the proxy exited with status {proxy.returncode}", file=sys.stderr)
        status = proxy.returncode or 1
    except KeyboardInterrupt:
        pass
    finally:
        proxy.terminate()
        try:
            proxy.wait(10)
        except subprocess.TimeoutExpired:
            proxy.kill()
            proxy.wait()
        sandbox.down()
        print("stopped.")
    return status


if __name__ == "__main__":
    sys.exit(main())
