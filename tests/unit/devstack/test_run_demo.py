"""``make run``'s control plane across restarts: the admin account keeps its password hash, so a browser logged in
before a restart stays logged in (issue 42 item 7: each start set the password again, with a new salt, which ends
every session Django holds)."""

from __future__ import annotations

import pytest
from django.test import Client

from devstack.run_demo import ADMIN, ensure_admin

pytestmark = pytest.mark.django_db


def test_a_restart_keeps_the_browser_logged_in() -> None:
    ensure_admin("first-pass")
    browser = Client()
    assert browser.login(username=ADMIN, password="first-pass")
    assert browser.get("/").status_code == 200
    ensure_admin("first-pass")  # the next start, with the kept password
    assert browser.get("/").status_code == 200
    ensure_admin("another-pass")  # a new password does end the sessions
    assert browser.get("/").status_code == 302
    assert Client().login(username=ADMIN, password="another-pass")
