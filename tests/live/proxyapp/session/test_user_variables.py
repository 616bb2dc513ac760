"""User variables follow the session to any backend connection instead of pinning it for good."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from devstack.proxy import ProxyProcess, rw_split_config
from devstack.sandbox import Sandbox


def test_user_variables_survive_moving_between_connections(
    sandbox: Sandbox, start_proxy: Callable[[dict[str, Any]], ProxyProcess]
) -> None:
    proxy = start_proxy(rw_split_config(sandbox.primary().port, [r.port for r in sandbox.replicas()]))
    with (
        proxy.connect(database="app", autocommit=True) as conn,
        proxy.connect(database="app", autocommit=True) as other,
        conn.cursor() as cur,
        other.cursor() as ocur,
    ):
        cur.execute("SET @n = 42, @s = 'héllo', @d = 1.50, @z = NULL, @b = X'00ff'")
        cur.execute("SELECT 0 INTO @into")
        # Reads go to the replica, writes to the primary: the session uses at least two connections.
        cur.execute("SELECT @n, @s, @d, @z, @b, @into, @@port")
        n, s, d, z, b, into, port = cur.fetchone()
        assert (n, s, str(d), z, b, into) == (42, "héllo", "1.50", None, b"\x00\xff", 0)
        assert port == sandbox.replicas()[0].port
        cur.execute("CREATE TABLE IF NOT EXISTS uv (v VARCHAR(20) CHARACTER SET utf8mb4)")
        cur.execute("INSERT INTO uv VALUES (@s)")
        cur.execute("SELECT @s = 'héllo', @n + 1")
        assert cur.fetchone() == (1, 43)
        # Another session on the same pooled connections does not see them.
        ocur.execute("SELECT @n, @s")
        assert ocur.fetchone() == (None, None)
    with sandbox.primary().connect(database="app") as conn, conn.cursor() as cur:
        cur.execute("SELECT v FROM uv")  # the INSERT ran on the primary with the replayed value
        assert ("héllo",) in cur.fetchall()
