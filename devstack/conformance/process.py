"""A suite's subprocess bounded in time: its own process group, its output in a log file, and a watchdog that ends
the whole group (SIGTERM, then SIGKILL) when the deadline passes."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

#: How long a process group has between SIGTERM and SIGKILL.
GRACE_S = 10.0


@dataclass(frozen=True)
class Finished:
    """How a bounded run ended."""

    returncode: int
    timed_out: bool
    seconds: float


def run_bounded(command: list[str], *, cwd: Path, env: dict[str, str], log: Path, timeout: float) -> Finished:
    """Run ``command`` with its output appended to ``log``; past ``timeout`` seconds its process group is ended."""
    started = time.monotonic()
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as out:
        out.write(f"$ {' '.join(command)}\n".encode())
        out.flush()
        proc = subprocess.Popen(command, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            code = proc.wait(timeout)
            timed_out = False
        except subprocess.TimeoutExpired:
            timed_out = True
            _end_group(proc)
            code = proc.returncode
            out.write(f"\n[conformance] watchdog: stopped after {timeout:.0f} s\n".encode())
    return Finished(code, timed_out, time.monotonic() - started)


def _end_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the child's process group, SIGKILL to it if the child is still there after ``GRACE_S``."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(GRACE_S)
            break
        except subprocess.TimeoutExpired:
            continue
    if proc.poll() is None:
        proc.wait()
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)  # what the child left behind in its group (pool workers)
