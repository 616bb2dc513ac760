"""The query events log (proxyapp.report.eventslog): one JSON object a line, its texts as they may be shown."""

from __future__ import annotations

import json
from pathlib import Path

from proxyapp.report.eventslog import EventsLog, query_event


def test_a_query_that_is_not_utf8_is_logged_escaped(tmp_path: Path) -> None:
    """``SELECT `\\xff``` in schema ``db\\xfe`` (lone surrogates once decoded): a valid UTF-8 line showing them as
    ``\\xff``, not a ``\\udcff`` a JSON reader hands on as a text no encoder takes."""
    path = tmp_path / "events.log"
    events = EventsLog(str(path))
    events.write(
        query_event(
            username="app",
            schemaname="db\udcfe",
            client="127.0.0.1:5000",
            hostgroup=10,
            server="127.0.0.1:3306",
            digest="0x1",
            query="SELECT `\udcff`",
            thread_id=1,
            started=1.0,
            rows_sent=0,
            rows_affected=0,
            last_insert_id=0,
            error="1300: Invalid utf8mb4 character string: '\udcff'",
        )
    )
    events.close()
    raw = path.read_bytes()
    assert b"\\udc" not in raw
    event = json.loads(raw.decode("utf-8"))
    assert (event["schemaname"], event["query"]) == ("db\\xfe", "SELECT `\\xff`")
    assert event["error"] == "1300: Invalid utf8mb4 character string: '\\xff'"
