"""The PostgreSQL sandbox's parts that need no server: finding the binaries, a stale state file, a TLS mode checked."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from devstack.pgsandbox import STATE_FILE, PgSandbox, bin_dir
from devstack.sandbox import SandboxError


def test_bin_dir_is_the_newest_version(tmp_path: Path) -> None:
    for version in ("9.6", "15", "16", "100-not-a-server"):
        (tmp_path / version / "bin").mkdir(parents=True)
    for version in ("9.6", "15", "16"):
        (tmp_path / version / "bin" / "postgres").touch()
    assert bin_dir(tmp_path) == tmp_path / "16" / "bin"


def test_bin_dir_names_the_missing_package(tmp_path: Path) -> None:
    with pytest.raises(SandboxError, match="install postgresql"):
        bin_dir(tmp_path)


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
            "socket_dir": str(base / "primary"),
        }
        (base / STATE_FILE).write_text(json.dumps({"replicas": 0, "settings": {}, "servers": [server]}))
        box = PgSandbox(base)
        assert [s.running for s in box.status()] == [False]
        box.down()
        assert stranger.poll() is None
        assert not base.exists()
    finally:
        stranger.kill()
        stranger.wait()


def test_up_refuses_an_unknown_tls_mode_before_starting_anything(tmp_path: Path) -> None:
    box = PgSandbox(tmp_path / "box")
    with pytest.raises(SandboxError, match="tls must be one of off, on, required, not 'yes'"):
        box.up(replicas=0, tls="yes")
    assert not box.base_dir.exists()
