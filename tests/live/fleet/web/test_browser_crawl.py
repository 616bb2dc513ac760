"""Every page in a real browser (the Chromium of ``test_browser``) as a viewer, an operator and an admin (a superuser,
who also opens the Django admin), with markup in every text field the control plane accepts: every page answers
200, shows the markup as text, and no script of it runs (no dialog, no script error, no Content-Security-Policy
refusal, which is what an injected script would meet first)."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User as Account
from django.urls import reverse
from django.utils.http import urlencode
from playwright.sync_api import BrowserContext, ConsoleMessage, Dialog, Page

from fleet.bench.models import BenchTarget
from fleet.core import roles
from fleet.core.models import Cluster, ProxyNode
from tests.live.fleet.web.test_browser import browser, context, log_in_as  # noqa: F401 (fixtures)
from tests.support.control_plane import LOGIN_PASSWORD, make_account
from tests.unit.fleet.web.test_web_views import (  # noqa: F401 (published is a fixture)
    HOSTILE,
    NODE,
    operator_urls,
    plant_hostile_values,
    published,
    viewer_urls,
)

pytestmark = pytest.mark.django_db(transaction=True)


def every_viewer_page(cluster: Cluster) -> list[str]:
    """The test client's viewer pages and those with live parts of their own (mirror, failover, benchmarks)."""
    return [
        *viewer_urls(),
        reverse("web:diff") + "?old=2&new=3",
        reverse("web:rule_test") + "?" + urlencode({"query": HOSTILE, "username": HOSTILE, "source": "draft"}),
        reverse("web:shard_map") + "?" + urlencode({"table": f"{HOSTILE}.{HOSTILE}", "key": HOSTILE, "source": "3"}),
        reverse("web:api_token"),
        reverse("web:mirror"),
        reverse("web:mirror_table"),
        reverse("web:failover"),
        reverse("web:failover_live"),
        reverse("web:failover_events"),
        reverse("web:failover_transitions"),
        reverse("web:bench_jobs"),
        reverse("web:bench_targets"),
    ]


def django_admin_pages(cluster: Cluster, root: Account) -> list[str]:
    """The Django admin's lists and change forms of what it manages."""
    node = ProxyNode.objects.get(name=NODE)
    target = BenchTarget.objects.get(name="hostile-target")
    return [
        reverse("admin:index"),
        reverse("admin:core_cluster_changelist"),
        reverse("admin:core_cluster_change", args=[cluster.pk]),
        reverse("admin:core_proxynode_changelist"),
        reverse("admin:core_proxynode_change", args=[node.pk]),
        reverse("admin:auth_user_changelist"),
        reverse("admin:auth_user_change", args=[root.pk]),
        reverse("admin:bench_benchtarget_changelist"),
        reverse("admin:bench_benchtarget_change", args=[target.pk]),
    ]


def crawl(page: Page, urls: list[str]) -> list[str]:
    """Open every URL; what went wrong on each (its status, markup shown as markup, a dialog, a script error)."""
    problems: list[str] = []
    at = [""]

    def dialog(d: Dialog) -> None:
        problems.append(f"{at[0]}: a dialog said {d.message!r}")
        d.dismiss()

    def console(message: ConsoleMessage) -> None:
        if message.type == "error":
            problems.append(f"{at[0]}: console error {message.text!r}")

    page.on("dialog", dialog)
    page.on("console", console)
    page.on("pageerror", lambda error: problems.append(f"{at[0]}: script error {error}"))
    for url in urls:
        at[0] = url
        response = page.goto(url)
        if response is None or response.status != 200:
            problems.append(f"{url}: answered {response.status if response else 'nothing'}")
            continue
        page.wait_for_load_state("load")
        if "<script>alert(1)" in page.content() or "onerror=alert(2)>" in page.content():
            problems.append(f"{url}: the markup is in the page as markup")
    return problems


def test_every_page_as_every_role_shows_hostile_values_as_text(context: BrowserContext, published: Cluster) -> None:  # noqa: F811
    plant_hostile_values(published)
    BenchTarget.objects.create(name="hostile-target", host="127.0.0.1", port=3306, user=HOSTILE, database=HOSTILE)
    root = Account.objects.create_superuser("crawl-root", email="", password=LOGIN_PASSWORD, first_name=HOSTILE)
    viewer_pages = every_viewer_page(published)
    target = BenchTarget.objects.get(name="hostile-target")
    operator_pages = [
        *viewer_pages,
        *operator_urls(published),
        reverse("web:bench_target_new"),
        reverse("web:bench_target_edit", args=[target.pk]),
    ]
    crawls = {
        roles.VIEWER: (make_account(roles.VIEWER), viewer_pages),
        roles.OPERATOR: (make_account(roles.OPERATOR), operator_pages),
        "superuser": (root, [*operator_pages, *django_admin_pages(published, root)]),
    }
    opened = 0
    for role, (account, urls) in crawls.items():
        problems = crawl(log_in_as(context, account), urls)
        assert problems == [], f"as {role}: " + "\n".join(problems)
        opened += len(urls)
    assert opened > 120  # every page, three times over
