"""The rule tester: what the query rules do with one query, computed by the proxy's own rule engine.

"This query, as this user on this schema from this address: which rules match, in what order, what it becomes,
where it goes", for the draft or any published version, so a DBA sees a rule's effect before publishing it. The
MySQL rules (``mysql_query_rules`` and the fast routing rows) or the PostgreSQL ones (``pgsql_query_rules``, read as
the pooling proxy reads them: ``database`` as the schema, PostgreSQL's digests, and the outputs it does not act on
named).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fleet.core import publishing
from fleet.core.models import Cluster, ConfigVersion
from proxyapp.config.document import PGSQL_RULE_NOT_ACTED_ON, Config, parse_config, pgsql_rule_as_mysql
from proxyapp.config.tables import MysqlQueryRule
from proxyapp.rules.engine import QueryContext, RuleEngine
from proxyapp.sql.digest import compute_digest, compute_pg_digest

#: The ``source`` that names a cluster's draft (any other is a published version's number).
DRAFT = "draft"

#: The rule sets the tester tries a query against: the MySQL proxy's or the PostgreSQL pooling proxy's.
MYSQL, PGSQL = "mysql", "pgsql"
#: The outcome fields the tester reports, in the order a DBA reads them.
OUTCOME_FIELDS = (
    "destination_hostgroup",
    "error_msg",
    "OK_msg",
    "cache_ttl",
    "timeout",
    "retries",
    "delay",
    "next_query_flagIN",
    "mirror_hostgroup",
    "mirror_flagOUT",
    "multiplex",
    "log",
)


@dataclass(frozen=True)
class Trial:
    """What the rules did with one query."""

    query: str
    digest: str
    digest_text: str
    matched: list[MysqlQueryRule]
    rewritten: str | None
    outcome: dict[str, object]
    answer: str  # what happens to the query, in words
    hostgroup: int | None  # where it runs (None: the proxy answers it itself)
    notes: list[str] = field(default_factory=list)


def try_query(
    config: Config,
    query: str,
    *,
    username: str,
    schemaname: str = "",
    client_addr: str = "127.0.0.1",
    proxy_addr: str = "127.0.0.1",
    proxy_port: int = 6033,
    flag_in: int = 0,
    engine: str = MYSQL,
) -> Trial:
    """Run ``query`` through ``config``'s rules of ``engine`` (``MYSQL`` or ``PGSQL``; ``schemaname`` is then the
    database) as a session of ``username`` would (ValueError for a rule set the engine refuses, as a node would
    refuse it)."""
    pgsql = engine == PGSQL
    digest = compute_pg_digest(query) if pgsql else compute_digest(query)
    if pgsql:
        rules = [pgsql_rule_as_mysql(rule) for rule in config.pgsql_query_rules]
        rule_engine = RuleEngine(rules)
        users, served = config.pgsql_users, {s.hostgroup_id for s in config.pgsql_servers}
    else:
        rules = list(config.mysql_query_rules)
        rule_engine = RuleEngine(rules, config.mysql_query_rules_fast_routing)
        users, served = config.mysql_users, {s.hostgroup_id for s in config.mysql_servers}
    outcome = rule_engine.evaluate(
        QueryContext(username, schemaname, client_addr, proxy_addr, proxy_port, query, digest.hash, digest.text),
        flag_in,
    )
    by_id = {rule.rule_id: rule for rule in rules}
    fields = {name: getattr(outcome, name) for name in OUTCOME_FIELDS if getattr(outcome, name) is not None}
    notes = []
    ignored = [name for name in fields if pgsql and name in PGSQL_RULE_NOT_ACTED_ON]
    if ignored:
        notes.append(f"the PostgreSQL proxy does not act on {', '.join(ignored)} yet")
    user = next((u for u in users if u.username == username and u.frontend), None)
    if user is None:
        notes.append(f"no frontend user {username!r} in this config: such a session could not log in")
    hostgroup: int | None
    if outcome.error_msg is not None:
        code = "an ErrorResponse (SQLSTATE 28000)" if pgsql else "error 1148"
        answer, hostgroup = f"refused by the proxy with {code}: {outcome.error_msg}", None
    elif outcome.OK_msg is not None and not pgsql:
        answer, hostgroup = f"answered OK by the proxy: {outcome.OK_msg}", None
    elif outcome.destination_hostgroup is not None:
        hostgroup = outcome.destination_hostgroup
        deciding = _deciding(outcome.matched, by_id)
        if "hostgroup" in outcome.annotations:
            why = "the query's hostgroup annotation"
        elif deciding is not None and by_id[deciding].destination_hostgroup == hostgroup:
            why = f"rule {deciding}'s destination"
        else:
            why = f"the fast routing row for {username!r} on {schemaname!r}"
        answer = f"runs on hostgroup {hostgroup} ({why})"
    elif user is not None:
        hostgroup = user.default_hostgroup
        answer = f"runs on hostgroup {hostgroup} ({username}'s default_hostgroup: no rule sets a destination)"
    else:
        answer, hostgroup = "no destination: no rule sets one and the user is unknown", None
    if hostgroup is not None and hostgroup not in served:
        fails = "no server could run it" if pgsql else "the query would wait, then fail (9001)"
        notes.append(f"hostgroup {hostgroup} has no servers in this config: {fails}")
    if outcome.annotations:
        notes.append(
            "annotations in its first comment: " + ", ".join(f"{k}={v}" for k, v in outcome.annotations.items())
        )
    return Trial(
        query=query,
        digest=digest.hash,
        digest_text=digest.text,
        matched=[by_id[rule_id] for rule_id in outcome.matched],
        rewritten=outcome.query,
        outcome=fields,
        answer=answer,
        hostgroup=hostgroup,
        notes=notes,
    )


def _deciding(matched: list[int], rules: dict[int, MysqlQueryRule]) -> int | None:
    """The last matched rule that set a destination hostgroup (None: an annotation set it)."""
    return next((rule_id for rule_id in reversed(matched) if rules[rule_id].destination_hostgroup is not None), None)


def config_of(cluster: Cluster, source: str) -> Config:
    """The config whose rules to try: the draft's, or published version ``source``'s.

    ConfigError for an invalid draft; ConfigVersion.DoesNotExist for a version the cluster does not have.
    """
    if source == DRAFT:
        return publishing.compile_draft(cluster)
    return parse_config(ConfigVersion.objects.get(cluster=cluster, number=int(source)).document)
