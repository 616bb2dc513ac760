"""The whole product as child processes on one machine, for ``make run`` (``devstack/run_demo.py``) and the end-to-end
tests: Redis, the control plane (gunicorn, a Celery worker, Celery beat) and proxy nodes with their agents.

Each process is a ``Service`` writing to its own log file; ``wait_until`` turns a process that died or never became
ready into an error that quotes its log. ``running_fleet`` runs a whole fleet in a ``FleetShape`` (the end-to-end tests'
one fixture and the failover benchmark build theirs with it). Nothing here imports Django: the control plane runs in the
children, set up by the environment ``control_plane_env`` builds."""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time
import urllib.request
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote, urlencode

import redis

from devstack import certs
from devstack.ports import free_port
from proxyapp import credential
from proxyapp.node.node import NodeStore

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent  # the virtualenv's scripts: celery, gunicorn
LOG_TAIL_LINES = 40


class Service:
    """A child process of this one, its output appended to ``log_path``."""

    def __init__(self, name: str, argv: Sequence[str], env: dict[str, str], log_path: Path) -> None:
        self.name = name
        self.argv = list(argv)
        self.env = env
        self.log_path = log_path
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> Service:
        """Start the process (in its own session, so a terminal's Ctrl-C reaches only this one, which stops it),
        known to ``stop_started`` from now on."""
        if self not in STARTED:
            STARTED.append(self)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                self.argv, cwd=REPO, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        return self

    @property
    def running(self) -> bool:
        """Whether the process was started and has not exited."""
        return self.proc is not None and self.proc.poll() is None

    def signal(self, sig: int) -> None:
        """Send ``sig`` to the process."""
        if self.running:
            assert self.proc is not None
            self.proc.send_signal(sig)

    def stop(self, timeout: float = 20) -> None:
        """SIGTERM, then SIGKILL after ``timeout`` seconds; waits for the exit."""
        terminate(self.proc, timeout)

    def log(self, lines: int = LOG_TAIL_LINES) -> str:
        """The last ``lines`` lines of the process's output."""
        if not self.log_path.exists():
            return ""
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])


def terminate(proc: subprocess.Popen[bytes] | None, timeout: float = 10) -> None:
    """Stop a child process: SIGTERM, then SIGKILL after ``timeout`` seconds; waits for the exit (nothing when it
    was never started or has exited)."""
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


class RestartPolicy:
    """Whether to start a child again that exited: yes, unless it exited ``limit`` times within ``window`` seconds
    (a crash loop, left stopped so that its log can be read). Times are given, so the policy is plain data."""

    def __init__(self, limit: int = 5, window: float = 60.0) -> None:
        self.limit = limit
        self.window = window
        self._exits: dict[str, deque[float]] = {}

    def allow(self, key: str, now: float) -> bool:
        """Record that ``key`` exited at ``now``; whether to start it again."""
        exits = self._exits.setdefault(key, deque())
        exits.append(now)
        while now - exits[0] > self.window:
            exits.popleft()
        return len(exits) <= self.limit


def wait_until(
    check: Callable[[], bool], what: str, timeout: float, service: Service | None = None, interval: float = 0.1
) -> None:
    """Poll ``check`` every ``interval`` seconds until it holds; RuntimeError naming ``what`` (with the service's log)
    when ``service`` exits first or ``timeout`` seconds pass. The one polling loop of the tests and the dev tooling:
    whatever waits for something calls this."""
    deadline = time.monotonic() + timeout
    while True:
        if check():
            return
        if service is not None and service.proc is not None and service.proc.poll() is not None:
            status = service.proc.returncode
            raise RuntimeError(f"{service.name} exited with status {status} before {what}:\n{service.log()}")
        if time.monotonic() >= deadline:
            log = f":\n{service.log()}" if service is not None else ""
            raise RuntimeError(f"no {what} within {timeout:.0f} s{log}")
        time.sleep(interval)


def http_ok(url: str) -> bool:
    """Whether ``url`` answers 200."""
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


def redis_answers(url: str) -> bool:
    """Whether a Redis server answers PING at ``url``."""
    try:
        return bool(redis.Redis.from_url(url, socket_timeout=1, socket_connect_timeout=1).ping())
    except (redis.RedisError, OSError):
        return False


@dataclass(frozen=True)
class RedisAccess:
    """How clients must reach a private Redis: an ACL user and its password (the default user is off), and TLS with a
    certificate for 127.0.0.1 (None: plain TCP)."""

    user: str
    password: str
    tls: certs.ServerCertificate | None = None


def redis_server(directory: Path, port: int | None = None, access: RedisAccess | None = None) -> tuple[Service, str]:
    """A private ``redis-server`` on loopback (no persistence), started and answering; returns it and its URL (with
    ``access``'s credentials, ``rediss://`` checking the certificate when it has TLS). The credentials go in a 0600
    config file, off the command line."""
    port = port or free_port()
    directory.mkdir(parents=True, exist_ok=True)
    conf: list[str] = []  # a config file, when there is one, comes first
    listen = ["--port", str(port)]
    url = f"redis://127.0.0.1:{port}/0"
    if access is not None:
        conf_path = directory / "access.conf"
        conf_path.touch(mode=0o600)
        conf = [str(conf_path)]
        lines = ["user default off", f"user {access.user} on >{access.password} ~* &* +@all"]
        userinfo = f"{quote(access.user, safe='')}:{quote(access.password, safe='')}@"
        url = f"redis://{userinfo}127.0.0.1:{port}/0"
        if access.tls is not None:
            tls = access.tls
            lines += [f"tls-cert-file {tls.cert}", f"tls-key-file {tls.key}", f"tls-ca-cert-file {tls.ca}"]
            lines += ["tls-auth-clients no"]
            listen = ["--port", "0", "--tls-port", str(port)]
            query = urlencode({"ssl_cert_reqs": "required", "ssl_ca_certs": str(tls.ca)})
            url = f"rediss://{userinfo}127.0.0.1:{port}/0?{query}"
        conf_path.write_text("".join(line + "\n" for line in lines))
    argv = ["redis-server", *conf, "--bind", "127.0.0.1", *listen, "--save", "", "--appendonly", "no"]
    service = Service("redis-server", [*argv, "--dir", str(directory)], dict(os.environ), directory / "redis.log")
    service.start()
    wait_until(lambda: redis_answers(url), "answer from redis-server", 10, service)
    return service, url


def control_plane_env(database_url: str, redis_url: str, **extra: str) -> dict[str, str]:
    """The environment of the control plane's processes: this one's, with the database and broker given."""
    env = dict(os.environ, DATABASE_URL=database_url, REDIS_URL=redis_url, PYTHONPATH=str(REPO))
    env["DJANGO_SETTINGS_MODULE"] = "fleet.settings"
    env.update(extra)
    return env


def manage(env: dict[str, str], *args: str) -> str:
    """Run ``manage.py ARGS`` to completion; its output, or RuntimeError quoting it."""
    done = subprocess.run(
        [sys.executable, "manage.py", *args], cwd=REPO, env=env, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"manage.py {' '.join(args)} failed ({done.returncode}):\n{done.stdout}{done.stderr}")
    return done.stdout


def web(env: dict[str, str], bind: str, log_dir: Path, workers: int = 2) -> Service:
    """gunicorn serving the control plane on ``bind`` (``deploy/gunicorn.conf.py``), started and answering."""
    env = dict(env, GUNICORN_BIND=bind, GUNICORN_WORKERS=str(workers))
    argv = [str(BIN / "gunicorn"), "-c", "deploy/gunicorn.conf.py", "fleet.wsgi"]
    service = Service("web", argv, env, log_dir / "web.log").start()
    wait_until(lambda: http_ok(f"http://{bind}/healthz"), f"answer from http://{bind}/healthz", 30, service)
    return service


def worker(
    env: dict[str, str], log_dir: Path, pool: str = "prefork", concurrency: int = 2, queue: str = "fleet"
) -> Service:
    """A Celery worker of the control plane on ``queue``: ``fleet`` (acks, reports, reconcile, history), or ``bench``
    (benchmark runs: their own worker, one run at a time, so that a run never delays a config push)."""
    argv = [str(BIN / "celery"), "-A", "fleet", "worker", "-Q", queue, "-n", f"{queue}.{os.getpid()}@%h"]
    argv += [f"--pool={pool}", f"--concurrency={concurrency}", "--without-gossip", "--without-mingle"]
    name = "celery worker" if queue == "fleet" else f"celery {queue} worker"
    log = "worker.log" if queue == "fleet" else f"{queue}-worker.log"
    return Service(name, [*argv, "--loglevel=INFO"], env, log_dir / log).start()


def beat(env: dict[str, str], log_dir: Path) -> Service:
    """Celery beat: reconcile every ``FLEET_RECONCILE_SECONDS``, history compaction every minute, benchmark jobs'
    crontabs (the schedule lives in the database: ``fleet.bench.beat``)."""
    argv = [str(BIN / "celery"), "-A", "fleet", "beat", "--schedule", str(log_dir / "celerybeat-schedule")]
    return Service("celery beat", [*argv, "--loglevel=INFO"], env, log_dir / "beat.log").start()


def node(
    name: str,
    broker: str,
    listen: str,
    admin: str,
    state_dir: Path,
    log_dir: Path,
    *,
    allowed_hostgroups: str | None = None,
    report_interval: float = 5.0,
    signing_public_key: str | None = None,
) -> Service:
    """A proxy node (``python -m proxyapp run --node``) with its agent, started and its admin endpoint answering; it
    gets the broker URL in its environment (``REDIS_URL``: a password in it stays off the command line) and, when
    given, the control plane's public key, refusing configs it did not sign."""
    argv = [sys.executable, "-m", "proxyapp", "run", "--node", name, "--listen", listen]
    argv += ["--admin", admin, "--state-dir", str(state_dir), "--report-interval", str(report_interval)]
    if allowed_hostgroups is not None:
        argv += ["--allowed-hostgroups", allowed_hostgroups]
    if signing_public_key is not None:
        argv += ["--signing-public-key", signing_public_key]
    env = dict(os.environ, PYTHONPATH=str(REPO), REDIS_URL=broker)
    service = Service(f"node {name}", argv, env, log_dir / f"node-{name}.log").start()
    wait_until(lambda: http_ok(f"http://{admin}/health"), f"answer from node {name}'s admin endpoint", 30, service)
    return service


def stop_all(services: Sequence[Service]) -> None:
    """Stop services, the last started first."""
    for service in reversed(services):
        service.stop()


#: Every service this process started, in order: a Ctrl-C or SIGTERM that comes while a helper starts one and waits
#: for it (``web``, ``node``) leaves it in no caller's list, and ``stop_started`` stops it all the same.
STARTED: list[Service] = []


def stop_started() -> None:
    """Stop every service this process started and has not stopped, the last started first."""
    stop_all(STARTED)


@dataclass
class NodeShape:
    """A proxy node of a running fleet: its name, the hostgroups it refuses to go beyond (``--allowed-hostgroups``;
    None: any) and how often it reports (None: the node's default)."""

    name: str
    allowed_hostgroups: str | None = None
    report_interval: float | None = None


@dataclass
class FleetShape:
    """What a running fleet is made of. ``seed`` is Python that ``manage.py shell`` runs once the database is
    migrated, with ``seed_env`` and ``FLEET_NODES`` (JSON: each node's name and the address its clients connect to)
    in its environment: the accounts, clusters and nodes the fleet starts with. ``env`` adds control-plane settings
    (``FLEET_RECONCILE_SECONDS`` and the like). The Celery worker serves ``worker_queue`` with ``worker_pool`` and
    ``worker_concurrency``; beat runs when ``beat`` is set; ``collectstatic`` is needed for pages that load their
    scripts (gunicorn serves them from the collected files). The broker always wants an ACL user and a password;
    ``broker_tls`` makes it speak TLS only."""

    seed: str
    seed_env: dict[str, str] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    nodes: list[NodeShape] = field(default_factory=list)
    worker_queue: str = "fleet"
    worker_pool: str = "solo"
    worker_concurrency: int = 1
    beat: bool = True
    collectstatic: bool = False
    broker_tls: bool = False


@dataclass
class RunningFleet:
    """A fleet running as child processes: the web UI's ``url``, the broker's URL and service, the control plane's
    environment, public signing key and services, and each node's service and (mysql port, admin port)."""

    shape: FleetShape
    workdir: Path
    url: str
    broker: str
    signing_public_key: str
    env: dict[str, str]
    redis: Service
    worker: Service
    beat: Service | None
    web: Service
    ports: dict[str, tuple[int, int]]
    nodes: dict[str, Service] = field(default_factory=dict)
    services: list[Service] = field(default_factory=list)

    def node_mysql(self, name: str) -> str:
        """The address node ``name``'s clients connect to."""
        return f"127.0.0.1:{self.ports[name][0]}"

    def node_admin(self, name: str) -> str:
        """The address of node ``name``'s admin endpoint."""
        return f"127.0.0.1:{self.ports[name][1]}"

    def node_token(self, name: str) -> str:
        """Node ``name``'s admin credential (made by the node at its first start, in its state directory)."""
        return credential.read(NodeStore(self.workdir / "nodes" / name).token_path)

    def start_node(self, name: str) -> Service:
        """Start (or start again) node ``name`` from its state directory, as its shape says."""
        node_shape = next(n for n in self.shape.nodes if n.name == name)
        interval = {} if node_shape.report_interval is None else {"report_interval": node_shape.report_interval}
        service = node(
            name,
            self.broker,
            self.node_mysql(name),
            self.node_admin(name),
            self.workdir / "nodes" / name,
            self.workdir,
            allowed_hostgroups=node_shape.allowed_hostgroups,
            signing_public_key=self.signing_public_key,
            **interval,
        )
        self.nodes[name] = service
        self.services.append(service)
        return service


@contextmanager
def running_fleet(workdir: Path, shape: FleetShape) -> Iterator[RunningFleet]:
    """Redis (an ACL user with a password holding URL-quoted characters, TLS if the shape asks), the control plane (on
    a file SQLite database under ``workdir``, seeded as ``shape`` says: a Celery worker, beat if asked, gunicorn with
    one worker; its signing key file made under ``workdir``) and ``shape``'s nodes, every one answering and checking
    the control plane's signature; all stopped on exit."""
    services: list[Service] = []
    try:
        tls = certs.loopback_certificate(workdir / "tls") if shape.broker_tls else None
        access = RedisAccess("fleet", f"{secrets.token_hex(8)}@/:%", tls)
        redis_service, broker = redis_server(workdir / "redis", access=access)
        services.append(redis_service)
        env = control_plane_env(
            f"sqlite:///{workdir / 'fleet.sqlite3'}",
            broker,
            SECRET_KEY=secrets.token_hex(16),
            FLEET_SIGNING_KEY="",
            FLEET_SIGNING_KEY_FILE=str(workdir / "signing.key"),
            **shape.env,
        )
        manage(env, "migrate", "--noinput")
        public_key = manage(env, "signing-public-key").strip()
        if shape.collectstatic:
            manage(env, "collectstatic", "--noinput")
        ports = {n.name: (free_port(), free_port()) for n in shape.nodes}
        nodes = json.dumps({name: f"127.0.0.1:{mysql}" for name, (mysql, _) in ports.items()})
        manage(dict(env, **shape.seed_env, FLEET_NODES=nodes), "shell", "-c", shape.seed)
        celery = worker(
            env, workdir, pool=shape.worker_pool, concurrency=shape.worker_concurrency, queue=shape.worker_queue
        )
        services.append(celery)
        scheduler = beat(env, workdir) if shape.beat else None
        if scheduler is not None:
            services.append(scheduler)
        bind = f"127.0.0.1:{free_port()}"
        server = web(env, bind, workdir, workers=1)
        services.append(server)
        fleet = RunningFleet(
            shape,
            workdir,
            f"http://{bind}",
            broker,
            public_key,
            env,
            redis_service,
            celery,
            scheduler,
            server,
            ports,
            {},
            services,
        )
        for node_shape in shape.nodes:
            fleet.start_node(node_shape.name)
        yield fleet
    finally:
        stop_all(services)
