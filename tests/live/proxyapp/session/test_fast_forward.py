"""``fast_forward`` users: bytes relayed to one backend connection, no query rules applied."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from devstack.proxy import ProxyProcess, rw_split_config
from devstack.sandbox import APP_PASSWORD, APP_USER, Sandbox


def test_fast_forward_user_bypasses_rules(
    sandbox: Sandbox, start_proxy: Callable[[dict[str, Any]], ProxyProcess]
) -> None:
    config = rw_split_config(sandbox.primary().port, [r.port for r in sandbox.replicas()])
    config["mysql_users"] = [
        {"username": APP_USER, "password": APP_PASSWORD, "default_hostgroup": 10, "fast_forward": 1}
    ]
    proxy = start_proxy(config)
    with proxy.connect(database="app", autocommit=True) as conn, conn.cursor() as cur:
        cur.execute("SELECT @@port, 7")  # the rules would send this to the replica
        assert cur.fetchone() == (sandbox.primary().port, 7)
        cur.execute("SELECT CONNECTION_ID()")
        first = cur.fetchone()
        cur.execute("SET @v = 5")
        cur.execute("SELECT @v, CONNECTION_ID()")
        assert cur.fetchone() == (5, first[0])
        conn.ping()
    with proxy.connect(database="app") as conn, conn.cursor() as cur:
        cur.execute("SELECT 1")
        assert cur.fetchone() == (1,)
