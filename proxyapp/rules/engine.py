"""The query rule engine: ProxySQL's ``mysql_query_rules`` evaluation (``Query_Processor::process_query``).

Active rules are walked in ``rule_id`` order; a rule is considered only while its ``flagIN`` equals the
current flag. A rule matches when every filter it sets matches. A match overwrites each output column the
rule sets, rewrites the query if it has a ``replace_pattern``, stops the walk if ``apply`` is set, and
otherwise switches the current flag to ``flagOUT`` (if set) and goes on with the *following* rules: ProxySQL
(with its default ``mysql-query_processor_iterations=0``) never goes back to a smaller ``rule_id``.
Afterwards, for original queries (not mirrors), the query's first ``/* ... */`` comment overrides the rules.

Regex notes. ``match_digest`` and ``match_pattern`` are searched (not anchored) with Python's ``re``, which
is close to ProxySQL's default PCRE flavour. ``re_modifiers`` CASELESS applies to both; GLOBAL makes
``replace_pattern`` replace every occurrence instead of the first one. ``negate_match_pattern`` inverts both
regex filters, as ProxySQL does (its code applies the flag to ``match_digest`` too). ``replace_pattern``
uses ProxySQL's (PCRE/RE2) rewrite syntax: ``\\1``..``\\9`` insert a group (``\\0`` the whole match)
and ``\\\\`` a backslash; any other backslash sequence is rejected, and ``$1`` is literal text, never a group.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from proxyapp.config.rulecompile import compile_rule, digest_value
from proxyapp.config.tables import MysqlQueryRule, MysqlQueryRuleFastRouting
from proxyapp.sql.lex import first_block_comment

#: The first-comment annotation keys ProxySQL knows (``query_parser_first_comment``).
ANNOTATION_KEYS = frozenset(
    {
        "hostgroup",
        "mirror",
        "cache_ttl",
        "query_timeout",
        "query_delay",
        "query_retries",
        "max_lag_ms",
        "min_epoch_ms",
        "min_gtid",
        "create_new_connection",
        "trx_queue",
    }
)

#: Annotations that override a rule output: annotation key -> RuleOutcome field.
_ANNOTATION_FIELDS = {
    "hostgroup": "destination_hostgroup",
    "mirror": "mirror_hostgroup",
    "cache_ttl": "cache_ttl",
    "query_timeout": "timeout",
    "query_delay": "delay",
    "query_retries": "retries",
}


class QueryContext:
    """What the rules can filter on, for one query.

    ``digest`` is the digest hash (``'0x'`` and 16 hex digits, as ``digest.Digest.hash``) and ``digest_text``
    the normalized text (``digest.Digest.text``). A plain class so that mypyc compiles its ``__init__``.
    """

    __slots__ = ("client_addr", "digest", "digest_text", "proxy_addr", "proxy_port", "query", "schemaname", "username")

    def __init__(
        self,
        username: str,
        schemaname: str,
        client_addr: str,
        proxy_addr: str,
        proxy_port: int,
        query: str,
        digest: str,
        digest_text: str,
    ) -> None:
        self.username = username
        self.schemaname = schemaname
        self.client_addr = client_addr
        self.proxy_addr = proxy_addr
        self.proxy_port = proxy_port
        self.query = query
        self.digest = digest
        self.digest_text = digest_text


@dataclass(slots=True)
class RuleOutcome:
    """The result of evaluating the rules for one query: every field is None unless a matching rule set it.

    ``query`` is the rewritten text once a rule with a ``replace_pattern`` matched; ``matched`` lists the
    matching rule_ids in order; ``annotations`` holds the parsed first-comment annotations of an original
    (non-mirror) query, including those the session interprets itself (``max_lag_ms``, ``min_gtid``, ...).
    """

    destination_hostgroup: int | None = None
    query: str | None = None
    error_msg: str | None = None
    OK_msg: str | None = None
    cache_ttl: int | None = None
    cache_empty_result: bool | None = None
    cache_timeout: int | None = None
    timeout: int | None = None
    retries: int | None = None
    delay: int | None = None
    next_query_flagIN: int | None = None
    mirror_flagOUT: int | None = None
    mirror_hostgroup: int | None = None
    multiplex: int | None = None
    log: bool | None = None
    reconnect: bool | None = None
    sticky_conn: bool | None = None
    gtid_from_hostgroup: int | None = None
    trx_queue: str | None = None  # the hot-row queue of a matching rule with trx_queue (``proxyapp.hotrows``)
    trx_queue_key: str | None = None  # its key, when the rule takes it from a group of its match_pattern
    trx_queue_column: str | None = None  # the column whose WHERE values are its keys, when the rule names one
    matched: list[int] = field(default_factory=list)
    annotations: dict[str, str] = field(default_factory=dict)


class RuleEngine:
    """Evaluates a set of ``mysql_query_rules`` rows; one engine per loaded configuration.

    Raises ValueError (naming the rule) for a rule that cannot be evaluated: an invalid regex, digest,
    ``re_modifiers`` or ``replace_pattern``, a ``replace_pattern`` without ``match_pattern``, a duplicate id.
    """

    def __init__(self, rules: Sequence[MysqlQueryRule], fast_routing: Sequence[MysqlQueryRuleFastRouting] = ()) -> None:
        """Keep the active rules, sorted by rule_id, with their regexes compiled, and the fast routing table."""
        #: (username, schemaname, flagIN) -> destination hostgroup (mysql_query_rules_fast_routing).
        self._fast: dict[tuple[str, str, int], int] = {
            (row.username, row.schemaname, row.flagIN): row.destination_hostgroup for row in fast_routing
        }
        active = sorted((rule for rule in rules if rule.active), key=lambda rule: rule.rule_id)
        self._rules = tuple(compile_rule(rule) for rule in active)
        #: rule_id -> number of queries the rule matched (``stats_mysql_query_rules.hits``).
        self.hits: dict[int, int] = {}
        for rule in self._rules:
            if rule.rule_id in self.hits:
                raise ValueError(f"rule {rule.rule_id}: duplicate rule_id")
            self.hits[rule.rule_id] = 0
        self._needs_digest = any(rule.digest is not None or rule.match_digest is not None for rule in self._rules)

    @property
    def active(self) -> bool:
        """Whether there is any active rule or fast routing row."""
        return bool(self._rules) or bool(self._fast)

    @property
    def needs_digest(self) -> bool:
        """Whether any active rule filters on ``digest`` or ``match_digest``."""
        return self._needs_digest

    def evaluate(self, ctx: QueryContext, flag_in: int = 0, *, mirror: bool = False) -> RuleOutcome:
        """Run the rules for one query, starting with the rules whose flagIN is ``flag_in``.

        ``flag_in`` is the session's ``next_query_flagIN`` for an original query, or the ``mirror_flagOUT``
        for a mirror (a mirror without one takes ``mirror_hostgroup`` and skips the rules, a caller's
        decision). First-comment annotations apply only when ``mirror`` is False.
        """
        outcome = RuleOutcome()
        flag: int | None = flag_in
        if self._rules:
            flag = self._walk(ctx, flag_in, outcome)
        if flag is not None and self._fast:  # as ProxySQL: fast routing when no apply=1 rule ended the walk
            destination = self._fast.get((ctx.username, ctx.schemaname, flag))
            if destination is not None:
                outcome.destination_hostgroup = destination
        if not mirror and "/*" in ctx.query:
            annotations = parse_annotations(ctx.query)
            if annotations:
                _override(outcome, annotations)
        return outcome

    def _walk(self, ctx: QueryContext, flag: int, outcome: RuleOutcome) -> int | None:
        """Walk the rules once, in rule_id order, updating ``outcome`` with each match; the flagIN the walk ended
        at, or None when an ``apply=1`` rule ended it."""
        query = ctx.query
        digest: int | None = None
        for rule in self._rules:
            if rule.flag_in != flag:
                continue
            if rule.username is not None and rule.username != ctx.username:
                continue
            if rule.schemaname is not None and rule.schemaname != ctx.schemaname:
                continue
            if rule.client_addr is not None and rule.client_addr != ctx.client_addr:
                continue
            if rule.client_prefix is not None and not ctx.client_addr.startswith(rule.client_prefix):
                continue
            if rule.proxy_addr is not None and rule.proxy_addr != ctx.proxy_addr:
                continue
            if rule.proxy_port is not None and rule.proxy_port != ctx.proxy_port:
                continue
            if rule.digest is not None:
                if digest is None:
                    digest = digest_value(ctx.digest)
                if digest != rule.digest:
                    continue
            if rule.match_digest is not None and (rule.match_digest(ctx.digest_text) is None) != rule.negate:
                continue
            found: re.Match[str] | None = None
            if rule.match_pattern is not None:
                found = rule.match_pattern.search(query)
                if (found is None) != rule.negate:
                    continue
            self.hits[rule.rule_id] += 1
            outcome.matched.append(rule.rule_id)
            for name, value in rule.outputs:
                setattr(outcome, name, value)
            if rule.queue is not None:
                outcome.trx_queue = rule.queue
                outcome.trx_queue_column = rule.queue_column
                outcome.trx_queue_key = (
                    found.group(rule.queue_group) if found is not None and rule.queue_group else None
                )
            if rule.replace is not None and rule.match_pattern is not None:
                query = rule.match_pattern.sub(rule.replace, query, count=rule.replace_count)
                outcome.query = query
            if rule.apply:
                return None
            if rule.flag_out is not None:
                flag = rule.flag_out
        return flag


def parse_annotations(query: str) -> dict[str, str]:
    """Parse the query's first ``/* ... */`` comment into its known ``key=value`` annotations.

    Pairs are separated by ``;`` (ProxySQL's separator), ``,`` or whitespace, with optional spaces around
    ``=``; keys are lowercased and unknown keys dropped; a repeated key keeps its last value. Comments inside
    string literals, quoted identifiers and ``#``/``--`` comments are not the first comment.
    """
    comment = first_block_comment(query)
    if comment is None:
        return {}
    annotations: dict[str, str] = {}
    for key, value in _pairs(comment):
        key = key.lower()
        if key in ANNOTATION_KEYS:
            annotations[key] = value
    return annotations


_PAIR_STOP = frozenset(" \t\n\r\f\v;,=")
_BLANK = frozenset(" \t\n\r\f\v")


def _pairs(comment: str) -> list[tuple[str, str]]:
    """The ``key=value`` pairs of an annotation comment, in one pass: a key is a run of characters other than
    whitespace, ``;``, ``,`` and ``=``, then ``=`` (spaces around it allowed) and the value, a run of the same
    characters, maybe empty. Anything else is skipped."""
    pairs: list[tuple[str, str]] = []
    n = len(comment)
    i = 0
    while i < n:
        start = i
        while i < n and comment[i] not in _PAIR_STOP:
            i += 1
        if i == start:  # a separator or a stray '='
            i += 1
            continue
        key_end = i
        while i < n and comment[i] in _BLANK:
            i += 1
        if i == n or comment[i] != "=":
            continue  # a word without '=': no pair starts inside it either
        i += 1
        while i < n and comment[i] in _BLANK:
            i += 1
        value_start = i
        while i < n and comment[i] not in _PAIR_STOP:
            i += 1
        pairs.append((comment[start:key_end], comment[value_start:i]))
    return pairs


def _override(outcome: RuleOutcome, annotations: dict[str, str]) -> None:
    """Apply first-comment annotations over the rules' outputs; values that are not integers are ignored."""
    outcome.annotations = annotations
    for key, value in annotations.items():
        name = _ANNOTATION_FIELDS.get(key)
        if name is not None and value.isascii() and value.isdigit():
            setattr(outcome, name, int(value))
