"""Helpers to run the shop on a free loopback port inside a process (tests, benchmarks, examples)."""
from __future__ import annotations

import contextlib
import socket
import threading
import time
import urllib.request
from typing import Any, Iterator

from webshop_server.app import create_app
from webshop_server.engine import Shop


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_healthy(base_url: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(base_url + "/health", timeout=2) as r:  # noqa: S310 - loopback
                if r.status == 200:
                    return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"{base_url} not healthy after {timeout}s")
        time.sleep(0.1)


@contextlib.contextmanager
def serve_in_thread(shop: Shop, production: bool = False, threads: int = 16, **app_kwargs: Any) -> Iterator[str]:
    """Serve ``shop`` on 127.0.0.1:<free port> in a daemon thread; yields the base URL.

    ``production=True`` uses waitress (as ``--production``), else werkzeug's threaded server.
    """
    app = create_app(shop, **app_kwargs)
    port = free_port()
    if production:
        from waitress.server import create_server

        from webshop_server.app import MAX_BODY_BYTES

        server = create_server(app, host="127.0.0.1", port=port, threads=threads, connection_limit=1000,
                               max_request_body_size=MAX_BODY_BYTES)
        from waitress import wasyncore

        stopping = threading.Event()

        def run() -> None:
            # waitress' own run() loops until its socket map is empty; closing the server from another thread
            # races with its select() (EBADF). Loop here and close in this thread once asked to stop.
            while not stopping.is_set():
                wasyncore.loop(timeout=0.1, map=server._map, count=1)
            server.task_dispatcher.shutdown()
            for channel in list(server._map.values()):
                channel.close()

        thread = threading.Thread(target=run, daemon=True)
        stop = stopping.set
    else:
        import logging

        from werkzeug.serving import make_server

        logging.getLogger("werkzeug").setLevel(logging.WARNING)
        server = make_server("127.0.0.1", port, app, threaded=True)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        stop = server.shutdown
    thread.start()
    base = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(base)
        yield base
    finally:
        stop()
        thread.join(timeout=5)


def goal_option_values(goal: dict[str, Any]) -> list[str]:
    """The option values a goal asks for (synthetic: dict values; human: the list)."""
    opts = goal.get("goal_options") or []
    return list(opts.values()) if isinstance(opts, dict) else list(opts)


def expert_episode(step: Any, first: dict[str, Any], goal: dict[str, Any], max_pages: int = 5) -> list[dict]:
    """Scripted demonstration: search the instruction, page to the goal product, open it, pick the goal's
    options, buy. ``step(action) -> API step answer``; returns the answers (last one is the purchase)."""
    answers: list[dict[str, Any]] = []

    def act(action: str) -> dict[str, Any]:
        answers.append(step(action))
        return answers[-1]

    query = goal["instruction_text"].split(", and price lower than")[0]
    cur = act(f"search[{query}]")
    target = goal["asin"].lower()
    for _ in range(max_pages):
        if target in cur["available_actions"]["clickables"]:
            break
        if "next >" not in cur["available_actions"]["clickables"]:
            break
        cur = act("click[next >]")
    if target not in cur["available_actions"]["clickables"]:  # fall back to the product's own title
        cur = act(f"search[{goal['name']}]")
    cur = act(f"click[{target}]")
    for value in goal_option_values(goal):
        if value in cur["available_actions"]["clickables"]:
            cur = act(f"click[{value}]")
    act("click[buy now]")
    return answers
