"""Which worker process serves a client session, from its id: MySQL's thread ids and PostgreSQL's process ids are
numbered so that the remainder by the number of workers says (``Proxy.start_session``, ``PgFront._new_id``), and a
KILL or a CancelRequest that reaches another worker is handed to that one."""

from __future__ import annotations


def worker_of(session_id: int, workers: int) -> int:
    """The index of the worker process that serves session ``session_id``."""
    return (session_id - 1) % workers
