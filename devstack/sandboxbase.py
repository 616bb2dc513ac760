"""What the MariaDB and PostgreSQL sandboxes share (``devstack/sandbox.py``, ``devstack/pgsandbox.py``): a primary and
replicas under one base directory whose state file records the servers started, so that status, stop, start, kill
and down act on those processes only; and the process helpers both use. Each engine's sandbox says how its state is
read and written, how its servers stop and how one starts (``ServerSandbox``'s abstract methods)."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Generic, Protocol, TypeVar

from devstack.stack import REPO


class SandboxError(RuntimeError):
    """A sandbox server could not be set up, started or found."""


@dataclass
class SandboxedServer:
    """What a sandbox knows of each of its servers, whatever the engine (each engine's server type adds its own);
    ``running``: whether its recorded process is alive right now."""

    name: str
    role: str  # "primary" or "replica"
    host: str
    port: int
    pid: int | None
    datadir: str
    running: bool = field(default=False, kw_only=True)

    @property
    def home(self) -> Path:
        """The server's directory: its datadir, log and the engine's other files are in it."""
        return Path(self.datadir).parent


class SandboxState(Protocol):
    """What a sandbox's state file holds: at least the servers started, primary first."""

    @property
    def servers(self) -> list: ...  # type: ignore[type-arg]  # each engine's own server type


S = TypeVar("S", bound=SandboxedServer)
St = TypeVar("St", bound=SandboxState)


def pid_alive(pid: int | None) -> bool:
    """Whether a process with this pid runs (a zombie does not)."""
    if not pid:
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:
            # The state follows the parenthesised command name, which may itself contain spaces.
            return f.read().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return False


def reap(pid: int) -> None:
    """Collect the exit status if the process is our own child, so it does not linger as a zombie."""
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


def wait_gone(pids: list[int], timeout: float) -> list[int]:
    """Wait until the processes have exited; returns those still alive after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        for pid in pids:
            reap(pid)
        pids = [pid for pid in pids if pid_alive(pid)]
        if not pids or time.monotonic() > deadline:
            return pids
        time.sleep(0.02)


def log_since(path: Path, offset: int) -> str:
    """What a server wrote to its log at ``path`` from byte ``offset`` on ("" when there is no log)."""
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            return f.read().decode(errors="replace")
    except OSError:
        return ""


def log_tail(path: Path, lines: int = 25) -> str:
    """The last ``lines`` lines of a server's log at ``path``."""
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return f"(no {path.name})"


class ServerSandbox(ABC, Generic[S, St]):
    """A primary and replicas under ``base_dir`` (relative paths are taken from the repository root), recorded in
    the state file ``state_name`` there."""

    #: How the sandbox is named in its errors.
    WHAT = "sandbox"
    #: The signal of a clean shutdown (``stop``) and of the one that throws the data away (``down``).
    STOP_SIGNAL = signal.SIGTERM
    DOWN_SIGNAL = signal.SIGKILL

    def __init__(self, base_dir: Path | str, state_name: str) -> None:
        base = Path(base_dir)
        self.base_dir = base if base.is_absolute() else REPO / base
        self.state_file = self.base_dir / state_name

    @abstractmethod
    def _load(self) -> St | None:
        """The state file read (each server's ``running`` found afresh); None when missing or unreadable."""

    @abstractmethod
    def _save(self, state: St) -> None:
        """Write the state file (atomically)."""

    @abstractmethod
    def _stop(self, servers: list[S], sig: int) -> None:
        """Signal the servers' processes (only those still ours) and wait until they are gone."""

    @abstractmethod
    def _launch(self, state: St, server: S, port_may_change: bool) -> None:
        """Start ``server`` on its datadir and wait until it is ready."""

    def status(self) -> list[S]:
        """The servers this sandbox started (primary first), each with whether it runs now; [] when not up."""
        state = self._load()
        return list(state.servers) if state else []

    def primary(self) -> S:
        """The primary server."""
        for server in self.status():
            if server.role == "primary":
                return server
        raise SandboxError(f"the {self.WHAT} in {self.base_dir} is not up")

    def replicas(self) -> list[S]:
        """The replica servers, in order."""
        return [s for s in self.status() if s.role == "replica"]

    def _server(self, state: St | None, name: str) -> S:
        for server in state.servers if state else []:
            if server.name == name:
                return server  # type: ignore[no-any-return]
        raise SandboxError(f"no {self.WHAT} server named {name!r} in {self.base_dir}")

    def down(self) -> None:
        """Stop the servers this sandbox started (only those: pids are checked against their datadirs) and remove
        the base directory. A stale or missing state file is fine."""
        state = self._load()
        if state:
            self._stop(list(state.servers), self.DOWN_SIGNAL)  # the data is thrown away: no clean shutdown
        shutil.rmtree(self.base_dir, ignore_errors=True)

    def stop(self, name: str | None = None) -> None:
        """Shut server ``name`` (every server when None) down cleanly; its data and port stay for ``up``/``start``."""
        state = self._load()
        servers = (list(state.servers) if state else []) if name is None else [self._server(state, name)]
        self._stop(servers, self.STOP_SIGNAL)

    def reap(self) -> None:
        """Collect the exit status of this sandbox's servers that ended while this process is their parent: one
        ``python -m devstack.sandboxes ENGINE stop NAME`` from another shell stopped stays a zombie until its parent
        does."""
        state = self._load()
        for server in state.servers if state else []:
            if server.pid:
                reap(server.pid)

    def kill(self, name: str, sig: int = signal.SIGKILL) -> None:
        """Stop one server with ``sig`` and wait until it is gone; its data stays for ``start``."""
        self._stop([self._server(self._load(), name)], sig)

    def start(self, name: str) -> S:
        """Start a stopped server again on its datadir and port (a replica resumes replicating by itself)."""
        state = self._load()
        server = self._server(state, name)
        if not server.running:
            assert state is not None
            self._launch(state, server, port_may_change=False)
            self._save(state)
        return server
