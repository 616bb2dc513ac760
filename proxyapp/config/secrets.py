"""What counts as a secret in a config document, and masking it: the one answer for the proxy's admin endpoint
(``GET /config`` without the admin credential) and the control plane (what it masks and seals).

A user's ``password`` and the value of any global variable named ``*_password`` (``mysql-monitor_password``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

#: Table columns that hold a password.
SECRET_COLUMNS = frozenset({"password"})
#: What a secret is shown as.
MASK = "********"
_SECRET_VARIABLE_SUFFIX = "_password"


def is_secret_variable(name: object) -> bool:
    """Whether a global variable named ``name`` holds a password (``mysql-monitor_password``)."""
    return str(name or "").endswith(_SECRET_VARIABLE_SUFFIX)


def is_secret(table: str, row: Mapping[str, Any], column: str) -> bool:
    """Whether ``row[column]`` of ``table`` is a credential (a user's password, a password variable's value)."""
    if column in SECRET_COLUMNS:
        return True
    return table == "global_variables" and column == "variable_value" and is_secret_variable(row.get("variable_name"))


def mask_row(table: str, row: Mapping[str, Any]) -> dict[str, Any]:
    """``row`` with every non-empty secret replaced by ``MASK``."""
    return {k: (MASK if v and is_secret(table, row, k) else v) for k, v in row.items()}


def mask_document(document: Mapping[str, Iterable[Mapping[str, Any]]]) -> dict[str, list[dict[str, Any]]]:
    """A copy of the config ``document`` fit to show: every secret masked."""
    return {table: [mask_row(table, row) for row in rows] for table, rows in document.items()}
