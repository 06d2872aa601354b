"""WebShop environment adapter: an HTTP client of ``webshop_server`` behind :class:`agents.base.AgentEnv`.

Follows verl-agent's WebShop environment manager:

* the task is the goal's instruction; the observation shown to the agent is the server's text observation
  after the instruction, each ``[SEP]``-separated part quoted (``format_obs``), or the raw text when the
  instruction is not on the page (done page);
* admissible actions are ``search[<your query>]`` when the page has a search bar plus ``click[x]`` for every
  clickable (``format_avail_actions``);
* reward is 10 when the episode ends with a purchase scoring exactly 1.0, else 0; the WebShop score is logged
  as ``info["score"]`` (also ``task_score``); episodes end after 15 steps;
* the anchor state for GiGPO/GACA step groups is the formatted observation;
* with ``oracle=True`` (server started with ``--expose-goals``) ``info["oracle_value"]`` holds the best reward
  still reachable from the page after the step (the server's ``GET /api/oracle``); the credit audit's progress of
  a step is this value minus the previous step's (docs/credit_audit.md section 4).

By default the rollout sends every projected action (verl-agent executes an invalid response's action too); with
its ``invalid_action="noop"`` option an invalid one comes as ``step(text, valid=False)``. Such an action is not
sent to the shop: it is answered as a no-op (same observation, reward 0) and still counts as a step. Every other
action is sent (over 1000 characters: answered here); the server reads it with WebShop's ``parse_action`` (a prefix
match: ``click[buy now].`` is a click) and answers anything else, and unknown clicks, as no-ops, as WebShop does. Unreachable/failing servers
raise :class:`agents.base.EnvError`.

Tasks for :meth:`WebShopEnv.reset`: a global goal index (``int`` or ``"123"``), or ``"test:12"`` /
``"eval:3"`` / ``"train:40"`` (index within a split: test 0-499, eval 500-1499, train 1500+).
"""
from __future__ import annotations

import os
import re
from typing import Any

from agents.base import EnvError, EnvStep
from agents.prompts import PromptTemplate
from agents.webshop.client import SessionLostError, WebShopClient

DEFAULT_URL = os.environ.get("WEBSHOP_URL", "http://127.0.0.1:3000")
MAX_STEPS = 15
SUCCESS_REWARD = 10.0
_TASK = re.compile(r"^\s*(test|eval|train)\s*[:/]\s*(\d+)\s*$")

_INSTRUCTION = (
    "Now it's your turn to take one action for the current step.\n"
    "You should first reason step-by-step about the current situation, then think carefully which "
    "admissible action best advances the shopping goal. This reasoning process MUST be enclosed within "
    "<think> </think> tags. \n"
    "Once you've finished your reasoning, you should choose an admissible action for current step and "
    "present it within <action> </action> tags.\n"
)


def format_admissible_actions(actions) -> str:
    """verl-agent's WebShop list: one ``'a',`` per line (a trailing comma on every item, the last one too)."""
    return "\n".join(f"'{a}'," for a in actions)


# verl-agent's WebShop templates (agent_system/environments/prompts/webshop.py: WEBSHOP_TEMPLATE_NO_HIS and
# WEBSHOP_TEMPLATE), byte for byte: the leading newline, the non-breaking hyphen in "e\u2011commerce" and the
# trailing spaces after "environment. " (no-history only), "are: " and "tags. ". verl-agent falls back to the
# no-history template when the one with history exceeds 13000 characters.
PROMPT = PromptTemplate(
    first=(
        "\nYou are an expert autonomous agent operating in the WebShop e\u2011commerce environment. \n"
        "Your task is to: {task}.\n"
        "Your current observation is: {observation}.\n"
        "Your admissible actions of the current situation are: \n"
        "[\n{admissible_actions}\n].\n\n"
        + _INSTRUCTION
    ),
    later=(
        "\nYou are an expert autonomous agent operating in the WebShop e\u2011commerce environment.\n"
        "Your task is to: {task}.\n"
        "Prior to this step, you have already taken {step_count} step(s). Below are the most recent "
        "{history_length} observations and the corresponding actions you took: {history}\n"
        "You are now at step {current_step} and your current observation is: {observation}.\n"
        "Your admissible actions of the current situation are: \n"
        "[\n{admissible_actions}\n].\n\n"
        + _INSTRUCTION
    ),
    format_actions=format_admissible_actions,
    max_chars_with_history=13000,
    tail_chars=20,
)


def format_obs(text_obs: str, task: str) -> str:
    """verl-agent's ``format_obs``: the parts after the instruction, each quoted, joined by ``[SEP]``."""
    parts = text_obs.split(" [SEP] ")
    try:
        index = parts.index(task)
    except ValueError:
        return text_obs
    return " [SEP] ".join(f"'{p}'" for p in parts[index + 1:])


def format_avail_actions(avail: dict[str, Any]) -> list[str]:
    """verl-agent's ``format_avail_actions``."""
    for key in avail:
        if key not in ("has_search_bar", "clickables"):
            raise ValueError(f"Unknown key in available actions: {key}")
    actions = ["search[<your query>]"] if avail.get("has_search_bar") else []
    actions += [f"click[{txt}]" for txt in avail.get("clickables", [])]
    return actions


def parse_task(task: Any) -> dict[str, Any]:
    """Reset arguments for a task: ``{"goal_index": n}`` or ``{"split": s, "index": i}``."""
    if isinstance(task, bool):
        raise ValueError(f"bad WebShop task {task!r}")
    if isinstance(task, int):
        return {"goal_index": task}
    if isinstance(task, dict):
        return dict(task)
    if isinstance(task, str):
        if task.strip().isdigit():
            return {"goal_index": int(task)}
        m = _TASK.match(task)
        if m:
            return {"split": m.group(1), "index": int(m.group(2))}
    raise ValueError(f"bad WebShop task {task!r}: use a goal index or 'test:12' / 'eval:3' / 'train:40'")


class WebShopEnv:
    """One WebShop episode at a time over HTTP (see module doc)."""

    name = "webshop"

    def __init__(self, base_url: str = DEFAULT_URL, timeout: float = 30.0, retries: int = 3,
                 max_steps: int = MAX_STEPS, success_reward: float = SUCCESS_REWARD, backoff: float = 0.5,
                 connect_wait: float = 60.0, oracle: bool | str = False):
        if oracle not in (True, False, "auto"):
            raise ValueError(f"WebShop env option oracle must be true, false or \"auto\", got {oracle!r}")
        self.oracle = oracle  # "auto": on where the server exposes goals (decided at the first step, from /health)
        self.client = WebShopClient(base_url, timeout=timeout, retries=retries, backoff=backoff,
                                    connect_wait=connect_wait)
        self.max_steps = int(max_steps)
        self.success_reward = float(success_reward)
        self.session_id: str | None = None
        self.task: str = ""
        self.goal_index: int | None = None
        self.task_type: str = ""
        self.steps = 0
        self.done = False
        self._last: EnvStep | None = None
        self._seq = 0
        # episodes failed because the server lost their session, by reason (evicted / expired / unknown ...)
        self.failed_episodes: dict[str, int] = {}

    # ------------------------------------------------------------------------------------------- helpers
    def _oracle_on(self) -> bool:
        if self.oracle == "auto":
            self.oracle = bool(self.client.health().get("goals_exposed", False))
        return bool(self.oracle)

    def _to_step(self, data: dict[str, Any], reward: float, done: bool, info: dict[str, Any]) -> EnvStep:
        if self._oracle_on():
            info["oracle_value"] = self.oracle_value()
        obs = format_obs(data["observation"], self.task)
        return EnvStep(observation=obs, anchor=obs, admissible_actions=format_avail_actions(data["available_actions"]),
                       reward=reward, done=done, won=bool(info.get("won", False)), info=info)

    # ----------------------------------------------------------------------------------------------- API
    def reset(self, task: str | int) -> tuple[str, EnvStep]:
        args = parse_task(task)
        if self.session_id is not None:
            self.client.close_session(self.session_id)
            self.session_id = None
        data = self.client.reset(**args)
        try:
            self.session_id = data["session_id"]
            self.task = data["instruction"]
            self.goal_index = data.get("goal_index")
            self.task_type = str(data.get("category") or "")
            self.steps, self.done, self._seq = 0, False, 0
            step = self._to_step(data, 0.0, False, {"score": 0.0, "task_score": 0.0, "won": False, "steps": 0,
                                                     "goal_index": self.goal_index, "task_type": self.task_type,
                                                     "page": "index"})
        except (KeyError, TypeError) as exc:
            raise EnvError(f"WebShop reset: malformed answer ({exc})") from exc
        self._last = step
        return self.task, step

    def step(self, action: str, valid: bool = True) -> EnvStep:
        if self.session_id is None or self._last is None:
            raise EnvError("WebShop step before reset")
        if self.done:
            raise EnvError("WebShop step after the episode ended")
        self.steps += 1
        # every action the rollout executes goes to the shop, which answers what WebShop's parse_action does not
        # read as search[...]/click[...] as a no-op, as WebShop's env does; only actions marked invalid
        # (valid=False) and over-long ones (the server refuses them) are answered here
        sendable = isinstance(action, str) and len(action) <= 1000
        if not (valid and sendable):
            truncated = self.steps >= self.max_steps
            self.done = truncated
            info = {"score": 0.0, "task_score": 0.0, "won": False, "steps": self.steps, "executed": False,
                    "is_action_valid": bool(valid), "goal_index": self.goal_index, "task_type": self.task_type,
                    "page": self._last.info.get("page"), "truncated": truncated}
            if self._oracle_on():  # nothing was sent: the page, and its value, are unchanged
                info["oracle_value"] = self._last.info.get("oracle_value")
            step = EnvStep(self._last.observation, self._last.anchor, list(self._last.admissible_actions),
                           0.0, truncated, False, info)
            self._last = step
            return step
        self._seq += 1
        try:
            data = self.client.step(self.session_id, action, seq=self._seq)
        except SessionLostError as exc:
            # the episode cannot go on (its state is gone): failed with the reason, never silently restarted
            self.done = True
            self.failed_episodes[exc.reason] = self.failed_episodes.get(exc.reason, 0) + 1
            self.session_id = None
            raise
        try:
            server_info = data.get("info") or {}
            server_done = bool(data["done"])
            score = float(server_info["score"]) if server_done and server_info.get("score") is not None else 0.0
            won = server_done and score == 1.0
            truncated = not server_done and self.steps >= self.max_steps
            info = {"score": score, "task_score": score, "won": won, "steps": self.steps,
                    "executed": bool(server_info.get("executed", True)), "is_action_valid": True,
                    "goal_index": self.goal_index, "task_type": self.task_type, "page": server_info.get("page"),
                    "truncated": truncated}
            if server_done and server_info.get("reward_info"):
                info["reward_info"] = server_info["reward_info"]
            reward = self.success_reward if won else 0.0
            self.done = server_done or truncated
            step = self._to_step(data, reward, self.done, info)
        except (KeyError, TypeError, ValueError) as exc:
            raise EnvError(f"WebShop step: malformed answer ({exc})") from exc
        self._last = step
        return step

    def oracle_value(self) -> float:
        """The best reward still reachable from the current page (server started with ``--expose-goals``)."""
        if self.session_id is None:
            raise EnvError("no episode")
        try:
            return float(self.client.oracle(self.session_id)["value"])
        except (KeyError, TypeError, ValueError) as exc:
            raise EnvError(f"WebShop oracle: malformed answer ({exc})") from exc

    def goal(self) -> dict[str, Any]:
        """The current goal (only when the server runs with ``--expose-goals``)."""
        if self.session_id is None:
            raise EnvError("no episode")
        return self.client.goal(self.session_id)

    def close(self) -> None:
        if self.session_id is not None:
            self.client.close_session(self.session_id)
            self.session_id = None
        self.client.close()


def make_env(**config: Any) -> WebShopEnv:
    """Registry factory. Config: ``base_url`` (or ``url``, or ``host`` + ``port``; default ``$WEBSHOP_URL`` or
    http://127.0.0.1:3000), ``timeout``, ``retries``, ``backoff``, ``connect_wait`` (seconds to wait for a restarting server, 60),
    ``max_steps`` (15), ``success_reward`` (10), ``oracle`` (False; True adds ``info["oracle_value"]``, needs a server
    started with ``--expose-goals``; "auto": only where the server exposes goals)."""
    cfg = dict(config)
    url = cfg.pop("base_url", None) or cfg.pop("url", None)
    host, port = cfg.pop("host", None), cfg.pop("port", None)
    if url is None and (host or port):
        url = f"http://{host or '127.0.0.1'}:{port or 3000}"
    allowed = {"timeout", "retries", "max_steps", "success_reward", "backoff", "connect_wait", "oracle"}
    unknown = set(cfg) - allowed
    if unknown:
        raise TypeError(f"unknown WebShop env options: {sorted(unknown)}")
    return WebShopEnv(base_url=url or DEFAULT_URL, **cfg)
