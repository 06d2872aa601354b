"""Bounded, thread-safe session store: idle sessions expire after a TTL, the least recently used go first
when the store is full. The ids of recently expired, evicted or closed sessions are remembered (bounded), so a
late request can be told *why* its session is gone instead of "unknown session"."""
from __future__ import annotations

import threading
import time
from collections import OrderedDict
from typing import Any, Callable

UNKNOWN, EVICTED, EXPIRED, CLOSED = "unknown", "evicted", "expired", "closed"


class SessionStore:
    def __init__(self, max_sessions: int = 20000, ttl_seconds: float = 3600.0,
                 clock: Callable[[], float] = time.monotonic, max_tombstones: int | None = None):
        if max_sessions < 1:
            raise ValueError("max_sessions must be >= 1")
        self.max_sessions = max_sessions
        self.ttl = ttl_seconds
        self._clock = clock
        self._items: OrderedDict[str, tuple[float, Any]] = OrderedDict()
        # id -> why it is gone; bounded so that a flood of sessions cannot grow memory without limit
        self._gone: OrderedDict[str, str] = OrderedDict()
        self.max_tombstones = max_tombstones if max_tombstones is not None else max(10000, max_sessions)
        self._lock = threading.Lock()
        self.evicted = 0
        self.expired = 0

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)

    def _bury(self, session_id: str, why: str) -> None:
        self._gone[session_id] = why
        self._gone.move_to_end(session_id)
        while len(self._gone) > self.max_tombstones:
            self._gone.popitem(last=False)

    def _expire(self, now: float) -> None:
        # items are kept in last-use order, so expired ones are at the front
        while self._items:
            sid, (used, _) = next(iter(self._items.items()))
            if now - used <= self.ttl:
                break
            self._items.popitem(last=False)
            self.expired += 1
            self._bury(sid, EXPIRED)

    def put(self, session_id: str, value: Any) -> None:
        now = self._clock()
        with self._lock:
            self._expire(now)
            self._items[session_id] = (now, value)
            self._items.move_to_end(session_id)
            self._gone.pop(session_id, None)
            while len(self._items) > self.max_sessions:
                sid, _ = self._items.popitem(last=False)
                self.evicted += 1
                self._bury(sid, EVICTED)

    def lookup(self, session_id: str) -> tuple[Any | None, str]:
        """``(value, "ok")``, or ``(None, why)`` with why in unknown / evicted / expired / closed."""
        now = self._clock()
        with self._lock:
            item = self._items.get(session_id)
            if item is None:
                return None, self._gone.get(session_id, UNKNOWN)
            if now - item[0] > self.ttl:
                del self._items[session_id]
                self.expired += 1
                self._bury(session_id, EXPIRED)
                return None, EXPIRED
            self._items[session_id] = (now, item[1])
            self._items.move_to_end(session_id)
            return item[1], "ok"

    def get(self, session_id: str) -> Any | None:
        return self.lookup(session_id)[0]

    def pop(self, session_id: str) -> Any | None:
        with self._lock:
            item = self._items.pop(session_id, None)
            if item is None:
                return None
            self._bury(session_id, CLOSED)
            return item[1]

    def __contains__(self, session_id: str) -> bool:
        return self.get(session_id) is not None
