"""ALFWorld's SFT demonstrator (``EnvSpec.sft_demos``): the walkthrough stored with each game (``game.tw-pddl``;
the generator stores the handcoded expert's winning command list) replayed through the training env adapter
(:class:`agents.alfworld.env.AlfworldEnv`) and kept only if it wins, or the observation-consistent searcher
(:mod:`agents.alfworld.search`); rendered with the training prompts (:func:`agents.demos.render_episode`).
With the searcher, ``detours`` more episodes per game each make one mistake and recover from it
(:func:`agents.alfworld.search.play`, recovery demonstrations); only their steps after the mistake are kept."""
from __future__ import annotations

import json
import os
import random
from typing import Callable, Iterable

from agents.demos import DemoStep, render_episode


def _walkthrough(gamefile: str) -> list[str]:
    with open(gamefile) as f:
        return list(json.load(f).get("walkthrough") or [])


def alfworld_demos(data_root: str, games: Iterable[str], history_k: int = 2, max_steps: int = 50,
                   drop_leading_look: bool = True, progress: Callable[[int, int], None] | None = None,
                   expert: str = "walkthrough", detours: int = 0) -> tuple[list[DemoStep], dict]:
    """Expert episodes of each game through the env adapter; return the winning episodes' steps and stats.

    ``expert="walkthrough"``: replay the game's stored walkthrough (ALFWorld's handcoded expert, which knows where
    objects are hidden). ``drop_leading_look``: the generator's walkthroughs start with ``look`` (ALFWorld's expert
    wrapper does); it changes nothing, so it is dropped unless the shortened walkthrough fails to win.
    ``expert="search"``: play the observation-consistent searcher (:mod:`agents.alfworld.search`,
    ``pick_and_place_simple`` only), whose every action follows from what its prompt shows.
    ``detours`` (searcher only): per won game, that many more episodes, each with one mistake at a step and of a kind
    drawn from the game's identity (its folder names, not where the data lives); the won ones add their steps after
    the mistake (stats: ``detour_episodes``, ``detour_won``, ``detour_steps``).
    """
    from agents.alfworld.env import AlfworldEnv, resolve_game

    if expert not in ("walkthrough", "search"):
        raise ValueError(f"unknown ALFWorld expert {expert!r}; expected 'walkthrough' or 'search'")
    if detours < 0 or (detours and expert != "search"):
        raise ValueError(f"detours={detours}: recovery episodes need expert='search' and a count >= 0")
    games = list(games)
    env = AlfworldEnv(data_dir=data_root, max_steps=max_steps)
    steps: list[DemoStep] = []
    stats = {"games": len(games), "won": 0, "no_walkthrough": 0, "not_won": 0, "steps": 0, "expert": expert}
    if detours:
        stats.update(detours=detours, detour_episodes=0, detour_won=0, detour_steps=0)
    try:
        for i, game in enumerate(games):
            if expert == "search":
                from agents.alfworld.search import play

                ep = play(env, game, max_steps)
                if ep is not None and ep["won"]:
                    steps.extend(render_episode(env.name, ep["task_text"], ep["observations"], ep["admissibles"],
                                                ep["actions"], task_id=game, history_k=history_k))
                    stats["won"] += 1
                    for j in range(detours):
                        steps.extend(_detour_episode(env, game, len(ep["actions"]), j, max_steps, history_k, stats))
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


def _detour_episode(env, game: str, clean_len: int, j: int, max_steps: int, history_k: int,
                    stats: dict) -> list[DemoStep]:
    """The ``j``-th recovery episode of ``game`` (searcher, one mistake): its steps after the mistake if it wins."""
    from agents.alfworld.search import DETOUR_KINDS, play

    # seeded by the game's identity (split/type folder/trial), so moving the data root changes nothing
    ident = "/".join(os.path.normpath(game).split(os.sep)[-3:])
    rng = random.Random(f"detour:{ident}:{j}")
    at = rng.randrange(1, clean_len) if clean_len > 1 else 0  # step 0 has no previous action to repeat
    kind = rng.choice(DETOUR_KINDS)
    stats["detour_episodes"] += 1
    ep = play(env, game, max_steps, detour=(at, kind), rng=rng, window=history_k)
    if ep is None or not ep["won"]:
        return []
    stats["detour_won"] += 1
    rendered = render_episode(env.name, ep["task_text"], ep["observations"], ep["admissibles"], ep["actions"],
                              task_id=game, history_k=history_k)[at + 1:]  # never trained on the mistake itself
    stats["detour_steps"] += len(rendered)
    return rendered


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
