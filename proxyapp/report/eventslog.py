"""The query events log (ProxySQL's eventslog in its JSON format): one JSON object per line."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import IO, Any

from proxyapp.shown import shown

log = logging.getLogger("proxyapp.report.eventslog")


class EventsLog:
    """Appends query events to ``mysql-eventslog_filename``; a file that cannot be written is reported once."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._file: IO[str] | None = None
        self._failed = False

    def write(self, event: dict[str, Any]) -> None:
        """Append one event."""
        if not self.path or self._failed:
            return
        try:
            if self._file is None:
                Path(self.path).parent.mkdir(parents=True, exist_ok=True)
                self._file = open(self.path, "a", encoding="utf-8", buffering=1)  # noqa: SIM115 - kept open
            self._file.write(json.dumps(event, separators=(",", ":"), default=str) + "\n")
        except OSError as exc:
            self._failed = True
            log.error("events log %s is not writable, no more events are logged: %s", self.path, exc)

    def close(self) -> None:
        """Close the file."""
        if self._file is not None:
            self._file.close()
            self._file = None


def query_event(
    *,
    username: str,
    schemaname: str,
    client: str,
    hostgroup: int,
    server: str,
    digest: str,
    query: str,
    thread_id: int,
    started: float,
    rows_sent: int,
    rows_affected: int,
    last_insert_id: int,
    error: str | None,
) -> dict[str, Any]:
    """One COM_QUERY event with ProxySQL's JSON field names; ``started`` is a ``time.time()`` value. A query's bytes
    that are not UTF-8 are shown as ``\\xff`` (``shown``), in its text, its schema and the server's error."""
    ended = time.time()
    event: dict[str, Any] = {
        "event": "COM_QUERY",
        "thread_id": thread_id,
        "username": username,
        "schemaname": shown(schemaname),
        "client": client,
        "hostgroup_id": hostgroup,
        "server": server,
        "digest": digest,
        "query": shown(query),
        "starttime_timestamp_us": int(started * 1_000_000),
        "endtime_timestamp_us": int(ended * 1_000_000),
        "duration_us": int((ended - started) * 1_000_000),
        "rows_sent": rows_sent,
        "rows_affected": rows_affected,
        "last_insert_id": last_insert_id,
    }
    if error is not None:
        event["error"] = shown(error)
    return event
