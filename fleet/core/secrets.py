"""What counts as a secret in a config, and masking it: the one place every view, export and audit entry asks.

A user's ``password`` and any global variable named ``*_password`` (``mysql-monitor_password``) are secrets: a
published version's document keeps their real values (the nodes need them); everything shown to a person, and
the audit log, gets ``MASK`` instead. At rest, in the control plane's database, they are sealed
(``fleet.core.sealing``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from fleet.core.sealing import is_secret

MASK = "********"


def mask_row(table: str, row: Mapping[str, Any]) -> dict[str, Any]:
    """``row`` with every non-empty secret replaced by ``MASK``."""
    return {k: (MASK if v and is_secret(table, row, k) else v) for k, v in row.items()}


def mask_document(document: Mapping[str, Iterable[Mapping[str, Any]]]) -> dict[str, list[dict[str, Any]]]:
    """A copy of ``document`` fit to show a user: every secret masked."""
    return {table: [mask_row(table, row) for row in rows] for table, rows in document.items()}
