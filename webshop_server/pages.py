"""WebShop's pages for people, server-side rendered, as a Flask blueprint (endpoints ``pages.*``).

WebShop's routes: ``/`` -> ``/<session_id>`` (search page; ``fixed_<n>`` selects goal n as in WebShop),
``/search_results/<sid>/<keywords>/<page>``, ``/item_page/<sid>/<asin>/<keywords>/<page>/<options>``,
``/item_sub_page/<sid>/<asin>/<keywords>/<page>/<sub_page>/<options>``, ``/done/<sid>/<asin>/<options>``
(``options`` is a JSON object in the URL). Page sessions live in ``state.page_store``, apart from API episodes.
Errors ``abort`` with a reason; the app renders them as ``error.html``.
"""
from __future__ import annotations

import json
import re
import secrets

from flask import Blueprint, abort, redirect, render_template, request, url_for

from webshop_server.engine import END_BUTTON, SUB_PAGES, ShopSession
from webshop_server.state import MAX_ACTION_CHARS, ShopState, strict_json

_SESSION_ID = re.compile(r"^[A-Za-z0-9_\-]{1,64}$")


def parse_options(options: str) -> dict[str, str]:
    """The options JSON object of a page URL (400 unless it maps names to values)."""
    try:
        value = strict_json(options)
    except (ValueError, RecursionError):  # also NaN, ints over the digit limit, deep nesting
        abort(400, "options must be a JSON object")
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                              for k, v in value.items()):
        abort(400, "options must map option names to values")
    return value


def keywords_of(keywords: str) -> list[str]:
    """A URL's keywords as WebShop's search words (400 when empty or too long)."""
    words = keywords.lower().split(" ")
    if not "".join(words) or len(keywords) > MAX_ACTION_CHARS:
        abort(400, "empty or too long query")
    return words


def kw(keywords: list[str]) -> str:
    """Search words as one URL segment (no "/", never empty)."""
    return " ".join(keywords).replace("/", " ") or " "


def pages_blueprint(state: ShopState) -> Blueprint:
    """The page routes over ``state`` (one blueprint per app)."""
    bp = Blueprint("pages", __name__)
    shop, page_store = state.shop, state.page_store

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

    def render(s: ShopSession):
        page = shop.render(s)
        ctx = dict(page.context, session_id=s.session_id, kw=kw(s.keywords or []),
                   options_json=json.dumps(s.options, sort_keys=True), end_button=END_BUTTON)
        return render_template(f"{page.kind}.html", **ctx)

    def open_item(s: ShopSession, asin: str, keywords: str, page: int, options: str) -> None:
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

    @bp.get("/")
    def home():
        return redirect(url_for("pages.index", session_id=secrets.token_hex(8)))

    @bp.route("/<session_id>", methods=["GET", "POST"])
    def index(session_id: str):
        s = page_session(session_id, create=True)
        if request.method == "POST" and "search_query" in request.form:
            query = request.form["search_query"]
            if not query.strip() or len(query) > MAX_ACTION_CHARS:
                abort(400, "empty or too long query")
            return redirect(url_for("pages.search_results", session_id=session_id,
                                    keywords=kw(query.lower().split(" ")), page=1))
        with s.lock:
            if not s.done:  # a finished session keeps showing its done page
                shop.reset_to_search(s)
            return render(s)

    @bp.route("/search_results/<session_id>/<keywords>/<int:page>", methods=["GET", "POST"])
    def search_results(session_id: str, keywords: str, page: int):
        s = page_session(session_id)
        words = keywords_of(keywords)
        with s.lock:
            shop.do_search(s, words, 1)
            if page < 1:  # pages past the last one are empty, as WebShop's "Next >" leads to them
                abort(404, "no such results page")
            s.page_num = page
            return render(s)

    @bp.route("/item_page/<session_id>/<asin>/<keywords>/<int:page>/<options>", methods=["GET", "POST"])
    def item_page(session_id: str, asin: str, keywords: str, page: int, options: str):
        s = page_session(session_id)
        with s.lock:
            open_item(s, asin, keywords, page, options)
            return render(s)

    @bp.route("/item_sub_page/<session_id>/<asin>/<keywords>/<int:page>/<sub_page>/<options>",
              methods=["GET", "POST"])
    def item_sub_page(session_id: str, asin: str, keywords: str, page: int, sub_page: str, options: str):
        s = page_session(session_id)
        if sub_page not in SUB_PAGES or (sub_page == "Attributes" and not shop.show_attrs):
            abort(404, "unknown sub page")
        with s.lock:
            open_item(s, asin, keywords, page, options)
            s.page, s.sub_page = "item_sub_page", sub_page
            return render(s)

    @bp.route("/done/<session_id>/<asin>/<options>", methods=["GET", "POST"])
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

    return bp
