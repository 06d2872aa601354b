"""The page oracle (webshop_server/oracle.py) over real HTTP on loopback: GET /api/oracle beside /api/goal."""
import pytest
import requests

from ws_http import goal_of, new_session, stepper  # same folder (rootdir import mode)

from webshop_server.testing import serve_in_thread


def oracle(url, sid):
    r = requests.get(url + "/api/oracle", params={"session_id": sid}, timeout=60)
    assert r.status_code == 200, r.text
    return r.json()


def open_item(step, first, asin, max_pages=6):
    """From a results page, page forward until ``asin`` is listed and open it."""
    page = first
    for _ in range(max_pages):
        if asin.lower() in page["available_actions"]["clickables"]:
            return step(f"click[{asin.lower()}]")
        page = step("click[next >]")
    raise AssertionError(f"{asin} not in the first {max_pages} result pages")


def test_hidden_without_expose_goals(shop):
    with serve_in_thread(shop) as url:
        sid = new_session(url)["session_id"]
        r = requests.get(url + "/api/oracle", params={"session_id": sid}, timeout=30)
        assert r.status_code == 404 and "--expose-goals" in r.json()["error"]


def test_search_page_value_is_the_goal_product(server_url):
    # the index value is exact when the goal's own product scores 1 (the maximum); it does for these goals
    for i in range(8):
        sid = new_session(server_url, split="test", index=i)["session_id"]
        o = oracle(server_url, sid)
        assert o["basis"] == "goal_product" and o["value"] == 1.0
        assert o["asin"] == goal_of(server_url, sid)["asin"]


def test_best_result_is_reached_by_buying_it(server_url):
    # the results page's value is achieved: open the reported product (value unchanged: progress 0), click the
    # reported options, buy -> the server pays exactly that value, and the done page's value is the payment.
    # guards: best options that are not the real maximiser, or a value the purchase does not pay
    checked = 0
    for i in range(6):
        sid = new_session(server_url, split="test", index=i)["session_id"]
        step = stepper(server_url, sid)
        goal = goal_of(server_url, sid)
        results = step(f"search[{goal['query']}]")
        o = oracle(server_url, sid)
        assert o["basis"] == "results"
        if o["asin"] is None:
            continue
        open_item(step, results, o["asin"])
        item = oracle(server_url, sid)
        assert item["basis"] == "item" and item["value"] == pytest.approx(o["value"])
        for value in (item["options"] or {}).values():
            step(f"click[{value}]")
            assert oracle(server_url, sid)["value"] == pytest.approx(o["value"])  # a best option keeps the value
        done = step("click[buy now]")
        assert done["done"] and done["reward"] == pytest.approx(o["value"])
        final = oracle(server_url, sid)
        assert final["basis"] == "done" and final["value"] == pytest.approx(done["reward"])
        checked += 1
    assert checked >= 4


def test_search_that_drops_the_goal_product_loses_value(server_url):
    sid = new_session(server_url, split="test", index=0)["session_id"]
    step = stepper(server_url, sid)
    before = oracle(server_url, sid)["value"]
    step("search[zzzq qqqz]")  # nothing matches: no product reachable forward
    after = oracle(server_url, sid)
    assert after["value"] < before and after["asin"] is None
    # Back to Search restores the whole shop: positive progress
    step("click[back to search]")
    assert oracle(server_url, sid)["value"] == before


def test_a_query_for_another_product_drops_the_goal_product(server_url):
    # the goal of test index 0 searched with another goal's query whose results lack the goal product
    # guards: a results value that looks beyond the results (e.g. the goal product itself)
    sid = new_session(server_url, split="test", index=0)["session_id"]
    step = stepper(server_url, sid)
    goal = goal_of(server_url, sid)
    for j in range(1, 40):
        other_sid = new_session(server_url, split="test", index=j)["session_id"]
        other = goal_of(server_url, other_sid)
        if other["product_category"] == goal["product_category"]:
            continue
        step(f"search[{other['query']}]")
        o = oracle(server_url, sid)
        if o["asin"] == goal["asin"]:
            continue
        assert o["value"] < 1.0
        return
    pytest.fail("no query of another category found")


def test_a_wrong_option_loses_value(server_url, shop):
    # on the goal product's page, clicking a value that matches no goal option (in a group whose best value does)
    # lowers the value, and buying then pays the lower value
    from webshop_server.oracle import PageOracle

    po = PageOracle(shop)
    for i in range(60):
        sid = new_session(server_url, split="test", index=i)["session_id"]
        goal = goal_of(server_url, sid)
        if not goal["goal_options"]:
            continue
        product = shop.products[goal["asin"]]
        best = po.best_options(goal["asin"], shop.goals[goal["goal_index"]], {})
        wrong = None
        for name, values in product["options"].items():
            for v in values:
                alone = po.best_options(goal["asin"], shop.goals[goal["goal_index"]], {name: v})
                if v != best.get(name) and po.item_value(goal["asin"], goal["goal_index"], alone)[0] < 1.0:
                    wrong = v
                    break
            if wrong:
                break
        if wrong is None:
            continue
        step = stepper(server_url, sid)
        open_item(step, step(f"search[{goal['query']}]"), goal["asin"])
        before = oracle(server_url, sid)["value"]
        step(f"click[{wrong}]")
        after = oracle(server_url, sid)["value"]
        assert after < before
        assert step("click[buy now]")["reward"] == pytest.approx(after)
        return
    pytest.fail("no goal with a wrong option found in the first 60 test goals")
