"""The admin credential: a token that whoever drives the proxy's admin endpoint (and its workers' internal ports)
must show, as ``Authorization: Bearer TOKEN``.

It lives in a file only its owner may read: created 0600 with a random token at the proxy's first start (by
default ``admin.token`` beside the config file), or provisioned beforehand (a fleet's operator gives the same token
to the control plane). A file that group or others may read or write is refused, as ssh refuses a private key so
kept. The node agent and the supervisor read it; the worker processes get it from their supervisor.
"""

from __future__ import annotations

import contextlib
import hmac
import os
import secrets
import stat
from pathlib import Path

#: The file name beside the config file, when no other is given.
DEFAULT_NAME = "admin.token"
#: The realm named in a 401's WWW-Authenticate.
REALM = "proxyfleet-admin"


class CredentialError(Exception):
    """The token file cannot be used (its permissions, its content, or it cannot be created)."""


def default_path(config_path: Path) -> Path:
    """Where the token of a proxy run from ``config_path`` is kept unless told otherwise."""
    return config_path.with_name(DEFAULT_NAME)


def load_or_create(path: Path) -> str:
    """The token in ``path``; a new random one written there (0600) when the file does not exist. The file appears
    whole (written aside, then linked into place), so a reader never sees it half written, and of two processes
    creating it at once one wins and both use its token."""
    if path.exists():
        return read(path)
    token = secrets.token_urlsafe(32)
    aside = path.with_name(f".{path.name}.{os.getpid()}")
    try:
        fd = os.open(aside, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(token + "\n")
        os.link(aside, path)
    except FileExistsError:
        return read(path)
    except OSError as exc:
        raise CredentialError(f"cannot create the admin token file {path}: {exc.strerror}") from None
    finally:
        with contextlib.suppress(OSError):
            os.unlink(aside)
    return token


def read(path: Path) -> str:
    """The token in ``path``; CredentialError when the file is missing, open to others, or holds no token."""
    try:
        mode = path.stat().st_mode
        text = path.read_text()
    except OSError as exc:
        raise CredentialError(f"cannot read the admin token file {path}: {exc.strerror}") from None
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise CredentialError(
            f"the admin token file {path} may be read or written by others (mode {stat.S_IMODE(mode):04o}): "
            "chmod 600 it"
        )
    token = text.strip()
    if len(token) < 16 or any(c.isspace() for c in token):
        raise CredentialError(f"the admin token file {path} must hold one token of 16 characters or more")
    return token


def header(token: str) -> dict[str, str]:
    """The HTTP header that shows ``token``."""
    return {"Authorization": f"Bearer {token}"}


def shows(authorization: str | None, token: str) -> bool:
    """Whether an ``Authorization`` header value shows ``token`` (compared in constant time)."""
    if not authorization or not authorization.startswith("Bearer "):
        return False
    return hmac.compare_digest(authorization[len("Bearer ") :].strip().encode(), token.encode())
