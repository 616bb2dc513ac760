"""Which rule of a new config is which rule of an old one (``same_rules``), for hits to follow their rule."""

from __future__ import annotations

from fleet.web.views.tables import same_rules
from proxyapp.config.tables import MysqlQueryRule


def rule(rule_id: int, pattern: str, hostgroup: int = 10) -> MysqlQueryRule:
    """An active rule sending what matches ``pattern`` to ``hostgroup``."""
    return MysqlQueryRule(rule_id=rule_id, active=True, match_digest=pattern, destination_hostgroup=hostgroup)


def test_renumbered_rules_are_found_by_what_they_are_and_edited_ones_by_their_number() -> None:
    old = [rule(1, "^SELECT.*FOR UPDATE"), rule(2, "^SELECT"), rule(3, "^UPDATE"), rule(4, "^DELETE")]
    new = [
        rule(10, "^SELECT.*FOR UPDATE"),  # renumbered
        rule(1, "^SELECT"),  # renumbered onto another's old number
        rule(3, "^UPDATE", hostgroup=20),  # edited in place
        rule(5, "^INSERT"),  # new; rule 4 is gone
    ]
    assert same_rules(old, new) == {1: 10, 2: 1, 3: 3}
