"""How the evaluation loop closes an environment (``runner._close_quietly``): in a daemon thread, so a hanging
``close()`` can neither block the evaluation nor keep the process alive at exit, and a failing ``close()`` is logged,
never raised. Real threads, no mocks. Each test names the one-line change it catches."""
from __future__ import annotations

import logging
import threading

from gaca_openrlhf.eval import runner as runner_mod


def _new_threads(before: set) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t not in before]


class _HangingEnv:
    def __init__(self):
        self.release = threading.Event()
        self.closing = threading.Event()

    def close(self):
        self.closing.set()
        self.release.wait(10)


class _BrokenEnv:
    def close(self):
        raise RuntimeError("socket gone")


def test_close_runs_in_a_daemon_thread_and_returns_at_once():
    """Catches `threading.Thread(target=close, daemon=True)` -> `daemon=False`, `daemon=None` or no `daemon`
    argument (a non-daemon thread: a hanging env close keeps the evaluation process alive at exit)."""
    env = _HangingEnv()
    before = set(threading.enumerate())
    runner_mod._close_quietly(env)  # returns although close() hangs
    try:
        assert env.closing.wait(5), "close() was never called"
        threads = [t for t in _new_threads(before) if t.is_alive()]
        assert len(threads) == 1
        assert threads[0].daemon is True
    finally:
        env.release.set()
    threads[0].join(5)


def test_close_failure_is_logged_with_the_error(caplog):
    """Catches `logger.warning(f"[eval] env close failed: {e!r}")` -> `logger.warning(None)` (or another text):
    the failure of a dead env's close must be reported, with the exception."""
    before = set(threading.enumerate())
    with caplog.at_level(logging.WARNING, logger=runner_mod.logger.name):
        runner_mod._close_quietly(_BrokenEnv())
        for t in _new_threads(before):
            t.join(5)
    assert "[eval] env close failed: RuntimeError('socket gone')" in caplog.text


def test_close_of_no_env_does_nothing(caplog):
    """Catches `if env is None: return` dropped or inverted (a thread started for a missing env, which fails on
    `None.close()` and logs a bogus warning; inverted, a real env is never closed: the first test fails)."""
    before = set(threading.enumerate())
    with caplog.at_level(logging.WARNING, logger=runner_mod.logger.name):
        runner_mod._close_quietly(None)
        for t in _new_threads(before):
            t.join(5)
    assert "env close failed" not in caplog.text
