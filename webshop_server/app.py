"""Flask app: WebShop's pages for people and a JSON API for agents.

Pages (server-side rendered, assets under ``/static``, no CDN), with WebShop's routes:
``/`` -> ``/<session_id>`` (search page; ``fixed_<n>`` selects goal n as in WebShop),
``/search_results/<sid>/<keywords>/<page>``, ``/item_page/<sid>/<asin>/<keywords>/<page>/<options>``,
``/item_sub_page/<sid>/<asin>/<keywords>/<page>/<sub_page>/<options>``, ``/done/<sid>/<asin>/<options>``
(``options`` is a JSON object in the URL).

API:
* ``GET /health`` -> ``{"status": "ok", "products": int, "goals": int, "generated": bool, "catalog": str}``
* ``POST /api/reset`` ``{"split": "test"|"eval"|"train", "index": int}`` or ``{"goal_index": int}`` (neither: a
  goal drawn by weight) -> ``{"session_id", "goal_index", "instruction", "category", "observation",
  "available_actions"}``
* ``POST /api/step`` ``{"session_id", "action", "seq"?}`` -> ``{"observation", "available_actions", "reward",
  "done", "info"}``; ``seq`` (optional, any JSON scalar) makes retries idempotent: repeating the last ``seq``
  returns the stored answer instead of acting twice.
* ``POST /api/close`` ``{"session_id"}`` frees a session.
* ``GET /api/goal?session_id=...`` (only with ``expose_goals``) -> the goal with WebShop's field names.
* ``GET /api/stats`` -> catalog/goal/session counters.

Errors are JSON ``{"error": reason}``: 400 malformed body, 404 unknown session or route, 410 a session that
existed but is gone (``"session_state"``: evicted / expired / closed / server_restarted), 413 body too large. API episodes and page
sessions live in separate stores: pages never see, finish or evict an API episode.
"""
from __future__ import annotations

import json
import re
import secrets
import threading
from typing import Any

from flask import Flask, abort, jsonify, redirect, render_template, request, url_for
from werkzeug.exceptions import HTTPException

from webshop_server.engine import END_BUTTON, SUB_PAGES, Shop, ShopSession
from webshop_server.goals import SPLITS, public_goal, split_range
from webshop_server.sessions import UNKNOWN, SessionStore

MAX_BODY_BYTES = 16 * 1024
MAX_ACTION_CHARS = 1000
_SESSION_ID = re.compile(r"^[A-Za-z0-9_\-]{1,64}$")
_API_SID = re.compile(r"^[0-9a-f]{32}$")


class ApiError(Exception):
    def __init__(self, status: int, reason: str, **extra: Any):
        super().__init__(reason)
        self.status = status
        self.reason = reason
        self.extra = extra


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def create_app(shop: Shop, expose_goals: bool = False, max_sessions: int = 20000,
               session_ttl: float = 3600.0) -> Flask:
    app = Flask(__name__)
    app.config["MAX_CONTENT_LENGTH"] = MAX_BODY_BYTES
    app.json.sort_keys = False  # type: ignore[attr-defined]
    # Two stores: agents' API episodes and people's page sessions never share ids, so no page visit can read,
    # reset, finish or evict an API episode (page traffic only ever evicts other page sessions).
    store = SessionStore(max_sessions=max_sessions, ttl_seconds=session_ttl)
    page_store = SessionStore(max_sessions=max_sessions, ttl_seconds=session_ttl)
    # API session ids start with this server instance's boot id, so a restarted server can tell an episode of
    # its previous life (410 "server_restarted") from an id it never issued (404)
    boot_id = secrets.token_hex(4)
    counters = {"steps": 0, "resets": 0, "closed": 0}
    counters_lock = threading.Lock()

    def count(key: str) -> None:
        with counters_lock:
            counters[key] += 1
    app.extensions["webshop"] = {"shop": shop, "store": store, "page_store": page_store,
                                 "expose_goals": expose_goals, "boot_id": boot_id, "counters": counters}

    # ------------------------------------------------------------------------------------------ helpers
    def is_api() -> bool:
        return request.path.startswith("/api/") or request.path == "/health"

    @app.errorhandler(ApiError)
    def _api_error(err: ApiError):
        return jsonify({"error": err.reason, **err.extra}), err.status

    @app.errorhandler(HTTPException)
    def _http_error(err: HTTPException):
        if is_api():
            reason = {413: f"request body larger than {MAX_BODY_BYTES} bytes"}.get(err.code, err.description)
            return jsonify({"error": reason}), err.code
        return render_template("error.html", code=err.code, message=err.description), err.code

    def body() -> dict[str, Any]:
        if request.content_length is not None and request.content_length > MAX_BODY_BYTES:
            raise ApiError(413, f"request body larger than {MAX_BODY_BYTES} bytes")
        raw = request.get_data(cache=True)
        if len(raw) > MAX_BODY_BYTES:
            raise ApiError(413, f"request body larger than {MAX_BODY_BYTES} bytes")
        try:
            data = json.loads(raw.decode("utf-8") if raw else "", parse_constant=_reject_constant)
        except (UnicodeDecodeError, ValueError) as exc:  # JSONDecodeError, NaN/Infinity, ints over 4300 digits
            raise ApiError(400, f"malformed JSON body: {str(exc)[:200]}") from None
        except RecursionError:
            raise ApiError(400, "malformed JSON body: nested too deeply") from None
        if not isinstance(data, dict):
            raise ApiError(400, "JSON body must be an object")
        return data

    def int_field(data: dict[str, Any], key: str) -> int | None:
        v = data.get(key)
        if v is None:
            return None
        if isinstance(v, bool) or not isinstance(v, int):
            raise ApiError(400, f"{key!r} must be an integer")
        return v

    def gone(sid: str, why: str) -> ApiError:
        if why == UNKNOWN and _API_SID.match(sid) and not sid.startswith(boot_id):
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

    def state(s: ShopSession) -> dict[str, Any]:
        page = shop.render(s)
        return {"observation": page.observation, "available_actions": page.available_actions()}

    # ---------------------------------------------------------------------------------------------- API
    @app.get("/health")
    def health():
        # "generated": the catalog is a generated stand-in, not WebShop's data (published numbers not comparable)
        return jsonify({"status": "ok", "products": len(shop.products), "goals": len(shop.goals),
                        "generated": shop.generated, "catalog": shop.catalog.source})

    @app.get("/api/stats")
    def stats():
        return jsonify({
            "products": len(shop.products), "goals": len(shop.goals), "goal_mode": shop.goal_mode,
            "generated": shop.generated,
            "catalog": shop.catalog.source, "seed": shop.seed,
            "splits": {k: len(split_range(k, len(shop.goals))) for k in SPLITS},
            "sessions": len(store), "sessions_evicted": store.evicted, "sessions_expired": store.expired,
            "page_sessions": len(page_store), "page_sessions_evicted": page_store.evicted,
            "boot_id": boot_id, "resets_total": counters["resets"], "steps_total": counters["steps"],
            "closed_total": counters["closed"],
            "max_sessions": store.max_sessions, "session_ttl_s": store.ttl, "load_seconds": shop.load_seconds,
        })

    @app.post("/api/reset")
    def api_reset():
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
        sid = boot_id + secrets.token_hex(12)
        s = shop.new_session(sid, gi)
        count("resets")
        store.put(sid, s)
        return jsonify({"session_id": sid, "goal_index": gi, "instruction": s.goal["instruction_text"],
                        "category": s.goal.get("category"), **state(s)})

    @app.post("/api/step")
    def api_step():
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
            count("steps")
            info.update({"page": s.page, "asin": s.asin, "options": dict(s.options), "steps": s.steps,
                         "goal_index": s.goal_index})
            if done:
                info["score"] = s.reward
                info["reward_info"] = s.reward_info
            response = {**state(s), "reward": reward, "done": done, "info": info}
            if seq is not None:
                s.last_seq, s.last_response = seq, response
        return jsonify(response)

    @app.post("/api/close")
    def api_close():
        data = body()
        sid = data.get("session_id")
        if not isinstance(sid, str) or not sid:
            raise ApiError(400, "'session_id' must be a non-empty string")
        if store.pop(sid) is None:
            raise gone(sid, store.lookup(sid)[1])
        count("closed")
        return jsonify({"closed": sid})

    @app.get("/api/goal")
    def api_goal():
        if not expose_goals:
            raise ApiError(404, "goals are not exposed (start the server with --expose-goals)")
        s = session_from(request.args.get("session_id"))
        return jsonify({**public_goal(s.goal), "goal_index": s.goal_index})

    @app.route("/api/<path:_rest>", methods=["GET", "POST", "PUT", "DELETE", "PATCH"])
    def api_unknown(_rest: str):
        raise ApiError(404, f"unknown API route {request.path!r}")

    # -------------------------------------------------------------------------------------------- pages
    def page_session(sid: str, create: bool = False) -> ShopSession:
        if not _SESSION_ID.match(sid):
            abort(404, "invalid session id")
        s = page_store.get(sid)
        if s is None:
            if not create:
                abort(404, "unknown session; start at the search page")
            m = re.fullmatch(r"fixed_(\d+)", sid)
            if m:
                gi = int(m.group(1))
                if gi >= len(shop.goals):
                    abort(404, "no such goal")
            else:
                gi = shop.goal_index()
            s = shop.new_session(sid, gi)
            page_store.put(sid, s)
        return s

    def parse_options(options: str) -> dict[str, str]:
        try:
            value = json.loads(options, parse_constant=_reject_constant)
        except (ValueError, RecursionError):  # also NaN, ints over the digit limit, deep nesting
            abort(400, "options must be a JSON object")
        if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                                  for k, v in value.items()):
            abort(400, "options must map option names to values")
        return value

    def keywords_of(keywords: str) -> list[str]:
        words = keywords.lower().split(" ")
        if not "".join(words) or len(keywords) > MAX_ACTION_CHARS:
            abort(400, "empty or too long query")
        return words

    def kw(keywords: list[str]) -> str:
        return " ".join(keywords).replace("/", " ") or " "

    def render(s: ShopSession):
        page = shop.render(s)
        ctx = dict(page.context, session_id=s.session_id, kw=kw(s.keywords or []),
                   options_json=json.dumps(s.options, sort_keys=True), end_button=END_BUTTON)
        return render_template(f"{page.kind}.html", **ctx)

    @app.get("/")
    def home():
        return redirect(url_for("index", session_id=secrets.token_hex(8)))

    @app.route("/<session_id>", methods=["GET", "POST"])
    def index(session_id: str):
        s = page_session(session_id, create=True)
        if request.method == "POST" and "search_query" in request.form:
            query = request.form["search_query"]
            if not query.strip() or len(query) > MAX_ACTION_CHARS:
                abort(400, "empty or too long query")
            return redirect(url_for("search_results", session_id=session_id, keywords=kw(query.lower().split(" ")),
                                    page=1))
        with s.lock:
            if not s.done:  # a finished session keeps showing its done page
                shop.reset_to_search(s)
            return render(s)

    @app.route("/search_results/<session_id>/<keywords>/<int:page>", methods=["GET", "POST"])
    def search_results(session_id: str, keywords: str, page: int):
        s = page_session(session_id)
        words = keywords_of(keywords)
        with s.lock:
            shop.do_search(s, words, 1)
            if page < 1:  # pages past the last one are empty, as WebShop's "Next >" leads to them
                abort(404, "no such results page")
            s.page_num = page
            return render(s)

    def _item_state(s: ShopSession, asin: str, keywords: str, page: int, options: str) -> None:
        if asin not in shop.products:
            abort(404, "unknown product")
        opts = parse_options(options)
        product = shop.products[asin]
        for name, value in opts.items():
            if value not in product["options"].get(name, []):
                abort(400, f"{value!r} is not a {name!r} option of {asin}")
        s.keywords = keywords_of(keywords)
        s.page_num = page
        shop.open_item(s, asin)
        s.options = opts

    @app.route("/item_page/<session_id>/<asin>/<keywords>/<int:page>/<options>", methods=["GET", "POST"])
    def item_page(session_id: str, asin: str, keywords: str, page: int, options: str):
        s = page_session(session_id)
        with s.lock:
            _item_state(s, asin, keywords, page, options)
            return render(s)

    @app.route("/item_sub_page/<session_id>/<asin>/<keywords>/<int:page>/<sub_page>/<options>",
               methods=["GET", "POST"])
    def item_sub_page(session_id: str, asin: str, keywords: str, page: int, sub_page: str, options: str):
        s = page_session(session_id)
        if sub_page not in SUB_PAGES or (sub_page == "Attributes" and not shop.show_attrs):
            abort(404, "unknown sub page")
        with s.lock:
            _item_state(s, asin, keywords, page, options)
            s.page, s.sub_page = "item_sub_page", sub_page
            return render(s)

    @app.route("/done/<session_id>/<asin>/<options>", methods=["GET", "POST"])
    def done(session_id: str, asin: str, options: str):
        s = page_session(session_id)
        with s.lock:
            if not s.done:
                if asin not in shop.products:
                    abort(404, "unknown product")
                opts = parse_options(options)
                s.asin, s.options = asin, opts
                shop.buy(s)
            return render(s)

    return app
