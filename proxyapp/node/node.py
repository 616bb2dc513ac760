"""Node mode (``python -m proxyapp run --node NAME``): a proxy of a fleet, with its agent beside it.

A node keeps its state in its own directory, so that it starts and serves without the control plane:

- ``config.json``: the last config document the agent applied (the proxy's config file: the node starts from it,
  and ``kill -HUP`` re-reads it); ``{}`` (no servers, no users) until the first version arrives;
- ``applied.json``: which version that is: ``{"cluster", "version", "checksum", "applied_at", "cluster_uid",
  "signed_at"}``.

The agent (``proxyapp.node.agent``) runs as a child process of the proxy, started and restarted by ``serve_node``: its
blocking Celery consumer never shares the proxy's event loop, and a crash or a hang of the agent (a broker outage,
say) never touches client sessions. The broker URL reaches it in its environment (``BROKER_ENV``), never on its
command line, which any user of the host can read (``ps``): it may hold the broker's password.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
import signal
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from proxyapp import credential
from proxyapp.statefile import commit, stage, write_atomically

log = logging.getLogger("proxyapp.node.node")

#: What a node's name may be (the control plane's ``ProxyNode.name`` follows the same rule).
NODE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,62}")
#: The environment variable holding the broker URL: ``run --node``'s default for ``--broker``, and the agent's source.
BROKER_ENV = "REDIS_URL"
#: The environment variable holding the control plane's public key: ``run --node``'s default for
#: ``--signing-public-key``.
SIGNING_PUBLIC_KEY_ENV = "PROXYFLEET_SIGNING_PUBLIC_KEY"
#: Seconds between restarts of an agent that exited.
AGENT_RESTART_DELAY = 2.0


@dataclass(frozen=True)
class AppliedVersion:
    """The version a node's ``config.json`` holds, as the control plane numbered it."""

    cluster: str
    version: int
    checksum: str
    applied_at: str
    cluster_uid: str = ""  # the cluster's identity: a control plane made anew numbers its versions from 1 again
    signed_at: str = ""  # when the control plane signed it ("" when it came unsigned)


class NodeStore:
    """A node's state directory: its last applied config document and which version it is."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.config_path = directory / "config.json"
        self.applied_path = directory / "applied.json"
        #: The proxy's admin credential, beside its config (``proxyapp.credential``): the agent shows it.
        self.token_path = credential.default_path(self.config_path)

    def prepare(self) -> Path:
        """Create the directory, an empty config when there is none yet and the admin token when there is none;
        returns the config file's path."""
        self.directory.mkdir(parents=True, exist_ok=True)
        if not self.config_path.exists():
            write_atomically(self.config_path, "{}\n")
        credential.load_or_create(self.token_path)
        return self.config_path

    def applied(self) -> AppliedVersion | None:
        """The recorded version, or None when none was ever applied (or the record is unreadable)."""
        try:
            raw = json.loads(self.applied_path.read_text(encoding="utf-8"))
            return AppliedVersion(
                cluster=str(raw["cluster"]),
                version=int(raw["version"]),
                checksum=str(raw["checksum"]),
                applied_at=str(raw["applied_at"]),
                cluster_uid=str(raw.get("cluster_uid", "")),
                signed_at=str(raw.get("signed_at", "")),
            )
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError) as exc:
            log.error("%s is unreadable, treating the node as unversioned: %s", self.applied_path, exc)
            return None

    def stage(self, document: dict[str, Any], applied: AppliedVersion) -> StagedSave:
        """Write an applied document and its version beside their files, to be committed once the proxy runs it
        (``StagedSave``); OSError (a full disk) before anything changed: the proxy is then not switched."""
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.directory.chmod(0o700)  # the config holds the backends' passwords: nobody else on the host reads it
        config = stage(self.config_path, json.dumps(document, indent=1, sort_keys=True) + "\n")
        try:
            version = stage(self.applied_path, json.dumps(asdict(applied), indent=1) + "\n")
        except BaseException:
            config.unlink(missing_ok=True)
            raise
        return StagedSave(self, config, version)

    def save(self, document: dict[str, Any], applied: AppliedVersion) -> None:
        """Record an applied document at once (staged and committed)."""
        self.stage(document, applied).commit()


@dataclass(frozen=True)
class StagedSave:
    """A config and its version written beside their files: ``commit`` puts them in place (renames, no space
    needed), the config first, then its version; a crash in between leaves a config whose checksum differs from the
    recorded one, which the agent reports as no version, and the control plane re-sends it. ``discard`` drops
    them."""

    store: NodeStore
    config: Path
    version: Path

    def commit(self) -> None:
        commit(self.config, self.store.config_path)
        commit(self.version, self.store.applied_path)

    def discard(self) -> None:
        self.config.unlink(missing_ok=True)
        self.version.unlink(missing_ok=True)


def check_node_name(name: str) -> str:
    """``name`` if it can name a node (it is part of the queue name ``node.<name>``); ValueError otherwise."""
    if not NODE_NAME.fullmatch(name):
        raise ValueError(f"--node: {name!r} is not a node name (letters, digits, '.', '_' and '-', at most 63)")
    return name


def parse_hostgroups(text: str) -> frozenset[int]:
    """``"10,20"`` -> {10, 20}; ValueError naming the bad item."""
    found = set()
    for item in text.split(","):
        item = item.strip()
        if not item.isdigit():
            raise ValueError(f"--allowed-hostgroups: {item!r} is not a hostgroup number (use a list like 10,20)")
        found.add(int(item))
    return frozenset(found)


class AgentProcess:
    """The agent child process: started, restarted when it exits, stopped with the proxy; it gets the broker URL
    in its environment."""

    def __init__(self, argv: list[str], broker: str) -> None:
        self.argv = argv
        self.env = {**os.environ, BROKER_ENV: broker}
        self.proc: asyncio.subprocess.Process | None = None

    async def keep_running(self) -> None:
        """Run the agent until cancelled, restarting it whenever it exits."""
        while True:
            # Its own session: a terminal's Ctrl-C reaches the proxy, which then stops the agent itself.
            self.proc = await asyncio.create_subprocess_exec(*self.argv, env=self.env, start_new_session=True)
            code = await self.proc.wait()
            log.error("the node agent exited with status %s; restarting it in %.0f s", code, AGENT_RESTART_DELAY)
            await asyncio.sleep(AGENT_RESTART_DELAY)

    async def stop(self) -> None:
        """Stop the agent: SIGTERM (it finishes the apply in progress), SIGKILL after 15 s."""
        proc = self.proc
        if proc is None or proc.returncode is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(proc.wait(), 15)
        except TimeoutError:
            proc.kill()
            await proc.wait()


def agent_argv(
    node: str,
    admin: tuple[str, int],
    state_dir: Path,
    *,
    allowed_hostgroups: str | None,
    signing_public_key: str | None,
    report_interval: float,
    log_level: str,
) -> list[str]:
    """The command line of the agent child of this process (the broker URL goes in its environment)."""
    argv = [sys.executable, "-m", "proxyapp", "agent", "--node", node]
    argv += ["--admin", f"{admin[0]}:{admin[1]}", "--state-dir", str(state_dir)]
    argv += ["--report-interval", str(report_interval), "--parent-pid", str(os.getpid()), "--log-level", log_level]
    if allowed_hostgroups is not None:
        argv += ["--allowed-hostgroups", allowed_hostgroups]
    if signing_public_key is not None:
        argv += ["--signing-public-key", signing_public_key]
    return argv


async def serve_node(
    store: NodeStore, listen: tuple[str, int] | None, admin: tuple[str, int], agent_command: list[str], broker: str
) -> None:
    """Serve the node's last applied config (``store``) with the agent beside it, until SIGINT/SIGTERM."""
    from proxyapp.main import serve

    config_path = store.prepare()
    agent = AgentProcess(agent_command, broker)
    keeper = asyncio.get_running_loop().create_task(agent.keep_running())
    try:
        await serve(config_path, listen, admin)
    finally:
        keeper.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await keeper
        await agent.stop()
