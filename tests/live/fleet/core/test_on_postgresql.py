"""The control plane's own unit suite with Django's ORM on PostgreSQL through ProxyFleet's pooling proxy: the
database the tests create, their transactions rolled back after each test, their savepoints, and the DROP DATABASE
at the end (the proxy closes its idle connections to a database about to be dropped) all pass through transaction
pooling."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest

from devstack.ports import free_port
from devstack.proxy import ProxyProcess

ROLE, PASSWORD, DATABASE = "pf_fleet_orm", "pf-fleet-orm-pass", "pf_fleet_orm"


def superuser() -> psycopg.Connection:
    """The machine's PostgreSQL as postgres (trusted on loopback), autocommit."""
    return psycopg.connect(host="127.0.0.1", port=5432, user="postgres", dbname="postgres", autocommit=True)


@pytest.fixture
def orm_role() -> Iterator[None]:
    """A role that may create the test database, and its own database."""
    with superuser() as conn:
        for database in (f"test_{DATABASE}", DATABASE):
            conn.execute(f"DROP DATABASE IF EXISTS {database} WITH (FORCE)")
        conn.execute(f"DROP ROLE IF EXISTS {ROLE}")
        conn.execute(f"CREATE ROLE {ROLE} LOGIN CREATEDB PASSWORD '{PASSWORD}'")
        conn.execute(f"CREATE DATABASE {DATABASE} OWNER {ROLE}")
    yield
    with superuser() as conn:
        for database in (f"test_{DATABASE}", DATABASE):
            conn.execute(f"DROP DATABASE IF EXISTS {database} WITH (FORCE)")
        conn.execute(f"DROP ROLE IF EXISTS {ROLE}")


def test_the_control_planes_suite_runs_through_the_pooler(
    orm_role: None, start_proxy: Callable[[dict[str, Any]], ProxyProcess]
) -> None:
    port = free_port()
    start_proxy(
        {
            "pgsql_servers": [{"hostgroup_id": 1, "hostname": "127.0.0.1", "port": 5432, "max_connections": 5}],
            "pgsql_users": [{"username": ROLE, "password": PASSWORD, "default_hostgroup": 1}],
            "global_variables": [
                {"variable_name": "mysql-threads", "variable_value": "1"},
                {"variable_name": "mysql-monitor_enabled", "variable_value": "false"},
                {"variable_name": "pgsql-interfaces", "variable_value": f"127.0.0.1:{port}"},
            ],
        }
    )
    env = {**os.environ, "DATABASE_URL": f"postgres://{ROLE}:{PASSWORD}@127.0.0.1:{port}/{DATABASE}"}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/unit/fleet"],
        capture_output=True,
        text=True,
        timeout=900,
        env=env,
    )
    tail = done.stdout[-3000:]
    assert done.returncode == 0, tail
    passed = re.search(r"(\d+) passed", tail)
    assert passed is not None and int(passed.group(1)) > 300, tail
    assert "Error when trying to teardown test databases" not in done.stdout, tail
    with superuser() as conn:  # the test database was dropped through the proxy
        assert conn.execute(
            "SELECT count(*) FROM pg_database WHERE datname = %s", (f"test_{DATABASE}",)
        ).fetchone() == (0,)
