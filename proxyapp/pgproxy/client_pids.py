"""The process ids the pooler tells its clients, and the guard that keeps a client from signalling one.

A pooled client's process id names no server process: it is drawn from ``CLIENT_PIDS``, above any id Linux gives
(its ``pid_max`` is at most 2**22). A ``pg_terminate_backend`` or ``pg_cancel_backend`` naming such an id is refused
with an error before it reaches a server (the server connection the client holds serves others too; the client's
own CancelRequest cancels its query): an id written in the statement (the simple protocol, or a Parse), and an id
bound as the statement's parameter (a Bind of a statement that passes ``$n`` to either function). Any other id passes
to the server, whose answer it is.
"""

from __future__ import annotations

import re

from proxyapp.pgproxy.routing import Route
from proxyapp.pgproxy.statements import bind_parameter

#: The process ids clients are told (``front``): no server process can have one.
CLIENT_PIDS = range(1 << 30, 1 << 31)
#: A call of pg_terminate_backend or pg_cancel_backend with a literal process id, or with a parameter ``$n``.
_SIGNAL_BACKEND = re.compile(r"pg_(?:terminate|cancel)_backend\s*\(\s*(?:(\d{1,12})|\$(\d{1,5}))\b", re.IGNORECASE)
#: The SQLSTATE of the refusal (insufficient_privilege, as the server's own refusal to signal a process).
REFUSED = "42501"


def _mentions(query: str) -> bool:
    return "ackend" in query or "ACKEND" in query  # a cheaper look before the expression


def refusal(pid: int) -> str:
    """The error a client gets for signalling the client process id ``pid``."""
    return (
        f"ProxyFleet: process {pid} is a pooler client's, not a server's: a pooled session cannot be signalled with "
        "pg_terminate_backend or pg_cancel_backend (its client's cancel request cancels its query)"
    )


def refuse_written_pid(route: Route) -> Route:
    """``route``, or its refusal when its query signals a client's process id written in it."""
    query = route.query
    if not _mentions(query):
        return route
    for found in _SIGNAL_BACKEND.finditer(query):
        if found.group(1) is not None and int(found.group(1)) in CLIENT_PIDS:
            return Route(route.hostgroup, query, refusal(int(found.group(1))), sqlstate=REFUSED)
    return route


def bound_client_pid(query: str, bind_body: bytes, start: int = 0) -> int | None:
    """The client process id a Bind of ``query`` (its body from ``start`` of ``bind_body``) passes to
    pg_terminate_backend or pg_cancel_backend as a parameter, if any; ValueError when the Bind is malformed."""
    if not _mentions(query):
        return None
    for found in _SIGNAL_BACKEND.finditer(query):
        if found.group(2) is None:
            continue
        code, value = bind_parameter(bind_body, int(found.group(2)) - 1, start)
        if value is None:
            continue
        if code == 1:
            pid = int.from_bytes(value, "big", signed=True) if len(value) in (2, 4, 8) else None
        else:
            text = value.strip()
            pid = int(text) if text.lstrip(b"+-").isdigit() and len(text) <= 20 else None
        if pid is not None and pid in CLIENT_PIDS:
            return pid
    return None
