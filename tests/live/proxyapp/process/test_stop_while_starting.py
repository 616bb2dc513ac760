"""A service manager's SIGTERM to a proxy while its workers start (issue 42, item 9): the start stops where it is,
the workers started so far are stopped too, and the proxy exits cleanly with none of its processes left behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from devstack.ports import free_port
from devstack.proxy import rw_split_config
from devstack.sandbox import Sandbox
from devstack.stack import REPO, wait_until

WORKERS = 2  # as many as the machine has CPUs at most (mysql-threads is capped so)


def session_processes(sid: int) -> set[int]:
    """The processes of session ``sid`` (the proxy's own: it was started in a session of its own)."""
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rpartition(")")[2].split()
            except OSError:  # gone meanwhile
                continue
            if int(fields[3]) == sid and fields[0] != "Z":  # the 6th field of stat: the session
                found.add(int(entry.name))
    return found


@pytest.mark.parametrize("workers_seen", [1, WORKERS], ids=["the first worker forked", "every worker forked"])
def test_a_sigterm_while_the_workers_start_leaves_no_process(
    sandbox: Sandbox, tmp_path: Path, workers_seen: int
) -> None:
    config = rw_split_config(
        sandbox.primary().port,
        [r.port for r in sandbox.replicas()],
        global_variables=[{"variable_name": "mysql-threads", "variable_value": str(WORKERS)}],
    )
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    argv = [sys.executable, "-m", "proxyapp", "run", "--config", str(path), "--listen", f"127.0.0.1:{free_port()}",
            "--admin", f"127.0.0.1:{free_port()}"]  # fmt: skip
    with (tmp_path / "proxy.log").open("wb") as log:
        proc = subprocess.Popen(argv, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_until(lambda: len(session_processes(proc.pid)) > workers_seen, f"{workers_seen} workers forked", 60)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0, (tmp_path / "proxy.log").read_text()
        assert session_processes(proc.pid) == set(), (tmp_path / "proxy.log").read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
        for pid in session_processes(proc.pid):
            os.kill(pid, signal.SIGKILL)
