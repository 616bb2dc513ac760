"""The layout in a real browser (the Chromium of ``test_browser``) at an on-call DBA's phone width (390 px) and a
laptop's (1280 px): on every page the navigation leaves the screen to the page and nothing scrolls sideways, a skip
link leads past the navigation, and the row actions of the widest tables stay on screen."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.urls import reverse
from playwright.sync_api import Browser, BrowserContext, Page, expect

from fleet.core import roles
from fleet.core.models import Cluster
from tests.live.fleet.web.test_browser import browser, log_in  # noqa: F401 (fixtures)
from tests.live.fleet.web.test_browser_crawl import every_viewer_page
from tests.unit.fleet.web.test_web_views import operator_urls, published  # noqa: F401 (published is a fixture)

pytestmark = pytest.mark.django_db(transaction=True)

PHONE = {"width": 390, "height": 844}
LAPTOP = {"width": 1280, "height": 800}
#: The most of a phone's screen height the header (brand, navigation, account) may take before the page starts.
HEADER_SHARE = 0.2


@pytest.fixture
def phone(browser: Browser, live_server) -> Iterator[BrowserContext]:  # noqa: F811 (test_browser's fixture)
    """A browser context the size of a phone's screen."""
    context = browser.new_context(base_url=live_server.url, viewport=PHONE)
    yield context
    context.close()


def pages(cluster: Cluster) -> list[str]:
    """Every full page an operator opens (the htmx partials and the chart data left out)."""
    urls = [*every_viewer_page(cluster), *operator_urls(cluster)]
    partial = (reverse("web:overview_nodes"), "/table/", ".json", "/live/")
    return [url for url in urls if not any(part in url for part in partial)]


def overflow(page: Page) -> int:
    """How many pixels the page is wider than the screen (what would scroll sideways)."""
    return int(page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth"))


def test_on_a_phone_no_page_scrolls_sideways_and_the_navigation_leaves_room(
    phone: BrowserContext,
    published: Cluster,  # noqa: F811 (test_web_views' fixture)
) -> None:
    page = log_in(phone, roles.OPERATOR)
    problems = []
    for url in pages(published):
        page.goto(url)
        if overflow(page) > 0:
            problems.append(f"{url}: {overflow(page)} px wider than the screen")
        header = page.locator("header.topbar").bounding_box()
        assert header is not None
        if header["height"] > PHONE["height"] * HEADER_SHARE:
            problems.append(f"{url}: the header takes {header['height']:.0f} px of {PHONE['height']}")
    assert problems == [], "\n".join(problems)


def test_on_a_phone_the_menu_opens_and_leads_to_a_page(
    phone: BrowserContext,
    published: Cluster,  # noqa: F811 (test_web_views' fixture)
) -> None:
    page = log_in(phone, roles.OPERATOR)
    history = page.get_by_role("link", name="History", exact=True)
    expect(history).to_be_hidden()
    page.get_by_role("button", name="Menu").click()
    expect(history).to_be_visible()
    history.click()
    expect(page.locator("h1")).to_contain_text("Version history")
    assert overflow(page) == 0


@pytest.mark.parametrize("viewport", [PHONE, LAPTOP], ids=["390px", "1280px"])
def test_the_skip_link_is_the_first_stop_and_leads_to_the_page(
    browser: Browser,  # noqa: F811 (test_browser's fixture)
    live_server,
    published: Cluster,  # noqa: F811 (test_web_views' fixture)
    viewport: dict[str, int],
) -> None:
    context = browser.new_context(base_url=live_server.url, viewport=viewport)
    try:
        page = log_in(context, roles.OPERATOR)
        skip = page.get_by_role("link", name="Skip to content")
        page.keyboard.press("Tab")
        expect(skip).to_be_focused()
        expect(skip).to_be_in_viewport()
        page.keyboard.press("Enter")
        expect(page.locator("main")).to_be_focused()
    finally:
        context.close()


@pytest.mark.parametrize("viewport", [PHONE, LAPTOP], ids=["390px", "1280px"])
def test_edit_and_delete_stay_on_screen_in_the_widest_table(
    browser: Browser,  # noqa: F811 (test_browser's fixture)
    live_server,
    published: Cluster,  # noqa: F811 (test_web_views' fixture)
    viewport: dict[str, int],
) -> None:
    context = browser.new_context(base_url=live_server.url, viewport=viewport)
    try:
        page = log_in(context, roles.OPERATOR)
        for slug in ("query-rules", "servers", "users", "variables"):
            page.goto(reverse("web:table_list", args=[slug]))
            row = page.locator("table.grid tbody tr").first
            expect(row.get_by_role("link", name="Edit")).to_be_in_viewport(ratio=1)
            expect(row.get_by_role("button", name="Delete")).to_be_in_viewport(ratio=1)
            assert overflow(page) == 0, slug
    finally:
        context.close()
