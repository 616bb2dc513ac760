"""KILL through the proxy: the thread id a client sees (the handshake's) is a proxy session's, not a backend's.

A client's ``KILL [CONNECTION | QUERY] N`` and COM_PROCESS_KILL name a proxy session, as in ProxySQL. Passed on to
a backend they would kill whichever backend thread happens to carry that number: another client's, since every
session of a user shares that user's backend connections. The mysql and mariadb clients send ``KILL QUERY N`` on a
new connection when the user presses Ctrl-C. Sessions live in several worker processes; the id says which one
(``Proxy.start_session``), and a worker hands a KILL for another worker's session to that worker's admin endpoint.
"""

from __future__ import annotations

import asyncio
import logging
import re
from dataclasses import dataclass
from typing import Any

import aiohttp

from proxyapp import credential
from proxyapp.backends.pool import ServerPool, server_tls
from proxyapp.mysql.backend import BackendConnection, BackendError, Credentials
from proxyapp.mysql.constants import ErrorCode
from proxyapp.mysql.wire import CONNECTION_LOST
from proxyapp.session.client import Client, SessionEnd
from proxyapp.session.services import SessionServices

log = logging.getLogger("proxyapp.session.kill")

_LEADING_COMMENTS = re.compile(r"\A(?:\s+|/\*.*?\*/|(?:--\s|#)[^\n]*(?:\n|\Z))*", re.S)
_KILL = re.compile(
    r"KILL\s+(?:(?:HARD|SOFT)\s+)?(?:(?P<kind>CONNECTION|QUERY)\s+)?(?P<id>ID\s+)?(?P<target>.*?)\s*;?\s*\Z",
    re.I | re.S,
)


class KillRefused(ValueError):
    """A KILL the proxy does not carry out; the message says why."""


@dataclass(frozen=True)
class KillRequest:
    """What a KILL asks: end session ``target`` (``query_only``: only interrupt its running statement)."""

    target: int
    query_only: bool


def parse_kill(sql: str) -> KillRequest:
    """The request of a ``KILL`` statement; KillRefused for a form that names no proxy session."""
    match = _KILL.match(sql, _LEADING_COMMENTS.match(sql).end())  # type: ignore[union-attr]  # it always matches
    if match is None:
        raise KillRefused("ProxyFleet: not a KILL statement")
    target = match["target"]
    if match["id"]:
        raise KillRefused("ProxyFleet: KILL QUERY ID names a backend's query id; use KILL QUERY <thread id>")
    if target.upper().startswith("USER"):
        raise KillRefused("ProxyFleet: KILL USER is not supported through the proxy; use KILL <thread id>")
    if not target.isdigit():
        raise KillRefused(
            f"ProxyFleet: KILL takes the thread id a client got at connect time (a number), not {target!r}"
        )
    return KillRequest(int(target), (match["kind"] or "").upper() == "QUERY")


def outcome(ok: bool, code: int = 0, error: str = "") -> dict[str, Any]:
    """A kill's answer, as the admin endpoint and the workers pass it on."""
    return {"ok": True} if ok else {"ok": False, "code": int(code), "error": error}


def unknown_thread(target: int) -> dict[str, Any]:
    """The answer for an id no session has."""
    return outcome(False, ErrorCode.NO_SUCH_THREAD, f"Unknown thread id: {target}")


async def forward_kill(
    admin_port: int, token: str, target: int, query_only: bool, username: str | None
) -> dict[str, Any]:
    """Ask the worker whose admin endpoint listens on ``admin_port`` (showing the admin ``token``) to kill its
    session ``target``.

    In a task of its own: aiohttp's timeout cancels the task it runs in, and a session's command runs on the
    session's driver (``proxyapp.driver``), in no task."""
    return await asyncio.get_running_loop().create_task(_post_kill(admin_port, token, target, query_only, username))


async def _post_kill(
    admin_port: int, token: str, target: int, query_only: bool, username: str | None
) -> dict[str, Any]:
    url = f"http://127.0.0.1:{admin_port}/processlist/{target}/kill"
    body = {"query_only": query_only, "username": username}
    try:
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as http,
            http.post(url, json=body, headers=credential.header(token)) as response,
        ):
            answer: dict[str, Any] = await response.json()
    except (aiohttp.ClientError, OSError, TimeoutError, ValueError) as exc:
        why = f"Thread id {target} belongs to another worker process, which did not answer: {exc}"
        return outcome(False, ErrorCode.NO_SUCH_THREAD, why)
    return answer


async def carry_out(
    request: KillRequest, session_id: int, client: Client, services: SessionServices, status: int
) -> None:
    """Carry out a client's KILL (from session ``session_id``, whose server status is ``status``) on a proxy
    session and answer the client."""
    if request.target == session_id:
        if request.query_only:  # nothing of this session runs but the KILL itself, which it interrupts
            client.send_error(ErrorCode.QUERY_INTERRUPTED, "Query execution was interrupted", 1)
            return
        client.send_error(ErrorCode.CONNECTION_KILLED, "Connection was killed", 1)
        raise SessionEnd
    answer = await services.kill_session(request.target, request.query_only, client.username)
    if answer.get("ok"):
        client.send_ok(status)
    else:
        client.send_error(int(answer.get("code") or ErrorCode.NO_SUCH_THREAD), str(answer.get("error")), 1)


async def kill_running(
    conn: BackendConnection, credentials: Credentials, services: SessionServices, what: str, session_id: int
) -> None:
    """``KILL QUERY`` the statement running on ``conn`` (``what``, for the log), from a separate connection to its
    server logged in with ``credentials``: a timed-out query, a gone client's, a killed session's."""
    pool = conn.pool
    assert isinstance(pool, ServerPool)
    try:
        killer = await BackendConnection.connect(
            pool.server.hostname,
            pool.server.port,
            credentials,
            None,
            timeout=2,
            tls=server_tls(pool.server, pool.hostgroup.manager.settings.tls),
        )
    except BackendError as exc:
        log.warning("session %d: cannot kill %s: %s", session_id, what, exc)
        return
    try:
        await killer.query(f"KILL QUERY {conn.thread_id}")
        services.counters.mysql_killed_backend_queries += 1
    except CONNECTION_LOST as exc:
        log.warning("session %d: cannot kill %s: %s", session_id, what, exc)
    finally:
        killer.close()
