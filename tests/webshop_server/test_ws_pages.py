"""Page text and action parsing follow WebShop's text environment (``web_agent_text_env.py`` + templates).

The expected observations were derived by rendering WebShop's own templates and applying its text-mode rule
(every visible text node stripped, nodes equal to "\\n" dropped, joined by " [SEP] ").
"""
import pytest
import requests

from webshop_server import catalog as C
from webshop_server.engine import Shop, parse_action
from webshop_server.testing import serve_in_thread


@pytest.fixture(scope="module")
def small_shop(tmp_path_factory):
    raw = C.generate_raw(40, seed=3)
    first, second = raw["items"][0], raw["items"][1]
    first["small_description"] = ["first bullet", "", " ", "last bullet"]
    first["full_description"] = ""
    second["full_description"] = "   "
    second["small_description"] = []
    d = tmp_path_factory.mktemp("ws_pages")
    C.write_raw(raw, str(d))  # includes reviews.json, which WebShop does not read
    return Shop(data_dir=str(d), seed=0, cache_dir=str(d / "cache"))


def session_at(shop, asin=None):
    s = shop.new_session("t", 0)
    if asin is not None:
        shop.do_search(s, ["x"])
        shop.open_item(s, asin)
    return s


def test_next_is_always_listed_also_on_last_page_and_empty_results(small_shop):
    shop = small_shop
    s = session_at(shop)
    shop.step(s, "search[zzzzqqqq]")  # nothing matches
    page = shop.render(s)
    assert page.observation.endswith("Page 1 (Total results: 0) [SEP] Next >")
    assert page.available_actions()["clickables"] == ["back to search", "next >"]
    r, done, info = shop.step(s, "click[next >]")
    assert info["executed"] and s.page_num == 2
    page = shop.render(s)
    assert page.observation.endswith("Page 2 (Total results: 0) [SEP] < Prev [SEP] Next >")
    # a normal search: the last page (5 of 50, or fewer results) still offers Next
    shop.step(s, f"search[{shop.catalog.products[5]['Title']}]")
    total = len(s.results)
    last = -(-total // 10)
    for _ in range(last - 1):
        shop.step(s, "click[next >]")
    assert s.page_num == last and "next >" in shop.render(s).available_actions()["clickables"]
    shop.step(s, "click[next >]")
    beyond = shop.render(s)
    assert f"Page {last + 1} (Total results: {total})" in beyond.observation
    assert not [c for c in beyond.available_actions()["clickables"] if c.startswith("b0")]


def test_blank_bullets_are_empty_parts_and_no_placeholder_texts(small_shop):
    shop = small_shop
    p0, p1 = shop.catalog.products[0], shop.catalog.products[1]
    s = session_at(shop, p0["asin"])
    head = f"Instruction: [SEP] {s.goal['instruction_text']} [SEP] Back to Search [SEP] < Prev"
    shop.step(s, "click[features]")
    assert shop.render(s).observation == head + " [SEP] first bullet [SEP]  [SEP]  [SEP] last bullet"
    shop.step(s, "click[< prev]")
    shop.step(s, "click[description]")
    assert shop.render(s).observation == head  # empty description: no text node at all
    shop.step(s, "click[< prev]")
    shop.step(s, "click[reviews]")
    assert shop.render(s).observation == head  # WebShop shows no reviews and no "No reviews found"
    s = session_at(shop, p1["asin"])
    shop.step(s, "click[description]")
    assert shop.render(s).observation == head + " [SEP] "  # a blank description is an empty part
    shop.step(s, "click[< prev]")
    shop.step(s, "click[features]")
    assert shop.render(s).observation == head  # no bullets: nothing ("No Features" is not shown)


def test_rating_is_na_and_reviews_empty_as_webshop_loads_no_reviews(small_shop):
    for p in small_shop.catalog.products:
        assert p["Rating"] == "N.A." and p["Reviews"] == []
    s = session_at(small_shop, small_shop.catalog.products[3]["asin"])
    assert "[SEP] Rating: N.A. [SEP] Description [SEP] Features [SEP] Reviews [SEP] Buy Now" in \
        small_shop.render(s).observation


@pytest.mark.parametrize("action,expected", [
    ("click[buy now].", ("click", "buy now")),
    ("click[buy now] please", ("click", "buy now")),
    ("search[a [b] c]", ("search[a ", "b] c")),  # greedy name, as WebShop's regex
    ("click [buy now]", ("click ", "buy now")),
    ("search[]", ("search[]", None)),
    ("buy it", ("buy it", None)),
])
def test_parse_action_is_webshops_prefix_match(action, expected):
    assert parse_action(action) == expected


def test_api_accepts_what_webshop_accepts(small_shop):
    shop = small_shop
    goal = shop.goals[0]
    with serve_in_thread(shop) as url:
        sid = requests.post(url + "/api/reset", json={"goal_index": 0}, timeout=30).json()["session_id"]

        def step(action):
            r = requests.post(url + "/api/step", json={"session_id": sid, "action": action}, timeout=30)
            assert r.status_code == 200, r.text
            return r.json()

        for noop in ("jump[now]", "buy it", "click [search]"):
            a = step(noop)
            assert a["info"]["executed"] is False and a["reward"] == 0 and not a["done"]
        step(f"search[{goal['name']}]")
        step(f"click[{goal['asin'].lower()}]")
        bought = step("click[buy now].")  # trailing text after "]" is ignored, as WebShop's parse_action
        assert bought["done"] is True and bought["info"]["executed"] is True and bought["info"]["page"] == "done"
