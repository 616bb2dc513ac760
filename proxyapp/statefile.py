"""Files the proxy keeps its state in (the node's config and applied version, the XA decision logs): written
whole or not at all. A write is staged first (written and synced beside its file, where a full disk fails it
before anything changed) and then committed (a rename, which needs no space)."""

from __future__ import annotations

import os
from pathlib import Path


def stage(path: Path, text: str) -> Path:
    """``text`` written and synced to a temporary file beside ``path`` (owner-only, 0600), which ``commit`` puts in
    place; OSError (a full disk, a file too large) with nothing left behind."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return tmp


def commit(tmp: Path, path: Path) -> None:
    """Put the staged file ``tmp`` in place of ``path`` (a rename, synced)."""
    os.replace(tmp, path)
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


def write_atomically(path: Path, text: str) -> None:
    """Replace ``path`` with ``text``: staged, then committed."""
    commit(stage(path, text), path)
