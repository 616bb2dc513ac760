"""`make run` (``python -m devstack.run_demo``): the whole product on one machine, until Ctrl-C.

A MariaDB sandbox (primary + replica, ``var/sandbox``) and two independent shard servers (``var/shards``); Redis
(the one answering at ``REDIS_URL``, default 127.0.0.1:6379, or else a private ``redis-server`` on a free port); the
control plane on ``DATABASE_URL`` (default SQLite ``var/fleet.sqlite3``, schema by ``migrate``): gunicorn on
127.0.0.1:8000, a Celery worker, the benchmark jobs' worker (queue ``bench``) and Celery beat; two proxy nodes,
``node1`` (127.0.0.1:6033, admin 6070) and ``node2`` (6034, admin 6071), each with its agent and the control plane's
public signing key (the nodes refuse configs it did not sign); the cluster ``demo`` with the demo config
(``devstack/demo.py``: the read/write split, and ``shop.tb_Shop`` sharded over the shard servers, whose schema is
made here and whose first shops are inserted through node1) published to both. The admin account's password is kept
in ``var/demo/admin-password``; every process logs to ``var/demo/logs/``.

A restart keeps what the last run left: the sandboxes' data and ports (they are stopped, not thrown away), the draft
and the published versions. A child that exits is started again while the others keep running.
"""

from __future__ import annotations

import os
import secrets
import signal
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pymysql
from kombu.utils.url import maybe_sanitize_url

from devstack import ports, stack
from devstack.demo import (
    PG_FORWARD_PORT,
    PG_POOL_PORT,
    SHARD_SCHEMA,
    demo_config,
    insert_shops,
    prepare_shop,
    with_postgresql,
)
from devstack.pgsandbox import APP_PASSWORD as PG_APP_PASSWORD
from devstack.pgsandbox import APP_USER as PG_APP_USER
from devstack.pgsandbox import PgSandbox
from devstack.sandbox import APP_PASSWORD, APP_USER, Sandbox, shard_sandboxes
from devstack.stack import REPO
from proxyapp import credential
from proxyapp.node.node import NodeStore

DEMO = REPO / "var" / "demo"
LOGS = DEMO / "logs"
WEB = "127.0.0.1:8000"
CLUSTER = "demo"
ADMIN = "admin"
NODES = {"node1": ("127.0.0.1:6033", "127.0.0.1:6070"), "node2": ("127.0.0.1:6034", "127.0.0.1:6071")}
APPLY_TIMEOUT = 60
SHARD_SERVERS = 2


def kept_secret(path: Path) -> str:
    """A random secret made once and kept in ``path`` (so logins and sessions survive a restart)."""
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(secrets.token_urlsafe(18) + "\n")
        path.chmod(0o600)
    return path.read_text().strip()


def check_ports_free() -> None:
    """Exit naming the first of the demo's fixed ports that something else listens on."""
    postgresql = (f"127.0.0.1:{PG_POOL_PORT}", f"127.0.0.1:{PG_FORWARD_PORT}")
    for address in (WEB, *(a for pair in NODES.values() for a in pair), *postgresql):
        port = int(address.rpartition(":")[2])
        if not ports.port_free(port):
            raise SystemExit(f"port {port} is in use (make run needs {address}); stop what listens there first")


def choose_redis(services: list[stack.Service]) -> str:
    """The running Redis if it answers, else a private redis-server started here."""
    url = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
    if stack.redis_answers(url):
        print(f"using the running Redis at {maybe_sanitize_url(url)}", flush=True)
        return url
    print(f"no Redis answers at {maybe_sanitize_url(url)}: starting a private redis-server", flush=True)
    service, url = stack.redis_server(DEMO / "redis")
    services.append(service)
    return url


def ensure_admin(password: str) -> Any:
    """The demo's admin account, made or kept with ``password``: a password it has already is not set again (a new
    hash would log every browser out at each restart: Django's sessions hold a hash of it)."""
    from django.contrib.auth.models import User

    admin = User.objects.filter(username=ADMIN).first() or User(username=ADMIN)
    admin.is_staff = admin.is_superuser = admin.is_active = True
    if not admin.has_usable_password() or not admin.check_password(password):
        admin.set_password(password)
    admin.save()
    return admin


def prepare_control_plane(sandbox: Sandbox, shards: list[Sandbox], pg: PgSandbox, admin_password: str) -> None:
    """Schema, static files, the admin account, the cluster ``demo`` with its nodes and the demo config as its
    draft (in this process, with the environment the children get)."""
    import django

    django.setup()
    from django.core.management import call_command

    from fleet.core import publishing
    from fleet.core.models import Cluster, ProxyNode

    call_command("migrate", interactive=False, verbosity=0)
    call_command("collectstatic", interactive=False, verbosity=0)
    admin = ensure_admin(admin_password)
    cluster, created = Cluster.objects.get_or_create(name=CLUSTER, defaults={"comment": "make run: the sandbox demo"})
    for name, (mysql, admin_address) in NODES.items():
        store = NodeStore(DEMO / "nodes" / name)  # the node's admin credential, made here for the node to find
        store.directory.mkdir(parents=True, exist_ok=True)
        token = credential.load_or_create(store.token_path)
        ProxyNode.objects.update_or_create(
            name=name,
            defaults={"cluster": cluster, "mysql_address": mysql, "admin_address": admin_address, "admin_token": token},
        )
    if created:  # a restart keeps the draft and the versions the user made
        document = demo_config(sandbox.primary(), sandbox.replicas(), [box.primary() for box in shards])
        document = with_postgresql(document, pg.primary(), pg.replicas())
        publishing.import_document(cluster, document, admin)


def signing_public_key() -> str:
    """The public half of the control plane's signing key (the key file is made on the first run), for the nodes."""
    from fleet.core import signing

    return signing.public_key_text()


def publish_demo() -> tuple[int, str]:
    """The version the nodes must run, and its checksum: the latest one (reconcile sends it to a node that lacks
    it), or on the first run the demo config, published now. A draft being edited is never published here."""
    from django.contrib.auth.models import User

    from fleet.core import publishing
    from fleet.core.models import Cluster

    cluster = Cluster.objects.get(name=CLUSTER)
    version = cluster.latest_version()
    if version is None:
        version = publishing.publish(cluster, User.objects.get(username=ADMIN), comment="make run: the demo config")
    return version.number, version.checksum


def sandboxes_up(sandbox: Sandbox, shards: list[Sandbox], pg: PgSandbox) -> None:
    """The sandbox (primary + 1 replica), the shard servers (a primary each) and the PostgreSQL sandbox (primary +
    1 streaming replica), started side by side."""
    with ThreadPoolExecutor(max_workers=2 + len(shards)) as pool:
        started = [pool.submit(sandbox.up, replicas=1), *(pool.submit(box.up, replicas=0) for box in shards)]
        started.append(pool.submit(pg.up, replicas=1))
        for future in started:
            future.result()


def fill_shards(made: bool) -> None:
    """The demo's shops, inserted through node1 when the shard servers' tables were made on this run; a proxy that
    refuses them (a draft published without the demo's sharding) is said, and the rest keeps running."""
    if not made:
        return
    port = int(NODES["node1"][0].rpartition(":")[2])
    try:
        insert_shops(port)
    except pymysql.MySQLError as error:
        print(f"the demo's shops were not inserted through node1: {error}", file=sys.stderr, flush=True)


def wait_applied(number: int, nodes: dict[str, stack.Service]) -> None:
    """Wait until both nodes acknowledged ``number``."""
    from fleet.core.models import ProxyNode

    for name, service in nodes.items():

        def applied(name: str = name) -> bool:
            node = ProxyNode.objects.get(name=name)
            return node.state == ProxyNode.State.APPLIED and node.applied_version == number

        stack.wait_until(applied, f"{name} applied at v{number}", APPLY_TIMEOUT, service)


def banner(number: int, checksum: str, admin_password: str, redis_url: str) -> str:
    node_lines = "\n".join(
        f"  {name}: mysql -h 127.0.0.1 -P {mysql.rpartition(':')[2]} -u {APP_USER} -p{APP_PASSWORD} app"
        f"    (stats http://{admin}/stats)"
        for name, (mysql, admin) in NODES.items()
    )
    node1_port = NODES["node1"][0].rpartition(":")[2]
    return (
        f"\nProxyFleet is up: cluster {CLUSTER} runs v{number} ({checksum[:12]}) on both nodes.\n"
        f"  web:   http://{WEB}/   login {ADMIN} / {admin_password}   (API http://{WEB}/api/v1/, docs /api/docs/)\n"
        f"{node_lines}\n"
        f"  shards: mysql -h 127.0.0.1 -P {node1_port} -u {APP_USER} -p{APP_PASSWORD} {SHARD_SCHEMA} "
        f'-e "SELECT * FROM tb_Shop WHERE City_ID = 1"    (map and tester http://{WEB}/shards/)\n'
        f"  postgresql: psql postgresql://{PG_APP_USER}:{PG_APP_PASSWORD}@127.0.0.1:{PG_POOL_PORT}/app    (pooling: "
        f"SELECTs to the replica)\n"
        f"              psql postgresql://{PG_APP_USER}:{PG_APP_PASSWORD}@127.0.0.1:{PG_FORWARD_PORT}/app    "
        "(forwarding to the primary)\n"
        f"  redis: {maybe_sanitize_url(redis_url)}   logs: {LOGS.relative_to(REPO)}/\n"
        "Ctrl-C stops everything."
    )


def supervise(services: list[stack.Service], sandboxes: list[Sandbox | PgSandbox]) -> None:
    """Until Ctrl-C: a child that exits is logged and started again while the others keep running (the nodes
    serve whatever happens to the control plane); one that keeps exiting is left stopped. A sandbox server stopped
    from another shell (``devstack.sandboxes mysql stop NAME``) is reaped, not left a zombie."""
    policy = stack.RestartPolicy()
    given_up: set[int] = set()
    while True:
        for service in services:
            if service.running or id(service) in given_up:
                continue
            code = service.proc.returncode if service.proc is not None else None
            if policy.allow(str(id(service)), time.monotonic()):
                print(
                    f"\n{service.name} exited ({code}); starting it again. Its log ends with:\n{service.log(10)}",
                    flush=True,
                )
                service.start()
            else:
                given_up.add(id(service))
                print(
                    f"\n{service.name} exited {policy.limit} times within {policy.window:.0f} s: left stopped, the "
                    f"others keep running. Its log ends with:\n{service.log()}",
                    file=sys.stderr,
                )
        for box in sandboxes:
            box.reap()
        time.sleep(0.5)


def main() -> int:
    """Bring everything up, wait for Ctrl-C (or a process that dies), bring it all down."""
    check_ports_free()
    (REPO / "var").mkdir(mode=0o700, exist_ok=True)
    (REPO / "var").chmod(0o700)  # secrets, the control plane's database and the nodes' configs live under it
    for sig in (signal.SIGINT, signal.SIGTERM):  # even when started with SIGINT ignored (in the background)
        signal.signal(sig, signal.default_int_handler)
    services: list[stack.Service] = []
    sandbox = Sandbox("var/sandbox")
    shards = shard_sandboxes(SHARD_SERVERS)
    pg = PgSandbox(REPO / "var" / "pgsandbox")
    status = 0
    try:
        print(
            f"starting the MariaDB sandbox (primary + 1 replica), {SHARD_SERVERS} shard servers and the PostgreSQL "
            "sandbox (primary + 1 replica)...",
            flush=True,
        )
        sandboxes_up(sandbox, shards, pg)
        made = prepare_shop(sandbox.primary(), [box.primary() for box in shards])
        redis_url = choose_redis(services)
        env = stack.control_plane_env(
            os.environ.get("DATABASE_URL", "sqlite:///var/fleet.sqlite3"),
            redis_url,
            SECRET_KEY=os.environ.get("SECRET_KEY") or kept_secret(DEMO / "secret-key"),
        )
        os.environ.update(env)
        admin_password = kept_secret(DEMO / "admin-password")
        print("preparing the control plane (schema, static files, admin account, demo cluster)...", flush=True)
        prepare_control_plane(sandbox, shards, pg, admin_password)
        print("starting the Celery workers and beat, two proxy nodes and the web server...", flush=True)
        services.append(stack.worker(env, LOGS))
        services.append(stack.worker(env, LOGS, concurrency=1, queue="bench"))
        services.append(stack.beat(env, LOGS))
        public_key = signing_public_key()
        nodes = {
            name: stack.node(name, redis_url, mysql, admin, DEMO / "nodes" / name, LOGS, signing_public_key=public_key)
            for name, (mysql, admin) in NODES.items()
        }
        services.extend(nodes.values())
        services.append(stack.web(env, WEB, LOGS))
        number, checksum = publish_demo()
        wait_applied(number, nodes)
        fill_shards(made)
        print(banner(number, checksum, admin_password, redis_url), flush=True)
        supervise(services, [sandbox, *shards, pg])
    except KeyboardInterrupt:
        pass
    except RuntimeError as exc:
        print(f"\nmake run failed: {exc}", file=sys.stderr)
        status = 1
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):  # a second Ctrl-C or SIGTERM must not cut the cleanup short
            signal.signal(sig, signal.SIG_IGN)
        print("\nstopping...", flush=True)
        stack.stop_started()  # ``services`` and any a SIGTERM caught while its helper waited for it
        for box in (sandbox, *shards, pg):
            box.stop()  # their data and ports stay for the next make run
        print("stopped.")
    return status


if __name__ == "__main__":
    sys.exit(main())
