"""The control-plane skeleton: settings from the environment, /healthz, the Celery app and the demo config."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from django.conf import settings
from django.test import Client

from devstack.stack import REPO
from fleet.celery import app as celery_app
from fleet.settings import database_from_url


def test_healthz() -> None:
    response = Client().get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


def test_default_settings() -> None:
    # Read in a fresh interpreter: pytest-django swaps this process's database for its test database.
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "ALLOWED_HOSTS", "DJANGO_DEBUG")}
    code = "import json, fleet.settings as s; print(json.dumps([s.DATABASES['default'], s.ALLOWED_HOSTS, s.DEBUG]))"
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, check=True)
    database, allowed_hosts, debug = json.loads(out.stdout)
    assert (database["ENGINE"], database["NAME"]) == ("django.db.backends.sqlite3", str(REPO / "var" / "fleet.sqlite3"))
    assert (allowed_hosts, debug) == (["localhost", "127.0.0.1"], False)
    assert settings.STATIC_ROOT == REPO / "var" / "staticfiles"
    assert (REPO / "static" / "css" / "fleet.css").is_file()


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("sqlite:///var/x.sqlite3", {"ENGINE": "django.db.backends.sqlite3", "NAME": str(REPO / "var/x.sqlite3")}),
        ("sqlite:////tmp/x.sqlite3", {"ENGINE": "django.db.backends.sqlite3", "NAME": "/tmp/x.sqlite3"}),
        ("sqlite://:memory:", {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}),
        (
            "postgres://fleet:p%40ss@db.internal:5433/fleet",
            {
                "ENGINE": "django.db.backends.postgresql",
                "NAME": "fleet",
                "USER": "fleet",
                "PASSWORD": "p@ss",
                "HOST": "db.internal",
                "PORT": "5433",
            },
        ),
        (
            "mysql://root@127.0.0.1/fleet",
            {
                "ENGINE": "django.db.backends.mysql",
                "NAME": "fleet",
                "USER": "root",
                "PASSWORD": "",
                "HOST": "127.0.0.1",
                "PORT": "",
            },
        ),
    ],
)
def test_database_from_url(url: str, expected: dict[str, str]) -> None:
    assert database_from_url(url) == expected


@pytest.mark.parametrize("url", ["redis://127.0.0.1/0", "sqlite://", "postgres://db.internal:5432/", "fleet.sqlite3"])
def test_database_from_url_refuses(url: str) -> None:
    with pytest.raises(ValueError, match="DATABASE_URL"):
        database_from_url(url)


def test_celery_uses_redis_url() -> None:
    assert celery_app.conf.broker_url == settings.REDIS_URL == "redis://127.0.0.1:6379/0"


def test_migrations_cover_every_model() -> None:
    out = subprocess.run(
        [sys.executable, "manage.py", "makemigrations", "--check", "--dry-run"],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stdout + out.stderr
