"""TLS from the proxy to servers with ``use_ssl=1``: a MariaDB that requires TLS of its user is reached by sessions
and by the monitor, its certificate verified when asked, and a server that offers no TLS is never reached in clear."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pymysql
import pytest

from devstack.proxy import ProxyProcess
from devstack.sandbox import Sandbox
from proxyapp.mysql.tls import make_certificate
from tests.support.monitor_support import global_variables, own_sandbox, wait_for

StartProxy = Callable[[dict[str, Any]], ProxyProcess]
SECURE_USER, SECURE_PASSWORD = "secure", "secure-pass"


@pytest.fixture(scope="module")
def tls_box() -> Iterator[Sandbox]:
    """A MariaDB with TLS whose ``secure`` and ``monitor`` users must log in over TLS (REQUIRE SSL)."""
    with own_sandbox("tls", replicas=0, tls=True) as box:
        with box.primary().connect() as conn, conn.cursor() as cur:
            cur.execute(f"CREATE USER '{SECURE_USER}'@'%' IDENTIFIED BY '{SECURE_PASSWORD}' REQUIRE SSL")
            cur.execute(f"GRANT ALL ON *.* TO '{SECURE_USER}'@'%'")
            cur.execute("ALTER USER 'monitor'@'%' REQUIRE SSL")
        yield box


def config(port: int, use_ssl: bool, **variables: object) -> dict[str, Any]:
    """The server on ``port`` in hostgroup 10 (``use_ssl`` as given) and the secure user; fast monitor checks."""
    return {
        "mysql_servers": [{"hostgroup_id": 10, "hostname": "127.0.0.1", "port": port, "use_ssl": int(use_ssl)}],
        "mysql_users": [{"username": SECURE_USER, "password": SECURE_PASSWORD, "default_hostgroup": 10}],
        "global_variables": global_variables(
            {"mysql-connect_retries_on_failure": 0, "mysql-connect_timeout_server_max": 2000, **variables}
        ),
    }


def backend_answer(proxy: ProxyProcess, sql: str) -> tuple[Any, ...]:
    """The first row of ``sql`` run through the proxy by the secure user, in clear text on the client side."""
    with proxy.connect(SECURE_USER, SECURE_PASSWORD, ssl_disabled=True) as conn, conn.cursor() as cur:
        cur.execute(sql)
        return cur.fetchone()


def test_a_use_ssl_server_is_reached_over_verified_tls(tls_box: Sandbox, start_proxy: StartProxy) -> None:
    port = tls_box.primary().port
    variables = {"mysql-ssl_p2s_ca": tls_box.ca_file, "mysql-ssl_p2s_verify": "true"}
    proxy = start_proxy(config(port, True, **variables))
    name, cipher = backend_answer(proxy, "SHOW SESSION STATUS LIKE 'Ssl_cipher'")  # the server's view of the link
    assert name == "Ssl_cipher" and cipher
    assert backend_answer(proxy, "SELECT CURRENT_USER()") == (f"{SECURE_USER}@%",)

    def monitor_connected() -> bool:  # the monitor's user requires TLS too
        rows = [row for row in proxy.admin("GET", "/monitor/connect") if row["port"] == port]
        return bool(rows) and rows[-1]["connect_error"] is None

    wait_for(monitor_connected, "a monitor connect check over TLS", proxy)


def test_without_use_ssl_the_server_refuses_its_tls_user(tls_box: Sandbox, start_proxy: StartProxy) -> None:
    proxy = start_proxy(config(tls_box.primary().port, False))
    with pytest.raises(pymysql.err.OperationalError) as refused:
        backend_answer(proxy, "SELECT 1")
    assert refused.value.args[0] == 1045
    assert f"Access denied for user '{SECURE_USER}'" in refused.value.args[1]


def test_a_server_certificate_from_another_ca_is_refused(
    tls_box: Sandbox, start_proxy: StartProxy, tmp_path: Path
) -> None:
    other_ca = tmp_path / "other-ca.pem"
    other_ca.write_bytes(make_certificate("another CA", is_ca=True)[0])
    variables = {"mysql-ssl_p2s_ca": other_ca, "mysql-ssl_p2s_verify": "true"}
    proxy = start_proxy(config(tls_box.primary().port, True, **variables))
    with pytest.raises(pymysql.err.OperationalError) as refused:
        backend_answer(proxy, "SELECT 1")
    assert "TLS with 127.0.0.1:" in refused.value.args[1]
    assert "CERTIFICATE_VERIFY_FAILED" in refused.value.args[1]


def test_a_use_ssl_server_without_tls_is_never_reached_in_clear(sandbox: Sandbox, start_proxy: StartProxy) -> None:
    port = sandbox.primary().port  # the shared sandbox offers no TLS
    proxy = start_proxy(config(port, True))
    with pytest.raises(pymysql.err.OperationalError) as refused:
        backend_answer(proxy, "SELECT 1")
    assert f"127.0.0.1:{port} does not offer TLS, which its use_ssl=1 requires" in refused.value.args[1]
