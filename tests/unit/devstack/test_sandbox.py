"""The MariaDB sandbox: servers up, replication working, kill/start, semi-sync, down, and the management command."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from devstack.sandbox import (
    Sandbox,
)


def test_down_leaves_alone_a_process_that_reused_a_recorded_pid(tmp_path: Path) -> None:
    stranger = subprocess.Popen(["sleep", "60"])
    try:
        base = tmp_path / "stale"
        base.mkdir()
        server = {
            "name": "primary",
            "role": "primary",
            "host": "127.0.0.1",
            "port": 1,
            "pid": stranger.pid,
            "datadir": str(base / "primary" / "data"),
            "socket": str(base / "primary" / "mysqld.sock"),
            "server_id": 1,
        }
        (base / "sandbox.json").write_text(json.dumps({"replicas": 0, "semi_sync": False, "servers": [server]}))
        box = Sandbox(base)
        assert [s.running for s in box.status()] == [False]
        box.down()
        assert stranger.poll() is None
        assert not base.exists()
    finally:
        stranger.kill()
        stranger.wait()
