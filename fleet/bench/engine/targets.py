"""Where a bench run sends its statements: MySQL DSNs, each a direct server or a proxy node."""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import parse_qs, unquote, urlsplit

DEFAULT_PORT = 3306


class TargetError(ValueError):
    """A target that cannot be understood; the message names the DSN's bad part."""


@dataclass(frozen=True)
class Target:
    """One MySQL endpoint. ``safe``: marked safe for benchmarks (a workload that writes may run against it)."""

    name: str
    host: str
    port: int = DEFAULT_PORT
    user: str = ""
    password: str = ""
    database: str = ""
    safe: bool = False

    @property
    def dsn(self) -> str:
        """The DSN without its password (what reports show)."""
        database = f"/{self.database}" if self.database else ""
        return f"mysql://{self.user}@{self.host}:{self.port}{database}"

    def describe(self) -> dict[str, object]:
        """Name, DSN (no password) and whether it is safe, for results."""
        return {"name": self.name, "dsn": self.dsn, "safe": self.safe}


def parse_dsn(text: str, name: str | None = None) -> Target:
    """A target from ``mysql://USER:PASSWORD@HOST:PORT/DATABASE?name=NAME&safe=1`` or mydbtest's
    ``USER/PASSWORD@HOST:PORT:DATABASE``; TargetError naming what is wrong."""
    text = text.strip()
    if not text:
        raise TargetError("target: an empty DSN")
    if "://" not in text:
        return _mydbtest(text, name)
    parts = urlsplit(text)
    if parts.scheme not in ("mysql", "mariadb"):
        raise TargetError(f"target {text!r}: the scheme must be mysql:// (got {parts.scheme}://)")
    if not parts.hostname:
        raise TargetError(f"target {text!r}: no host")
    try:
        port = parts.port or DEFAULT_PORT
    except ValueError:
        raise TargetError(f"target {text!r}: the port is not a number from 1 to 65535") from None
    query = {key: values[-1] for key, values in parse_qs(parts.query, keep_blank_values=True).items()}
    unknown = set(query) - {"name", "safe"}
    if unknown:
        raise TargetError(f"target {text!r}: unknown parameter {sorted(unknown)[0]!r} (name, safe)")
    safe_text = query.get("safe", "0").lower()
    if safe_text not in ("0", "1", "true", "false", "yes", "no"):
        raise TargetError(f"target {text!r}: safe must be 1 or 0, got {safe_text!r}")
    return Target(
        name=name or query.get("name") or f"{parts.hostname}:{port}",
        host=parts.hostname,
        port=port,
        user=unquote(parts.username or ""),
        password=unquote(parts.password or ""),
        database=unquote(parts.path.lstrip("/")),
        safe=safe_text in ("1", "true", "yes"),
    )


def _mydbtest(text: str, name: str | None) -> Target:
    """mydbtest's ``user test/test@10.70.241.51:3306:test``."""
    match = re.fullmatch(r"([^/@]*)/([^@]*)@([^:]+):(\d+)(?::(\w*))?", text)
    if match is None:
        raise TargetError(f"target {text!r}: expected mysql://USER:PASSWORD@HOST:PORT/DATABASE")
    port = int(match.group(4))
    if not 1 <= port <= 65535:
        raise TargetError(f"target {text!r}: the port is not a number from 1 to 65535")
    return Target(
        name=name or f"{match.group(3)}:{port}",
        host=match.group(3),
        port=port,
        user=match.group(1),
        password=match.group(2),
        database=match.group(5) or "",
    )
