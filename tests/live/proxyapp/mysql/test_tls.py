"""TLS between clients and the proxy: drivers and the CLI verify the proxy's certificate, use_ssl users are refused in
clear text as a wrong password is, caching_sha2_password's full authentication over TLS, garbage instead of TLS,
and a certificate reloaded under sessions that stay up."""

from __future__ import annotations

import contextlib
import queue
import shutil
import ssl
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import mariadb
import pymysql
import pytest
from cryptography import x509

from devstack.proxy import ProxyProcess, small_pool_config
from devstack.sandbox import APP_PASSWORD, APP_USER, Sandbox
from devstack.stack import wait_until
from proxyapp.mysql import auth
from proxyapp.mysql.constants import Cap
from proxyapp.mysql.handshake import ssl_request
from proxyapp.mysql.tls import make_certificate
from tests.support.rawclient import (
    APP2_PASSWORD,
    APP2_USER,
    DEFAULT_CAPS,
    RawClient,
    ensure_backend_users,
    parse_err,
    parse_ok,
)

StartProxy = Callable[[dict[str, Any]], ProxyProcess]


class Certificates:
    """A test CA, and two server certificates for 127.0.0.1 it signed (A and B), as PEM files in ``directory``."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        ca = make_certificate("test CA", is_ca=True)
        self.ca = directory / "ca.pem"
        self.ca.write_bytes(ca[0])
        self.pairs = {name: make_certificate(f"proxy {name}", issuer=ca) for name in ("A", "B")}
        self.cert, self.key = directory / "cert.pem", directory / "key.pem"
        self.install("A")

    def install(self, name: str) -> None:
        """Put certificate ``name`` where the proxy's config points (``cert``, ``key``)."""
        cert, key = self.pairs[name]
        self.cert.write_bytes(cert)
        self.key.write_bytes(key)

    def serial(self, name: str) -> int:
        """The serial number of certificate ``name``."""
        return x509.load_pem_x509_certificate(self.pairs[name][0]).serial_number

    def variables(self) -> dict[str, str]:
        """The proxy's TLS variables for these files."""
        return {"mysql-ssl_cert": str(self.cert), "mysql-ssl_key": str(self.key)}

    def client_context(self) -> ssl.SSLContext:
        """A client context that verifies the proxy against the test CA, host name (127.0.0.1) included."""
        context = ssl.create_default_context(cafile=str(self.ca))
        context.check_hostname = True
        return context


@pytest.fixture
def certs(tmp_path: Path) -> Certificates:
    """Fresh certificates for one test."""
    directory = tmp_path / "certs"
    directory.mkdir()
    return Certificates(directory)


def proxy_config(sandbox: Sandbox, certs: Certificates, users: list[dict[str, Any]] | None = None, **variables: str):
    """One hostgroup on the sandbox's primary, TLS with ``certs``, and ``users`` (the app user by default)."""
    config = small_pool_config(sandbox.primary().port, 4, **certs.variables(), **variables)
    if users is not None:
        config["mysql_users"] = users
    return config


def peer_serial(conn: pymysql.Connection) -> int:
    """The serial number of the certificate the proxy presented on ``conn``."""
    sock = conn._sock
    assert isinstance(sock, ssl.SSLSocket), "the connection is not TLS"
    der = sock.getpeercert(binary_form=True)
    assert der is not None
    return x509.load_der_x509_certificate(der).serial_number


def test_pymysql_verifies_the_proxy_and_runs_queries_over_tls(
    sandbox: Sandbox, start_proxy: StartProxy, certs: Certificates
) -> None:
    proxy = start_proxy(proxy_config(sandbox, certs))
    with proxy.connect(ssl=certs.client_context()) as conn, conn.cursor() as cur:
        sock = conn._sock
        assert isinstance(sock, ssl.SSLSocket)
        assert sock.cipher() is not None and sock.version() in ("TLSv1.2", "TLSv1.3")
        assert peer_serial(conn) == certs.serial("A")
        cur.execute("SELECT REPEAT('x', 300000), 42")  # a row larger than a TLS record
        value, answer = cur.fetchone()
        assert (len(value), answer) == (300_000, 42)
    stats = proxy.stats()["global"]
    assert stats["Client_Connections_tls"] >= 1 and stats["Client_TLS_handshake_errors"] == 0


def test_the_cli_requires_and_verifies_tls(sandbox: Sandbox, start_proxy: StartProxy, certs: Certificates) -> None:
    proxy = start_proxy(proxy_config(sandbox, certs))
    client = shutil.which("mariadb") or shutil.which("mysql")
    assert client is not None
    command = [client, "-h127.0.0.1", f"-P{proxy.port}", f"-u{APP_USER}", f"-p{APP_PASSWORD}", "--ssl"]
    command += [f"--ssl-ca={certs.ca}", "--ssl-verify-server-cert", "-e", "status; SELECT 6 * 7 AS answer"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    assert "Cipher in use is TLS" in done.stdout  # the client's own view of its connection
    assert "42" in done.stdout.split("answer")[-1]


def test_libmariadb_requires_and_verifies_tls(sandbox: Sandbox, start_proxy: StartProxy, certs: Certificates) -> None:
    proxy = start_proxy(proxy_config(sandbox, certs))
    conn = mariadb.connect(
        host="127.0.0.1",
        port=proxy.port,
        user=APP_USER,
        password=APP_PASSWORD,
        ssl_ca=str(certs.ca),
        ssl_verify_cert=True,
    )
    try:
        assert conn.tls_cipher and conn.tls_version in ("TLSv1.2", "TLSv1.3")  # the client's view
        cur = conn.cursor()
        cur.execute("SELECT ?", (42,))  # the binary protocol too
        assert cur.fetchone() == (42,)
    finally:
        conn.close()


def test_a_use_ssl_user_is_refused_in_clear_text_as_a_wrong_password_is(
    sandbox: Sandbox, start_proxy: StartProxy, certs: Certificates
) -> None:
    users = [{"username": APP_USER, "password": APP_PASSWORD, "default_hostgroup": 10, "use_ssl": 1}]
    proxy = start_proxy(proxy_config(sandbox, certs, users))
    with pytest.raises(pymysql.err.OperationalError) as clear:
        proxy.connect(ssl_disabled=True)
    with pytest.raises(pymysql.err.OperationalError) as wrong:
        proxy.connect(password="wrong", ssl=certs.client_context())
    denied = (1045, f"Access denied for user '{APP_USER}'@'127.0.0.1' (using password: YES)")
    assert clear.value.args == wrong.value.args == denied
    with proxy.connect(ssl=certs.client_context()) as conn, conn.cursor() as cur:
        cur.execute("SELECT CURRENT_USER() LIKE 'app@%'")
        assert cur.fetchone() == (1,)
    assert proxy.stats()["global"]["Access_Denied_Wrong_Password"] == 2


def test_changing_user_to_a_use_ssl_user_needs_tls(
    sandbox: Sandbox, start_proxy: StartProxy, certs: Certificates
) -> None:
    ensure_backend_users(sandbox)
    users = [
        {"username": APP2_USER, "password": APP2_PASSWORD, "default_hostgroup": 10},
        {"username": APP_USER, "password": APP_PASSWORD, "default_hostgroup": 10, "use_ssl": 1},
    ]
    proxy = start_proxy(proxy_config(sandbox, certs, users))
    login = {"host": "127.0.0.1", "port": proxy.port, "user": APP2_USER, "password": APP2_PASSWORD}
    clear = mariadb.connect(**login)
    try:
        assert clear.tls_cipher is None
        with pytest.raises(mariadb.OperationalError) as refused:
            clear.change_user(APP_USER, APP_PASSWORD, "")
        assert refused.value.errno == 1045
    finally:
        with contextlib.suppress(mariadb.Error):
            clear.close()
    secure = mariadb.connect(**login, ssl_ca=str(certs.ca), ssl_verify_cert=True)
    try:
        secure.change_user(APP_USER, APP_PASSWORD, "")
        cur = secure.cursor()
        cur.execute("SELECT CURRENT_USER() LIKE 'app@%'")
        assert cur.fetchone() == (1,)
    finally:
        secure.close()


def _sha2_login(proxy: ProxyProcess, certs: Certificates | None, user: str, password: str) -> tuple[bytes, bytes]:
    """Log in with caching_sha2_password, over TLS unless ``certs`` is None, sending a fast-auth reply for
    ``password``; returns the proxy's first answer and its final one (after the clear password when it asked)."""
    client = RawClient(proxy.port)
    try:
        client.read_greeting()
        seq = 1
        if certs is not None:
            client.start_tls(certs.client_context())
            seq = 2
        caps = DEFAULT_CAPS | Cap.SSL if certs is not None else DEFAULT_CAPS
        client.send_packet(client.login_payload(user, password, None, caps, auth.CACHING_SHA2), seq)
        first = client.read_packet()
        if first != b"\x01" + auth.SHA2_FULL_AUTH:
            return first, first
        client.send_packet(password.encode() + b"\x00", client.seq + 1)
        final = client.read_packet()
        if final[:1] == b"\x00":
            client.send_packet(b"\x03SELECT 1", 0)
            assert client.read_packet() == b"\x01"  # one column: the session reaches its backend
        return first, final
    finally:
        client.close()


def test_caching_sha2_full_authentication_over_tls(
    sandbox: Sandbox, start_proxy: StartProxy, certs: Certificates
) -> None:
    # The password stored as a native hash: a SHA-2 scramble cannot be checked against it, the clear password can.
    users = [{"username": APP_USER, "password": auth.native_hash(APP_PASSWORD), "default_hostgroup": 10}]
    config = proxy_config(sandbox, certs, users, **{"mysql-default_authentication_plugin": "caching_sha2_password"})
    proxy = start_proxy(config)
    first, final = _sha2_login(proxy, certs, APP_USER, APP_PASSWORD)
    assert first == b"\x01" + auth.SHA2_FULL_AUTH
    assert parse_ok(final).status is not None
    # A wrong password and an unknown user go through the same exchange and get the same answer.
    for user, password in ((APP_USER, "wrong"), ("nobody", APP_PASSWORD)):
        first, final = _sha2_login(proxy, certs, user, password)
        assert first == b"\x01" + auth.SHA2_FULL_AUTH
        assert parse_err(final).code == 1045
    # In clear text the password is never asked for: the login is switched to mysql_native_password instead.
    first, _ = _sha2_login(proxy, None, APP_USER, APP_PASSWORD)
    assert first.startswith(b"\xfe" + auth.NATIVE.encode())


def test_garbage_instead_of_a_tls_handshake_is_dropped_and_counted(
    sandbox: Sandbox, start_proxy: StartProxy, certs: Certificates
) -> None:
    proxy = start_proxy(proxy_config(sandbox, certs))
    # Not TLS; a record that is not a ClientHello (a ServerHello); zeros.
    for garbage in (b"GET / HTTP/1.1\r\n\r\n", b"\x16\x03\x03\x00\x04\x02\x00\x00\x00", b"\x00" * 4096):
        client = RawClient(proxy.port)
        client.read_greeting()
        client.send_packet(ssl_request(DEFAULT_CAPS, 1 << 24, 45), 1)
        client.send_raw(garbage)
        assert client.wait_closed()
        client.close()
    assert proxy.stats()["global"]["Client_TLS_handshake_errors"] == 3
    assert "Traceback" not in proxy.log()
    with proxy.connect(ssl=certs.client_context()) as conn, conn.cursor() as cur:  # the proxy serves on
        cur.execute("SELECT 1")
        assert cur.fetchone() == (1,)


def test_a_reloaded_certificate_serves_new_sessions_and_established_ones_stay_up(
    sandbox: Sandbox, start_proxy: StartProxy, certs: Certificates
) -> None:
    proxy = start_proxy(proxy_config(sandbox, certs))
    before = proxy.connect(ssl=certs.client_context())
    try:
        assert peer_serial(before) == certs.serial("A")
        certs.install("B")
        assert proxy.admin("POST", "/reload")["ok"] is True
        with proxy.connect(ssl=certs.client_context()) as after:
            assert peer_serial(after) == certs.serial("B")
        with before.cursor() as cur:  # the session made with A goes on
            cur.execute("SELECT 'still here'")
            assert cur.fetchone() == ("still here",)
        # A certificate file that cannot be used is refused, naming its variable; the one loaded stays.
        certs.cert.write_text("not a certificate\n")
        refused = proxy.admin("POST", "/reload")
        assert refused["ok"] is False
        assert refused["errors"][0].startswith("global_variables mysql-ssl_cert, mysql-ssl_key: ")
        with proxy.connect(ssl=certs.client_context()) as later:
            assert peer_serial(later) == certs.serial("B")
    finally:
        before.close()


def test_a_session_killed_by_the_admin_tells_its_tls_client_why_before_the_close(
    sandbox: Sandbox, start_proxy: StartProxy, certs: Certificates
) -> None:
    """An idle session over TLS killed through the admin endpoint (the web UI's KILL): libmariadb (the CLI's library)
    reads MariaDB's 1927 "Connection was killed", not a TLS connection cut ("TLS/SSL error: unexpected eof"); a
    running one gets it as its statement's answer."""
    proxy = start_proxy(proxy_config(sandbox, certs))
    connect = dict(host="127.0.0.1", port=proxy.port, user=APP_USER, password=APP_PASSWORD, ssl_ca=str(certs.ca))
    idle = mariadb.connect(**connect, ssl_verify_cert=True)
    busy = mariadb.connect(**connect, ssl_verify_cert=True)
    try:
        assert proxy.admin("POST", f"/processlist/{idle.connection_id}/kill") == {"ok": True}
        with pytest.raises(mariadb.Error) as killed:
            idle.cursor().execute("SELECT 1")
        assert (killed.value.errno, killed.value.args[0]) == (1927, "Connection was killed")

        answers: queue.Queue[BaseException | None] = queue.Queue()
        sleeper = threading.Thread(target=run_into, args=(busy, "SELECT SLEEP(60)", answers), daemon=True)
        sleeper.start()

        def sleeping() -> bool:
            return any(row["command"] == "Query" for row in proxy.admin("GET", "/processlist"))

        wait_until(sleeping, "the statement runs", timeout=10)
        assert proxy.admin("POST", f"/processlist/{busy.connection_id}/kill") == {"ok": True}
        answer = answers.get(timeout=10)
        assert isinstance(answer, mariadb.Error) and (answer.errno, answer.args[0]) == (1927, "Connection was killed")
    finally:
        idle.close()
        busy.close()


def run_into(conn: mariadb.Connection, sql: str, answers: queue.Queue[BaseException | None]) -> None:
    """Run ``sql`` on ``conn`` and put what it raised (None: nothing) in ``answers``."""
    try:
        conn.cursor().execute(sql)
    except mariadb.Error as error:
        answers.put(error)
    else:
        answers.put(None)
