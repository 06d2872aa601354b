"""The 'Checked by' flow and API behaviour over real HTTP on loopback."""
import json

import pytest
import requests

from webshop_server.engine import Shop
from webshop_server.sessions import SessionStore
from ws_http import goal_of, new_session, post, stepper  # same folder (rootdir import mode)

from webshop_server.testing import expert_episode, goal_option_values, serve_in_thread


def test_health(server_url, shop):
    assert requests.get(server_url + "/health", timeout=10).json() == {
        "status": "ok", "products": len(shop.products), "goals": len(shop.goals), "generated": True,
        "catalog": "generated:1000:seed0", "goals_exposed": True}
    from webshop_server.app import create_app  # a server without --expose-goals says so (the oracle's "auto")
    assert create_app(shop).test_client().get("/health").get_json()["goals_exposed"] is False


def test_health_echoes_the_run_token(shop):
    # A server started with --run-token (the launch scripts' WEBSHOP_RUN_TOKEN) says so in /health; one without
    # adds nothing (above). Guards: the token not echoed, so every launch would take a leftover server for its own.
    from webshop_server.app import create_app

    client = create_app(shop, run_token="run-1700000000-42-7").test_client()
    assert client.get("/health").get_json()["run_token"] == "run-1700000000-42-7"
    assert "run_token" not in create_app(shop).test_client().get("/health").get_json()


def test_reset_shape_and_search_page(server_url, shop):
    r = new_session(server_url, split="eval", index=7)
    assert set(r) >= {"session_id", "instruction", "observation", "available_actions"}
    assert r["goal_index"] == 507 and r["instruction"] == shop.goals[507]["instruction_text"]
    assert r["observation"] == f"WebShop [SEP] Instruction: [SEP] {r['instruction']} [SEP] Search"
    assert r["available_actions"] == {"has_search_bar": True, "clickables": ["search"]}
    assert new_session(server_url, goal_index=3)["goal_index"] == 3
    g = goal_of(server_url, r["session_id"])
    for key in ("asin", "instruction_text", "attributes", "goal_options", "price_upper", "query", "name"):
        assert key in g


@pytest.mark.parametrize("index", [0, 1, 2, 5, 8, 13, 21, 34])
def test_expert_buys_goal_product_with_reward_one(server_url, index):
    r = new_session(server_url, split="test", index=index)
    sid = r["session_id"]
    goal = goal_of(server_url, sid)
    answers = expert_episode(stepper(server_url, sid), r, goal)
    last = answers[-1]
    assert last["done"] is True and last["reward"] == 1.0 and last["info"]["score"] == 1.0
    assert last["info"]["asin"] == goal["asin"]
    assert set(last["info"]["options"].values()) == set(goal_option_values(goal))
    assert all(not a["done"] for a in answers[:-1])
    assert "Your score (min 0.0, max 1.0) [SEP] 1.0" in last["observation"]
    # the episode is over: further actions change nothing
    after = stepper(server_url, sid)("click[back to search]")
    assert after["done"] is True and after["reward"] == 0.0


def test_wrong_product_scores_below_one(server_url, shop):
    r = new_session(server_url, split="test", index=4)
    sid = r["session_id"]
    goal = goal_of(server_url, sid)
    step = stepper(server_url, sid)
    other_query = next(q for q in ("office chair", "green tea", "hdmi cable") if q != goal["query"])
    res = step(f"search[{other_query}]")
    asin = next(c for c in res["available_actions"]["clickables"][2:] if c != goal["asin"].lower()
                and c not in ("next >", "< prev"))
    step(f"click[{asin}]")
    last = step("click[buy now]")
    assert last["done"] is True and last["reward"] < 1.0 and last["info"]["score"] == last["reward"]


def test_missing_options_score_below_one(server_url, shop):
    gi = next(i for i in range(500) if goal_option_values(shop.goals[i]))
    r = new_session(server_url, goal_index=gi)
    step = stepper(server_url, r["session_id"])
    step(f"search[{shop.goals[gi]['name']}]")
    step(f"click[{shop.goals[gi]['asin'].lower()}]")
    assert step("click[buy now]")["reward"] < 1.0


def test_unknown_click_is_a_noop(server_url):
    r = new_session(server_url)
    step = stepper(server_url, r["session_id"])
    res = step("search[green tea]")
    for action in ("click[definitely not here]", "click[search]", "click[buy now]", "search[]", "click[]"):
        again = step(action)
        assert again["observation"] == res["observation"] and again["available_actions"] == res["available_actions"]
        assert again["reward"] == 0 and again["done"] is False and again["info"]["executed"] is False


def test_paging_subpages_and_back(server_url):
    r = new_session(server_url)
    step = stepper(server_url, r["session_id"])
    p1 = step("search[tea chair cable shoes polish]")
    assert "Page 1 (Total results: 50)" in p1["observation"] and "next >" in p1["available_actions"]["clickables"]
    assert len([c for c in p1["available_actions"]["clickables"] if c.startswith("b0")]) == 10
    p2 = step("click[next >]")
    assert "Page 2 (Total results: 50)" in p2["observation"] and "< prev" in p2["available_actions"]["clickables"]
    assert step("click[< prev]")["observation"] == p1["observation"]
    asin = p1["available_actions"]["clickables"][2]
    item = step(f"click[{asin}]")
    assert item["available_actions"]["clickables"][:6] == [
        "back to search", "< prev", "description", "features", "reviews", "buy now"]
    assert "Price: $" in item["observation"] and "Rating: " in item["observation"]
    for sub in ("description", "features", "reviews"):
        page = step(f"click[{sub}]")
        assert page["available_actions"]["clickables"] == ["back to search", "< prev"]
        assert step("click[< prev]")["observation"] == item["observation"]
    assert step("click[< prev]")["observation"] == p1["observation"]
    home = step("click[back to search]")
    assert home["observation"] == r["observation"] and home["available_actions"]["has_search_bar"]


def test_unknown_session_404(server_url):
    r = post(server_url, "/api/step", {"session_id": "nope", "action": "click[buy now]"})
    assert r.status_code == 404 and "unknown session" in r.json()["error"]
    r = requests.get(server_url + "/api/goal", params={"session_id": "nope"}, timeout=10)
    assert r.status_code == 404 and r.json()["error"]
    assert post(server_url, "/api/close", {"session_id": "nope"}).status_code == 404


@pytest.mark.parametrize("body,reason", [
    ("{not json", "malformed JSON"),
    ("[1, 2]", "must be an object"),
    ('{"session_id": "x"}', "'action' must be a string"),
    ('{"session_id": "x", "action": 5}', "'action' must be a string"),
    ('{"session_id": 5, "action": "click[x]"}', "session_id"),
])
def test_malformed_step_400(server_url, body, reason):
    r = requests.post(server_url + "/api/step", data=body, headers={"Content-Type": "application/json"}, timeout=10)
    assert r.status_code == 400 and reason in r.json()["error"]


@pytest.mark.parametrize("payload", [
    {"split": "dev", "index": 0}, {"split": "test"}, {"index": 3}, {"split": "test", "index": 500},
    {"goal_index": -1}, {"goal_index": 10 ** 9}, {"goal_index": "3"}, {"split": "test", "index": True},
])
def test_malformed_reset_400(server_url, payload):
    r = post(server_url, "/api/reset", payload)
    assert r.status_code == 400 and r.json()["error"]


def test_huge_inputs_refused(server_url):
    sid = new_session(server_url)["session_id"]
    r = post(server_url, "/api/step", {"session_id": sid, "action": "search[" + "a " * 600 + "]"})
    assert r.status_code == 400 and "longer than" in r.json()["error"]
    r = requests.post(server_url + "/api/step", data=json.dumps({"session_id": sid, "action": "x" * 100_000}),
                      headers={"Content-Type": "application/json"}, timeout=10)
    assert r.status_code == 413 and r.json()["error"]


def test_unknown_api_route_is_json_404(server_url):
    r = requests.get(server_url + "/api/nothing", timeout=10)
    assert r.status_code == 404 and "error" in r.json()
    # a known API path with a method it lacks, and an unrouted /api/ URL, are JSON too (not the HTML error page)
    r = requests.put(server_url + "/api/step", timeout=10)
    assert r.status_code == 404 and r.json() == {"error": "unknown API route '/api/step'"}
    assert requests.get(server_url + "/api/", timeout=10).json()["error"]


def test_sessions_are_isolated(server_url, shop):
    a, b = new_session(server_url, goal_index=0), new_session(server_url, goal_index=1)
    sa, sb = stepper(server_url, a["session_id"]), stepper(server_url, b["session_id"])
    ra = sa("search[green tea]")
    rb = sb("search[office chair]")
    assert ra["observation"] != rb["observation"]
    assert shop.goals[0]["instruction_text"] in ra["observation"]
    assert shop.goals[1]["instruction_text"] in rb["observation"]
    asin = ra["available_actions"]["clickables"][2]
    sa(f"click[{asin}]")
    done_a = sa("click[buy now]")
    assert done_a["done"]
    again_b = sb("click[next >]")
    assert again_b["done"] is False and "Page 2" in again_b["observation"]


def test_seq_makes_step_retries_idempotent(server_url):
    sid = new_session(server_url)["session_id"]
    r1 = post(server_url, "/api/step", {"session_id": sid, "action": "search[green tea]", "seq": 1}).json()
    r2 = post(server_url, "/api/step", {"session_id": sid, "action": "click[next >]", "seq": 2}).json()
    r2b = post(server_url, "/api/step", {"session_id": sid, "action": "click[next >]", "seq": 2}).json()
    assert r2 == r2b and "Page 2" in r2["observation"] and r1["observation"] != r2["observation"]
    r3 = post(server_url, "/api/step", {"session_id": sid, "action": "click[next >]", "seq": 3}).json()
    assert "Page 3" in r3["observation"]


def test_close_frees_session(server_url):
    sid = new_session(server_url)["session_id"]
    assert post(server_url, "/api/close", {"session_id": sid}).status_code == 200
    r = post(server_url, "/api/step", {"session_id": sid, "action": "click[x]"})
    assert r.status_code == 410 and r.json()["session_state"] == "closed"
    assert post(server_url, "/api/close", {"session_id": sid}).status_code == 410


def test_goal_endpoint_needs_expose_goals(shop):
    with serve_in_thread(shop) as url:
        sid = new_session(url)["session_id"]
        r = requests.get(url + "/api/goal", params={"session_id": sid}, timeout=10)
        assert r.status_code == 404 and "expose-goals" in r.json()["error"]


def test_session_store_ttl_and_lru():
    now = [0.0]
    store = SessionStore(max_sessions=3, ttl_seconds=10, clock=lambda: now[0])
    for i in range(3):
        store.put(f"s{i}", i)
    assert store.get("s0") == 0  # s0 becomes most recent
    store.put("s3", 3)  # evicts least recently used: s1
    assert store.get("s1") is None and store.evicted == 1 and len(store) == 3
    now[0] = 5.0
    assert store.get("s2") == 2
    now[0] = 12.0  # s0/s3 last used at 0 -> expired; s2 used at 5 -> alive
    assert store.get("s0") is None and store.get("s3") is None and store.get("s2") == 2
    store.put("s4", 4)
    assert len(store) == 2


# ------------------------------------------------------------------------------------------------ pages
def test_pages_for_people_escape_html(server_url):
    sid = "fixed_2"
    r = requests.get(f"{server_url}/{sid}", timeout=10)
    assert r.status_code == 200 and 'id="search_input"' in r.text and "Instruction:" in r.text
    assert "cdn" not in r.text.lower() and "https://" not in r.text
    r = requests.post(f"{server_url}/{sid}", data={"search_query": "<script>alert('x')</script> green tea"},
                      timeout=10)
    assert r.status_code == 200 and r.url.startswith(f"{server_url}/search_results/{sid}/")
    assert "<script>alert" not in r.text and "&lt;script&gt;alert" in r.text
    assert "Page 1 (Total results:" in r.text and 'class="product-link"' in r.text


def test_pages_walk_to_done(server_url, shop):
    from urllib.parse import quote
    goal = shop.goals[2]
    kw = quote(goal["name"].lower().replace("/", " "))
    base = f"{server_url}/item_page/fixed_2/{goal['asin']}/{kw}/1/"
    options = {}
    product = shop.products[goal["asin"]]
    for name, values in product["options"].items():
        for v in goal_option_values(goal):
            if v in values:
                options[name] = v
    r = requests.get(base + quote(json.dumps(options)), timeout=10)
    assert r.status_code == 200 and "Buy Now" in r.text and product["Title"].split()[0] in r.text
    for sub in ("Description", "Features", "Reviews"):
        r = requests.get(f"{server_url}/item_sub_page/fixed_2/{goal['asin']}/{kw}/1/{sub}/{quote(json.dumps(options))}",
                         timeout=10)
        assert r.status_code == 200 and "&lt; Prev" in r.text
    r = requests.post(f"{server_url}/done/fixed_2/{goal['asin']}/{quote(json.dumps(options))}", timeout=10)
    assert r.status_code == 200 and "Thank you for shopping with us!" in r.text and "<pre>1.0</pre>" in r.text
    assert requests.get(f"{server_url}/static/style.css", timeout=10).status_code == 200


def test_page_errors(server_url):
    assert requests.get(f"{server_url}/item_page/unknown_sid/B0X/q/1/%7B%7D", timeout=10).status_code == 404
    requests.get(f"{server_url}/fixed_5", timeout=10)
    assert requests.get(f"{server_url}/item_page/fixed_5/NOPE/q/1/%7B%7D", timeout=10).status_code == 404
    assert requests.get(f"{server_url}/item_page/fixed_5/{'B0'}/q/1/notjson", timeout=10).status_code in (400, 404)
    # an unrouted URL (no page route matched) still gets the HTML error page with its link back to the shop
    r = requests.get(f"{server_url}/a/b/c", timeout=10)
    assert r.status_code == 404 and "text/html" in r.headers["Content-Type"] and 'href="/"' in r.text


def test_synthetic_goal_mode_is_solvable():
    small = Shop(num_products=200, seed=7, goal_mode="synthetic")
    with serve_in_thread(small, expose_goals=True) as url:
        for gi in (0, 1, 2):
            r = new_session(url, goal_index=gi)
            goal = goal_of(url, r["session_id"])
            assert isinstance(goal["goal_options"], dict)
            assert expert_episode(stepper(url, r["session_id"]), r, goal)[-1]["reward"] == 1.0
