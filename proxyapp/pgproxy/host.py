"""What a PostgreSQL session of the pooling proxy uses of the proxy that serves it (``front.PgFront`` provides it), and
what the pooling proxy counts."""

from __future__ import annotations

from collections import OrderedDict
from typing import Protocol

from proxyapp.pgproxy.pool import PgPools
from proxyapp.pgproxy.routing import PgRouter
from proxyapp.report.stats import DigestStats
from proxyapp.rules.cache import QueryCache


class SessionCounters:
    """What the pooling proxy counts, in this process."""

    __slots__ = ("blocked", "queries", "timed_out", "transactions")

    def __init__(self) -> None:
        self.queries = 0
        self.transactions = 0
        self.blocked = 0  # statements a rule's error_msg refused
        self.timed_out = 0  # statements the server was asked to cancel for running past their timeout


class SessionHost(Protocol):
    """What a session uses of the proxy that serves it."""

    pools: PgPools
    counters: SessionCounters
    router: PgRouter
    digests: DigestStats
    #: Answers of ``cache_ttl`` rules (``pgsql-query_cache_size_MB``).
    cache: QueryCache
    #: Server-side statement names a server of this process prepared (least recently first).
    known: OrderedDict[str, None]
    #: Statements that may change the schema (CREATE, ALTER, DROP) this process's sessions sent: part of every
    #: server-side statement's name (``statements.server_statement``).
    schema_epoch: int

    def max_prepared(self) -> int:
        """``pgsql-max_prepared_statements``."""
        ...

    def default_timeout_ms(self) -> int:
        """``pgsql-default_query_timeout``."""
        ...

    def caches_empty_result(self) -> bool:
        """``pgsql-query_cache_stores_empty_result``."""
        ...

    async def close_idle(self, database: str) -> None:
        """Close the idle server connections to ``database`` in every worker process of the node."""
        ...
