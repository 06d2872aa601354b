"""The phases' subprocesses: each command's output appended to its phase log, a failure raised as
:class:`PhaseError` with the log's tail, and the environment every child runs in (CPU backend, offline hub, the
repository on ``PYTHONPATH``, the shared cache)."""
from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


class PhaseError(RuntimeError):
    pass


def run_logged(cmd: list[str], log: Path, env: dict | None = None, timeout: float | None = None) -> str:
    """Run ``cmd`` with stdout+stderr appended to ``log``; return the last stdout-ish line; raise with the log tail."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "a") as f:
        f.write(f"\n$ {shlex.join(cmd)}\n")
        f.flush()
        proc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, cwd=ROOT, env=env, timeout=timeout)
    if proc.returncode != 0:
        tail = log.read_text(errors="replace").splitlines()[-25:]
        raise PhaseError(f"`{cmd[2] if len(cmd) > 2 else cmd[0]}` exited with {proc.returncode}; see {log}\n  "
                         + "\n  ".join(tail))
    return ""


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
