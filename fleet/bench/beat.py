"""Celery beat's scheduler for the control plane: django-celery-beat's database scheduler, so that benchmark jobs'
crontabs (``PeriodicTask`` rows) fire alongside the fixed ``CELERY_BEAT_SCHEDULE``.

The database scheduler copies the fixed entries into its tables at start, but keeps an entry's expiry only as
``expire_seconds``: this one turns a numeric ``expires`` option into it, so every beat message of the fixed schedule
still expires after one period (docs/control-plane.md).
"""

from __future__ import annotations

import math
from typing import Any

from django_celery_beat.schedulers import DatabaseScheduler

from fleet.core.health import heartbeat


class Scheduler(DatabaseScheduler):
    """The database scheduler, keeping the fixed entries' expiry, and showing the overview that beat runs."""

    def tick(self, *args: Any, **kwargs: Any) -> float:
        """One pass over the schedule, recorded as beat's heartbeat."""
        heartbeat("beat", f"{len(self.schedule)} entries")
        return super().tick(*args, **kwargs)

    def update_from_dict(self, mapping: dict[str, Any]) -> None:
        """Install the fixed entries, each numeric ``expires`` also as ``expire_seconds``."""
        entries = {}
        for name, entry in mapping.items():
            options = dict(entry.get("options") or {})
            expires = options.get("expires")
            if isinstance(expires, int | float) and "expire_seconds" not in options:
                options["expire_seconds"] = max(1, math.ceil(expires))
            entries[name] = {**entry, "options": options}
        super().update_from_dict(entries)
