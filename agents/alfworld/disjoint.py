"""What makes two ALFWorld games "the same task" across splits, and the check that splits share none.

A validation or test game must not be a training game in disguise. Two keys identify a game for that purpose:

- the **goal key** (floor plan, goal object class, goal receptacle class): the same goal in the same room is the
  same problem whatever the object positions (the generator may place the objects differently);
- the **opening key**: a digest of the first observation (room listing + task text) the agent sees; with small
  rooms two floor plans can list the same receptacles under the same task text, so the opening is the same.

:func:`game_keys` reads both from a game folder (the generator stores the opening digest in ``traj_data.json``;
for games without it -- real ALFWorld data, older generated games -- the game is loaded once on the engine).
:func:`split_keys` collects them for every game of a split folder, and :func:`check_disjoint` raises
:class:`OverlapError` naming the first shared key of any two splits.
"""
from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass

from agents.alfworld.assets import GAME_FILE, TRAJ_FILE


class OverlapError(ValueError):
    """Two splits share a goal key or an opening (see module doc)."""


def opening_digest(first_observation: str) -> str:
    """Digest of a game's first observation, whitespace-normalised."""
    return hashlib.sha1(" ".join(first_observation.split()).encode("utf-8")).hexdigest()[:16]


def goal_key(scene_num: int, object_target: str, parent_target: str) -> str:
    """(floor plan, goal object, goal receptacle) as one string."""
    return f"FloorPlan{int(scene_num)}/{object_target}/{parent_target}"


@dataclass(frozen=True)
class GameKeys:
    game: str  # the game folder
    goal: str
    opening: str


def _first_observation(game_dir: str) -> str:
    from agents.alfworld.engine import GameEngine

    engine = GameEngine(cache_size=1, disk_cache=True)
    try:
        engine.load(os.path.join(game_dir, GAME_FILE))
        return str(engine.reset()["feedback"])
    finally:
        engine.close()


def game_keys(game_dir: str) -> GameKeys:
    """Both keys of the game in ``game_dir`` (a ``trial_*`` folder holding traj_data.json and game.tw-pddl)."""
    with open(os.path.join(game_dir, TRAJ_FILE)) as f:
        traj = json.load(f)
    params = traj.get("pddl_params", {})
    goal = goal_key(traj["scene"]["scene_num"], params.get("object_target", ""), params.get("parent_target", ""))
    opening = (traj.get("generator") or {}).get("opening")
    if not opening:
        opening = opening_digest(_first_observation(game_dir))
    return GameKeys(game_dir, goal, opening)


def split_games(split_dir: str) -> list[str]:
    """Every game folder (``<task>/<trial>``) under a split folder, sorted."""
    out = []
    for root, _dirs, files in os.walk(split_dir):
        if TRAJ_FILE in files and GAME_FILE in files and not os.path.basename(root).startswith(".tmp-"):
            out.append(root)
    return sorted(out)


def split_keys(split_dir: str) -> list[GameKeys]:
    return [game_keys(g) for g in split_games(split_dir)]


def excluded_keys(split_dirs) -> tuple[frozenset, frozenset]:
    """(goal keys, opening keys) of every game under ``split_dirs``: what a new split must avoid."""
    goals, openings = set(), set()
    for d in split_dirs:
        if not os.path.isdir(d):
            raise FileNotFoundError(f"split folder to exclude not found: {d}")
        for k in split_keys(d):
            goals.add(k.goal)
            openings.add(k.opening)
    return frozenset(goals), frozenset(openings)


def check_disjoint(splits: dict[str, str]) -> dict[str, int]:
    """Raise :class:`OverlapError` if any two of ``splits`` (name -> split folder) share a goal key or an opening;
    return the number of games of each split."""
    keys = {name: split_keys(d) for name, d in splits.items()}
    names = list(keys)
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            for kind in ("goal", "opening"):
                seen = {getattr(k, kind): k.game for k in keys[a]}
                for k in keys[b]:
                    if getattr(k, kind) in seen:
                        raise OverlapError(f"splits {a!r} and {b!r} share a game {kind}: {getattr(k, kind)} "
                                           f"({seen[getattr(k, kind)]} and {k.game})")
    return {name: len(v) for name, v in keys.items()}
