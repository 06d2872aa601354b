"""What the API and the pages of one app share: the shop, the two session stores, the counters, the limits.

``create_app`` makes one :class:`ShopState` per app and hands it to both blueprints, so two apps in one process
(tests, a restarted server) never share sessions, counters or boot ids.
"""
from __future__ import annotations

import json
import secrets
import threading
from typing import Any

from webshop_server.engine import Shop
from webshop_server.sessions import SessionStore

MAX_BODY_BYTES = 16 * 1024
MAX_ACTION_CHARS = 1000  # also the longest search query the pages accept


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def strict_json(text: str) -> Any:
    """``json.loads`` refusing NaN/Infinity (``ValueError``), for API bodies and the options in page URLs."""
    return json.loads(text, parse_constant=_reject_constant)


class ShopState:
    """One app's shared state. ``store`` holds agents' API episodes, ``page_store`` people's page sessions."""

    def __init__(self, shop: Shop, expose_goals: bool = False, max_sessions: int = 20000,
                 session_ttl: float = 3600.0, run_token: str | None = None):
        self.shop = shop
        # echoed by /health: a launch script tells its own server from a leftover one answering on the same port
        self.run_token = run_token
        self.expose_goals = expose_goals
        # Two stores: agents' API episodes and people's page sessions never share ids, so no page visit can read,
        # reset, finish or evict an API episode (page traffic only ever evicts other page sessions).
        self.store = SessionStore(max_sessions=max_sessions, ttl_seconds=session_ttl)
        self.page_store = SessionStore(max_sessions=max_sessions, ttl_seconds=session_ttl)
        # API session ids start with this server instance's boot id, so a restarted server can tell an episode of
        # its previous life (410 "server_restarted") from an id it never issued (404)
        self.boot_id = secrets.token_hex(4)
        self.counters = {"steps": 0, "resets": 0, "closed": 0}
        self._counters_lock = threading.Lock()

    def count(self, key: str) -> None:
        """Add one to ``counters[key]`` (requests run in many threads)."""
        with self._counters_lock:
            self.counters[key] += 1
