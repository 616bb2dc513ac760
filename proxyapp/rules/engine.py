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

import dataclasses
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from proxyapp.config.tables import MysqlQueryRule, MysqlQueryRuleFastRouting
from proxyapp.hotrows.marks import KEY_COLUMN, KEY_GROUP, QUEUE_NAME
from proxyapp.sql.lex import first_block_comment

#: The column of a rule's hot-row queue key.
KEY = "trx_queue_key"
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

#: Rule columns copied to the outcome when a matching rule sets them (non-None).
_OUTPUT_COLUMNS = (
    "destination_hostgroup",
    "error_msg",
    "OK_msg",
    "cache_ttl",
    "cache_empty_result",
    "cache_timeout",
    "timeout",
    "retries",
    "delay",
    "next_query_flagIN",
    "mirror_flagOUT",
    "mirror_hostgroup",
    "multiplex",
    "log",
    "reconnect",
    "sticky_conn",
    "gtid_from_hostgroup",
)

_REWRITE_ESCAPE = re.compile(r"\\(.?)", re.DOTALL)


class RuleError(ValueError):
    """A rule the engine cannot evaluate; the message names the rule, ``column`` the column at fault."""

    def __init__(self, message: str, column: str) -> None:
        super().__init__(message)
        self.column = column

    def reason(self) -> str:
        """The message without the rule's and the column's names (a row check's message)."""
        text = str(self).partition(": ")[2]
        for prefix in (f"{self.column}: ", f"{self.column} "):
            if text.startswith(prefix):
                return text[len(prefix) :]
        return text


def check_rule(rule: MysqlQueryRule) -> tuple[str, str] | None:
    """What keeps ``rule`` (taken as active: a rule is written to be turned on) from being evaluated, as (column,
    reason); None when nothing does. The config's row check of ``mysql_query_rules`` (``config.document``)."""
    try:
        _prepare(dataclasses.replace(rule, active=True))
    except RuleError as error:
        return error.column, error.reason()
    return None


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


@dataclass(frozen=True, slots=True)
class _Rule:
    """An active rule prepared for evaluation: empty filters dropped, regexes compiled, outputs listed."""

    rule_id: int
    flag_in: int
    username: str | None
    schemaname: str | None
    client_addr: str | None
    client_prefix: str | None
    proxy_addr: str | None
    proxy_port: int | None
    digest: int | None
    match_digest: Callable[[str], re.Match[str] | None] | None
    match_pattern: re.Pattern[str] | None
    negate: bool
    flag_out: int | None
    replace: str | None
    replace_count: int
    apply: bool
    outputs: tuple[tuple[str, object], ...]
    queue: str | None  # trx_queue
    queue_group: int  # trx_queue_key as a group of match_pattern (0: not)
    queue_column: str | None  # trx_queue_key as a column


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
        self._rules = tuple(_prepare(rule) for rule in active)
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
                    digest = _digest_value(ctx.digest)
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


def _digest_value(digest: str) -> int:
    """A digest hash as a number (so hex case and leading zeros don't matter); -1 if it isn't one."""
    try:
        return int(digest, 16)
    except ValueError:
        return -1


def _prepare(rule: MysqlQueryRule) -> _Rule:
    """Check one active rule and turn it into its evaluation form."""
    where = f"rule {rule.rule_id}"
    caseless, global_replace = _modifiers(rule.re_modifiers, where)
    flags = re.IGNORECASE if caseless else 0
    match_digest = _compile(rule.match_digest, flags, f"{where}: match_digest")
    match_pattern = _compile(rule.match_pattern, flags, f"{where}: match_pattern")
    replace = None
    if rule.replace_pattern is not None:
        if match_pattern is None:
            raise RuleError(f"{where}: replace_pattern requires match_pattern", "replace_pattern")
        replace = _rewrite_template(rule.replace_pattern, match_pattern.groups, f"{where}: replace_pattern")
    client_addr = rule.client_addr or None
    client_prefix = None
    if client_addr is not None and "%" in client_addr:
        # ProxySQL compares up to the first '%'; a leading '%' matches every client.
        client_prefix = client_addr[: client_addr.index("%")] or None
        client_addr = None
    return _Rule(
        rule_id=rule.rule_id,
        flag_in=rule.flagIN,
        username=rule.username or None,
        schemaname=rule.schemaname or None,
        client_addr=client_addr,
        client_prefix=client_prefix,
        proxy_addr=rule.proxy_addr or None,
        proxy_port=rule.proxy_port,
        digest=_rule_digest(rule.digest, where),
        match_digest=match_digest.search if match_digest is not None else None,
        match_pattern=match_pattern,
        negate=rule.negate_match_pattern,
        flag_out=rule.flagOUT,
        replace=replace,
        replace_count=0 if global_replace else 1,
        apply=rule.apply,
        outputs=tuple((name, getattr(rule, name)) for name in _OUTPUT_COLUMNS if getattr(rule, name) is not None),
        **_queue(rule, match_pattern, where),
    )


def _queue(rule: MysqlQueryRule, match_pattern: re.Pattern[str] | None, where: str) -> dict[str, Any]:
    """A rule's hot-row queue (``trx_queue``, ``trx_queue_key``) in its evaluation form; ValueError when it cannot
    be (one set without the other, a bad name, a group match_pattern does not have, a column that is no name)."""
    queue, key = rule.trx_queue or None, rule.trx_queue_key or None
    if queue is None and key is None:
        return {"queue": None, "queue_group": 0, "queue_column": None}
    if queue is None or key is None:
        missing = "trx_queue" if queue is None else KEY
        raise RuleError(f"{where}: set both trx_queue and trx_queue_key, or neither", missing)
    if not QUEUE_NAME.fullmatch(queue):
        raise RuleError(
            f"{where}: trx_queue {queue[:80]!r} is not a queue name (1 to 64 of A-Z a-z 0-9 _ . $ -)", "trx_queue"
        )
    group = KEY_GROUP.fullmatch(key)
    if group is not None:
        n = int(group.group(1))
        if match_pattern is None or rule.negate_match_pattern:
            raise RuleError(f"{where}: trx_queue_key {key} needs a match_pattern (not negated) with that group", KEY)
        if n > match_pattern.groups:
            raise RuleError(f"{where}: trx_queue_key {key} refers to a group match_pattern does not have", KEY)
        return {"queue": queue, "queue_group": n, "queue_column": None}
    if not KEY_COLUMN.fullmatch(key):
        raise RuleError(
            f"{where}: trx_queue_key {key[:80]!r} is neither \\1..\\9 (a group of match_pattern) nor a column name",
            KEY,
        )
    return {"queue": queue, "queue_group": 0, "queue_column": key.lower()}


def _modifiers(re_modifiers: str, where: str) -> tuple[bool, bool]:
    """``re_modifiers`` (comma-separated CASELESS, GLOBAL, any case) as (caseless, global)."""
    caseless = global_replace = False
    for modifier in re_modifiers.split(","):
        modifier = modifier.strip().upper()
        if modifier == "CASELESS":
            caseless = True
        elif modifier == "GLOBAL":
            global_replace = True
        elif modifier:
            raise RuleError(f"{where}: unknown re_modifiers value {modifier!r}", "re_modifiers")
    return caseless, global_replace


def _compile(pattern: str | None, flags: int, where: str) -> re.Pattern[str] | None:
    """Compile a rule regex, or None when the column is not set."""
    if pattern is None:
        return None
    try:
        return re.compile(pattern, flags)
    except re.error as exc:
        raise RuleError(f"{where}: invalid regex {pattern!r}: {exc}", where.rpartition(": ")[2]) from None


def _rule_digest(digest: str | None, where: str) -> int | None:
    """A rule's ``digest`` column as a number, or None when not set."""
    if not digest:
        return None
    value = _digest_value(digest)
    if not 0 <= value < 2**64:
        raise RuleError(f"{where}: digest {digest!r} is not a 64-bit hex number", "digest")
    return value


def _rewrite_template(replace: str, groups: int, where: str) -> str:
    """Translate a ProxySQL rewrite string into an ``re.sub`` template that means the same thing."""

    def translate(escape: re.Match[str]) -> str:
        char = escape.group(1)
        if char == "\\":
            return "\\\\"
        if char.isascii() and char.isdigit():
            if int(char) > groups:
                raise RuleError(f"{where}: \\{char} refers to a missing group", "replace_pattern")
            return f"\\g<{char}>"
        raise RuleError(
            f"{where}: invalid escape \\{char} (groups are \\1..\\9, a backslash is \\\\)", "replace_pattern"
        )

    return _REWRITE_ESCAPE.sub(translate, replace)
