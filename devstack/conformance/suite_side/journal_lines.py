"""Writing the journal: JSON lines appended to the file named by ``CONFORMANCE_JOURNAL``, one ``start`` line as a
test begins (with the process id, so a hung test can be named) and one ``outcome`` line per result."""

from __future__ import annotations

import json
import os

#: The environment variable naming the journal file.
JOURNAL_ENV = "CONFORMANCE_JOURNAL"
#: How much of a failure's text is kept: its start (the first exception of a chain) and its end (the last).
HEAD_CHARS, TAIL_CHARS = 3000, 5000


def write(record: dict[str, object]) -> None:
    """Append one record as a line (one write on an O_APPEND file, so processes side by side do not interleave)."""
    path = os.environ.get(JOURNAL_ENV)
    if not path:
        return
    line = (json.dumps(record) + "\n").encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


def started(test: str) -> None:
    """Record that ``test`` begins in this process."""
    write({"event": "start", "test": test, "pid": os.getpid()})


def finished(test: str, outcome: str, detail: str = "") -> None:
    """Record one of ``test``'s results (passed, failed, error, skipped, xfail or xpass)."""
    if len(detail) > HEAD_CHARS + TAIL_CHARS:
        detail = f"{detail[:HEAD_CHARS]}\n[...]\n{detail[-TAIL_CHARS:]}"
    write({"event": "outcome", "test": test, "outcome": outcome, "detail": detail})
