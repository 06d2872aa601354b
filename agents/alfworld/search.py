"""An observation-consistent scripted expert for ALFWorld ``pick_and_place_simple``: demonstrations a small model can
imitate.

Why: the generator's stored walkthroughs come from ALFWorld's handcoded expert, which knows where the object is
hidden (the PDDL facts). A policy that only sees its observation cannot infer that location, so imitating those
walkthroughs teaches it nothing that transfers to unseen games (measured: 0 / 16 held-out games after SFT). This
searcher uses only what the agent is shown -- the task text, the current observation, the admissible actions and
its own past actions -- and a rule the prompt history makes visible:

1. holding the target: go to the first receptacle of the goal class (admissible-list order), open it if it is
   closed, ``move`` the object there;
2. a ``take <obj> N from ...`` is admissible: take the first one;
3. standing at a closed receptacle: open it;
4. otherwise go to the first receptacle of the admissible ``go to`` list (sorted) that comes after the last one
   visited, skipping the goal class (the generator never starts the target there).

Every rule reads only the task, the admissible list and the last two actions, which the 2-step history of the
training prompt shows (holding the object is also visible as admissible ``move`` commands), so each demonstration
step is a function of its prompt. Other task types return None (not covered).

Detours (recovery demonstrations, DART-style: Laskey et al. 2017, "DART: Noise Injection for Robust Imitation
Learning"): the searcher's own episodes never contain a step that changes nothing, so a model trained on them alone
never sees what follows one -- and a warm start that once stands still tends to stay (issue 35, notebook section 8).
``play(..., detour=(t, kind))`` replaces the searcher's action at step ``t`` by a mistake of the kind the warm starts
make (:data:`DETOUR_KINDS`) and lets the searcher recover from wherever that leaves it; the demonstrator trains on the
steps after the detour only, never on the detour itself.

    python -m agents.alfworld.search --data ROOT --split valid_seen [--max-steps 15]

prints the searcher's own success rate and steps on a split (the check that the demonstrations are sound).
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass, field
from typing import Sequence

_TASK = re.compile(r"put (?:a|some) (\w+) (?:in|on) (\w+)")
_GO = re.compile(r"go to (\w+) (\d+)$")
_AT = re.compile(r"(?:open|close|take \w+ \d+ from|move \w+ \d+ to) (\w+) (\d+)$")


def parse_task(task_text: str) -> tuple[str, str] | None:
    """``put a book in shelf.`` -> ("book", "shelf"); None for other task types."""
    m = _TASK.search(task_text.strip().rstrip("."))
    return (m.group(1), m.group(2)) if m else None


@dataclass
class SearchState:
    """What the searcher remembers: its target, goal class and past actions (all visible to the agent)."""

    obj: str
    goal: str
    actions: list[str] = field(default_factory=list)

    @property
    def holding(self) -> bool:
        return any(a.startswith(f"take {self.obj} ") for a in self.actions)

    @property
    def here(self) -> str | None:
        """The receptacle the agent stands at ("cabinet 2"): that of the last ``go to``, or of a later ``open`` /
        ``close`` / ``take ... from`` / ``move ... to`` (each acts where the agent stands, so a history window that
        lost the ``go to`` still shows the place); None before the first move."""
        for a in reversed(self.actions):
            m = _GO.match(a) or _AT.match(a)
            if m:
                return f"{m.group(1)} {m.group(2)}"
        return None


def next_action(state: SearchState, observation: str, admissible: Sequence[str]) -> str:
    """The searcher's action for the current step (see the module docstring); records it in ``state``."""
    adm = list(admissible)
    here = state.here
    gos = [a for a in adm if _GO.match(a)]
    action = None
    # holding: remembered, or visible (the engine lists "move <obj> N to ..." only while the object is held)
    if state.holding or any(a.startswith(f"move {state.obj} ") for a in adm):
        goal_gos = [a for a in gos if _GO.match(a).group(1) == state.goal]
        at_goal = here is not None and here.split()[0] == state.goal
        moves = [a for a in adm if a.startswith(f"move {state.obj} ") and a.endswith(f" to {here}")] if at_goal else []
        if moves:
            action = moves[0]
        elif at_goal and f"open {here}" in adm:
            action = f"open {here}"
        elif goal_gos:
            action = goal_gos[0]
    else:
        takes = [a for a in adm if a.startswith(f"take {state.obj} ")]
        if takes:
            action = takes[0]
        elif here is not None and f"open {here}" in adm:
            action = f"open {here}"
        else:
            # the current receptacle is not in the list (no "go to" where one stands): the next one is the first
            # listed receptacle after it in the list's (sorted) order, wrapping around
            targets = [a[len("go to "):] for a in gos if _GO.match(a).group(1) != state.goal]
            later = [t for t in targets if here is None or t > here]  # string order, as listed
            if later or targets:
                action = "go to " + (later or targets)[0]
    if action is None:
        action = "look"
    state.actions.append(action)
    return action


#: the mistakes a detour makes: ``repeat`` the previous action (a second ``go to`` where the agent now stands, a second
#: ``open``: both change nothing), ``stay`` (``go to`` the receptacle the agent is at: nothing happens), ``wander``
#: (``go to`` a receptacle drawn from the admissible list: the search resumes from there)
DETOUR_KINDS = ("repeat", "stay", "wander")


def detour_action(kind: str, state: SearchState, admissible: Sequence[str], rng) -> str:
    """The mistake ``kind`` (:data:`DETOUR_KINDS`) in ``state`` (``rng``: a ``random.Random`` for ``wander``);
    recorded in ``state`` like a searcher action, so that the search goes on from where it leaves the agent."""
    if kind not in DETOUR_KINDS:
        raise ValueError(f"unknown detour kind {kind!r}; expected one of {DETOUR_KINDS}")
    action = None
    if kind == "stay" and state.here is not None:
        action = f"go to {state.here}"
    elif kind == "wander":
        gos = sorted(a for a in admissible if _GO.match(a))
        action = rng.choice(gos) if gos else None
    if action is None:  # repeat, or a stay/wander with nothing to choose from
        action = state.actions[-1] if state.actions else "look"
    state.actions.append(action)
    return action


def play(env, game: str, max_steps: int = 50, detour: tuple[int, str] | None = None, rng=None,
         window: int = 2) -> dict | None:
    """Play ``game`` on an :class:`agents.alfworld.env.AlfworldEnv`; return the episode's observations, admissible
    lists, actions, won flag and task text, or None when the task is not ``pick_and_place_simple``-shaped.

    ``detour=(t, kind)``: step ``t``'s action is :func:`detour_action` (``kind``, drawing from ``rng``) instead of the
    searcher's; the searcher plays every other step, from the state the detour left, remembering only its last
    ``window`` actions (what the prompt's history shows: after a mistake its full memory would know more than the
    prompt, and the demonstration would no longer be a function of its prompt)."""
    task_text, obs = env.reset(game)
    parsed = parse_task(task_text)
    if parsed is None:
        return None
    state = SearchState(*parsed)
    observations, admissibles, actions = [], [], []
    for t in range(max_steps):
        observations.append(obs.observation)
        admissibles.append(list(obs.admissible_actions))
        if detour is not None and t == detour[0]:
            actions.append(detour_action(detour[1], state, obs.admissible_actions, rng))
        else:
            if detour is not None:
                state.actions = state.actions[-window:] if window > 0 else []
            actions.append(next_action(state, obs.observation, obs.admissible_actions))
        obs = env.step(actions[-1])
        if obs.done:
            break
    return {"task_text": task_text, "observations": observations, "admissibles": admissibles,
            "actions": actions, "won": bool(obs.won)}


def main(argv=None) -> int:
    from agents.alfworld.env import AlfworldEnv
    from agents.alfworld.panels import list_games

    p = argparse.ArgumentParser(prog="python -m agents.alfworld.search", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", required=True)
    p.add_argument("--split", default="valid_seen")
    p.add_argument("--max-steps", type=int, default=15)
    args = p.parse_args(argv)
    games = [g for g, _ in list_games(args.data, args.split)]
    if not games:
        print(f"error: no games in {args.data} ({args.split})", file=sys.stderr)
        return 2
    env = AlfworldEnv(data_dir=args.data, max_steps=args.max_steps)
    won, steps, covered = 0, [], 0
    try:
        for g in games:
            ep = play(env, g, args.max_steps)
            if ep is None:
                continue
            covered += 1
            won += ep["won"]
            if ep["won"]:
                steps.append(len(ep["actions"]))
    finally:
        env.close()
    print(json.dumps({"games": len(games), "covered": covered, "won": won,
                      "success_rate": won / covered if covered else 0.0,
                      "steps_mean": sum(steps) / len(steps) if steps else None, "steps_max": max(steps, default=None)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
