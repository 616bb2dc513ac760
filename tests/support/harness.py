"""Test helpers around a proxy and its servers (``devstack.proxy`` starts the proxy): the backend thread running a
statement, the transactions open on a server, time passing for the proxy while a statement runs, and the type of
the ``start_proxy`` fixture."""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from devstack.proxy import ProxyProcess
from devstack.sandbox import APP_USER
from devstack.stack import wait_until

if TYPE_CHECKING:
    from devstack.sandbox import SandboxServer


def backend_thread(server: SandboxServer, marker: str, timeout: float = 5) -> int:
    """The processlist id of the app connection running a statement that contains ``marker``."""
    found: list[int] = []
    with server.connect() as conn, conn.cursor() as cur:

        def running() -> bool:
            cur.execute(
                "SELECT ID FROM information_schema.PROCESSLIST WHERE USER = %s AND INFO LIKE %s",
                (APP_USER, f"%{marker}%"),
            )
            row = cur.fetchone()
            if row is not None:
                found.append(int(row[0]))
            return bool(found)

        wait_until(running, f"backend thread running a statement containing {marker!r}", timeout, interval=0.01)
    return found[0]


def advance_clock_while_running(proxy: ProxyProcess, session_id: int, marker: str, seconds: float) -> threading.Thread:
    """In a thread: once session ``session_id`` runs a statement containing ``marker`` (its processlist info),
    make ``seconds`` pass for the proxy (``ProxyProcess.advance_clock``); if the session ends first, do nothing.
    Join the thread to know it is done."""

    def advance() -> None:
        gone: list[bool] = []

        def running_or_gone() -> bool:
            rows = [r for r in proxy.admin("GET", "/processlist") if r["SessionID"] == session_id]
            if not rows:
                gone.append(True)
            return bool(gone) or marker in (rows[0]["info"] or "")

        wait_until(running_or_gone, f"session {session_id} running {marker!r}", 30, interval=0.01)
        if not gone:
            proxy.advance_clock(seconds)

    thread = threading.Thread(target=advance, daemon=True)
    thread.start()
    return thread


def open_transactions(server: SandboxServer, user: str = APP_USER) -> list[tuple[int, str, str]]:
    """The InnoDB transactions open now on ``server`` for ``user``'s connections (a proxy's backend connections):
    (thread id, "ACTIVE" or "LOCK WAIT", the transaction's line) each.

    Read from SHOW ENGINE INNODB STATUS, which InnoDB writes afresh for each call (INNODB_TRX is a cache that a
    reader must leave alone for 100 ms before it shows the present).
    """
    with server.connect() as conn, conn.cursor() as cur:
        cur.execute("SHOW ENGINE INNODB STATUS")
        status = cur.fetchone()[2]
    listed = status.partition("LIST OF TRANSACTIONS FOR EACH SESSION:")[2].partition("\nFILE I/O")[0]
    found = []
    for block in listed.split("---TRANSACTION ")[1:]:
        head = block.partition("\n")[0]
        owner = _TRX_OWNER.search(block)
        if "ACTIVE" in head and owner is not None and owner.group(3) == user:
            found.append((int(owner.group(1)), "LOCK WAIT" if "LOCK WAIT" in block else "ACTIVE", head))
    return found


#: A transaction's session in SHOW ENGINE INNODB STATUS: thread id, client host, user.
_TRX_OWNER = re.compile(r"(?:MySQL|MariaDB) thread id (\d+), OS thread handle \d+, query id \d+ (\S+) (\S+)")


#: The ``start_proxy`` fixture: starts a proxy from a config document (stopped after the test).
StartProxy = Callable[[dict[str, Any]], ProxyProcess]
