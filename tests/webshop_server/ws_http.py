"""The JSON API calls the server tests make over real HTTP (one copy for every test file of this folder)."""
import requests


def post(url, path, payload=None, **kw):
    return requests.post(url + path, json=payload, timeout=30, **kw)


def new_session(url, **payload):
    r = post(url, "/api/reset", payload or {"split": "test", "index": 0})
    assert r.status_code == 200, r.text
    return r.json()


def stepper(url, sid):
    """``step(action)``: one /api/step of session ``sid``, its JSON answer (a non-200 answer fails the test)."""
    def step(action):
        r = post(url, "/api/step", {"session_id": sid, "action": action})
        assert r.status_code == 200, r.text
        return r.json()
    return step


def goal_of(url, sid):
    r = requests.get(url + "/api/goal", params={"session_id": sid}, timeout=30)
    assert r.status_code == 200, r.text
    return r.json()
