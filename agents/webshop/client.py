"""Minimal HTTP client for the WebShop server's JSON API, with timeouts and bounded retries.

A session the server no longer holds (HTTP 410 evicted/expired/closed, or 404 on a step: e.g. the server was
restarted) raises :class:`SessionLostError` and is counted in ``lost_sessions`` by reason.
Only failures where the request cannot have been applied are retried blindly (connection refused/reset
before an answer, HTTP 502/503/504); refused connections are retried for up to ``connect_wait`` seconds, so a
supervised server that is restarting is waited for. A step that timed out is retried with the same ``seq``: the server
answers a repeated ``seq`` from its stored response instead of acting twice. Anything else raises
:class:`agents.base.EnvError`.
"""
from __future__ import annotations

import json
import time
from typing import Any

from agents.base import EnvError

try:
    import requests
except ImportError:  # pragma: no cover - requests is installed with the stack; urllib keeps the client usable
    requests = None  # type: ignore[assignment]

_RETRY_STATUS = (502, 503, 504)


class SessionLostError(EnvError):
    """The server no longer holds the episode's session (``reason``: evicted / expired / closed / unknown, or
    ``server restarted`` when a restarted server does not know it): the episode is failed, never continued."""

    def __init__(self, message: str, reason: str):
        super().__init__(message)
        self.reason = reason


class WebShopClient:
    def __init__(self, base_url: str = "http://127.0.0.1:3000", timeout: float = 30.0, retries: int = 3,
                 backoff: float = 0.5, connect_wait: float = 60.0):
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self.retries = max(0, int(retries))
        self.backoff = backoff
        # a refused connection applied nothing: keep retrying it this long (a supervised server restarting)
        self.connect_wait = float(connect_wait)
        self._session = requests.Session() if requests is not None else None
        self.lost_sessions: dict[str, int] = {}  # reason -> episodes whose session the server lost

    # --------------------------------------------------------------------------------------- transport
    def _once(self, method: str, path: str, payload: dict[str, Any] | None,
              params: dict[str, Any] | None) -> tuple[int, Any]:
        url = self.base_url + path
        if self._session is not None:
            r = self._session.request(method, url, json=payload, params=params, timeout=self.timeout)
            try:
                data = r.json()
            except ValueError:
                data = {"error": r.text[:300]}
            return r.status_code, data
        import urllib.error
        import urllib.parse
        import urllib.request

        if params:
            url += "?" + urllib.parse.urlencode(params)
        body = json.dumps(payload).encode() if payload is not None else None
        req = urllib.request.Request(url, data=body, method=method,
                                     headers={"Content-Type": "application/json"} if body else {})
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:  # noqa: S310 - loopback URL
                return resp.status, json.loads(resp.read().decode() or "null")
        except urllib.error.HTTPError as exc:
            try:
                return exc.code, json.loads(exc.read().decode() or "null")
            except ValueError:
                return exc.code, {"error": str(exc)}

    def _is_connect_error(self, exc: Exception) -> bool:
        if requests is not None and isinstance(exc, requests.exceptions.ConnectionError) \
                and not isinstance(exc, requests.exceptions.ReadTimeout):
            return True
        return isinstance(exc, (ConnectionRefusedError, ConnectionResetError))

    def _is_timeout(self, exc: Exception) -> bool:
        if requests is not None and isinstance(exc, requests.exceptions.Timeout):
            return True
        return isinstance(exc, TimeoutError)

    def request(self, method: str, path: str, payload: dict[str, Any] | None = None,
                params: dict[str, Any] | None = None, idempotent: bool = False) -> dict[str, Any]:
        """Send a request; retry connection failures (and timeouts when ``idempotent``); raise EnvError."""
        last: str = ""
        t0 = time.monotonic()
        attempt = 0
        while True:
            if attempt:
                time.sleep(min(self.backoff * (2 ** (attempt - 1)), 5.0))
            attempt += 1
            try:
                status, data = self._once(method, path, payload, params)
            except Exception as exc:  # noqa: BLE001 - classified below
                last = f"{type(exc).__name__}: {exc}"
                connect = self._is_connect_error(exc)
                if connect and time.monotonic() - t0 < self.connect_wait:
                    continue
                if (connect or (idempotent and self._is_timeout(exc))) and attempt <= self.retries:
                    continue
                raise EnvError(f"WebShop {method} {path} failed: {last}") from exc
            if status in _RETRY_STATUS:
                last = f"HTTP {status}"
                if attempt <= self.retries:
                    continue
                break
            if status != 200:
                reason = data.get("error") if isinstance(data, dict) else data
                if status == 410 or (status == 404 and path == "/api/step"):
                    why = data.get("session_state", "unknown") if isinstance(data, dict) else "unknown"
                    self.lost_sessions[why] = self.lost_sessions.get(why, 0) + 1
                    raise SessionLostError(f"WebShop {method} {path}: episode lost ({why}): {reason}", why)
                raise EnvError(f"WebShop {method} {path}: HTTP {status}: {reason}")
            if not isinstance(data, dict):
                raise EnvError(f"WebShop {method} {path}: unexpected answer {str(data)[:200]}")
            return data
        raise EnvError(f"WebShop {method} {path} failed after {attempt} attempts: {last}")

    # --------------------------------------------------------------------------------------------- API
    def health(self) -> dict[str, Any]:
        return self.request("GET", "/health", idempotent=True)

    def reset(self, split: str | None = None, index: int | None = None,
              goal_index: int | None = None) -> dict[str, Any]:
        payload: dict[str, Any] = {}
        if goal_index is not None:
            payload["goal_index"] = int(goal_index)
        else:
            payload.update(split=split, index=int(index) if index is not None else None)
        # a retried reset at worst leaves an unused session behind, which the server's TTL/LRU evicts
        return self.request("POST", "/api/reset", payload, idempotent=True)

    def step(self, session_id: str, action: str, seq: int | None = None) -> dict[str, Any]:
        payload: dict[str, Any] = {"session_id": session_id, "action": action}
        if seq is not None:
            payload["seq"] = seq
        return self.request("POST", "/api/step", payload, idempotent=seq is not None)

    def close_session(self, session_id: str) -> None:
        try:
            self.request("POST", "/api/close", {"session_id": session_id})
        except EnvError:
            pass  # already evicted, or the server is gone: nothing to free

    def goal(self, session_id: str) -> dict[str, Any]:
        return self.request("GET", "/api/goal", params={"session_id": session_id}, idempotent=True)

    def oracle(self, session_id: str) -> dict[str, Any]:
        """The best reward still reachable from the session's page (server started with ``--expose-goals``)."""
        return self.request("GET", "/api/oracle", params={"session_id": session_id}, idempotent=True)

    def close(self) -> None:
        if self._session is not None:
            self._session.close()
