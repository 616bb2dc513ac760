"""A query rule row checked and turned into the form the rule engine evaluates (``proxyapp.rules.engine``): its
regexes compiled, its ``replace_pattern`` translated, its hot-row queue read, its outputs listed. What cannot be
(an invalid regex, digest, modifier, a replacement naming a missing group, a ``trx_queue`` without its key...) is a
``RuleError`` naming the rule and the column; ``check_rule`` is the config's row check of ``mysql_query_rules``, so
that the control plane and a node refuse such a rule before any engine sees it.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from proxyapp.config.tables import MysqlQueryRule

#: The characters of a hot-row queue's name (``proxyapp.hotrows``), and a name.
QUEUE_CHARS = "A-Za-z0-9_.$-"
QUEUE_NAME = re.compile(f"[{QUEUE_CHARS}]{{1,64}}")
#: A rule's ``trx_queue_key`` naming a group of its match_pattern.
KEY_GROUP = re.compile(r"\\([1-9])")
#: A rule's ``trx_queue_key`` naming a column.
KEY_COLUMN = re.compile(r"[A-Za-z_][A-Za-z0-9_$]{0,63}")

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
    reason); None when nothing does. The row check of ``mysql_query_rules`` (``config.document``)."""
    try:
        compile_rule(dataclasses.replace(rule, active=True))
    except RuleError as error:
        return error.column, error.reason()
    return None


@dataclass(frozen=True, slots=True)
class CompiledRule:
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


def digest_value(digest: str) -> int:
    """A digest hash as a number (so hex case and leading zeros don't matter); -1 if it isn't one."""
    try:
        return int(digest, 16)
    except ValueError:
        return -1


def compile_rule(rule: MysqlQueryRule) -> CompiledRule:
    """Check one active rule and turn it into the form the rule engine evaluates; RuleError naming the rule and the
    column when it cannot be."""
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
    return CompiledRule(
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
    value = digest_value(digest)
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


#: The column of a rule's hot-row queue key.
KEY = "trx_queue_key"
