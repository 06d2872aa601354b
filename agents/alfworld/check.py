"""Replay every stored walkthrough of a data split through the training env adapter and summarise.

Used by ``python -m agents.alfworld check``. Games without a stored walkthrough (real ALFWorld files may lack
one) are played by the fixed handcoded expert instead (counted in ``expert_played``).
"""
from __future__ import annotations

import json
import os
import statistics
import time
from collections import Counter
from typing import Callable

from agents.alfworld.panels import list_games
from agents.alfworld.assets import GAME_FILE


def _p50(xs: list[float]) -> float:
    return round(statistics.median(xs), 2) if xs else 0.0


def check_split(data_root: str, split: str, backend: str = "local",
                progress: Callable[[int, int], None] | None = None, verbose: bool = False) -> dict:
    from agents.alfworld.backends import make_env

    games = list_games(data_root, split)
    env = make_env(backend=backend, data_dir=data_root)
    won = 0
    types: Counter = Counter()
    reset_ms: list[float] = []
    step_ms: list[float] = []
    failures: list[str] = []
    expert_played = 0
    try:
        for i, (gid, ttype) in enumerate(games):
            types[ttype] += 1
            with open(os.path.join(data_root, gid, GAME_FILE)) as f:
                walkthrough = json.load(f).get("walkthrough")
            if not walkthrough:
                walkthrough = _expert_walkthrough(os.path.join(data_root, gid, GAME_FILE))
                expert_played += 1
            t0 = time.perf_counter()
            _task, step = env.reset(gid)
            reset_ms.append((time.perf_counter() - t0) * 1000)
            ok = False
            for cmd in walkthrough or []:
                t0 = time.perf_counter()
                step = env.step(cmd)
                step_ms.append((time.perf_counter() - t0) * 1000)
                if step.done:
                    ok = step.won and step.reward == 10.0
                    break
            won += ok
            if not ok:
                failures.append(gid)
                if verbose:
                    print(f"NOT WON: {gid}", flush=True)
            if progress is not None:
                progress(i + 1, len(games))
    finally:
        env.close()
    return {"games": len(games), "won": won, "task_types": dict(sorted(types.items())),
            "reset_ms_p50": _p50(reset_ms), "step_ms_p50": _p50(step_ms),
            "_failures": failures, "_expert_played": expert_played}


def _expert_walkthrough(gamefile: str) -> list[str] | None:
    from agents.alfworld.engine import GameEngine
    from agents.alfworld.env import read_traj
    from agents.alfworld.expert import run_expert

    traj = read_traj(gamefile)
    engine = GameEngine(cache_size=1, request_facts=True)
    try:
        return run_expert(engine, gamefile, traj["task_type"], traj["pddl_params"], seed=0)
    finally:
        engine.close()


ROOM_TYPES = {0: "kitchen", 2: "living_room", 3: "bedroom", 4: "bathroom"}


def room_type(scene_num: int) -> str:
    """AI2-THOR floor-plan numbering: 1-30 kitchens, 201-230 living rooms, 301-330 bedrooms, 401-430 bathrooms."""
    return ROOM_TYPES.get(int(scene_num) // 100, "unknown")


def _dist(xs: list[float]) -> dict:
    if not xs:
        return {"n": 0}
    return {"n": len(xs), "mean": round(statistics.fmean(xs), 1), "p50": statistics.median(xs),
            "min": min(xs), "max": max(xs)}


def split_stats(data_root: str, split: str) -> dict:
    """Distribution figures of a split, from the game files alone (works on real and generated data): expert
    steps per task type (length of the stored walkthrough), objects / receptacles / locations per scene by room
    type, and the share of receptacles that share their location with another receptacle."""
    import re

    games = list_games(data_root, split)
    steps: dict[str, list[int]] = {}
    per_room: dict[str, dict[str, list[int]]] = {}
    shared = total_recs = 0
    scenes: set[int] = set()
    for gid, ttype in games:
        with open(os.path.join(data_root, gid, GAME_FILE)) as f:
            game = json.load(f)
        with open(os.path.join(data_root, gid, "traj_data.json")) as f:
            traj = json.load(f)
        if game.get("walkthrough"):
            steps.setdefault(ttype, []).append(len(game["walkthrough"]))
        problem = game.get("pddl_problem", "")
        # declarations only (one per line, as ALFRED writes them), not the goal's ``?r - receptacle`` variables
        n_obj = len(re.findall(r"^\s*[^\s(?]\S*\s+-\s+object\s*$", problem, flags=re.M))
        n_rec = len(re.findall(r"^\s*[^\s(?]\S*\s+-\s+receptacle\s*$", problem, flags=re.M))
        rec_locs = re.findall(r"\(receptacleAtLocation\s+([^\s?]\S*)\s+(\S+)\)", problem)  # facts, not goal terms
        per_loc = Counter(loc for _r, loc in rec_locs)
        shared += sum(n for n in per_loc.values() if n > 1)
        total_recs += len(rec_locs)
        scene = int(traj.get("scene", {}).get("scene_num", -1))
        scenes.add(scene)
        room = per_room.setdefault(room_type(scene), {"objects": [], "receptacles": [], "locations": []})
        room["objects"].append(n_obj)
        room["receptacles"].append(n_rec)
        room["locations"].append(len(per_loc))
    return {"games": len(games), "floor_plans": sorted(scenes),
            "expert_steps": {t: _dist(v) for t, v in sorted(steps.items())},
            "per_room": {r: {k: _dist(v) for k, v in d.items()} for r, d in sorted(per_room.items())},
            "receptacles_sharing_a_location": round(shared / total_recs, 3) if total_recs else 0.0}
