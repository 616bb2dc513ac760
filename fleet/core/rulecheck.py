"""The node's own check of query rules, run by the control plane: what ``parse_config`` leaves to the node's
``RuleEngine`` (``proxyapp.rules.engine._prepare``: a rule's columns taken together, such as a ``trx_queue_key``
group that ``match_pattern`` does not have) refuses a row in the form and the API, an import and a publish with the
very message the node would refuse the config with."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence

from proxyapp.config.document import Config, ConfigError, parse_config
from proxyapp.config.tables import MysqlQueryRule, MysqlQueryRuleFastRouting
from proxyapp.rules.engine import RuleEngine


def engine_error(rules: Sequence[MysqlQueryRule], fast: Sequence[MysqlQueryRuleFastRouting] = ()) -> str | None:
    """The message the node's RuleEngine refuses ``rules`` with (it checks the active ones), or None."""
    try:
        RuleEngine(rules, fast)
    except ValueError as error:
        return str(error)
    return None


def rule_error(rule: MysqlQueryRule) -> str | None:
    """What the node would say of ``rule`` were it active (a rule is written to be turned on), or None."""
    return engine_error([dataclasses.replace(rule, active=True)])


def named_column(message: str) -> str:
    """The column a RuleEngine message starts with after the rule (``rule 5: trx_queue_key \\2 refers to ...``,
    ``rule 5: replace_pattern: ...``), or "" when it starts with none."""
    _, _, rest = message.partition(": ")
    first = re.match(r"\w+", rest)
    return first.group(0) if first and first.group(0) in MysqlQueryRule.__dataclass_fields__ else ""


def node_config(document: object) -> Config:
    """``document`` validated as a node validates it: the proxy's ``parse_config``, then its RuleEngine; ConfigError
    with each message."""
    config = parse_config(document)
    error = engine_error(config.mysql_query_rules, config.mysql_query_rules_fast_routing)
    if error is not None:
        raise ConfigError([error])
    return config
