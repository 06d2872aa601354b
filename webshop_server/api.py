"""The JSON API agents use (WebShop's text mode over HTTP), as a Flask blueprint.

* ``GET /health`` -> ``{"status": "ok", "products": int, "goals": int, "generated": bool, "catalog": str,
  "goals_exposed": bool}``
  (+ ``"run_token": str`` when the server was started with ``--run-token``)
* ``POST /api/reset`` ``{"split": "test"|"eval"|"train", "index": int}`` or ``{"goal_index": int}`` (neither: a
  goal drawn by weight) -> ``{"session_id", "goal_index", "instruction", "category", "observation",
  "available_actions"}``
* ``POST /api/step`` ``{"session_id", "action", "seq"?}`` -> ``{"observation", "available_actions", "reward",
  "done", "info"}``; ``seq`` (optional, any JSON scalar) makes retries idempotent: repeating the last ``seq``
  returns the stored answer instead of acting twice.
* ``POST /api/close`` ``{"session_id"}`` frees a session.
* ``GET /api/goal?session_id=...`` (only with ``expose_goals``) -> the goal with WebShop's field names.
* ``GET /api/oracle?session_id=...`` (only with ``expose_goals``) -> ``{"value", "page", "basis", "asin",
  "options"}``: the best reward still reachable from the session's page (:mod:`webshop_server.oracle`).
* ``GET /api/stats`` -> catalog/goal/session counters.

Errors raise :class:`ApiError`, which the app answers as JSON ``{"error": reason, **extra}``.
"""
from __future__ import annotations

import re
import secrets
from typing import Any

from flask import Blueprint, jsonify, request

from webshop_server.engine import ShopSession
from webshop_server.goals import SPLITS, public_goal, split_range
from webshop_server.oracle import PageOracle
from webshop_server.sessions import UNKNOWN
from webshop_server.state import MAX_ACTION_CHARS, MAX_BODY_BYTES, ShopState, strict_json

_API_SID = re.compile(r"^[0-9a-f]{32}$")


class ApiError(Exception):
    """An API request refused with ``status`` and ``{"error": reason, **extra}``."""

    def __init__(self, status: int, reason: str, **extra: Any):
        super().__init__(reason)
        self.status = status
        self.reason = reason
        self.extra = extra


def body() -> dict[str, Any]:
    """The request's JSON object; any other body (bad UTF-8, NaN, too deep, too large, not an object) is an
    ``ApiError`` 400/413."""
    if request.content_length is not None and request.content_length > MAX_BODY_BYTES:
        raise ApiError(413, f"request body larger than {MAX_BODY_BYTES} bytes")
    raw = request.get_data(cache=True)
    if len(raw) > MAX_BODY_BYTES:
        raise ApiError(413, f"request body larger than {MAX_BODY_BYTES} bytes")
    try:
        data = strict_json(raw.decode("utf-8") if raw else "")
    except (UnicodeDecodeError, ValueError) as exc:  # JSONDecodeError, NaN/Infinity, ints over 4300 digits
        raise ApiError(400, f"malformed JSON body: {str(exc)[:200]}") from None
    except RecursionError:
        raise ApiError(400, "malformed JSON body: nested too deeply") from None
    if not isinstance(data, dict):
        raise ApiError(400, "JSON body must be an object")
    return data


def int_field(data: dict[str, Any], key: str) -> int | None:
    """``data[key]`` as an int, ``None`` when absent (bools and other types are a 400)."""
    v = data.get(key)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int):
        raise ApiError(400, f"{key!r} must be an integer")
    return v


def api_blueprint(state: ShopState) -> Blueprint:
    """The API routes over ``state`` (one blueprint per app)."""
    bp = Blueprint("api", __name__)
    shop, store, page_store = state.shop, state.store, state.page_store

    def gone(sid: str, why: str) -> ApiError:
        if why == UNKNOWN and _API_SID.match(sid) and not sid.startswith(state.boot_id):
            why = "server_restarted"
        if why == UNKNOWN:
            return ApiError(404, f"unknown session {sid[:80]!r}")
        # 410: the episode existed but is lost (evicted from the full store, idle past the TTL, or closed)
        return ApiError(410, f"session {sid[:80]!r} {why}", session_state=why)

    def session_from(sid: Any) -> ShopSession:
        if not isinstance(sid, str) or not sid:
            raise ApiError(400, "'session_id' must be a non-empty string")
        s, why = store.lookup(sid)
        if s is None:
            raise gone(sid, why)
        return s

    def observe(s: ShopSession) -> dict[str, Any]:
        page = shop.render(s)
        return {"observation": page.observation, "available_actions": page.available_actions()}

    @bp.get("/health")
    def health():
        # "generated": the catalog is a generated stand-in, not WebShop's data (published numbers not comparable)
        out = {"status": "ok", "products": len(shop.products), "goals": len(shop.goals),
               "generated": shop.generated, "catalog": shop.catalog.source,
               "goals_exposed": bool(state.expose_goals)}  # /api/goal and /api/oracle answer
        if state.run_token:  # the launching run's token (--run-token): its own server, not a leftover on the port
            out["run_token"] = state.run_token
        return jsonify(out)

    @bp.get("/api/stats")
    def stats():
        counters = state.counters
        return jsonify({
            "products": len(shop.products), "goals": len(shop.goals), "goal_mode": shop.goal_mode,
            "generated": shop.generated,
            "catalog": shop.catalog.source, "seed": shop.seed,
            "splits": {k: len(split_range(k, len(shop.goals))) for k in SPLITS},
            "sessions": len(store), "sessions_evicted": store.evicted, "sessions_expired": store.expired,
            "page_sessions": len(page_store), "page_sessions_evicted": page_store.evicted,
            "boot_id": state.boot_id, "resets_total": counters["resets"], "steps_total": counters["steps"],
            "closed_total": counters["closed"],
            "max_sessions": store.max_sessions, "session_ttl_s": store.ttl, "load_seconds": shop.load_seconds,
        })

    @bp.post("/api/reset")
    def reset():
        data = body()
        goal_index = int_field(data, "goal_index")
        split = data.get("split")
        index = int_field(data, "index")
        if split is not None and (not isinstance(split, str) or split not in SPLITS):
            raise ApiError(400, f"'split' must be one of {sorted(SPLITS)}")
        if split is not None and index is None:
            raise ApiError(400, "'index' is required with 'split'")
        if split is None and index is not None:
            raise ApiError(400, "'split' is required with 'index'")
        try:
            gi = shop.goal_index(split=split, index=index, goal_index=goal_index)
        except IndexError as exc:
            raise ApiError(400, str(exc)) from None
        sid = state.boot_id + secrets.token_hex(12)
        s = shop.new_session(sid, gi)
        state.count("resets")
        store.put(sid, s)
        return jsonify({"session_id": sid, "goal_index": gi, "instruction": s.goal["instruction_text"],
                        "category": s.goal.get("category"), **observe(s)})

    @bp.post("/api/step")
    def step():
        data = body()
        action = data.get("action")
        if not isinstance(action, str):
            raise ApiError(400, "'action' must be a string")
        if len(action) > MAX_ACTION_CHARS:
            raise ApiError(400, f"'action' longer than {MAX_ACTION_CHARS} characters")
        # any string is an action, as in WebShop: parse_action matches a prefix (``click[buy now].`` buys) and
        # anything that is not search[...]/click[...] is a no-op answered with reward 0
        seq = data.get("seq")
        if seq is not None and not isinstance(seq, (int, str)):
            raise ApiError(400, "'seq' must be an integer or a string")
        s = session_from(data.get("session_id"))
        with s.lock:
            if seq is not None and s.last_seq == seq and s.last_response is not None:
                return jsonify(s.last_response)
            reward, done, info = shop.step(s, action)
            state.count("steps")
            info.update({"page": s.page, "asin": s.asin, "options": dict(s.options), "steps": s.steps,
                         "goal_index": s.goal_index})
            if done:
                info["score"] = s.reward
                info["reward_info"] = s.reward_info
            response = {**observe(s), "reward": reward, "done": done, "info": info}
            if seq is not None:
                s.last_seq, s.last_response = seq, response
        return jsonify(response)

    @bp.post("/api/close")
    def close():
        data = body()
        sid = data.get("session_id")
        if not isinstance(sid, str) or not sid:
            raise ApiError(400, "'session_id' must be a non-empty string")
        if store.pop(sid) is None:
            raise gone(sid, store.lookup(sid)[1])
        state.count("closed")
        return jsonify({"closed": sid})

    @bp.get("/api/goal")
    def goal():
        if not state.expose_goals:
            raise ApiError(404, "goals are not exposed (start the server with --expose-goals)")
        s = session_from(request.args.get("session_id"))
        return jsonify({**public_goal(s.goal), "goal_index": s.goal_index})

    oracle = PageOracle(shop) if state.expose_goals else None

    @bp.get("/api/oracle")
    def oracle_value():
        if oracle is None:
            raise ApiError(404, "the oracle is not exposed (start the server with --expose-goals)")
        s = session_from(request.args.get("session_id"))
        with s.lock:  # the page may not change while its value is computed
            out = oracle.value(s)
        return jsonify(out)

    @bp.route("/api/<path:_rest>", methods=["GET", "POST", "PUT", "DELETE", "PATCH"])
    def unknown(_rest: str):
        raise ApiError(404, f"unknown API route {request.path!r}")

    return bp
