"""TLS: the contexts the variables make, the record layer, a wire upgraded from bytes already buffered, and the
password check of caching_sha2_password's full authentication."""

from __future__ import annotations

import asyncio
import ssl
from pathlib import Path

import pytest
from cryptography import x509

from proxyapp.config.variables import Variables
from proxyapp.mysql import auth
from proxyapp.mysql.handshake import is_ssl_request, ssl_request
from proxyapp.mysql.packets import frame
from proxyapp.mysql.stream import WireProtocol
from proxyapp.mysql.tls import TlsError, TlsLayer, client_context, contexts, make_certificate, server_context


@pytest.fixture
def ca_and_server(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A CA's certificate, and a server certificate for localhost it signed with its key: (ca, cert, key) files."""
    ca = make_certificate("test CA", is_ca=True)
    cert, key = make_certificate("test server", issuer=ca)
    paths = tmp_path / "ca.pem", tmp_path / "cert.pem", tmp_path / "key.pem"
    for path, pem in zip(paths, (ca[0], cert, key), strict=True):
        path.write_bytes(pem)
    return paths


def test_certificates_are_signed_by_their_issuer_and_name_their_hosts() -> None:
    ca = make_certificate("test CA", is_ca=True)
    cert = x509.load_pem_x509_certificate(make_certificate("srv", issuer=ca, hosts=("db1", "10.0.0.5"))[0])
    assert cert.issuer == x509.load_pem_x509_certificate(ca[0]).subject
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert [str(n.value) for n in names] == ["db1", "10.0.0.5"]


def test_the_variables_make_both_contexts(ca_and_server: tuple[Path, Path, Path]) -> None:
    ca, cert, key = (str(path) for path in ca_and_server)
    made = contexts(Variables({"mysql-ssl_cert": cert, "mysql-ssl_key": key, "mysql-ssl_p2s_ca": ca}))
    assert made.frontend is not None
    assert made.frontend.minimum_version == ssl.TLSVersion.TLSv1_2
    assert made.frontend.verify_mode == ssl.CERT_NONE  # no mysql-ssl_ca: clients are not asked for certificates
    assert made.backend.verify_mode == ssl.CERT_NONE  # mysql-ssl_p2s_verify is false by default
    verifying = contexts(Variables({"mysql-ssl_p2s_ca": ca, "mysql-ssl_p2s_verify": "true", "mysql-ssl_ca": ca}))
    assert verifying.backend.verify_mode == ssl.CERT_REQUIRED and verifying.backend.check_hostname
    assert verifying.frontend is not None and verifying.frontend.verify_mode == ssl.CERT_OPTIONAL


def test_no_frontend_context_without_have_ssl() -> None:
    assert contexts(Variables({"mysql-have_ssl": "false"})).frontend is None


@pytest.mark.parametrize(
    ("variables", "named"),
    [
        ({"mysql-ssl_cert": "/nonexistent/cert.pem", "mysql-ssl_key": "/nonexistent/key.pem"}, "mysql-ssl_cert"),
        ({"mysql-ssl_p2s_ca": "/nonexistent/ca.pem", "mysql-ssl_p2s_verify": "1"}, "mysql-ssl_p2s_ca"),
        ({"mysql-ssl_ca": "/nonexistent/ca.pem"}, "mysql-ssl_ca"),
    ],
)
def test_a_missing_file_is_named_with_its_variable(variables: dict[str, str], named: str) -> None:
    with pytest.raises(TlsError) as refused:
        contexts(Variables(variables))
    assert str(refused.value).startswith(f"{named}: ")
    assert "/nonexistent/" in str(refused.value)


def test_a_file_that_is_not_a_certificate_is_refused(tmp_path: Path, ca_and_server: tuple[Path, Path, Path]) -> None:
    junk = tmp_path / "junk.pem"
    junk.write_text("not a certificate\n")
    _, _, key = ca_and_server
    with pytest.raises(TlsError, match=r"^mysql-ssl_cert, mysql-ssl_key: .*junk\.pem.* not a PEM certificate"):
        server_context(str(junk), str(key))


def test_layers_handshake_and_carry_records(ca_and_server: tuple[Path, Path, Path]) -> None:
    ca, cert, key = ca_and_server
    server = TlsLayer(server_context(str(cert), str(key)), True)
    client = TlsLayer(client_context(str(ca), verify=True), False, "localhost")
    to_server, to_client = client.handshake(b"")[1], b""
    for _ in range(4):
        server_done, to_client = server.handshake(to_server)
        client_done, to_server = client.handshake(to_client)
        if server_done and client_done:
            break
    server.unwrap(to_server)  # the client's last handshake records
    assert server.cipher() and client.version() in ("TLSv1.2", "TLSv1.3")
    assert server.unwrap(client.wrap(b"x" * 100_000)) == b"x" * 100_000  # several records
    assert client.unwrap(server.wrap(b"answer")) == b"answer"


def test_garbage_instead_of_a_client_hello_fails_the_handshake() -> None:
    server = TlsLayer(server_context("", ""), True)  # the process's self-signed certificate
    with pytest.raises(ssl.SSLError):
        server.handshake(b"GET / HTTP/1.1\r\nHost: proxy\r\n\r\n")


@pytest.mark.filterwarnings("ignore:ssl.TLSVersion.TLSv1_1 is deprecated:DeprecationWarning")
def test_a_tls_1_1_client_is_refused() -> None:
    server = TlsLayer(server_context("", ""), True)
    old = client_context()
    old.minimum_version = old.maximum_version = ssl.TLSVersion.TLSv1_1
    old.set_ciphers("ALL:@SECLEVEL=0")
    try:
        hello = TlsLayer(old, False).handshake(b"")[1]
    except ssl.SSLError:  # this OpenSSL cannot even offer TLS 1.1: nothing to refuse
        pytest.skip("TLS 1.1 is disabled in this OpenSSL build")
    with pytest.raises(ssl.SSLError):
        server.handshake(hello)


def test_ssl_request_is_told_from_a_login() -> None:
    request = ssl_request(0x000FA685, 1 << 24, 45)
    assert is_ssl_request(request)
    assert not is_ssl_request(request[:-1])
    assert not is_ssl_request(b"\x85\xa6\x0f\x00" + request[4:] + b"app\x00")  # a login (longer, no SSL bit)


def test_full_authentication_checks_the_clear_password() -> None:
    assert auth.verify_clear("secret", b"secret").ok
    assert not auth.verify_clear("secret", b"Secret").ok
    hashed = auth.verify_clear(auth.native_hash("secret"), b"secret")
    assert hashed.ok and hashed.stage1 is not None
    assert auth.native_token_from_stage1(hashed.stage1, b"s" * 20) == auth.native_token("secret", b"s" * 20)
    assert not auth.verify_clear(auth.native_hash("secret"), b"other").ok
    assert auth.verify_clear("", b"").ok and not auth.verify_clear("", b"x").ok


async def _upgrade(data_after_request: bytes, ca: Path, cert: Path, key: Path) -> tuple[bytes, bytes | Exception]:
    """A wire upgraded to TLS by a client that sends its SSL request and ``data_after_request`` (its ClientHello, or
    garbage) in one write; returns what the client read back, and the packet the wire read after the upgrade (or the
    error the upgrade raised)."""
    loop = asyncio.get_running_loop()
    protocols: list[WireProtocol] = []

    def accept() -> WireProtocol:  # not a subclass: the compiled WireProtocol takes none
        protocols.append(WireProtocol())
        return protocols[-1]

    server = await loop.create_server(accept, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    while not protocols or protocols[0].wire is None:  # the server side's connection_made runs in a later callback
        await asyncio.sleep(0)
    wire = protocols[0].wire

    async def serve() -> bytes | Exception:
        try:
            assert is_ssl_request(await wire.read_payload())
            await wire.start_tls(server_context(str(cert), str(key)), True)
            payload = await wire.read_payload()
            wire.send(b"pong", wire.seq + 1)
            return payload
        except ssl.SSLError as failed:
            wire.close()
            return failed

    served = loop.create_task(serve())
    client = TlsLayer(client_context(str(ca), verify=True), False, "localhost")
    hello = data_after_request or client.handshake(b"")[1]
    writer.write(frame(ssl_request(0x000FA685, 1 << 24, 45), 1) + hello)
    answer = b""
    if not data_after_request:
        done = False
        while not done:
            done, out = client.handshake(await reader.read(65536))
            # The client's last handshake records and its first packet in one write, as drivers often send them.
            writer.write(out + (client.wrap(frame(b"ping", 2)) if done else b""))
        while not answer:
            answer = client.unwrap(await reader.read(65536))
    else:
        answer = await reader.read(65536)
    result = await served
    writer.close()
    server.close()
    return answer, result


def test_a_client_hello_sent_with_the_ssl_request_is_not_lost(ca_and_server: tuple[Path, Path, Path]) -> None:
    answer, read = asyncio.run(_upgrade(b"", *ca_and_server))
    assert read == b"ping"
    assert answer == frame(b"pong", 3)


def test_garbage_after_the_ssl_request_ends_the_upgrade(ca_and_server: tuple[Path, Path, Path]) -> None:
    answer, read = asyncio.run(_upgrade(b"\x16\x03\x01\x00\x05hello, not TLS at all" * 4, *ca_and_server))
    assert isinstance(read, ssl.SSLError)
    assert answer == b"" or answer.startswith(b"\x15")  # closed, perhaps after a TLS alert
