"""The logged-in account's API token: when it expires, a new one (shown once), revoking it; audited."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from rest_framework.authtoken.models import Token

from fleet.api import tokens
from fleet.core import audit
from fleet.core.models import AuditEntry
from fleet.web.access import viewer_page


@viewer_page
def api_token(request: HttpRequest) -> HttpResponse:
    """GET: the token's state; POST ``action=new`` makes one (the old revoked) and shows it once, ``action=revoke``
    revokes it."""
    user = request.user
    shown = ""
    said = ""
    if request.method == "POST":
        action = request.POST.get("action")
        if action == "new":
            shown = tokens.new_token(user).key
            audit.record(user, AuditEntry.Action.CREATE, table="api_token", object_key=user.get_username())
            said = "A new token: copy it now, it is not shown again. The old one no longer works."
        elif action == "revoke" and tokens.revoke(user):
            audit.record(user, AuditEntry.Action.DELETE, table="api_token", object_key=user.get_username())
            said = "Your token is revoked."
    token = Token.objects.filter(user=user).first()
    context = {
        "token": token,
        "expires": tokens.expires_at(token) if token is not None else None,
        "shown": shown,
        "said": said,
    }
    return render(request, "web/api_token.html", context)
