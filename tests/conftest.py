"""Shared fixtures: one MariaDB sandbox (primary + replica) for the whole run, and proxies in front of it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pymysql
import pytest

from fleet.sandbox import Sandbox
from tests.harness import APP_PASSWORD, APP_USER, ProxyProcess, rw_split_config

TEST_SANDBOX_DIR = "var/test-sandbox"


@pytest.fixture(scope="session")
def sandbox() -> Iterator[Sandbox]:
    """A primary and one replica with GTID replication, and the ``app`` user on both."""
    box = Sandbox(TEST_SANDBOX_DIR)
    box.up(replicas=1)
    with box.primary().connect() as conn, conn.cursor() as cur:
        cur.execute(f"CREATE USER IF NOT EXISTS '{APP_USER}'@'%' IDENTIFIED BY '{APP_PASSWORD}'")
        cur.execute(f"GRANT ALL ON *.* TO '{APP_USER}'@'%'")
        cur.execute("CREATE DATABASE IF NOT EXISTS app")
    box.wait_replicated()
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
