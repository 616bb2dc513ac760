"""Shared control-plane fixtures (a pytest plugin of ``tests/conftest.py``): a cluster whose draft holds a realistic
config, one account per role, and API clients for the operator and the viewer."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User as Account
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from devstack.proxy import rw_split_config
from fleet.core import publishing, roles
from fleet.core.models import Cluster

#: A backend password and a password variable that must never reach anything a user sees.
SECRET = "Sup3r-s3cret-backend-pw"
MONITOR_SECRET = "m0nitor-s3cret-pw"
LOGIN_PASSWORD = "control-login-pass"
NO_ROLE = "none"


def seed_document(**overrides: Any) -> dict[str, Any]:
    """The read/write split of the test harness with secrets: writer 10, reader 20, two rules, two variables."""
    document = rw_split_config(3306, [3307])
    document["mysql_users"][0]["password"] = SECRET
    document["global_variables"] = [
        {"variable_name": "mysql-threads", "variable_value": "2"},
        {"variable_name": "mysql-monitor_password", "variable_value": MONITOR_SECRET},
    ]
    document.update(overrides)
    return document


def make_cluster(name: str, document: dict[str, Any] | None = None) -> Cluster:
    """A cluster whose draft is ``document`` (default: ``seed_document()``), imported without an author."""
    cluster = Cluster.objects.create(name=name)
    publishing.import_document(cluster, document if document is not None else seed_document(), None)
    return cluster


@pytest.fixture
def cluster(db: None) -> Cluster:
    """The cluster ``main`` with the seed config as its draft, nothing published yet."""
    return make_cluster("main")


def make_account(role: str) -> Account:
    """An account named after ``role`` holding it (no role for ``NO_ROLE``), logging in with LOGIN_PASSWORD."""
    account = Account.objects.create_user(f"{role}-account", password=LOGIN_PASSWORD)
    if role != NO_ROLE:
        roles.grant(account, role)
    return account


@pytest.fixture
def accounts(db: None, settings: Any) -> dict[str, Account]:
    """One account per role, plus one without a role, keyed by role name (``NO_ROLE`` for the last); passwords
    are hashed with a fast hasher for these tests (the slow default costs about 0.3 s an account)."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    return {role: make_account(role) for role in (*roles.ROLES, NO_ROLE)}


def client_for(account: Account | None) -> APIClient:
    """An API client sending ``account``'s token (no credentials for None)."""
    client = APIClient()
    if account is not None:
        client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.get_or_create(user=account)[0].key}")
    return client


@pytest.fixture
def api_operator(accounts: dict[str, Account]) -> APIClient:
    """An API client as the operator account."""
    return client_for(accounts[roles.OPERATOR])


@pytest.fixture
def api_viewer(accounts: dict[str, Account]) -> APIClient:
    """An API client as the viewer account."""
    return client_for(accounts[roles.VIEWER])
