"""Flask app: WebShop's pages for people (:mod:`webshop_server.pages`) and a JSON API for agents
(:mod:`webshop_server.api`), over one :class:`~webshop_server.state.ShopState` per app.

Errors: API routes (``/api/...``, ``/health``) answer JSON ``{"error": reason}``: 400 malformed body, 404 unknown
session or route, 410 a session that existed but is gone (``"session_state"``: evicted / expired / closed /
server_restarted), 413 body too large. Pages answer ``error.html`` with the status. API episodes and page
sessions live in separate stores: pages never see, finish or evict an API episode.
"""
from __future__ import annotations

from flask import Flask, jsonify, render_template, request
from werkzeug.exceptions import HTTPException

from webshop_server.api import ApiError, api_blueprint
from webshop_server.engine import Shop
from webshop_server.pages import pages_blueprint
from webshop_server.state import MAX_BODY_BYTES, ShopState

__all__ = ["MAX_BODY_BYTES", "create_app"]


def _is_api() -> bool:
    # by path, not blueprint: unrouted URLs under /api/ have no blueprint but still get JSON
    return request.path.startswith("/api/") or request.path == "/health"


def create_app(shop: Shop, expose_goals: bool = False, max_sessions: int = 20000,
               session_ttl: float = 3600.0, run_token: str | None = None) -> Flask:
    """A WSGI app serving ``shop``: pages and API, each app with its own sessions (see :class:`ShopState`);
    ``run_token``, when given, is echoed by ``/health`` (the launching run's token)."""
    app = Flask(__name__)
    app.config["MAX_CONTENT_LENGTH"] = MAX_BODY_BYTES
    app.json.sort_keys = False  # type: ignore[attr-defined]
    state = ShopState(shop, expose_goals=expose_goals, max_sessions=max_sessions, session_ttl=session_ttl,
                      run_token=run_token)
    app.extensions["webshop"] = state
    app.register_blueprint(api_blueprint(state))
    app.register_blueprint(pages_blueprint(state))

    @app.errorhandler(ApiError)
    def _api_error(err: ApiError):
        return jsonify({"error": err.reason, **err.extra}), err.status

    @app.errorhandler(HTTPException)
    def _http_error(err: HTTPException):
        if _is_api():
            reason = {413: f"request body larger than {MAX_BODY_BYTES} bytes"}.get(err.code, err.description)
            return jsonify({"error": reason}), err.code
        return render_template("error.html", code=err.code, message=err.description), err.code

    return app
