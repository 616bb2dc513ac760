"""What counts as a secret in a config, and masking it: the one place every view, export and audit entry asks.

A user's ``password`` and any global variable named ``*_password`` (``mysql-monitor_password``) are secrets: a
published version's document keeps their real values (the nodes need them); everything shown to a person, and
the audit log, gets ``MASK`` instead. At rest, in the control plane's database, they are sealed
(``fleet.core.sealing``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from fleet.core.models.tables import SECRET_COLUMNS
from fleet.core.sealing import is_secret_variable

MASK = "********"


def is_secret(table: str, row: Mapping[str, Any], column: str) -> bool:
    """Whether ``row[column]`` is a credential that no user may see (a user's password, a password variable)."""
    if column in SECRET_COLUMNS:
        return True
    return table == "global_variables" and column == "variable_value" and is_secret_variable(row.get("variable_name"))


def mask_row(table: str, row: Mapping[str, Any]) -> dict[str, Any]:
    """``row`` with every non-empty secret replaced by ``MASK``."""
    return {k: (MASK if v and is_secret(table, row, k) else v) for k, v in row.items()}


def mask_document(document: Mapping[str, Iterable[Mapping[str, Any]]]) -> dict[str, list[dict[str, Any]]]:
    """A copy of ``document`` fit to show a user: every secret masked."""
    return {table: [mask_row(table, row) for row in rows] for table, rows in document.items()}
