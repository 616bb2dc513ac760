"""TLS from the proxy to PostgreSQL servers, against a sandbox whose servers refuse every TCP login without TLS (so a
login that passes went over TLS): the pooler reaches a ``use_ssl=1`` server over TLS (verifying its certificate when
``mysql-ssl_p2s_verify`` says so), a ``use_ssl=0`` row to it ends in an error the client reads (as does a
``use_ssl=1`` row to a server without TLS), the monitor pings it over TLS, and a forwarding listener carries a
client's own TLS session to it end to end."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest

from devstack.pgsandbox import APP_PASSWORD, APP_USER, MONITOR_PASSWORD, MONITOR_USER, PgSandbox
from devstack.ports import free_port
from devstack.proxy import ProxyProcess
from devstack.stack import wait_until
from proxyapp.mysql.tls import make_certificate
from tests.support.monitor_support import SEEN_WITHIN, global_variables

HG = 30
#: Whether the session the statement runs in is encrypted, asked of the server that runs it.
ENCRYPTED = "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()"
#: The server's refusal of a login without TLS.
NO_ENCRYPTION = r"pg_hba\.conf rejects connection for host .*, no encryption"

StartProxy = Callable[[dict[str, Any]], ProxyProcess]


def tls_config(
    pg: PgSandbox, port: int, use_ssl: int = 1, variables: dict[str, object] | None = None
) -> dict[str, Any]:
    """The sandbox's primary (a ``use_ssl`` row) behind a pooling listener on ``port`` for ``app``, and the monitor
    logging in as ``monitor``; ``variables`` are global variables over those (and the fast monitor's)."""
    primary = pg.primary()
    return {
        "pgsql_servers": [{"hostgroup_id": HG, "hostname": primary.host, "port": primary.port, "use_ssl": use_ssl}],
        "pgsql_users": [{"username": APP_USER, "password": APP_PASSWORD, "default_hostgroup": HG}],
        "global_variables": global_variables(
            {
                "mysql-threads": 1,
                "pgsql-interfaces": f"127.0.0.1:{port}",
                "pgsql-monitor_username": MONITOR_USER,
                "pgsql-monitor_password": MONITOR_PASSWORD,
                **(variables or {}),
            }
        ),
    }


def connect(port: int, **kwargs: Any) -> psycopg.Connection:
    """A psycopg connection to the proxy's port as ``app`` to the database ``app`` (no TLS to the proxy unless
    ``kwargs`` ask for it: what the proxy does on its own is what is tested)."""
    options: dict[str, Any] = {"sslmode": "disable", "autocommit": True, **kwargs}
    return psycopg.connect(
        host="127.0.0.1", port=port, user=APP_USER, password=APP_PASSWORD, dbname="app", connect_timeout=10, **options
    )


def test_the_pooler_reaches_a_use_ssl_server_over_tls(pg_tls_sandbox: PgSandbox, start_proxy: StartProxy) -> None:
    port = free_port()
    start_proxy(tls_config(pg_tls_sandbox, port))
    with connect(port) as conn:
        assert conn.execute(ENCRYPTED).fetchone() == (True,)
        conn.execute("CREATE TABLE IF NOT EXISTS tls_pooled (id int PRIMARY KEY, note text)")
        conn.execute("INSERT INTO tls_pooled VALUES (1, 'over TLS'), (2, 'é') ON CONFLICT DO NOTHING")
        assert conn.execute("SELECT id, note FROM tls_pooled ORDER BY id").fetchall() == [(1, "over TLS"), (2, "é")]
        with conn.cursor(binary=True) as cur:
            assert cur.execute("SELECT %s::bigint", (2**40,)).fetchone() == (2**40,)
    with pg_tls_sandbox.primary().connect(dbname="app") as direct:
        assert direct.execute("SELECT count(*) FROM tls_pooled").fetchone() == (2,)
        sessions = direct.execute(
            "SELECT s.ssl FROM pg_stat_activity a JOIN pg_stat_ssl s USING (pid) WHERE a.usename = %s", (APP_USER,)
        ).fetchall()
    assert sessions and all(ssl for (ssl,) in sessions)  # the pool's server connections, all encrypted


def test_the_pooler_verifies_the_server_certificate_when_told(
    pg_tls_sandbox: PgSandbox, start_proxy: StartProxy, tmp_path: Path
) -> None:
    verify: dict[str, object] = {"mysql-ssl_p2s_verify": "true", "mysql-ssl_p2s_ca": pg_tls_sandbox.ca_file}
    port = free_port()
    start_proxy(tls_config(pg_tls_sandbox, port, variables=verify))
    with connect(port) as conn:
        assert conn.execute(ENCRYPTED).fetchone() == (True,)

    stranger = tmp_path / "other-ca.pem"
    stranger.write_bytes(make_certificate("some other CA", is_ca=True)[0])
    verify["mysql-ssl_p2s_ca"] = stranger
    port = free_port()  # without the monitor: the pooler's own connect fails, and the client reads why
    start_proxy(tls_config(pg_tls_sandbox, port, variables={**verify, "mysql-monitor_enabled": "false"}))
    with pytest.raises(psycopg.OperationalError, match="certificate verify failed"):
        connect(port)
    proxy = start_proxy(tls_config(pg_tls_sandbox, free_port(), variables=verify))  # the monitor shuns it, saying why
    primary = pg_tls_sandbox.primary()

    def shunned_for_its_certificate() -> bool:
        (row,) = [r for r in proxy.stats()["pgsql"]["connection_pool"] if r["srv_port"] == primary.port]
        return row["status"] == "SHUNNED" and "certificate verify failed" in row["status_reason"]

    wait_until(shunned_for_its_certificate, "the server with a certificate of another CA shunned", SEEN_WITHIN)


def test_a_use_ssl_0_row_to_a_server_requiring_tls_gives_the_client_its_refusal(
    pg_tls_sandbox: PgSandbox, start_proxy: StartProxy
) -> None:
    port = free_port()
    start_proxy(tls_config(pg_tls_sandbox, port, use_ssl=0))
    for _ in range(2):  # and again: nothing was left waiting
        with pytest.raises(psycopg.OperationalError, match=NO_ENCRYPTION):
            connect(port)


def test_a_use_ssl_1_row_to_a_server_without_tls_gives_the_client_the_refusal(start_proxy: StartProxy) -> None:
    port = free_port()  # the machine's PostgreSQL: no TLS (ssl = off), trusts the proxy's loopback logins
    start_proxy(
        {
            "pgsql_servers": [{"hostgroup_id": HG, "hostname": "127.0.0.1", "port": 5432, "use_ssl": 1}],
            "pgsql_users": [{"username": "postgres", "password": "pf-pass", "default_hostgroup": HG}],
            "global_variables": global_variables(
                {"mysql-threads": 1, "pgsql-interfaces": f"127.0.0.1:{port}", "mysql-monitor_enabled": "false"}
            ),
        }
    )
    login = {"host": "127.0.0.1", "user": "postgres", "dbname": "postgres", "connect_timeout": 10}
    with psycopg.connect(port=5432, **login) as direct:
        assert direct.execute("SHOW ssl").fetchone() == ("off",)
    with pytest.raises(psycopg.OperationalError, match=r"127\.0\.0\.1:5432 refuses TLS, and use_ssl=1 needs it"):
        psycopg.connect(port=port, password="pf-pass", sslmode="disable", **login)


def test_the_monitor_pings_a_use_ssl_server_over_tls(pg_tls_sandbox: PgSandbox, start_proxy: StartProxy) -> None:
    port = free_port()
    proxy = start_proxy(tls_config(pg_tls_sandbox, port))
    primary = pg_tls_sandbox.primary()

    def pinged() -> bool:
        rows = [r for r in proxy.admin("GET", "/monitor/ping") if r["port"] == primary.port]
        return len(rows) >= 2 and rows[-1]["ping_error"] is None

    wait_until(pinged, "the monitor's pings of the TLS server", SEEN_WITHIN)
    (row,) = [r for r in proxy.stats()["pgsql"]["connection_pool"] if r["srv_port"] == primary.port]
    assert row["status"] == "ONLINE"
    with primary.connect() as direct:
        sessions = direct.execute(
            "SELECT s.ssl FROM pg_stat_activity a JOIN pg_stat_ssl s USING (pid) WHERE a.usename = %s",
            (MONITOR_USER,),
        ).fetchall()
    assert all(ssl for (ssl,) in sessions)


def test_a_forwarding_listener_carries_the_client_tls_to_the_server(
    pg_tls_sandbox: PgSandbox, start_proxy: StartProxy
) -> None:
    port, forwarding = free_port(), free_port()
    config = tls_config(pg_tls_sandbox, port, use_ssl=0)  # the proxy itself never speaks TLS on this path
    config["pgsql_forward_listeners"] = [{"port": forwarding, "hostgroup_id": HG}]
    start_proxy(config)
    # verify-full against the sandbox's CA: the certificate the client checks is the server's, not one of the proxy's
    verified = {"sslmode": "verify-full", "sslrootcert": str(pg_tls_sandbox.ca_file)}
    with connect(forwarding, **verified) as conn:
        assert conn.pgconn.ssl_in_use
        assert conn.execute(ENCRYPTED).fetchone() == (True,)
        assert conn.execute("SELECT inet_server_port()").fetchone() == (pg_tls_sandbox.primary().port,)
    with pytest.raises(psycopg.OperationalError, match=NO_ENCRYPTION):
        connect(forwarding, sslmode="disable")
