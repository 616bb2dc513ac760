"""Where a PostgreSQL statement goes: ``pgsql_query_rules`` through the MySQL side's rule engine
(``proxyapp.rules.engine``; a rule's ``database`` is read as its ``schemaname``), and the first-comment
``hostgroup=N`` annotation as ProxySQL reads it.

The pooling proxy asks at every simple Query and every Parse: a rule's ``error_msg`` blocks the statement, its
``replace_pattern`` rewrites it, and its ``destination_hostgroup`` is where the transaction the statement begins
borrows its server connection (a transaction stays where it began: ProxySQL's ``transaction_persistent``). Read/write
split is two rules (``^SELECT`` to the readers, the rest to the writers) over a ``pgsql_replication_hostgroups``
pair, as on the MySQL side.
"""

from __future__ import annotations

from dataclasses import dataclass

from proxyapp.config.document import Config, pgsql_rule_as_mysql
from proxyapp.rules.engine import QueryContext, RuleEngine
from proxyapp.sql.digest import compute_pg_digest


@dataclass(frozen=True, slots=True)
class Route:
    """What the rules decided for one statement: its hostgroup (None: the user's default), the text to run, the
    error to answer instead (None: run it), how long its answer may be served from the query cache (``cache_ttl``
    ms, 0: not cached; ``cache_empty_result``: an answer without rows too, None: as
    ``pgsql-query_cache_stores_empty_result``) and how long it may run before the server is asked to cancel it
    (``timeout`` ms, 0: ``pgsql-default_query_timeout``); ``sqlstate``: the error's code."""

    hostgroup: int | None
    query: str
    error: str | None
    cache_ttl: int = 0
    cache_empty_result: bool | None = None
    timeout: int = 0
    sqlstate: str = "28000"


class PgRouter:
    """The PostgreSQL query rules of one config."""

    def __init__(self, config: Config) -> None:
        self.engine = RuleEngine([pgsql_rule_as_mysql(rule) for rule in config.pgsql_query_rules])
        #: Whether a rule caches answers (only then does a simple Query look in the cache).
        self.caching = any(rule.active and rule.cache_ttl for rule in config.pgsql_query_rules)

    @property
    def hits(self) -> dict[int, int]:
        """Queries each rule matched (``stats_pgsql_query_rules``)."""
        return self.engine.hits

    def route(self, sql: str, user: str, database: str, client_addr: str, proxy_port: int) -> Route:
        """The route of statement ``sql`` of a session of ``user`` on ``database``."""
        engine = self.engine
        if not engine.active and "/*" not in sql:
            return Route(None, sql, None)
        digest, text = "", ""
        if engine.needs_digest:
            found = compute_pg_digest(sql)
            digest, text = found.hash, found.text
        ctx = QueryContext(user, database, client_addr, "", proxy_port, sql, digest, text)
        outcome = engine.evaluate(ctx)
        return Route(
            outcome.destination_hostgroup,
            outcome.query or sql,
            outcome.error_msg,
            outcome.cache_ttl or 0,
            outcome.cache_empty_result,
            outcome.timeout or 0,
        )
