"""Logins through the web form and the API's token endpoint: throttled by django-axes, and audited."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User as Account
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from fleet.core.models import AuditEntry
from tests.support.control_plane import LOGIN_PASSWORD

pytestmark = pytest.mark.django_db

TOKEN = "/api/v1/auth/token/"


def test_the_web_login_locks_a_username_out_after_five_failures(accounts: dict[str, Any], settings: Any) -> None:
    client = Client(REMOTE_ADDR="10.1.2.3")
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        refused = client.post(reverse("login"), {"username": "viewer-account", "password": "wrong"})
        assert refused.status_code == 200  # the form again, with its error
    last = client.post(reverse("login"), {"username": "viewer-account", "password": "wrong"})
    assert last.status_code == 429  # the limit reached: locked out
    locked = client.post(reverse("login"), {"username": "viewer-account", "password": LOGIN_PASSWORD})
    assert locked.status_code == 429  # even the right password, until the cool-off passes
    failures = AuditEntry.objects.filter(action=AuditEntry.Action.LOGIN_FAILED, object_key="viewer-account")
    assert failures.count() >= settings.AXES_FAILURE_LIMIT
    assert (failures.first().source, failures.first().client) == ("web", "10.1.2.3")
    other = Client(REMOTE_ADDR="10.1.2.3").post(
        reverse("login"), {"username": "operator-account", "password": LOGIN_PASSWORD}
    )
    assert other.status_code == 302  # another account from the same address is not locked out
    login = AuditEntry.objects.get(action=AuditEntry.Action.LOGIN, object_key="operator-account")
    assert login.user.username == "operator-account" and login.source == "web"


def test_the_token_endpoint_is_throttled_too(accounts: dict[str, Any], settings: Any) -> None:
    api = APIClient(REMOTE_ADDR="10.9.9.9")
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        assert api.post(TOKEN, {"username": "admin-account", "password": "wrong"}).status_code == 400
    assert api.post(TOKEN, {"username": "admin-account", "password": "wrong"}).status_code == 429
    assert api.post(TOKEN, {"username": "admin-account", "password": LOGIN_PASSWORD}).status_code == 429
    failed = AuditEntry.objects.filter(action=AuditEntry.Action.LOGIN_FAILED, object_key="admin-account").first()
    assert (failed.source, failed.client) == ("api", "10.9.9.9")


def test_a_success_resets_the_count(accounts: dict[str, Account], settings: Any) -> None:
    client = Client(REMOTE_ADDR="10.5.5.5")
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        client.post(reverse("login"), {"username": "viewer-account", "password": "wrong"})
    assert client.post(reverse("login"), {"username": "viewer-account", "password": LOGIN_PASSWORD}).status_code == 302
    client.post(reverse("logout"))
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        client.post(reverse("login"), {"username": "viewer-account", "password": "wrong"})
    assert client.post(reverse("login"), {"username": "viewer-account", "password": LOGIN_PASSWORD}).status_code == 302


def test_api_tokens_expire_and_are_revoked_from_the_ui(accounts: dict[str, Any], settings: Any) -> None:
    api = APIClient()
    answer = api.post(TOKEN, {"username": "viewer-account", "password": LOGIN_PASSWORD}).json()
    key, expires = answer["token"], answer["expires"]
    assert expires.startswith(str((Token.objects.get(key=key).created + timedelta(days=30)).date()))
    api.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    assert api.get("/api/v1/clusters/").status_code == 200
    Token.objects.filter(key=key).update(created=timezone.now() - timedelta(days=31))  # time is data
    expired = api.get("/api/v1/clusters/")
    assert expired.status_code == 401 and "token expired" in str(expired.json())
    renewed = APIClient().post(TOKEN, {"username": "viewer-account", "password": LOGIN_PASSWORD}).json()["token"]
    assert renewed != key  # an expired token is replaced, not handed out again
    browser = Client()
    assert browser.login(username="viewer-account", password=LOGIN_PASSWORD)
    page = browser.post(reverse("web:api_token"), {"action": "new"}).content.decode()
    (shown,) = re.findall(r'<code id="token">([0-9a-f]+)</code>', page)
    assert shown != renewed and not Token.objects.filter(key=renewed).exists()
    browser.post(reverse("web:api_token"), {"action": "revoke"})
    api.credentials(HTTP_AUTHORIZATION=f"Token {shown}")
    assert api.get("/api/v1/clusters/").status_code == 401
    assert AuditEntry.objects.filter(table="api_token").count() == 2
