"""The node agent: applies the versions the control plane pushes, and reports the node's statistics.

It is a plain Celery worker (no Django) beside the proxy, started by ``python -m proxyapp run --node NAME`` as a child
process (see ``proxyapp.node.node``). It consumes only its node's queue ``node.<name>`` (unique worker name, one message
at a time, acknowledged after the task ran) and talks to the proxy only through the loopback admin endpoint. The
contract is docs/control-plane.md ("Push protocol"):

- ``proxyfleet.node.apply(cluster, cluster_uid, version, checksum, document, signed_at, signature)``: idempotent.
  The signature is checked first when the node has the control plane's public key (``proxyapp.node.signature``),
  then the version (never older than the one the node runs), then the document (the proxy's own validation, the
  checksum, the node's own limits); it is loaded with ``POST /reload`` (sessions in flight keep running), saved on
  the node's disk, and acknowledged with ``proxyfleet.fleet.ack``; a refused message is acknowledged ``ok=False``
  with the reason while the proxy keeps its running config.
- every ``report_interval`` seconds, ``proxyfleet.fleet.report``: what the node runs and its ``/stats`` snapshot
  (the digest table cut to its ``TOP_DIGESTS`` busiest rows, the sharding digests to the ``TOP_DIGESTS`` that
  scatter most).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from celery import Celery
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from kombu import Queue

from proxyapp import credential
from proxyapp.config.document import ConfigError, parse_config
from proxyapp.node.node import AppliedVersion, NodeStore
from proxyapp.node.signature import SignatureError, SignedConfig, verify
from proxyapp.report.sharding import most_scattered
from proxyapp.report.stats import order_digest_rows

log = logging.getLogger("proxyapp.node.agent")

APPLY_TASK = "proxyfleet.node.apply"
ACK_TASK = "proxyfleet.fleet.ack"
REPORT_TASK = "proxyfleet.fleet.report"
FLEET_QUEUE = "fleet"
#: How many digest rows (by total time) and sharding digest rows (by scatters) a report carries.
TOP_DIGESTS = 50
#: How long an apply waits for the proxy's admin endpoint to answer before giving up (the push is then re-sent).
ADMIN_WAIT_SECONDS = 15.0
#: Redis redelivers a message not acknowledged within this many seconds; far above any apply's duration.
VISIBILITY_TIMEOUT = 3600


class AdminUnavailable(Exception):
    """The proxy's admin endpoint does not answer, or its credential cannot be read."""


@dataclass(frozen=True)
class AgentSettings:
    """What an agent needs to know about its node."""

    node: str
    broker: str
    admin: tuple[str, int]
    state_dir: Path
    report_interval: float = 5.0
    #: Hostgroups this node may serve; None: any. A config with servers in another one is refused.
    allowed_hostgroups: frozenset[int] | None = None
    #: The control plane's public keys (several while its key is changed): every config must be signed with the
    #: private half of one of them. Empty: configs are applied unchecked (a node set up before signing existed).
    signing_public_keys: tuple[Ed25519PublicKey, ...] = ()


class AdminClient:
    """The proxy's loopback admin endpoint, over plain blocking HTTP."""

    def __init__(self, address: tuple[str, int], token_path: Path, timeout: float = 30) -> None:
        self.base = f"http://{address[0]}:{address[1]}"
        self.token_path = token_path  # the admin credential's file (``proxyapp.credential``), read at each call
        self.timeout = timeout

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        """``(status, decoded JSON)``; AdminUnavailable when the endpoint cannot be reached."""
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.base + path, data=data, method=method)
        request.add_header("Content-Type", "application/json")
        try:
            request.headers.update(credential.header(credential.read(self.token_path)))
        except credential.CredentialError as exc:
            raise AdminUnavailable(str(exc)) from None
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read() or b"{}")
        except (OSError, ValueError) as exc:
            raise AdminUnavailable(f"{self.base}{path}: {exc}") from None

    def wait_ready(self, timeout: float) -> None:
        """Return once ``/health`` answers; AdminUnavailable after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                self.call("GET", "/health")
                return
            except AdminUnavailable:
                if time.monotonic() >= deadline:
                    raise
                time.sleep(0.2)

    def running_checksum(self) -> str:
        """The checksum of the config the proxy runs."""
        status, body = self.call("GET", "/config")
        if status != 200:
            raise AdminUnavailable(f"GET /config answered {status}: {body}")
        return str(body["checksum"])


def _earlier(signed_at: str, than: str) -> bool:
    """Whether ``signed_at`` is before ``than`` (ISO 8601 times with their offsets); a time that does not read counts
    as earlier, unless ``than`` is empty (the config the node runs came unsigned: nothing to compare with)."""
    if not than:
        return False
    try:
        return datetime.fromisoformat(signed_at) < datetime.fromisoformat(than)
    except (ValueError, TypeError):
        return True


def now_iso() -> str:
    """The current time, ISO 8601 in UTC (the ``at`` of acks and reports)."""
    return datetime.now(UTC).isoformat()


class Agent:
    """Applies pushed versions to the proxy and builds its reports; ``apply`` and ``report`` return the task kwargs
    to send, so the Celery wiring (``build_app``) stays apart from the logic."""

    def __init__(self, settings: AgentSettings) -> None:
        self.settings = settings
        self.store = NodeStore(settings.state_dir)
        self.admin = AdminClient(settings.admin, self.store.token_path)

    def _ack(self, version: int, checksum: str, error: str = "") -> dict[str, Any]:
        return {
            "node": self.settings.node,
            "version": version,
            "checksum": checksum,
            "ok": not error,
            "error": error,
            "at": now_iso(),
        }

    def apply(
        self,
        cluster: str,
        version: int,
        checksum: str,
        document: Any,
        cluster_uid: str = "",
        signed_at: str = "",
        signature: str = "",
    ) -> dict[str, Any]:
        """Bring the proxy to ``version``; returns the ack's kwargs. ValueError for a message of the wrong types
        (nothing to acknowledge); raises AdminUnavailable (nothing is acked then; the control plane's reconcile
        sends the version again).

        Version numbers are compared only within one cluster identity (name and ``cluster_uid``): a control plane
        whose database was made anew numbers from 1 again, and its versions must not be ignored as late; a signed
        message of another identity must have been signed after the config the node runs."""
        if not isinstance(version, int) or isinstance(version, bool) or version < 1:
            raise ValueError(f"apply: version must be a positive whole number, not {version!r}")
        texts = {"cluster": cluster, "cluster_uid": cluster_uid, "checksum": checksum, "signed_at": signed_at}
        for name, value in (*texts.items(), ("signature", signature)):
            if not isinstance(value, str):
                raise ValueError(f"apply: {name} must be text, not {value!r}")
        keys = self.settings.signing_public_keys
        if keys:
            try:
                verify(
                    keys,
                    SignedConfig(cluster, cluster_uid, version, checksum, document, signed_at),
                    self.settings.node,
                    signature,
                )
            except SignatureError as exc:
                log.error("version %d of cluster %s refused, nothing applied: %s", version, cluster, exc)
                return self._ack(version, checksum, str(exc))
        self.admin.wait_ready(ADMIN_WAIT_SECONDS)
        running = self.admin.running_checksum()
        applied = self.store.applied()
        same_cluster = applied is not None and (applied.cluster, applied.cluster_uid) == (cluster, cluster_uid)
        if applied is not None and same_cluster and applied.checksum == running:
            if applied.version > version:  # a late message: the node already runs a newer version
                log.info("version %d is older than the running version %d; nothing to do", version, applied.version)
                return self._ack(applied.version, applied.checksum)
            if applied.version == version and applied.checksum == checksum:
                return self._ack(version, checksum)
        older = self._older(applied, same_cluster, version, signed_at)
        if older:
            return self._refuse(version, checksum, running, older)
        errors = self.refusals(document, checksum)
        if errors:
            return self._refuse(version, checksum, running, *errors)
        try:  # saved before the switch: a node that cannot keep a version does not run it
            staged = self.store.stage(
                document, AppliedVersion(cluster, version, checksum, now_iso(), cluster_uid, signed_at)
            )
        except OSError as exc:
            return self._refuse(version, checksum, running, f"cannot save version {version} in "
                                f"{self.store.directory}: {exc}")  # fmt: skip
        try:
            if running != checksum:
                status, body = self.admin.call("POST", "/reload", document)
                if status != 200 or not body.get("ok"):
                    reasons = body.get("errors") or [body.get("error") or f"the proxy answered HTTP {status}"]
                    log.error("the proxy refused version %d: %s", version, "; ".join(map(str, reasons)))
                    staged.discard()
                    return self._ack(version, checksum, "\n".join(map(str, reasons)))
            staged.commit()
        except BaseException:
            staged.discard()
            raise
        log.info("cluster %s version %d (%s) applied", cluster, version, checksum[:12])
        return self._ack(version, checksum)

    def _older(self, applied: AppliedVersion | None, same_cluster: bool, version: int, signed_at: str) -> str:
        """Why a message is older than the config the node applied ("" when it is not): a lower version of the same
        cluster identity, or, from another identity, a signature made before the applied one's (a replay of what
        the node was sent earlier). Applying it would roll the node back."""
        if applied is None:
            return ""
        if same_cluster and applied.version > version:
            return f"version {version} is older than version {applied.version} this node applied: not rolled back"
        if not same_cluster and self.settings.signing_public_keys and _earlier(signed_at, applied.signed_at):
            return (
                f"signed at {signed_at or '(no time)'}, before version {applied.version} of cluster {applied.cluster} "
                f"this node applied (signed at {applied.signed_at}): not rolled back"
            )
        return ""

    def _refuse(self, version: int, checksum: str, running: str, *errors: str) -> dict[str, Any]:
        """Log why ``version`` is refused and return the ack saying it."""
        log.error("version %d refused, keeping config %s: %s", version, running[:12], "; ".join(errors))
        return self._ack(version, checksum, "\n".join(errors))

    def refusals(self, document: Any, checksum: str) -> list[str]:
        """Why this node refuses ``document`` (empty: it accepts it): the proxy's validation, the checksum the
        control plane computed, and the hostgroups this node may serve."""
        try:
            config = parse_config(document)
        except ConfigError as exc:
            return list(exc.errors)
        if config.checksum != checksum:
            return [f"checksum mismatch: the document's is {config.checksum}, the message says {checksum}"]
        allowed = self.settings.allowed_hostgroups
        if allowed is not None:
            outside = sorted({s.hostgroup_id for s in config.mysql_servers} - allowed)
            if outside:
                shown = ", ".join(map(str, sorted(allowed)))
                return [
                    f"mysql_servers: hostgroup {h} is not served by node {self.settings.node} "
                    f"(it serves hostgroups {shown}: --allowed-hostgroups)"
                    for h in outside
                ]
        return []

    def report(self) -> dict[str, Any]:
        """The report's kwargs: what the proxy runs (the version only when the saved record matches the running
        checksum) and its statistics. Raises AdminUnavailable."""
        at = now_iso()
        status, stats = self.admin.call("GET", "/stats")
        if status != 200:
            raise AdminUnavailable(f"GET /stats answered {status}: {stats}")
        running = str(stats["config"]["checksum"])
        applied = self.store.applied()
        stats["query_digest"] = order_digest_rows(stats.get("query_digest", []), TOP_DIGESTS, "sum_time")
        stats["pgsql_query_digest"] = order_digest_rows(stats.get("pgsql_query_digest", []), TOP_DIGESTS, "sum_time")
        stats["sharding_digest"] = most_scattered(stats.get("sharding_digest", []), TOP_DIGESTS)
        return {
            "node": self.settings.node,
            "at": at,
            "applied_version": applied.version if applied is not None and applied.checksum == running else None,
            "applied_checksum": running,
            "stats": stats,
        }


def build_app(agent: Agent) -> Celery:
    """The agent's Celery app: only the node's queue, one message at a time, acknowledged after the task."""
    settings = agent.settings
    queue = f"node.{settings.node}"
    app = Celery(f"proxyfleet-node-{settings.node}", broker=settings.broker, set_as_current=True)
    app.conf.update(
        task_queues=[Queue(queue)],
        task_default_queue=queue,
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        task_ignore_result=True,
        worker_prefetch_multiplier=1,
        worker_concurrency=1,
        worker_hijack_root_logger=False,
        broker_transport_options={"visibility_timeout": VISIBILITY_TIMEOUT},
        broker_connection_retry_on_startup=True,
        broker_connection_max_retries=None,  # a broker outage is waited out, however long
    )

    @app.task(name=APPLY_TASK, acks_late=True, reject_on_worker_lost=True)
    def apply(**message: Any) -> None:
        try:
            ack = agent.apply(**message)
        except (TypeError, ValueError) as exc:  # missing, unknown or mistyped fields: no version to acknowledge
            log.error("refused a malformed %s message, nothing applied: %s", APPLY_TASK, exc)
            return
        app.send_task(ACK_TASK, kwargs=ack, queue=FLEET_QUEUE)

    return app


#: How often the reporter asks the proxy whether its monitor's findings changed (then it reports at once).
MONITOR_POLL_SECONDS = 0.5


class Reporter(threading.Thread):
    """Sends a report right away, then every ``report_interval`` seconds, and at once when the monitor's findings
    change (a shunned primary reaches the control plane's failover in a second, not a report interval); a failure
    is logged once per outage."""

    def __init__(self, agent: Agent, app: Celery) -> None:
        super().__init__(name="reporter", daemon=True)
        self.agent = agent
        self.app = app
        self.failing = False

    def run(self) -> None:
        """Report until the process ends."""
        interval = self.agent.settings.report_interval
        with contextlib.suppress(AdminUnavailable):  # reported below, as any other failure
            self.agent.admin.wait_ready(ADMIN_WAIT_SECONDS)
        while True:
            try:
                report = self.agent.report()
                # A report that waited long in the broker is of no use: it expires (the next one is on its way).
                self.app.send_task(REPORT_TASK, kwargs=report, queue=FLEET_QUEUE, expires=max(60.0, 10 * interval))
                if self.failing:
                    log.info("reporting again")
                self.failing = False
            except Exception as exc:
                if not self.failing:
                    log.warning("cannot report (retrying every %.0f s): %s", interval, exc)
                self.failing = True
            self._wait(interval)

    def _wait(self, interval: float) -> None:
        """Sleep until the next report is due, or until the monitor's findings change."""
        deadline = time.monotonic() + interval
        seen = self._monitor_seq()
        while time.monotonic() < deadline:
            time.sleep(min(MONITOR_POLL_SECONDS, max(0.0, deadline - time.monotonic())))
            seq = self._monitor_seq()
            if seq is not None and seen is not None and seq != seen:
                return
            seen = seq if seen is None else seen

    def _monitor_seq(self) -> int | None:
        """The proxy's monitor findings number (None when it cannot be read)."""
        try:
            status, body = self.agent.admin.call("GET", "/runtime/monitor")
        except AdminUnavailable:
            return None
        return body.get("seq") if status == 200 and isinstance(body, dict) else None


def _exit_with_parent(parent: int) -> None:
    """Stop this process (warm shutdown) once ``parent`` is gone (the proxy was killed)."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1)
        log.warning("the proxy (pid %d) is gone; the agent stops", parent)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def run_agent(settings: AgentSettings, parent_pid: int | None = None, log_level: str = "INFO") -> None:
    """Run the agent until SIGTERM/SIGINT (or, with ``parent_pid``, until that process is gone)."""
    agent = Agent(settings)
    app = build_app(agent)
    if not settings.signing_public_keys:
        log.warning("no --signing-public-key: configs from the broker are applied without checking who signed them")
    else:
        log.info("configs are applied only when signed by the control plane (--signing-public-key)")
    if parent_pid is not None:
        _exit_with_parent(parent_pid)
    Reporter(agent, app).start()
    app.worker_main(
        [
            "worker",
            "--pool=solo",
            f"--queues=node.{settings.node}",
            f"--hostname=node.{settings.node}@%h",
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
            f"--loglevel={log_level}",
        ]
    )
