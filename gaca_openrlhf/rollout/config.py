"""Rollout configuration, from the CLI (``--env.*``) to the rollout actors.

The executor is instantiated with no arguments inside vLLM's ``RolloutRayActor`` (OpenRLHF's contract), so its
configuration travels as JSON in the ``GACA_ROLLOUT_CONFIG`` environment variable of the Ray job's runtime env.
"""
from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from typing import Any

ENV_VAR = "GACA_ROLLOUT_CONFIG"
INVALID_ACTION_MODES = ("execute", "noop")
VALIDITY_MODES = ("format", "admissible")


def check_invalid_action(mode: str) -> str:
    """Validate an ``invalid_action`` mode ("execute" | "noop")."""
    if mode not in INVALID_ACTION_MODES:
        raise ValueError(f"invalid_action must be one of {INVALID_ACTION_MODES}, got {mode!r}")
    return mode


@dataclass
class RolloutConfig:
    """How one episode is run."""

    env: str = "toy"  # registry name (agents.registry.ENVIRONMENTS): alfworld | webshop | toy
    env_kwargs: dict[str, Any] = field(default_factory=dict)  # passed to make_env(env, **env_kwargs)
    history_k: int = 2  # (observation, action) pairs of memory in the step prompt
    max_steps: int = 0  # episode step limit; 0 = the environment's own (ALFWorld 50, WebShop 15)
    prompt_max_len: int = 2048  # step prompts longer than this are left-truncated (logged)
    max_new_tokens: int = 256  # per-step response budget (--rollout.max_new_tokens)
    stop: list[str] = field(default_factory=lambda: ["</action>"])  # generation stops after the action
    env_timeout_s: float = 120.0  # one reset/step call slower than this fails the episode
    # what an invalid response does (agents.parsing): "execute" (verl-agent: the projected action is executed and
    # only penalised through is_action_valid) or "noop" (this project's older rule: the environment answers it
    # as an unknown command without executing it; environments whose step() takes no ``valid`` execute it anyway)
    invalid_action: str = "execute"
    # which responses count as valid (is_action_valid, hence the invalid-action penalty c): "format" (verl-agent:
    # the projection's format check only) or "admissible" (an ablation: also an action off the environment's
    # admissible list is invalid; a step whose list is empty is judged on format alone)
    validity: str = "format"
    # fault drill (tests): kill the env's Ray worker (``env._actor``) at this step of the first
    # ``kill_worker_episodes`` episodes that reach it (-1: never)
    kill_worker_at_step: int = -1
    kill_worker_episodes: int = 1
    # the run's seed (--train.seed): every generation request carries derive_seed(seed, task, k, step), k = the
    # task's episode count on this engine, so the sampled tokens do not depend on which requests share a batch
    seed: int = 0

    def __post_init__(self) -> None:
        check_invalid_action(self.invalid_action)
        if self.validity not in VALIDITY_MODES:
            raise ValueError(f"validity must be one of {VALIDITY_MODES}, got {self.validity!r}")

    def to_env(self) -> dict[str, str]:
        return {ENV_VAR: json.dumps(asdict(self))}

    @classmethod
    def from_env(cls) -> "RolloutConfig":
        raw = os.environ.get(ENV_VAR)
        return cls(**json.loads(raw)) if raw else cls()
