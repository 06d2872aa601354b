"""The environment interface the agent rollout function is generic over.

An environment contributes three things (docs/design.md §2.4): an adapter with ``reset``/``step``
(this protocol), a prompt template (see :mod:`agents.prompts`) and its success metrics (``EnvStep.info``).
Adding a third environment touches ``agents/<env>/`` and one line in :data:`agents.registry.ENVIRONMENTS`.
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Any, Protocol, Sequence, runtime_checkable


class EnvError(RuntimeError):
    """An environment failed (crashed worker, unreachable server, timeout).

    The rollout marks the episode as failed and excludes it from the update instead of crashing training.
    """


@dataclass
class EnvStep:
    """What the agent sees after ``reset`` or ``step``.

    observation: text the prompt shows as the current observation (already formatted for the agent).
    anchor: the anchor-state string used to build GiGPO/GACA step groups (ALFWorld: the raw observation,
        WebShop: the formatted observation); hashed to a 64-bit id by :func:`agents.prompts.anchor_id`.
    admissible_actions: the actions the environment accepts now (listed in the prompt).
    reward: environment reward of the step just taken (0.0 after reset).
    done: the episode is over (success, failure or step limit).
    won: the task was solved.
    info: environment-specific numbers for metrics (e.g. ``score``, ``task_type``); JSON-serialisable.
    """

    observation: str
    anchor: str
    admissible_actions: list[str]
    reward: float = 0.0
    done: bool = False
    won: bool = False
    info: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class AgentEnv(Protocol):
    """One episode at a time of one environment instance."""

    #: registry name, e.g. "alfworld" or "webshop"
    name: str
    #: episode length limit in agent steps (ALFWorld 50, WebShop 15)
    max_steps: int

    def reset(self, task: str | int) -> tuple[str, EnvStep]:
        """Start the episode for ``task`` (a panel entry: game path or goal index); return (task text, first step)."""
        ...

    def step(self, action: str) -> EnvStep:
        """Execute ``action`` (the projected action, see :func:`agents.parsing.parse_action`).

        Environments may take a second argument ``valid``: with ``valid=False`` they answer the step as an unknown
        command without executing it (the rollout's ``invalid_action="noop"`` mode; see :func:`step_env`).
        """
        ...

    def close(self) -> None:
        """Release resources (worker, HTTP session)."""
        ...


def takes_validity(env) -> bool:
    """Whether ``env.step`` accepts the ``valid`` argument (ALFWorld, WebShop) or only the action (toy)."""
    try:
        return "valid" in inspect.signature(env.step).parameters
    except (TypeError, ValueError):
        return False


def is_listed(action: str, listed: Sequence[str]) -> bool:
    """Whether ``action`` is one of the environment's admissible actions. An entry with a ``<placeholder>`` in
    brackets (WebShop's ``search[<your query>]``) admits any argument: ``search[red shoes]``."""
    if action in listed:
        return True
    head, sep, _ = action.partition("[")
    return bool(sep) and action.endswith("]") and any(
        a.startswith(head + "[<") and a.endswith(">]") for a in listed)


def step_env(env, action: str, valid: bool, invalid_action: str = "execute", pass_validity: bool | None = None):
    """One environment step of a projected action, as training rollouts and evaluation both take it.

    invalid_action="execute" (default, verl-agent): the action is executed whatever its validity; validity only
    decides the invalid-action penalty. "noop": an invalid action is passed with ``valid=False`` to environments
    that take it, which answer it as an unknown command (no state change) while it still counts as a step.
    ``pass_validity``: the cached :func:`takes_validity` of ``env`` (computed when None).
    """
    if invalid_action == "execute":
        return env.step(action)
    if invalid_action != "noop":
        raise ValueError(f"invalid_action must be 'execute' or 'noop', got {invalid_action!r}")
    if pass_validity is None:
        pass_validity = takes_validity(env)
    return env.step(action, valid) if pass_validity else env.step(action)
