"""TLS on MySQL connections, both sides: the contexts a config asks for, a self-signed certificate when it names
none, and the record layer a ``Wire`` reads and writes through once a connection is upgraded.

The layer is the stdlib's ``ssl.SSLObject`` over two memory BIOs rather than ``loop.start_tls``: a MySQL client
sends its SSL request and its TLS ClientHello back to back, so the ClientHello may already sit in the wire's read
buffer when the SSL request is parsed, and ``start_tls`` offers no way to hand it those bytes. Here the handshake
starts from whatever the buffer holds (``Wire.start_tls``). At least TLS 1.2, both sides.
"""

from __future__ import annotations

import datetime
import os
import ssl
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path

MIN_VERSION = ssl.TLSVersion.TLSv1_2
#: Bytes of plaintext asked of the TLS object per read (a record holds at most 16 KiB).
_READ_SIZE = 1 << 16

#: The global variables read here (``proxyapp/config/variables.py`` documents them).
HAVE_SSL = "mysql-have_ssl"
FRONTEND_FILES = ("mysql-ssl_cert", "mysql-ssl_key", "mysql-ssl_ca")
BACKEND_FILES = ("mysql-ssl_p2s_cert", "mysql-ssl_p2s_key", "mysql-ssl_p2s_ca")
BACKEND_VERIFY = "mysql-ssl_p2s_verify"


class TlsError(ValueError):
    """A certificate, key or CA file named by a variable cannot be used; the message names the variable."""


class TlsLayer:
    """The TLS records of one connection: ``handshake`` until it is done, then ``unwrap`` what arrives and ``wrap``
    what is sent."""

    __slots__ = ("incoming", "outgoing", "tls")

    def __init__(self, context: ssl.SSLContext, server_side: bool, server_hostname: str | None = None) -> None:
        self.incoming = ssl.MemoryBIO()
        self.outgoing = ssl.MemoryBIO()
        self.tls = context.wrap_bio(self.incoming, self.outgoing, server_side, server_hostname)

    def handshake(self, data: bytes) -> tuple[bool, bytes]:
        """Feed ``data`` received; returns (whether the handshake is done, the bytes to send). ``ssl.SSLError``
        when the peer sent something that is not TLS or failed the handshake."""
        if data:
            self.incoming.write(data)
        try:
            self.tls.do_handshake()
            done = True
        except ssl.SSLWantReadError:
            done = False
        return done, self.outgoing.read()

    def unwrap(self, data: bytes) -> bytes:
        """The plaintext carried by the records in ``data`` (and by records fed before but not yet read)."""
        if data:
            self.incoming.write(data)
        chunks = []
        while True:
            try:
                chunk = self.tls.read(_READ_SIZE)
            except ssl.SSLWantReadError:
                break
            if not chunk:  # the peer's close_notify: the TCP close follows
                break
            chunks.append(chunk)
        return b"".join(chunks)

    def wrap(self, raw: bytes) -> bytes:
        """``raw`` as TLS records to send (with anything the layer had to send besides)."""
        self.tls.write(raw)
        return self.outgoing.read()

    def close_notify(self) -> bytes:
        """The alert that ends the TLS session (close_notify), to send before the TCP close so that the peer reads a
        close, not a cut connection; nothing when the session is not up."""
        try:
            self.tls.unwrap()
        except ssl.SSLWantReadError:  # sent ours; the peer's answer is not waited for
            pass
        except ssl.SSLError:
            return b""
        return self.outgoing.read()

    def pending(self) -> bytes:
        """Records the layer produced on its own while reading (a TLS 1.3 key update's answer), to send."""
        return self.outgoing.read() if self.outgoing.pending else b""

    def cipher(self) -> str:
        """The negotiated cipher suite ('' before the handshake)."""
        found = self.tls.cipher()
        return found[0] if found else ""

    def version(self) -> str:
        """The negotiated protocol version, e.g. 'TLSv1.3'."""
        return self.tls.version() or ""


@dataclass(frozen=True, slots=True)
class TlsContexts:
    """What a config's TLS variables make: the context clients are offered (None: ``mysql-have_ssl`` is false)
    and the one backends with ``use_ssl=1`` are reached with."""

    frontend: ssl.SSLContext | None
    backend: ssl.SSLContext


def contexts(variables: Mapping[str, object]) -> TlsContexts:
    """Build both contexts from the global variables (names as in ``proxyapp.config.variables``), reading the files
    they name now; TlsError names the variable whose file cannot be used."""
    frontend = None
    if variables[HAVE_SSL]:
        cert, key, ca = (str(variables[name]) for name in FRONTEND_FILES)
        frontend = server_context(cert, key, ca)
    cert, key, ca = (str(variables[name]) for name in BACKEND_FILES)
    return TlsContexts(frontend, client_context(ca, cert, key, bool(variables[BACKEND_VERIFY])))


def server_context(cert: str, key: str, ca: str = "") -> ssl.SSLContext:
    """The context the proxy offers clients: ``cert`` and ``key`` (PEM files; both empty: the process's self-signed
    certificate), and with ``ca`` client certificates are asked for and must chain to it when one is sent."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = MIN_VERSION
    if cert:
        _load_chain(context, cert, key, FRONTEND_FILES)
    else:
        cert_pem, key_pem = self_signed()
        _load_pem_chain(context, cert_pem, key_pem)
    if ca:
        _load_ca(context, ca, FRONTEND_FILES[2])
        context.verify_mode = ssl.CERT_OPTIONAL
    return context


def client_context(ca: str = "", cert: str = "", key: str = "", verify: bool = False) -> ssl.SSLContext:
    """The context the proxy reaches TLS backends with: verifying their certificate and host name against ``ca``
    (empty: the system's store) when ``verify``, presenting ``cert`` and ``key`` when set."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version = MIN_VERSION
    if verify:
        if ca:
            _load_ca(context, ca, BACKEND_FILES[2])
        else:
            context.load_default_certs()
    else:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if cert:
        _load_chain(context, cert, key, BACKEND_FILES)
    return context


def _load_chain(context: ssl.SSLContext, cert: str, key: str, names: tuple[str, str, str]) -> None:
    for path, name in ((cert, names[0]), (key, names[1])):
        if not path or not os.access(path, os.R_OK):
            raise TlsError(f"{name}: cannot read {path!r}" if path else f"{name}: not set (required by {names[0]})")
    try:
        context.load_cert_chain(cert, key)
    except (ssl.SSLError, OSError) as exc:
        raise TlsError(
            f"{names[0]}, {names[1]}: {cert!r} and {key!r} are not a PEM certificate and its key: {exc}"
        ) from None


def _load_ca(context: ssl.SSLContext, ca: str, name: str) -> None:
    try:
        context.load_verify_locations(cafile=ca)
    except (ssl.SSLError, OSError) as exc:
        raise TlsError(f"{name}: cannot load CA certificates from {ca!r}: {exc}") from None


def _load_pem_chain(context: ssl.SSLContext, cert_pem: bytes, key_pem: bytes) -> None:
    """Load a certificate and key held in memory (``ssl`` reads only files: a private directory, removed after)."""
    with tempfile.TemporaryDirectory(prefix="proxyfleet-tls-") as directory:
        cert, key = Path(directory, "cert.pem"), Path(directory, "key.pem")
        cert.write_bytes(cert_pem)
        key.touch(mode=0o600)
        key.write_bytes(key_pem)
        context.load_cert_chain(cert, key)


@cache
def self_signed() -> tuple[bytes, bytes]:
    """This process's self-signed certificate and key (PEM), made at first use: what clients are offered when
    ``mysql-ssl_cert`` is not set (encryption without authentication of the proxy, as ProxySQL's generated one)."""
    return make_certificate("ProxyFleet self-signed")


def make_certificate(
    common_name: str,
    *,
    issuer: tuple[bytes, bytes] | None = None,
    hosts: tuple[str, ...] = ("localhost", "127.0.0.1"),
    is_ca: bool = False,
    days: int = 825,
) -> tuple[bytes, bytes]:
    """A new certificate and its private key (PEM, EC P-256), signed by ``issuer`` (a CA's certificate and key
    PEM) or by itself, valid for ``hosts`` (names or IP addresses); for the proxy and for test certificates."""
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    signer_name, signer_key = subject, key
    if issuer is not None:
        signer_name = x509.load_pem_x509_certificate(issuer[0]).subject
        loaded = serialization.load_pem_private_key(issuer[1], None)
        assert isinstance(loaded, ec.EllipticCurvePrivateKey)
        signer_key = loaded
    now = datetime.datetime.now(datetime.UTC)
    names: list[x509.GeneralName] = []
    for host in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(signer_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=is_ca, path_length=None), critical=True)
    )
    if not is_ca:
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    cert = builder.sign(signer_key, hashes.SHA256())
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return cert.public_bytes(serialization.Encoding.PEM), key_pem
