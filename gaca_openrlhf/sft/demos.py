"""Expert demonstrations as step-level SFT samples, rendered exactly as the training rollout renders its prompts.

Each demonstration step becomes one (prompt text, response text) pair: the prompt is
``agents.prompts.render_step_prompt(agents.registry.prompt_template(env), task, memory, observation, admissible)``
with the same :class:`agents.prompts.StepMemory` (k pairs) the rollout (:mod:`gaca_openrlhf.rollout.agent_executor`)
and the evaluation loop use; the response is ``<think>...</think><action>COMMAND</action>``, the format
:func:`agents.parsing.parse_action` accepts. Nothing here copies a template: when the prompt library changes, the
demonstrations change with it (the SFT cache key includes a hash of the rendered samples).

ALFWorld: the walkthrough stored with each game (``game.tw-pddl``; the generator stores the handcoded expert's
winning command list) is replayed through the training env adapter (:class:`agents.alfworld.env.AlfworldEnv`) and
kept only if it wins. WebShop: :func:`gaca_openrlhf.sft.webshop_expert.webshop_demos` asks the local server's goal
endpoint for each goal's target product and plays search -> item -> options -> buy.
"""
from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass
from typing import Callable, Iterable, Sequence

from agents.prompts import StepMemory, render_step_prompt
from agents.registry import prompt_template


@dataclass(frozen=True)
class DemoStep:
    """One SFT sample: the rendered step prompt (user message) and the expert's response."""

    task: str  # task id (ALFWorld game id / WebShop goal id)
    step: int
    prompt: str
    response: str


def expert_response(action: str) -> str:
    """The response the SFT model learns to write: a one-sentence thought and the action, in the parsed format."""
    return f"<think>I should {action}.</think><action>{action}</action>"


def render_episode(env_name: str, task_text: str, observations: Sequence[str], admissibles: Sequence[list[str]],
                   actions: Sequence[str], task_id: str = "", history_k: int = 2) -> list[DemoStep]:
    """Render a played episode (observation/admissible actions *before* each action) as SFT samples."""
    if not (len(observations) == len(admissibles) == len(actions)):
        raise ValueError("observations, admissible action lists and actions must have the same length")
    template = prompt_template(env_name)
    memory = StepMemory(k=history_k)
    out = []
    for t, (obs, adm, act) in enumerate(zip(observations, admissibles, actions)):
        out.append(DemoStep(task_id, t, render_step_prompt(template, task_text, memory, obs, list(adm)),
                            expert_response(act)))
        memory.add(obs, act)
    return out


def _walkthrough(gamefile: str) -> list[str]:
    with open(gamefile) as f:
        return list(json.load(f).get("walkthrough") or [])


def alfworld_demos(data_root: str, games: Iterable[str], history_k: int = 2, max_steps: int = 50,
                   drop_leading_look: bool = True, progress: Callable[[int, int], None] | None = None,
                   expert: str = "walkthrough") -> tuple[list[DemoStep], dict]:
    """Expert episodes of each game through the env adapter; return the winning episodes' steps and stats.

    ``expert="walkthrough"``: replay the game's stored walkthrough (ALFWorld's handcoded expert, which knows where
    objects are hidden). ``drop_leading_look``: the generator's walkthroughs start with ``look`` (ALFWorld's expert
    wrapper does); it changes nothing, so it is dropped unless the shortened walkthrough fails to win.
    ``expert="search"``: play the observation-consistent searcher (:mod:`gaca_openrlhf.sft.alfworld_search`,
    ``pick_and_place_simple`` only), whose every action follows from what its prompt shows.
    """
    from agents.alfworld.env import AlfworldEnv, resolve_game

    if expert not in ("walkthrough", "search"):
        raise ValueError(f"unknown ALFWorld expert {expert!r}; expected 'walkthrough' or 'search'")
    games = list(games)
    env = AlfworldEnv(data_dir=data_root, max_steps=max_steps)
    steps: list[DemoStep] = []
    stats = {"games": len(games), "won": 0, "no_walkthrough": 0, "not_won": 0, "steps": 0, "expert": expert}
    try:
        for i, game in enumerate(games):
            if expert == "search":
                from gaca_openrlhf.sft.alfworld_search import play

                ep = play(env, game, max_steps)
                if ep is not None and ep["won"]:
                    steps.extend(render_episode(env.name, ep["task_text"], ep["observations"], ep["admissibles"],
                                                ep["actions"], task_id=game, history_k=history_k))
                    stats["won"] += 1
                else:
                    stats["not_won"] += 1
                if progress:
                    progress(i + 1, len(games))
                continue
            walk = _walkthrough(resolve_game(game, data_root))
            if not walk:
                stats["no_walkthrough"] += 1
                continue
            tries = [walk]
            if drop_leading_look and walk[0] == "look" and len(walk) > 1:
                tries.insert(0, walk[1:])
            for cmds in tries:
                episode = _play(env, game, cmds, history_k)
                if episode is not None:
                    steps.extend(episode)
                    stats["won"] += 1
                    break
            else:
                stats["not_won"] += 1
            if progress:
                progress(i + 1, len(games))
    finally:
        env.close()
    stats["steps"] = len(steps)
    return steps, stats


def _play(env, game: str, commands: list[str], history_k: int) -> list[DemoStep] | None:
    task_text, obs = env.reset(game)
    observations, admissibles, actions = [], [], []
    for cmd in commands:
        if obs.done:
            return None
        observations.append(obs.observation)
        admissibles.append(list(obs.admissible_actions))
        actions.append(cmd)
        obs = env.step(cmd)
    if not obs.won:
        return None
    return render_episode(env.name, task_text, observations, admissibles, actions, task_id=game, history_k=history_k)


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
