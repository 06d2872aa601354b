"""A tiny deterministic text environment, registered as ``toy`` (development and fast tests only).

A corridor of rooms 0..L-1; the agent starts in room 0 and must ``go to room <goal>``. Admissible actions are
``go forward``, ``go back`` and ``look``; reaching the goal gives reward 10 and ends the episode. Like the real
adapters, ``step(action, valid=False)`` answers "Nothing happens." without executing (the rollout's
``invalid_action="noop"`` mode). Observations
repeat across trajectories (same room = same anchor), so GiGPO/GACA step groups are non-trivial. It is NOT a
stand-in for ALFWorld/WebShop in the end-to-end tests; it only makes the rollout testable in seconds.
Task ids are integers: goal = 1 + task % (length - 1). With ``oracle=True`` every ``EnvStep.info`` carries
``oracle_distance`` = |goal - room|, the actions a full-knowledge agent still needs (the credit audit's input,
docs/credit_audit.md).
"""
from __future__ import annotations

from agents.base import EnvError, EnvStep
from agents.prompts import PromptTemplate

_INTRO = "You are an expert agent walking through a corridor of rooms.\nYour task is to: {task}\n"
_FORMAT = (
    "Your admissible actions of the current situation are: [{admissible_actions}].\n"
    "Think step by step inside <think> </think> tags, then give exactly one admissible action inside "
    "<action> </action> tags."
)
PROMPT = PromptTemplate(
    first=_INTRO + "Your current observation is: {observation}\n" + _FORMAT,
    later=_INTRO
    + "Prior to this step, you have already taken {step_count} step(s). Below are the most recent "
    "{history_length} observations and the corresponding actions you took: {history}\n"
    "You are now at step {current_step} and your current observation is: {observation}\n" + _FORMAT,
)


class ToyCorridorEnv:
    name = "toy"

    def __init__(self, length: int = 4, max_steps: int = 6, fail_on_task: int | None = None, oracle: bool = False):
        self.length, self.max_steps, self.fail_on_task = length, max_steps, fail_on_task
        self.oracle = bool(oracle)
        self.room = self.goal = self.steps = 0

    def _obs(self) -> EnvStep:
        text = f"You are in room {self.room}. The corridor has rooms 0 to {self.length - 1}."
        info = {"oracle_distance": abs(self.goal - self.room)} if self.oracle else {}
        return EnvStep(observation=text, anchor=text, admissible_actions=["go forward", "go back", "look"], info=info)

    def reset(self, task):
        task = int(task)
        if self.fail_on_task is not None and task == self.fail_on_task:
            raise EnvError(f"toy env: injected failure on task {task}")
        self.room, self.steps, self.goal = 0, 0, 1 + task % (self.length - 1)
        return f"go to room {self.goal}.", self._obs()

    def step(self, action: str, valid: bool = True) -> EnvStep:
        self.steps += 1
        if valid and action == "go forward":
            self.room = min(self.room + 1, self.length - 1)
        elif valid and action == "go back":
            self.room = max(self.room - 1, 0)
        won = self.room == self.goal
        out = self._obs()
        if not valid:
            out.observation = "Nothing happens."
        elif action not in out.admissible_actions:
            out.observation = "Nothing happens. " + out.observation
        out.reward, out.won = (10.0 if won else 0.0), won
        out.done = won or self.steps >= self.max_steps
        out.info = {**out.info, "task_type": "corridor", "score": float(won)}
        return out

    def close(self) -> None:
        pass


def make_env(**config) -> ToyCorridorEnv:
    return ToyCorridorEnv(**config)

