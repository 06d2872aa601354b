"""Expert demonstrations as step-level SFT samples (:mod:`agents.demos`: :class:`DemoStep`, :func:`render_episode`,
rendered exactly as the training rollout renders its prompts), saved to and loaded from JSON lines. Each
environment's demonstrator is its ``EnvSpec.sft_demos`` (e.g. ``agents/alfworld/demos.py``,
``agents/webshop/expert.py``).
"""
from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict
from typing import Sequence

from agents.demos import DemoStep, expert_response, render_episode

__all__ = ["DemoStep", "expert_response", "render_episode", "save_demos", "load_demos"]


def save_demos(steps: Sequence[DemoStep], path: str) -> str:
    """Write one JSON line per step; return the content hash (what the SFT cache key uses)."""
    os.makedirs(os.path.dirname(os.path.abspath(path)) or ".", exist_ok=True)
    h = hashlib.sha256()
    with open(path, "w") as f:
        for s in steps:
            line = json.dumps(asdict(s), sort_keys=True)
            h.update(line.encode())
            f.write(line + "\n")
    return h.hexdigest()[:16]


def load_demos(path: str) -> list[DemoStep]:
    with open(path) as f:
        return [DemoStep(**json.loads(line)) for line in f if line.strip()]
