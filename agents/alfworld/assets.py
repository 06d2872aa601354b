"""Access to the data shipped inside the installed ``alfworld`` wheel (layouts, constants, goal library,
PDDL domain, TextWorld grammar) and the task-type table shared by the generator, the adapter and the checks.

Nothing here copies ALFWorld data: every value is read from the installed package at run time.
"""
from __future__ import annotations

import functools
import json
import os
from typing import Any

#: ALFWorld's task types (ids as in ALFWorld's configs ``env.task_types``).
TASK_TYPES: dict[int, str] = {
    1: "pick_and_place_simple",
    2: "look_at_obj_in_light",
    3: "pick_clean_then_place_in_recep",
    4: "pick_heat_then_place_in_recep",
    5: "pick_cool_then_place_in_recep",
    6: "pick_two_obj_and_place",
}
TASK_TYPE_IDS: dict[str, int] = {v: k for k, v in TASK_TYPES.items()}

SPLITS = ("train", "valid_seen", "valid_unseen")

#: the ALFWorld game-file layout below a data root
JSON_DIR = "json_2.1.1"
GAME_FILE = "game.tw-pddl"
TRAJ_FILE = "traj_data.json"


def _alfworld_dir() -> str:
    # ``import alfworld`` creates ~/.cache/alfworld (or $ALFWORLD_DATA) as a side effect; locate the package
    # without importing it when possible.
    import importlib.util

    spec = importlib.util.find_spec("alfworld")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("the `alfworld` package is not installed (pip install alfworld==0.4.2)")
    return list(spec.submodule_search_locations)[0]


@functools.lru_cache(maxsize=None)
def domain_text() -> str:
    with open(os.path.join(_alfworld_dir(), "data", "alfred.pddl")) as f:
        return f.read()


@functools.lru_cache(maxsize=None)
def grammar_text() -> str:
    with open(os.path.join(_alfworld_dir(), "data", "alfred.twl2")) as f:
        return f.read()


def layouts_dir() -> str:
    return os.path.join(_alfworld_dir(), "gen", "layouts")


@functools.lru_cache(maxsize=None)
def scene_layout(scene_num: int) -> tuple[list[str], dict[str, list[float]]]:
    """(object types present, {receptacle id: interaction pose}) of AI2-THOR ``FloorPlan<scene_num>``."""
    base = os.path.join(layouts_dir(), f"FloorPlan{scene_num}")
    with open(base + "-objects.json") as f:
        objects = json.load(f)
    with open(base + "-openable.json") as f:
        poses = json.load(f)
    return list(objects), dict(poses)


def constants() -> Any:
    import alfworld.gen.constants as c

    return c


def goal_library() -> dict[str, dict]:
    import alfworld.gen.goal_library as g

    return g.gdict


#: ALFRED's valid_unseen floor plans (its train and valid_seen splits never use them).
UNSEEN_SCENES: tuple[int, ...] = (10, 219, 308, 424)

#: games per task type (ids 1-6) of the real ALFWorld splits (ALFWorld paper; train 3553, valid_seen 140,
#: valid_unseen 134)
REAL_SPLIT_COUNTS: dict[str, dict[int, int]] = {
    "train": {1: 790, 2: 308, 3: 650, 4: 459, 5: 533, 6: 813},
    "valid_seen": {1: 35, 2: 13, 3: 27, 4: 16, 5: 25, 6: 24},
    "valid_unseen": {1: 24, 2: 18, 3: 31, 4: 23, 5: 21, 6: 17},
}

#: marker file the generator writes in ``json_2.1.1/<split>/`` (see :func:`is_generated`)
GENERATED_MARKER = "generated.json"


@functools.lru_cache(maxsize=None)
def all_scene_numbers() -> tuple[int, ...]:
    """Every floor plan whose layout the wheel ships."""
    nums = set()
    for name in os.listdir(layouts_dir()):
        if name.startswith("FloorPlan") and name.endswith("-objects.json"):
            nums.add(int(name[len("FloorPlan"):-len("-objects.json")]))
    return tuple(sorted(nums))


def scene_numbers(split: str) -> list[int]:
    """Floor plans per split, following ALFRED's scene split: ``valid_unseen`` uses only its four held-out floor
    plans (:data:`UNSEEN_SCENES`); ``train`` and ``valid_seen`` use every other floor plan the wheel ships (ALFRED's
    train and valid_seen share floor plans). ALFRED's 8 test-unseen floor plans are not published with the wheel,
    so they cannot be excluded and are part of the train pool."""
    if split in ("train", "valid_seen"):
        return [n for n in all_scene_numbers() if n not in UNSEEN_SCENES]
    if split == "valid_unseen":
        return list(UNSEEN_SCENES)
    raise ValueError(f"unknown split {split!r}; expected one of {SPLITS}")


def is_generated(data_dir: str | None) -> bool:
    """True when ``data_dir`` (a data root holding ``json_2.1.1/``) contains games written by this project's
    generator (:mod:`agents.alfworld.generator`) rather than the real ALFWorld data: results on them are not
    comparable to published ALFWorld numbers. Looks for the generator's marker in any split, and, for data made
    before the marker existed, for the ``generator`` entry the generator writes into every ``traj_data.json``."""
    if not data_dir:
        return False
    base = os.path.join(data_dir, JSON_DIR)
    if not os.path.isdir(base):
        return False
    for split in sorted(os.listdir(base)):
        split_dir = os.path.join(base, split)
        if not os.path.isdir(split_dir):
            continue
        if os.path.isfile(os.path.join(split_dir, GENERATED_MARKER)):
            return True
        for root, _dirs, files in os.walk(split_dir):
            if TRAJ_FILE in files:
                try:
                    with open(os.path.join(root, TRAJ_FILE)) as f:
                        if "generator" in json.load(f):
                            return True
                except (OSError, ValueError):
                    pass
                break  # one game per split is enough: a split is either generated or real
    return False


def task_type_id(name_or_id: str | int) -> int:
    if isinstance(name_or_id, int) or str(name_or_id).isdigit():
        tid = int(name_or_id)
        if tid not in TASK_TYPES:
            raise ValueError(f"unknown task type id {tid}; expected 1..6")
        return tid
    if name_or_id not in TASK_TYPE_IDS:
        raise ValueError(f"unknown task type {name_or_id!r}")
    return TASK_TYPE_IDS[name_or_id]
