"""Logins: throttled (django-axes) and audited, on the web login and the API's token endpoint alike.

Axes locks out a username from one client address after ``AXES_FAILURE_LIMIT`` failed attempts for
``AXES_COOLOFF_TIME`` (the answer is 429). Every login and failed login is written to the audit log, which records
the client's address and the way in (``web`` or ``api``) of every entry.
"""

from __future__ import annotations

from typing import Any

from axes.backends import AxesStandaloneBackend
from django.contrib.auth.signals import user_logged_in, user_login_failed
from django.dispatch import receiver
from django.http import HttpRequest

from fleet.core import audit
from fleet.core.models import AuditEntry


class LoginThrottle(AxesStandaloneBackend):
    """Axes' lockout check for every login that comes with a request (the web form, the token endpoint).

    A programmatic ``authenticate()`` without a request (a management command, a test) has no client to throttle:
    it is left to the next backend, where axes' own backend would refuse to run.
    """

    def authenticate(self, request: HttpRequest | None, *args: Any, **kwargs: Any) -> Any:
        if request is None:
            return None
        return super().authenticate(request, *args, **kwargs)


@receiver(user_logged_in, dispatch_uid="fleet-audit-login")
def _audit_login(sender: Any, request: HttpRequest | None = None, user: Any = None, **_: Any) -> None:
    if request is None:  # a test client's force_login: nobody logged in through a door
        return
    audit.record(user, AuditEntry.Action.LOGIN, table="account", object_key=user.get_username())


@receiver(user_login_failed, dispatch_uid="fleet-audit-login-failed")
def _audit_login_failed(sender: Any, credentials: dict[str, Any], request: HttpRequest | None = None, **_: Any) -> None:
    username = str(credentials.get("username", ""))
    audit.record(None, AuditEntry.Action.LOGIN_FAILED, table="account", object_key=username)
