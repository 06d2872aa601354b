"""A WebShop demonstrator that knows the goal: the server's goal endpoint (``GET /api/goal``, server started with
``--expose-goals``) gives the target product and options; the demonstrator plays search -> item -> options -> buy
through the training env adapter (:class:`agents.webshop.env.WebShopEnv`), so observations and admissible actions
are exactly what the policy sees, and the steps are rendered with the training prompts
(:func:`agents.demos.render_episode`).

Search query: the goal's ``query`` when the server gives one, else the instruction text. If the target product is
not on the first results page, the demonstrator pages forward (``next >``) up to ``max_pages``; an episode that
does not end with a purchase scoring 1.0 is discarded.
"""
from __future__ import annotations

from typing import Any, Callable, Iterable

from agents.webshop.env import WebShopEnv
from agents.demos import DemoStep, render_episode


def _option_values(goal_options: Any) -> list[str]:
    if isinstance(goal_options, dict):
        return [str(v) for v in goal_options.values()]
    if isinstance(goal_options, (list, tuple)):
        return [str(v) for v in goal_options]
    return []


def plan_click(admissible: list[str], target: str) -> str | None:
    """The admissible ``click[...]`` whose text equals ``target`` case-insensitively (None if absent)."""
    want = f"click[{target}]".lower()
    for a in admissible:
        if a.lower() == want:
            return a
    return None


def play_goal(base_url: str, goal_index: int | str, history_k: int = 2, max_pages: int = 3, max_steps: int = 15):
    """Play one goal with the goal-aware demonstrator; return its rendered steps, or None when it did not win."""
    env = WebShopEnv(base_url=base_url, max_steps=max_steps)
    try:
        task, obs = env.reset(goal_index)
        goal = env.goal()
        asin = str(goal.get("asin") or "").lower()
        query = str(goal.get("query") or task).strip().lower()
        options = _option_values(goal.get("goal_options"))
        observations, admissibles, actions = [], [], []

        def act(action: str):
            nonlocal obs
            observations.append(obs.observation)
            admissibles.append(list(obs.admissible_actions))
            actions.append(action)
            obs = env.step(action)

        act(f"search[{query}]")
        for _ in range(max_pages):
            click = plan_click(obs.admissible_actions, asin)
            if click or obs.done:
                break
            nxt = plan_click(obs.admissible_actions, "next >")
            if nxt is None:
                return None
            act(nxt)
        click = plan_click(obs.admissible_actions, asin)
        if click is None or obs.done:
            return None
        act(click)
        for value in options:
            c = plan_click(obs.admissible_actions, value)
            if c is not None and not obs.done:
                act(c)
        buy = plan_click(obs.admissible_actions, "buy now")
        if buy is None or obs.done:
            return None
        act(buy)
        if not obs.won:
            return None
        return render_episode("webshop", task, observations, admissibles, actions, task_id=str(goal_index),
                              history_k=history_k)
    finally:
        env.close()


def webshop_demos(base_url: str, goal_ids: Iterable[int | str], history_k: int = 2,
                  progress: Callable[[int, int], None] | None = None) -> tuple[list[DemoStep], dict]:
    """Expert WebShop episodes (one :func:`play_goal` per goal id) and counts of the won / not won goals."""
    goal_ids = list(goal_ids)
    steps: list[DemoStep] = []
    stats = {"goals": len(goal_ids), "won": 0, "not_won": 0, "steps": 0}
    for i, gid in enumerate(goal_ids):
        episode = play_goal(base_url, gid, history_k=history_k)
        if episode:
            steps.extend(episode)
            stats["won"] += 1
        else:
            stats["not_won"] += 1
        if progress:
            progress(i + 1, len(goal_ids))
    stats["steps"] = len(steps)
    return steps, stats
