"""ALFWorld's SFT demonstrator (``EnvSpec.sft_demos``): the walkthrough stored with each game (``game.tw-pddl``;
the generator stores the handcoded expert's winning command list) replayed through the training env adapter
(:class:`agents.alfworld.env.AlfworldEnv`) and kept only if it wins, or the observation-consistent searcher
(:mod:`agents.alfworld.search`); rendered with the training prompts (:func:`agents.demos.render_episode`)."""
from __future__ import annotations

import json
from typing import Callable, Iterable

from agents.demos import DemoStep, render_episode


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
    ``expert="search"``: play the observation-consistent searcher (:mod:`agents.alfworld.search`,
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
                from agents.alfworld.search import play

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
