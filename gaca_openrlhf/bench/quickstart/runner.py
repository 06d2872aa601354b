"""The phases' subprocesses: each command's output appended to its phase log, a failure raised as
:class:`PhaseError` with the log's tail, and the environment every child runs in (CPU backend, offline hub, the
repository on ``PYTHONPATH``, the shared cache)."""
from __future__ import annotations

import os
import shlex
import subprocess
import threading
from pathlib import Path
from typing import Callable

from gaca_openrlhf.progress_lines import parse as parse_progress

ROOT = Path(__file__).resolve().parents[3]


class PhaseError(RuntimeError):
    pass


def run_logged(cmd: list[str], log: Path, env: dict | None = None, timeout: float | None = None,
               on_progress: Callable[[str, int, int], None] | None = None) -> str:
    """Run ``cmd`` with stdout+stderr appended to ``log``; raise :class:`PhaseError` with the log's tail.

    ``on_progress(what, done, total)`` is called for each progress line the child prints
    (:mod:`gaca_openrlhf.progress_lines`); the lines still reach the log."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "a") as f:
        f.write(f"\n$ {shlex.join(cmd)}\n")
        f.flush()
        if on_progress is None:
            returncode = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, cwd=ROOT, env=env,
                                        timeout=timeout).returncode
        else:
            returncode = _run_reading_progress(cmd, f, env, timeout, on_progress)
    if returncode != 0:
        tail = log.read_text(errors="replace").splitlines()[-25:]
        raise PhaseError(f"`{cmd[2] if len(cmd) > 2 else cmd[0]}` exited with {returncode}; see {log}\n  "
                         + "\n  ".join(tail))
    return ""


def _run_reading_progress(cmd, f, env, timeout, on_progress) -> int:
    """The child's output line by line into ``f``, progress lines also to ``on_progress``; killed after
    ``timeout`` seconds (``subprocess.TimeoutExpired``, as :func:`subprocess.run` raises)."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=ROOT, env=env, text=True,
                            errors="replace", bufsize=1)
    timed_out = threading.Event()

    def kill() -> None:
        timed_out.set()
        proc.kill()

    timer = threading.Timer(timeout, kill) if timeout else None
    if timer:
        timer.daemon = True
        timer.start()
    try:
        for line in proc.stdout:
            f.write(line)
            progress = parse_progress(line)
            if progress:
                f.flush()
                on_progress(*progress)
        returncode = proc.wait()
    finally:
        if timer:
            timer.cancel()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    if timed_out.is_set():
        raise subprocess.TimeoutExpired(cmd, timeout)
    return returncode


def child_env() -> dict:
    """The environment of every phase's subprocess: CPU backend, offline hub, this repository importable."""
    env = dict(os.environ)
    env.update(TOKENIZERS_PARALLELISM="false", RAY_USAGE_STATS_ENABLED="0", HF_HUB_OFFLINE="1",
               TRANSFORMERS_OFFLINE="1", DS_ACCELERATOR=env.get("DS_ACCELERATOR", "cpu"),
               GACA_BACKEND=env.get("GACA_BACKEND", "cpu"))
    env["PYTHONPATH"] = os.pathsep.join(x for x in (str(ROOT), env.get("PYTHONPATH", "")) if x)
    from gaca_openrlhf.models.tiny import cache_root

    env["GACA_CACHE"] = str(cache_root())
    return env
