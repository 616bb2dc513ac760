"""The whole product around a sandbox for failover's end-to-end test and its benchmark (``stack.running_fleet`` in the
shape ``fleet_shape`` gives): a private redis-server, the control plane (gunicorn, a Celery worker with two
processes, beat) on a file SQLite database, and two proxy nodes with their agents and monitors, running a config
whose hostgroup 10 is the sandbox's primary and hostgroup 20 its replicas, with failover on; plus a client that
writes through a node in a loop, and the API as an operator."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pymysql

from devstack import stack
from devstack.api_client import ApiClient
from devstack.failover_sandbox import address, ha_document, query
from devstack.sandbox import APP_PASSWORD, APP_USER, REPL_PASSWORD, REPL_USER, Sandbox, SandboxServer

CLUSTER = "fo-e2e"
NODES = ("fo-a", "fo-b")
OPERATOR, OPERATOR_PASSWORD = "fo-operator", "fo-operator-pass"
#: The table the writer fills: one row per acknowledged INSERT.
TABLE = "app.e2e_writes"
#: The longest any awaited state may take (a failover takes seconds; this only bounds a broken run).
TIMEOUT = 60
SEED = """
import json, os
from django.contrib.auth.models import User
from fleet.core import roles
from fleet.core.models import Cluster, ProxyNode
from fleet.core.publishing import import_document
account = User.objects.create_user(os.environ["FO_OPERATOR"], password=os.environ["FO_PASSWORD"])
roles.grant(account, roles.OPERATOR)
cluster = Cluster.objects.create(name=os.environ["FO_CLUSTER"])
import_document(cluster, json.loads(os.environ["FO_DOCUMENT"]), None)
for name in json.loads(os.environ["FLEET_NODES"]):
    ProxyNode.objects.create(cluster=cluster, name=name)
"""


class Api(ApiClient):
    """The control plane's REST API as the operator, on the cluster ``CLUSTER``."""

    def __init__(self, base: str) -> None:
        super().__init__(base, OPERATOR, OPERATOR_PASSWORD, CLUSTER)

    def events(self, kind: str) -> list[dict[str, Any]]:
        """The cluster's events of ``kind``, newest first, with their timelines."""
        return self.call("GET", f"/failover-events/?kind={kind}")["results"]

    def wait_event(self, kind: str, count: int) -> dict[str, Any]:
        """Wait until the ``count``-th event of ``kind`` has finished (done or failed); that event."""

        def finished() -> bool:
            found = self.events(kind)
            return len(found) >= count and found[0]["state"] in ("done", "failed")

        stack.wait_until(finished, f"end of {kind} number {count}", TIMEOUT)
        return self.events(kind)[0]


@dataclass
class Writer:
    """A client writing through a proxy node in a loop, one row per autocommit INSERT: ``acked`` holds the ids whose
    INSERT the client saw succeed (and ``acked_at`` when), ``errors`` what the others got (their fate is unknown)."""

    port: int
    phase: str
    first_id: int
    acked: list[int] = field(default_factory=list)
    acked_at: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None

    def _connect(self) -> pymysql.Connection:
        return pymysql.connect(
            host="127.0.0.1",
            port=self.port,
            user=APP_USER,
            password=APP_PASSWORD,
            autocommit=True,
            connect_timeout=5,
            read_timeout=30,
        )

    def _run(self) -> None:
        conn: pymysql.Connection | None = None
        next_id = self.first_id
        while not self.stop.is_set():
            try:
                if conn is None:
                    conn = self._connect()
                with conn.cursor() as cur:
                    cur.execute(f"INSERT INTO {TABLE} VALUES (%s, %s)", (next_id, self.phase))
                self.acked.append(next_id)
                self.acked_at.append(time.time())
            except pymysql.err.MySQLError as error:
                self.errors.append(str(error))
                if conn is not None and not conn.open:
                    conn = None
                time.sleep(0.02)
            next_id += 1
        if conn is not None:
            conn.close()

    def start(self) -> Writer:
        """Start writing; returns once 50 writes succeeded."""
        self.thread = threading.Thread(target=self._run, name=f"writer {self.phase}", daemon=True)
        self.thread.start()
        stack.wait_until(lambda: len(self.acked) >= 50, f"50 writes through the proxy ({self.phase})", TIMEOUT)
        return self

    def wait_more(self, count: int) -> None:
        """Wait until ``count`` more writes succeeded."""
        target = len(self.acked) + count
        stack.wait_until(lambda: len(self.acked) >= target, f"{count} more writes ({self.phase})", TIMEOUT)

    def finish(self) -> None:
        """Stop writing."""
        self.stop.set()
        if self.thread is not None:
            self.thread.join(30)


@dataclass
class Fleet:
    """What a test or the benchmark drives."""

    sandbox: Sandbox
    api: Api
    ports: dict[str, tuple[int, int]]  # node -> (mysql port, admin port)
    workdir: Path

    def server(self, name: str) -> SandboxServer:
        """The sandbox server at host:port ``name``."""
        return next(s for s in self.sandbox.status() if address(s) == name)

    def topology(self) -> dict[str, Any]:
        """Hostgroup 10 as the API shows it."""
        return self.api.call("GET", "/failover/10/")

    def wait_applied(self) -> None:
        """Wait until every node runs the cluster's latest version."""
        latest = self.api.call("GET", "/versions/")["results"][0]["number"]

        def applied() -> bool:
            return all(self.api.call("GET", f"/nodes/{n}/")["applied_version"] == latest for n in NODES)

        stack.wait_until(applied, f"every node on v{latest}", TIMEOUT)


def fleet_shape(
    box: Sandbox, report_interval: float | None = None, variables: dict[str, str] | None = None
) -> stack.FleetShape:
    """The fleet around ``box``: the operator, the cluster whose config puts ``box`` in hostgroups 10 and 20 (with
    ``variables``), and the nodes ``NODES``, reporting every ``report_interval`` s (default: the node's own). The worker
    has two processes: a switchover waits in one for the nodes' acks, which the other records."""
    document = ha_document(address(box.primary()), [address(r) for r in box.replicas()])
    document["global_variables"] = [
        {"variable_name": name, "variable_value": value} for name, value in (variables or {}).items()
    ]
    return stack.FleetShape(
        seed=SEED,
        seed_env={
            "FO_OPERATOR": OPERATOR,
            "FO_PASSWORD": OPERATOR_PASSWORD,
            "FO_CLUSTER": CLUSTER,
            "FO_DOCUMENT": json.dumps(document),
        },
        nodes=[stack.NodeShape(name, report_interval=report_interval) for name in NODES],
        worker_pool="prefork",
        worker_concurrency=2,
    )


def failover_on(running: stack.RunningFleet, box: Sandbox) -> Fleet:
    """The seed config published and applied by both nodes, failover on for hostgroup 10 (otherwise its defaults),
    and the writers' table made."""
    query(box.primary(), f"CREATE TABLE IF NOT EXISTS {TABLE} (id INT PRIMARY KEY, phase VARCHAR(20))")
    fleet = Fleet(box, Api(running.url), running.ports, running.workdir)
    fleet.api.call("POST", "/publish/", {"comment": "the seed config"})
    fleet.api.call(
        "PATCH",
        "/failover/10/policy/",
        {"enabled": True, "replication_user": REPL_USER, "replication_password": REPL_PASSWORD},
    )
    fleet.wait_applied()
    return fleet


@contextmanager
def running_fleet(box: Sandbox, workdir: Path) -> Iterator[Fleet]:
    """Everything around ``box`` with the nodes' default settings (the benchmark's), failover on; stopped on exit."""
    with stack.running_fleet(workdir, fleet_shape(box)) as running:
        yield failover_on(running, box)
