"""Rollout configuration, from the CLI (``--env.*``) to the rollout actors.

Every field of :class:`RolloutConfig` is a ``train_ppo`` option ``--env.<field>`` of the same name (generated from
the field and its metadata, as ``--gaca.*`` is from the estimator's config), except the fields whose metadata names
the OpenRLHF option that sets them (``from``): ``--env.name``, ``--env.kwargs``, ``--env.history_k``, ...
:meth:`RolloutConfig.from_args` builds the config from the parsed options.

The executor is instantiated with no arguments inside vLLM's ``RolloutRayActor`` (OpenRLHF's contract), so its
configuration travels as JSON in the ``GACA_ROLLOUT_CONFIG`` environment variable of the Ray job's runtime env.
"""
from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from agents.registry import DEFAULT_ENV

ENV_VAR = "GACA_ROLLOUT_CONFIG"
INVALID_ACTION_MODES = ("execute", "noop")
VALIDITY_MODES = ("format", "admissible")
CREDIT_AUDIT_MODES = ("auto", "on", "off")
#: key in a request's ``SamplingParams.extra_args`` marking a validation round (its index): the executor counts the
#: task's episodes from 0 within the round and derives their seeds without the round (gaca_openrlhf.trainer.validation)
VALIDATION_ROUND_KEY = "gaca_validation_round"
#: the response budget when ``--rollout.max_new_tokens`` is unset
DEFAULT_MAX_NEW_TOKENS = 256


def check_invalid_action(mode: str) -> str:
    """Validate an ``invalid_action`` mode ("execute" | "noop")."""
    if mode not in INVALID_ACTION_MODES:
        raise ValueError(f"invalid_action must be one of {INVALID_ACTION_MODES}, got {mode!r}")
    return mode


@dataclass
class RolloutConfig:
    """How one episode is run (and how a rollout round's failed episodes are judged)."""

    # the environment (the ``--env.*`` namespace's name and kwargs): its registry name, the CLI's default too (one
    # source: the registry's DEFAULT_ENV), and the keyword config of its make_env
    name: str = field(default=DEFAULT_ENV, metadata={
        "help": "registered environment (agents.registry; default: %(default)s)"})
    kwargs: dict[str, Any] = field(default_factory=dict, metadata={
        "cli_default": None, "help": "JSON object passed to agents.registry.make_env(name, **kwargs)"})
    history_k: int = field(default=2, metadata={"help": "(observation, action) pairs of memory in the step prompt"})
    max_steps: int = field(default=0, metadata={
        "help": "episode step limit (0: the environment's own)"})
    # longer step prompts are left-truncated (logged); the option's None means data.max_len - the response budget
    prompt_max_len: int = field(default=2048, metadata={
        "cli_default": None, "help": "step-prompt token limit (default: data.max_len - rollout.max_new_tokens)"})
    max_new_tokens: int = field(default=DEFAULT_MAX_NEW_TOKENS, metadata={"from": "--rollout.max_new_tokens",
                                                                          "help": "per-step response budget"})
    stop: list[str] = field(default_factory=lambda: ["</action>"], metadata={
        "help": "generation stops after these strings (the action's closing tag)"})
    timeout_s: float = field(default=120.0, metadata={
        "help": "one env reset/step call slower than this fails the episode"})
    # what an invalid response does (agents.parsing): "execute" (verl-agent: the projected action is executed and
    # only penalised through is_action_valid) or "noop" (this project's older rule: the environment answers it
    # as an unknown command without executing it; environments whose step() takes no ``valid`` execute it anyway)
    invalid_action: str = field(default="execute", metadata={"choices": INVALID_ACTION_MODES, "help": (
        "an invalid response (bad format): 'execute' its projected action and only penalise it (verl-agent), or "
        "'noop': the environment answers it as an unknown command")})
    # which responses count as valid (is_action_valid, hence the invalid-action penalty c): "format" (verl-agent:
    # the projection's format check only) or "admissible" (an ablation: also an action off the environment's
    # admissible list is invalid; a step whose list is empty is judged on format alone)
    validity: str = field(default="format", metadata={"choices": VALIDITY_MODES, "help": (
        "what is_action_valid checks: 'format' (verl-agent: the response's tags) or 'admissible' (ablation: also an "
        "action off the environment's admissible list is invalid and penalised)")})
    # fault drill (tests): kill the env's Ray worker (``env._actor``) at this step of the first
    # ``kill_worker_episodes`` episodes that reach it (-1: never)
    kill_worker_at_step: int = field(default=-1, metadata={
        "help": "fault drill (tests): kill the env worker of an episode at this step (-1: off)"})
    kill_worker_episodes: int = field(default=1, metadata={
        "help": "fault drill: how many episodes (the first to reach the step) lose their worker"})
    # the run's seed (--train.seed): every generation request carries derive_seed(seed, task, k, step), k = the
    # task's episode count on this engine, so the sampled tokens do not depend on which requests share a batch
    seed: int = field(default=0, metadata={"from": "--train.seed", "help": "the run's seed"})
    # read by the driver's samples generator (a round of episodes), not by the rollout actors
    max_failed_frac: float = field(default=0.5, metadata={"help": (
        "an iteration with more failed episodes than this counts as failing; failing in iteration 1 stops training "
        "at once (a broken environment setup)")})
    max_failed_iters: int = field(default=3, metadata={
        "help": "stop with an error after this many failing iterations in a row"})
    # the credit audit (docs/credit_audit.md §6): the environment's oracle reports its progress per step and the
    # trainer scores every step estimator's advantages on the iteration's batch against it (audit/* metrics)
    credit_audit: str = field(default="auto", metadata={"choices": CREDIT_AUDIT_MODES, "help": (
        "log the credit audit of every iteration's batch (audit/*: every step estimator's advantages scored against "
        "the environment's oracle progress): 'auto' where the environment has an oracle and can report it (a "
        "server-backed one only where its server exposes goals), 'on' (an error where it has none), 'off'")})

    def __post_init__(self) -> None:
        check_invalid_action(self.invalid_action)
        if self.validity not in VALIDITY_MODES:
            raise ValueError(f"validity must be one of {VALIDITY_MODES}, got {self.validity!r}")
        if self.credit_audit not in CREDIT_AUDIT_MODES:
            raise ValueError(f"credit_audit must be one of {CREDIT_AUDIT_MODES}, got {self.credit_audit!r}")

    def env_kwargs(self) -> dict[str, Any]:
        """``kwargs`` for ``make_env``, with the environment's oracle requested as ``credit_audit`` says:
        ``oracle=True`` ("on"), ``oracle="auto"`` ("auto": the adapter reports it where it can) or nothing ("off",
        or an environment without an oracle under "auto"). An explicit ``oracle`` in ``kwargs`` is kept. Raises
        ValueError for "on" with an environment that has no oracle."""
        from agents.registry import spec

        if self.credit_audit == "off" or "oracle" in self.kwargs:
            return dict(self.kwargs)
        if not spec(self.name).oracle:
            if self.credit_audit == "on":
                raise ValueError(f"--env.credit_audit on: environment {self.name!r} has no oracle progress "
                                 "(its EnvSpec.oracle is False); use auto or off")
            return dict(self.kwargs)
        return {**self.kwargs, "oracle": True if self.credit_audit == "on" else "auto"}

    @classmethod
    def from_args(cls, args) -> "RolloutConfig":
        """The run's config from ``train_ppo``'s parsed options: ``args.env.<field>`` for each field with an option
        (``kwargs`` parsed from JSON, ``prompt_max_len`` derived when unset), ``max_new_tokens`` from
        ``--rollout.max_new_tokens`` and ``seed`` from ``--train.seed``."""
        values = {f.name: getattr(args.env, f.name) for f in fields(cls) if "from" not in f.metadata}
        max_new = args.rollout.max_new_tokens or DEFAULT_MAX_NEW_TOKENS
        values["kwargs"] = json.loads(values["kwargs"]) if values["kwargs"] else {}
        values["prompt_max_len"] = values["prompt_max_len"] or max(1, args.data.max_len - max_new)
        cfg = cls(**values, max_new_tokens=max_new, seed=args.train.seed)
        cfg.env_kwargs()  # "--env.credit_audit on" without an oracle: refused here, before any actor starts
        return cfg

    def to_env(self) -> dict[str, str]:
        return {ENV_VAR: json.dumps(asdict(self))}

    @classmethod
    def from_env(cls) -> "RolloutConfig":
        raw = os.environ.get(ENV_VAR)
        return cls(**json.loads(raw)) if raw else cls()
