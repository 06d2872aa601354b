"""ALFWorld environment adapter (``AgentEnv``) on the real engine and its step-prompt template.

``make_env`` (this adapter in-process or in a Ray worker) is in :mod:`agents.alfworld.backends`.

One adapter for real ALFWorld data (``$ALFWORLD_DATA``) and generated games: both are ``game.tw-pddl`` files
played by TextWorld's PDDL engine with ALFWorld's demangler/infos wrappers (:mod:`agents.alfworld.engine`).

Episode contract (docs/design.md §2.4):

- ``reset(task)`` -> ``(task_text, EnvStep)``. ``task`` is a game id relative to the data root
  (``json_2.1.1/<split>/<dir>/<trial>``, with or without ``/game.tw-pddl``) or a path. The first observation is
  ALFWorld's intro (``-= Welcome to TextWorld, ALFRED! =- ... Your task is to: ...``); ``task_text`` is what
  follows ``"Your task is to: "``.
- ``step(action, valid=True)`` -> ``EnvStep`` with reward 10.0 on the winning step else 0.0, ``done`` when won
  or after ``max_steps`` (50) steps, ``won``, and the admissible commands.
- **Invalid actions.** By default the rollout sends the projected action (``agents.parsing.parse_action``)
  whatever its validity, as verl-agent does: an invalid response's action still runs, only the penalty differs.
  With the rollout option ``invalid_action="noop"`` it passes ``valid=False`` instead: the command is *not
  executed* -- even if it happens to be admissible -- and the step is answered exactly as the engine answers an
  unknown command: observation ``"Nothing happens."``, state unchanged, reward 0. It still counts as a step.
  An unknown command that is executed goes to the engine, which answers ``"Nothing happens."``.
- ``anchor`` = the raw observation string of the step (GiGPO anchor state); ``observation`` is the same text.
- ``admissible_actions`` omits ``help`` (as verl-agent does); it stays executable.
- ``info``: ``task_type`` (id 1-6), ``task_type_name``, ``won``, ``steps``, ``truncated``, ``gamefile``; with
  ``oracle=True`` also ``oracle_distance``: the actions a full-knowledge agent still needs to win from the state
  after the step (:mod:`agents.alfworld.oracle`; None for goals it does not cover). The credit audit's progress
  of a step is the previous step's distance minus this one (docs/credit_audit.md section 2).

Loaded games are cached per process (LRU, ``cache_size``): repeated resets of a game skip PDDL translation.
"""
from __future__ import annotations

import json
import os
from typing import Any

from agents.alfworld import assets
from agents.alfworld.assets import GAME_FILE, TASK_TYPE_IDS, TRAJ_FILE
from agents.base import EnvError, EnvStep
from agents.prompts import PromptTemplate

NAME = "alfworld"
MAX_STEPS = 50
SUCCESS_REWARD = 10.0
NOTHING_HAPPENS = "Nothing happens."
TASK_PREFIX = "Your task is to: "

_INSTRUCTION = (
    "Now it's your turn to take an action.\n"
    "You should first reason step-by-step about the current situation. This reasoning process MUST be "
    "enclosed within <think> </think> tags. \n"
    "Once you've finished your reasoning, you should choose an admissible action for current step and "
    "present it within <action> </action> tags.\n"
)


def format_admissible_actions(actions) -> str:
    """verl-agent's ALFWorld list: ``'a'`` items joined by a newline and a space (inside the template's ``[ ]``)."""
    return "\n ".join(f"'{a}'" for a in actions)


# verl-agent's ALFWorld prompts (agent_system/environments/prompts/alfworld.py: ALFWORLD_TEMPLATE_NO_HIS and
# ALFWORLD_TEMPLATE), byte for byte, with this project's field names. The no-history one has no task line.
PROMPT = PromptTemplate(
    first=(
        "\nYou are an expert agent operating in the ALFRED Embodied Environment.\n"
        "Your current observation is: {observation}\n"
        "Your admissible actions of the current situation are: [{admissible_actions}].\n\n"
        + _INSTRUCTION
    ),
    later=(
        "\nYou are an expert agent operating in the ALFRED Embodied Environment. Your task is to: {task}\n"
        "Prior to this step, you have already taken {step_count} step(s). Below are the most recent "
        "{history_length} observations and the corresponding actions you took: {history}\n"
        "You are now at step {current_step} and your current observation is: {observation}\n"
        "Your admissible actions of the current situation are: [{admissible_actions}].\n\n"
        + _INSTRUCTION
    ),
    format_actions=format_admissible_actions,
    hidden_actions=("help",),  # verl-agent drops 'help' from the prompt's list (it stays executable)
    tail_chars=30,
)


def default_data_dir() -> str | None:
    return os.environ.get("ALFWORLD_DATA")


def resolve_game(task: str, data_dir: str | None = None) -> str:
    """Game id or path -> absolute path of its ``game.tw-pddl``."""
    task = str(task)
    candidates = [task]
    root = data_dir or default_data_dir()
    if root and not os.path.isabs(task):
        candidates.insert(0, os.path.join(root, task))
    for c in candidates:
        if os.path.isdir(c):
            c = os.path.join(c, GAME_FILE)
        if os.path.isfile(c):
            return os.path.abspath(c)
    raise FileNotFoundError(f"ALFWorld game not found: {task!r} (data dir: {root!r})")


def read_traj(gamefile: str) -> dict:
    with open(os.path.join(os.path.dirname(gamefile), TRAJ_FILE)) as f:
        return json.load(f)


def task_text_of(observation: str) -> str:
    i = observation.find(TASK_PREFIX)
    return observation[i + len(TASK_PREFIX):].strip() if i >= 0 else ""


class AlfworldEnv:
    """In-process ALFWorld adapter (see module docstring). One episode at a time."""

    name = NAME

    def __init__(self, data_dir: str | None = None, max_steps: int = MAX_STEPS, cache_size: int = 32,
                 hide_help: bool = True, request_facts: bool = False, oracle: bool = False) -> None:
        from agents.alfworld.engine import GameEngine  # lazy: TextWorld/ALFWorld load only when an env is built

        self.data_dir = data_dir
        self.max_steps = int(max_steps)
        self.hide_help = hide_help
        self.oracle = bool(oracle)
        self._goals: dict = {}  # gamefile -> its oracle goal (None: not covered)
        self.engine = GameEngine(cache_size=cache_size, request_facts=request_facts)
        self._traj_cache: dict[str, dict] = {}
        self._gamefile: str | None = None
        self._task_type = 0
        self._steps = 0
        self._done = True
        self._won = False
        self._admissible: list[str] = []
        self.last_state = None  # the engine's last game state (facts etc. when request_facts)

    # -- helpers
    def _admissible_of(self, state) -> list[str]:
        cmds = list(state["admissible_commands"] or [])
        self._admissible = cmds
        return [c for c in cmds if not (self.hide_help and c == "help")]

    def _info(self) -> dict[str, Any]:
        info = {"task_type": self._task_type, "task_type_name": assets.TASK_TYPES.get(self._task_type, ""),
                "won": self._won, "steps": self._steps,
                "truncated": bool(self._done and not self._won), "gamefile": self._gamefile or ""}
        if self.oracle:
            info["oracle_distance"] = self.oracle_distance()
        return info

    def oracle_distance(self) -> int | None:
        """Actions a full-knowledge agent still needs to win from the current state (0 once won), from the
        engine's live facts without stepping the game; None when the game's goal is not one the oracle covers
        (:func:`agents.alfworld.oracle.goal_of`)."""
        from agents.alfworld import oracle

        if self._gamefile is None:
            raise EnvError("oracle_distance() without an active episode: call reset() first")
        if self._gamefile not in self._goals:
            self._goals[self._gamefile] = oracle.goal_of(self.engine.pddl_problem)
        goal = self._goals[self._gamefile]
        if goal is None:
            return None
        return oracle.distance(oracle.World.from_facts(self.engine.facts()), goal)

    # -- AgentEnv
    def reset(self, task: str | int) -> tuple[str, EnvStep]:
        gamefile = resolve_game(str(task), self.data_dir)
        traj = self._traj_cache.get(gamefile)
        if traj is None:
            traj = self._traj_cache[gamefile] = read_traj(gamefile)
        self._task_type = TASK_TYPE_IDS.get(traj.get("task_type", ""), 0)
        self.engine.load(gamefile)
        state = self.engine.reset()
        self.last_state = state
        self._gamefile = gamefile
        self._steps, self._done, self._won = 0, False, False
        obs = state["feedback"]
        return task_text_of(obs), EnvStep(observation=obs, anchor=obs, admissible_actions=self._admissible_of(state),
                                          reward=0.0, done=False, won=False, info=self._info())

    def step(self, action: str, valid: bool = True) -> EnvStep:
        if self._gamefile is None or self._done:
            raise EnvError("step() without an active episode: call reset() first")
        self._steps += 1
        if valid:
            state, _, _ = self.engine.step(str(action))
            self.last_state = state
            obs = state["feedback"]
            won = bool(state["won"])
            admissible = self._admissible_of(state)
        else:
            obs, won = NOTHING_HAPPENS, False
            admissible = [c for c in self._admissible if not (self.hide_help and c == "help")]
        self._won = won
        self._done = won or self._steps >= self.max_steps
        return EnvStep(observation=obs, anchor=obs, admissible_actions=admissible,
                       reward=SUCCESS_REWARD if won else 0.0, done=self._done, won=won, info=self._info())

    def cache_info(self) -> dict[str, int]:
        return self.engine.cache_info

    def close(self) -> None:
        self.engine.close()
        self._gamefile = None
        self._done = True

