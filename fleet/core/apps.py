"""The control plane's core app."""

from __future__ import annotations

from django.apps import AppConfig


class CoreConfig(AppConfig):
    """Connects the login audit when Django starts."""

    name = "fleet.core"
    label = "core"

    def ready(self) -> None:
        """Import the signal receivers."""
        from fleet.core import logins  # noqa: F401
