"""How long ago a moment was, as the UI says it."""

from __future__ import annotations

from datetime import datetime

from django.utils import timezone


def ago(at: datetime | None, now: datetime | None = None) -> str:
    """How long before ``now`` (default: now) ``at`` was, to the second under a minute ("12 s ago", "3 min ago",
    "5 h ago", "2 d ago"); "never" for None."""
    if at is None:
        return "never"
    seconds = max(0, int(((now or timezone.now()) - at).total_seconds()))
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds // size} {unit} ago"
    return f"{seconds} s ago"
