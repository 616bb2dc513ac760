"""Static checks of ``mysql_query_rules`` rows, decided from the rows alone (no query): which active rules can never
match because an earlier ``apply=1`` rule ends the walk first. The config's warnings and the control plane's rules
page both use it; the rule engine (``proxyapp.rules.engine``) runs the rules, this reads them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from proxyapp.config.tables import MysqlQueryRule

#: The columns a rule filters on (besides flagIN): a rule that sets one matches only queries that meet it.
_FILTER_COLUMNS = ("username", "schemaname", "client_addr", "proxy_addr", "proxy_port", "digest", "match_digest")


def shadowed_rules(rules: Sequence[MysqlQueryRule]) -> list[tuple[int, int]]:
    """Active rules that can never match, as (rule_id, the rule_id that stops the walk first).

    Decided where it can be: an earlier active rule with ``apply=1`` and the same flagIN whose every filter is
    unset or equal in the later rule (its regexes with the same modifiers and negation) matches every query the
    later one would, and ends the walk there.
    """
    active = sorted((rule for rule in rules if rule.active), key=lambda rule: rule.rule_id)
    found = []
    for index, later in enumerate(active):
        for earlier in active[:index]:
            if earlier.apply and earlier.flagIN == later.flagIN and _covers(earlier, later):
                found.append((later.rule_id, earlier.rule_id))
                break
    return found


def _covers(earlier: MysqlQueryRule, later: MysqlQueryRule) -> bool:
    """Whether every query ``later`` matches is matched by ``earlier`` too (decidably: by equal filters, or a
    pattern that is an anchored literal prefix of the later one's, as ``^SELECT`` before ``^SELECT.*FOR UPDATE``)."""
    for column in _FILTER_COLUMNS:
        value = getattr(earlier, column)
        if value in (None, ""):
            continue
        if column == "match_digest":
            if not _pattern_covers(value, later.match_digest, later.negate_match_pattern):
                return False
        elif value != getattr(later, column):
            return False
    if earlier.match_pattern is not None and not _pattern_covers(
        earlier.match_pattern, later.match_pattern, later.negate_match_pattern
    ):
        return False
    patterned = earlier.match_digest is not None or earlier.match_pattern is not None
    return not patterned or (
        earlier.negate_match_pattern == later.negate_match_pattern and earlier.re_modifiers == later.re_modifiers
    )


_ANCHORED_LITERAL = re.compile(r"\^[A-Za-z0-9 _]+")


def _pattern_covers(earlier: str, later: str | None, negated: bool) -> bool:
    """Whether every text ``later`` matches, ``earlier`` matches too: the same pattern, or (not negated) an anchored
    literal that starts a later pattern with no alternation in it."""
    if later is None:
        return False
    if earlier == later:
        return True
    return not negated and bool(_ANCHORED_LITERAL.fullmatch(earlier)) and later.startswith(earlier) and "|" not in later
