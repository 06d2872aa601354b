"""``make_env``: the ALFWorld ``AgentEnv`` in this process or in a Ray worker; the registry's ALFWorld entry.

It sits above both backends (:mod:`agents.alfworld.env`, :mod:`agents.alfworld.workers`) so that neither imports
the other's module back. ``PROMPT`` is the adapter's step-prompt template, named here for :mod:`agents.registry`.
"""
from __future__ import annotations

from typing import Any

from agents.alfworld.env import PROMPT, AlfworldEnv

__all__ = ["PROMPT", "make_env"]


def make_env(backend: str = "local", **config: Any):
    """Build an ALFWorld ``AgentEnv``.

    backend="local": :class:`~agents.alfworld.env.AlfworldEnv` in this process (tests, scripts, the ``check``
    command). backend="ray": :class:`agents.alfworld.workers.RayAlfworldEnv`, the same adapter inside a CPU-only Ray
    actor (``num_gpus=0``) with per-call timeouts; use this from rollout code running inside vLLM actors.
    Config: ``data_dir``, ``max_steps``, ``cache_size``, ``hide_help``, ``oracle`` (``info["oracle_distance"]``, the
    credit audit's input; in the worker with the ray backend); ray only: ``step_timeout_s``,
    ``reset_timeout_s``, ``num_cpus``.
    """
    if backend == "local":
        return AlfworldEnv(**config)
    if backend == "ray":
        from agents.alfworld.workers import RayAlfworldEnv  # lazy: imports Ray, which the local backend never needs

        return RayAlfworldEnv(**config)
    raise ValueError(f"unknown backend {backend!r}; expected 'local' or 'ray'")
