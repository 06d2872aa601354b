"""Sessions and input hardening: API episodes vs. pages, lost sessions (410 with the reason), malformed bodies,
the request-body limit applied by waitress before buffering, /api/stats."""
import json
import socket
import time

import pytest
import requests

from webshop_server.app import MAX_BODY_BYTES, create_app
from webshop_server.sessions import SessionStore
from webshop_server.testing import serve_in_thread


def api(client, path, payload):
    r = client.post(path, data=json.dumps(payload), content_type="application/json")
    return r.status_code, r.get_json()


def test_max_sessions_setting_is_wired_and_eviction_is_reported(shop):
    client = create_app(shop, max_sessions=2).test_client()
    sids = [api(client, "/api/reset", {"goal_index": i})[1]["session_id"] for i in range(3)]
    status, data = api(client, "/api/step", {"session_id": sids[0], "action": "search[tea]"})
    assert status == 410 and data["session_state"] == "evicted" and "evicted" in data["error"]
    for sid in sids[1:]:
        assert api(client, "/api/step", {"session_id": sid, "action": "search[tea]"})[0] == 200
    stats = client.get("/api/stats").get_json()
    assert stats["max_sessions"] == 2 and stats["sessions"] == 2 and stats["sessions_evicted"] == 1


def test_expired_closed_and_unknown_sessions_are_told_apart(shop):
    client = create_app(shop, session_ttl=0.2).test_client()
    old = api(client, "/api/reset", {"goal_index": 0})[1]["session_id"]
    time.sleep(0.3)
    status, data = api(client, "/api/step", {"session_id": old, "action": "search[tea]"})
    assert status == 410 and data["session_state"] == "expired"
    sid = api(client, "/api/reset", {"goal_index": 0})[1]["session_id"]
    assert api(client, "/api/close", {"session_id": sid})[0] == 200
    status, data = api(client, "/api/step", {"session_id": sid, "action": "search[tea]"})
    assert status == 410 and data["session_state"] == "closed"
    status, data = api(client, "/api/step", {"session_id": "never-issued", "action": "search[tea]"})
    assert status == 404 and "unknown session" in data["error"] and "session_state" not in data


def test_a_restarted_server_reports_its_previous_sessions(shop):
    before = create_app(shop).test_client()
    sid = api(before, "/api/reset", {"goal_index": 0})[1]["session_id"]
    after = create_app(shop).test_client()  # a new server instance (new boot id), e.g. after a crash
    status, data = api(after, "/api/step", {"session_id": sid, "action": "search[tea]"})
    assert status == 410 and data["session_state"] == "server_restarted"
    mine = api(after, "/api/reset", {"goal_index": 0})[1]["session_id"]
    assert mine[:8] != sid[:8] and api(after, "/api/step", {"session_id": mine, "action": "search[tea]"})[0] == 200
    stats = after.get("/api/stats").get_json()
    assert stats["resets_total"] == 1 and stats["steps_total"] == 1 and stats["boot_id"] == mine[:8]


def test_pages_cannot_touch_api_episodes(shop):
    client = create_app(shop, max_sessions=3).test_client()
    start = api(client, "/api/reset", {"goal_index": 4})[1]
    sid = start["session_id"]
    asin = shop.goals[4]["asin"]
    # a page visit with the API episode's id gets its own page session, and buying there leaves the episode alone
    assert client.get(f"/{sid}").status_code == 200
    assert client.get(f"/done/{sid}/{asin}/{{}}").status_code == 200
    assert client.get(f"/search_results/{sid}/tea/1").status_code == 200
    # many anonymous page sessions (more than the store holds) never evict the API episode
    for i in range(10):
        assert client.get(f"/page{i}").status_code == 200
    status, data = api(client, "/api/step", {"session_id": sid, "action": "click[search]"})
    assert status == 200 and data["done"] is False and data["info"]["page"] == "index"
    assert data["observation"] == start["observation"]
    stats = client.get("/api/stats").get_json()
    assert stats["sessions"] == 1 and stats["sessions_evicted"] == 0 and stats["page_sessions"] == 3
    assert stats["page_sessions_evicted"] == 8
    # the pages do not know API ids either (no page session was created for this one)
    other = api(client, "/api/reset", {"goal_index": 5})[1]["session_id"]
    assert client.get(f"/search_results/{other}/tea/1").status_code == 404


def test_two_apps_in_one_process_share_no_state(shop):
    a, b = create_app(shop).test_client(), create_app(shop).test_client()
    sid = api(a, "/api/reset", {"goal_index": 0})[1]["session_id"]
    assert a.get("/p1").status_code == 200 and a.get("/search_results/p1/tea/1").status_code == 200
    assert b.get("/search_results/p1/tea/1").status_code == 404  # a's page session is unknown to b
    assert api(b, "/api/step", {"session_id": sid, "action": "search[tea]"})[0] == 410
    stats_a, stats_b = a.get("/api/stats").get_json(), b.get("/api/stats").get_json()
    assert (stats_a["sessions"], stats_a["page_sessions"], stats_a["resets_total"]) == (1, 1, 1)
    assert (stats_b["sessions"], stats_b["page_sessions"], stats_b["resets_total"]) == (0, 0, 0)
    assert stats_a["boot_id"] != stats_b["boot_id"]


@pytest.mark.parametrize("body", [
    '{"session_id": "x", "action": "click[a]", "seq": ' + "9" * 5000 + "}",  # int over Python's digit limit
    "[" * 8000 + "]" * 8000,  # deeper than the recursion limit
    '{"goal_index": NaN}',
    '{"goal_index": Infinity}',
    b'{"goal_index": "\xff"}',  # not UTF-8
    '{"goal_index": 1',
    "",
    "null",
])
def test_every_malformed_body_is_a_400(shop, body):
    client = create_app(shop).test_client()
    for path in ("/api/reset", "/api/step", "/api/close"):
        r = client.post(path, data=body, content_type="application/json")
        assert r.status_code == 400, (path, r.status_code, r.data[:200])
        assert r.get_json()["error"]


def test_stats_split_sizes_follow_the_goal_count(shop):
    stats = create_app(shop).test_client().get("/api/stats").get_json()
    n = stats["goals"]
    assert n == len(shop.goals) and n > 500
    assert stats["splits"] == {"test": 500, "eval": min(n, 1500) - 500, "train": max(0, n - 1500)}


def test_waitress_refuses_large_bodies_before_buffering(shop):
    with serve_in_thread(shop, production=True, threads=2) as url:
        port = int(url.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            # announce 1 GB but send one byte: a server that buffers first would wait for the rest (timeout)
            s.sendall(b"POST /api/step HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                      b"Content-Length: 1000000000\r\n\r\n{")
            head = s.recv(4096).decode("latin-1")
        assert head.startswith("HTTP/1.1 413"), head[:200]
        big = requests.post(url + "/api/step", data=b"x" * (MAX_BODY_BYTES + 1), timeout=10)
        assert big.status_code == 413
        ok = requests.post(url + "/api/reset", json={"goal_index": 0}, timeout=10)
        assert ok.status_code == 200


def test_store_remembers_why_a_session_is_gone():
    now = [0.0]
    store = SessionStore(max_sessions=2, ttl_seconds=10, clock=lambda: now[0], max_tombstones=2)
    store.put("a", 1)
    store.put("b", 2)
    store.put("c", 3)
    assert store.lookup("a") == (None, "evicted") and store.lookup("b") == (2, "ok")
    store.pop("b")
    assert store.lookup("b") == (None, "closed")
    now[0] = 11
    assert store.lookup("c") == (None, "expired")
    assert store.lookup("a") == (None, "unknown")  # only the last 2 tombstones are kept
    store.put("c", 4)  # an id in use again is live, not a tombstone
    assert store.lookup("c") == (4, "ok")


@pytest.mark.parametrize("path,fields", [
    ("/api/reset", ("split", "index", "goal_index")),
    ("/api/step", ("session_id", "action", "seq")),
    ("/api/close", ("session_id",)),
])
def test_wrong_field_types_are_400_not_500(shop, path, fields):
    client = create_app(shop).test_client()
    sid = api(client, "/api/reset", {"goal_index": 0})[1]["session_id"]
    base = {"/api/reset": {"split": "test", "index": 0}, "/api/step": {"session_id": sid, "action": "search[tea]"},
            "/api/close": {"session_id": sid}}[path]
    for field in fields:
        for value in ([], {}, ["test"], {"a": 1}, 1.5, -1, True, "x" * 2000, 10 ** 30, "\u0000"):
            status, data = api(client, path, {**base, field: value})
            assert status in (200, 400, 404), (field, value, status, data)
            assert status == 200 or data["error"]


def test_malformed_page_urls_are_400(shop):
    client = create_app(shop).test_client()
    asin = shop.goals[0]["asin"]
    assert client.get("/p1").status_code == 200  # a page session
    for options in ("[" * 3000 + "]" * 3000, '{"a": ' + "9" * 5000 + "}", "NaN", "{", '["x"]', '{"color": 1}'):
        r = client.get(f"/item_page/p1/{asin}/tea/1/{options}")
        assert r.status_code == 400, (options[:20], r.status_code)
