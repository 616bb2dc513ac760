"""Key files of the control plane (the sealing keys, the signing key): kept outside the database, readable by their
owner only, made on first use."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path

log = logging.getLogger(__name__)


def read_or_create(path: Path, make: Callable[[], str], warning: str) -> str:
    """The text of the key file ``path``. When there is none yet, ``make()`` is written there first (0600, in a 0700
    directory, created exclusively: of two processes racing, both use the file that won) and ``warning`` is logged
    with the path."""
    try:
        return path.read_text(encoding="ascii")
    except FileNotFoundError:
        pass
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    text = make()
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # another process made it first: use theirs
        return path.read_text(encoding="ascii")
    with os.fdopen(fd, "w", encoding="ascii") as f:
        f.write(text)
    log.warning("made %s: %s", path, warning)
    return text
