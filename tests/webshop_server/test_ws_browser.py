"""A person's path through the pages in headless Debian chromium (playwright, no downloaded browsers)."""
import os
import shutil

import pytest

from webshop_server.testing import goal_option_values, serve_in_thread

CHROMIUM = os.environ.get("WEBSHOP_CHROMIUM", "/usr/bin/chromium")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]


@pytest.mark.slow
def test_browser_search_open_pick_options_buy(shop, tmp_path):
    from playwright import sync_api  # default install: a missing part fails
    if not os.path.exists(CHROMIUM):
        pytest.fail(f"{CHROMIUM} not installed: scripts/test.sh installs Debian chromium (apt-get install chromium)")
    gi = next(i for i in range(500) if len(goal_option_values(shop.goals[i])) >= 1)
    goal = shop.goals[gi]
    requests_seen = []
    with serve_in_thread(shop, production=True) as url, sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.on("request", lambda r: requests_seen.append(r.url))
            page.goto(f"{url}/fixed_{gi}")
            assert goal["instruction_text"] in page.inner_text("#instruction-text")
            page.fill("#search_input", goal["name"])
            page.click("button:has-text('Search')")
            page.wait_for_url("**/search_results/**")
            assert "Total results" in page.content()
            page.click(f"a.product-link:has-text('{goal['asin']}')")
            page.wait_for_url("**/item_page/**")
            for value in goal_option_values(goal):
                radio = page.locator(f"input[type=radio][value='{value}']")
                if radio.count():
                    label_for = radio.first.get_attribute("id")
                    with page.expect_navigation():
                        page.click(f"label[for='{label_for}']")
                    assert page.locator(f"input[type=radio][value='{value}']").first.is_checked()
            page.click("button:has-text('Description')")
            page.wait_for_url("**/item_sub_page/**")
            page.click("button:has-text('< Prev')")
            page.wait_for_url("**/item_page/**")
            page.click("button:has-text('Buy Now')")
            page.wait_for_url("**/done/**")
            assert "Thank you for shopping with us!" in page.content()
            score = page.inner_text("#reward pre")
            shot = tmp_path / "webshop_done.png"
            page.screenshot(path=str(shot), full_page=True)
            assert shot.stat().st_size > 1000
            out_dir = os.environ.get("WEBSHOP_SCREENSHOT_DIR")
            if out_dir:
                os.makedirs(out_dir, exist_ok=True)
                shutil.copy(shot, os.path.join(out_dir, shot.name))
        finally:
            browser.close()
    assert float(score) == 1.0
    assert all(u.startswith(url) for u in requests_seen), [u for u in requests_seen if not u.startswith(url)]
