"""Shared fixtures: one MariaDB sandbox (primary + replica) for the whole run, and proxies in front of it; one
PostgreSQL sandbox (primary + streaming replica) for the whole run, for the tests that use it; the control
plane's (a cluster, one account per role) come from ``tests.support.control_plane``.

Unit tests live under ``tests/unit``, live ones under ``tests/live`` (marked ``live`` there, by their folder): a test
under ``tests/unit`` that needs a live part stops the run at collection."""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pymysql
import pytest
from django.conf import settings

from devstack.pgsandbox import PgSandbox
from devstack.proxy import ProxyProcess, rw_split_config
from devstack.sandbox import Sandbox, pid_alive
from devstack.stack import REPO
from proxyapp.node import signature

pytest_plugins = ("tests.support.control_plane",)

TESTS = Path(__file__).resolve().parent
TEST_SANDBOX_ROOT = REPO / "var" / "test-sandbox"
TEST_SANDBOX_DIR = f"var/test-sandbox/{os.getpid()}"  # one per run, so concurrent runs do not share servers
TEST_PG_SANDBOX_ROOT = REPO / "var" / "test-pgsandbox"
TEST_PG_SANDBOX_DIR = f"var/test-pgsandbox/{os.getpid()}"


def pytest_configure(config: pytest.Config) -> None:
    """Give Django a throwaway secret key and the control plane a throwaway config signing key for the run, unless
    SECRET_KEY and FLEET_SIGNING_KEY are set (so that no test writes a key file under var/)."""
    if not os.environ.get("SECRET_KEY"):
        settings.SECRET_KEY = "test-insecure-" + secrets.token_hex(16)
    if not os.environ.get("FLEET_SIGNING_KEY"):
        settings.FLEET_SIGNING_KEY = signature.new_private_key()


#: Fixtures that start or reach something outside the test process (MariaDB servers, a proxy process, a live web
#: server, a browser, the whole stack): a test that uses one, directly or through another fixture, is ``live``.
LIVE_FIXTURES = frozenset(
    {
        "sandbox",
        "pg_sandbox",
        "pg_tls_sandbox",
        "primary_conn",
        "start_proxy",
        "rw_proxy",
        "live_server",
        "browser",
        "running_fleet",
    }
)


def needs_live_part(item: pytest.Item) -> bool:
    """Whether a test needs something outside the test process: a live fixture, directly or through another
    fixture, or the ``sandbox`` marker."""
    return item.get_closest_marker("sandbox") is not None or bool(
        LIVE_FIXTURES & set(getattr(item, "fixturenames", ()))
    )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Refuse the run when a test outside ``tests/live`` needs a live part (``tests/live/conftest.py`` marks the
    tests there ``live``): ``make test-unit`` (``pytest tests/unit``) must need nothing but the test process."""
    misplaced = [
        item.nodeid for item in items if not item.path.is_relative_to(TESTS / "live") and needs_live_part(item)
    ]
    if misplaced:
        raise pytest.UsageError("tests that need a live part belong under tests/live: " + ", ".join(misplaced))


def _down_abandoned_sandboxes() -> None:
    """Take down the test sandboxes of earlier runs whose pytest process is gone (a run that was killed): the run's
    own (``<pid>``) and those its test modules made (``<pid>-<label>``, see ``module_sandbox_dir``), MariaDB's and
    PostgreSQL's."""
    for root, kind in ((TEST_SANDBOX_ROOT, Sandbox), (TEST_PG_SANDBOX_ROOT, PgSandbox)):
        for path in root.glob("*"):
            pid = path.name.partition("-")[0]
            if pid.isdigit() and not pid_alive(int(pid)):
                kind(path).down()


def module_sandbox_dir(label: str) -> str:
    """The directory of a sandbox a test module makes for itself (one it may break), cleaned up like the run's."""
    return f"{TEST_SANDBOX_DIR}-{label}"


def module_pg_sandbox_dir(label: str) -> str:
    """The directory of a PostgreSQL sandbox a test module makes for itself, cleaned up like the run's (under
    ``var/``, not pytest's ``tmp_path``: the servers' user must reach it)."""
    return f"{TEST_PG_SANDBOX_DIR}-{label}"


#: What a proxy logs when one of its tasks failed and nobody handled it: a bug, whatever the test asserted.
UNHANDLED = ("Task exception was never retrieved", "ended with an unhandled error")


@pytest.fixture(scope="session", autouse=True)
def no_unhandled_task_errors(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Fail the run when any proxy a test started (its log under the run's temporary directory) logged a task's
    exception that nobody handled."""
    yield
    base = tmp_path_factory.getbasetemp()
    found = [
        str(path.relative_to(base))
        for path in base.rglob("*.log")
        if any(mark in path.read_text(errors="replace") for mark in UNHANDLED)
    ]
    assert not found, f"unhandled task errors in the logs of: {', '.join(sorted(found))}"


@pytest.fixture(scope="session")
def sandbox() -> Iterator[Sandbox]:
    """The test sandbox for the whole run: a primary and one replica with GTID replication, whose users
    (``app``/``app-pass`` among them) and databases (``app``, ``test``) the sandbox creates."""
    _down_abandoned_sandboxes()
    box = Sandbox(TEST_SANDBOX_DIR)
    box.up(replicas=1)
    yield box
    box.down()


@pytest.fixture(scope="session")
def pg_sandbox() -> Iterator[PgSandbox]:
    """The PostgreSQL sandbox for the whole run: a primary and one streaming replica, whose roles (``app``/
    ``app-pass`` with SCRAM, ``md5user``/``md5-pass`` with MD5, ``monitor``/``monitor``) and databases (``app``,
    ``test``) the sandbox creates; ``postgres`` logs in without a password."""
    _down_abandoned_sandboxes()
    box = PgSandbox(TEST_PG_SANDBOX_DIR)
    box.up(replicas=1)
    yield box
    box.down()


@pytest.fixture(scope="module")
def pg_tls_sandbox() -> Iterator[PgSandbox]:
    """A PostgreSQL sandbox for one test module whose servers refuse TCP logins without TLS (``up(tls="required")``,
    verified against its ``ca_file``): a primary and one streaming replica with ``pg_sandbox``'s roles and databases."""
    _down_abandoned_sandboxes()
    box = PgSandbox(module_pg_sandbox_dir("tls"))
    box.up(replicas=1, tls="required")
    yield box
    box.down()


@pytest.fixture
def primary_conn(sandbox: Sandbox) -> Callable[..., pymysql.Connection]:
    """Open root connections to the sandbox primary."""
    return sandbox.primary().connect


@pytest.fixture
def start_proxy(tmp_path: Path) -> Iterator[Callable[[dict[str, Any]], ProxyProcess]]:
    """Start proxies from config documents; all are stopped at the end of the test."""
    started: list[ProxyProcess] = []

    def start(config: dict[str, Any]) -> ProxyProcess:
        workdir = tmp_path / f"proxy{len(started)}"
        workdir.mkdir()
        proxy = ProxyProcess(config, workdir)
        started.append(proxy)
        return proxy.start()

    yield start
    for proxy in started:
        proxy.stop()


@pytest.fixture
def rw_proxy(sandbox: Sandbox, start_proxy: Callable[[dict[str, Any]], ProxyProcess]) -> ProxyProcess:
    """A proxy doing the classic read/write split over the sandbox (writer 10, reader 20)."""
    return start_proxy(rw_split_config(sandbox.primary().port, [r.port for r in sandbox.replicas()]))
