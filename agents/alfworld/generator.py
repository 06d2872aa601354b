"""Offline ALFWorld game generator.

Writes games in ALFWorld's own on-disk format,
``DIR/json_2.1.1/<split>/<task>-<Obj>-<MRecep|None>-<Recep>-<scene>/trial_*/{traj_data.json, game.tw-pddl}``,
built only from what the ``alfworld`` wheel ships: the AI2-THOR floor-plan layouts
(``alfworld/gen/layouts/FloorPlan*-objects.json`` / ``-openable.json``), ``alfworld.gen.constants`` (receptacle
types, which objects fit where, cleanable/heatable/coolable/...), the goal library
(``alfworld.gen.goal_library.gdict``: PDDL goals and task-text templates), the PDDL domain ``alfred.pddl`` and
the grammar ``alfred.twl2``.

What follows ALFRED (see ``agents/alfworld/README.md`` for what still differs):

- **scene split**: ``valid_unseen`` uses only ALFRED's held-out floor plans 10, 219, 308, 424; ``train`` and
  ``valid_seen`` use every other floor plan (:func:`agents.alfworld.assets.scene_numbers`);
- **task mix**: the per-type counts of the real split (:data:`agents.alfworld.assets.REAL_SPLIT_COUNTS`), exactly
  for the real sizes (3553 / 140 / 134) and proportional otherwise (:func:`type_counts`, largest remainder);
- **locations**: receptacles whose layout poses coincide share one location, as ALFRED's PDDL puts receptacles at
  the grid pose the agent interacts from (``loc|x/0.25|z/0.25|rotation/90|horizon``);
- **objects**: every pickupable class the floor plan lists, 1-3 instances each, the target 1-4 times (ALFRED's
  ``MAX_NUM_OF_OBJ_INSTANCES`` = 3 and ``PICKUP_REPEAT_MAX`` = 4).

Each candidate game is validated by ALFWorld's handcoded expert (with the move/put fix, see
:mod:`agents.alfworld.expert`) on the real engine and stored with the expert's walkthrough; games the expert
cannot win within the 50-step episode limit are dropped and counted. Fast Downward's planner is never run.

Robust runs: candidates are drawn only from floor plans where the task type is feasible; a game that finds no
solvable candidate in ``max_attempts`` is skipped and reported (the run goes on). Games are written atomically
(a temporary folder renamed into place) and ``generated.json`` in the split folder records the arguments, so an
interrupted run resumes: re-running the same command keeps every finished game and writes only the missing ones.

Determinism: game ``i`` of (split, seed, num_games, task types) depends only on those values, so the same command
line writes byte-identical files.
"""
from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import tempfile
import time
import warnings
from dataclasses import dataclass, field
from typing import Callable, Iterable

from agents.alfworld import assets
from agents.alfworld.assets import GAME_FILE, GENERATED_MARKER, JSON_DIR, TASK_TYPES, TRAJ_FILE
from agents.alfworld.disjoint import excluded_keys, goal_key, opening_digest

#: bump when the same arguments would produce different games (resume refuses to mix versions)
GENERATOR_VERSION = 2

# Lamps are toggled in look_at_obj_in_light; they stand on furniture and cannot be picked up.
LAMPS = ("DeskLamp", "FloorLamp")
LAMP_SURFACES = ("Desk", "SideTable", "Dresser", "CoffeeTable", "DiningTable", "TVStand", "Shelf", "CounterTop")
# receptacle classes whose instances the layouts do not list: how many to create (AI2-THOR stoves have 4 burners)
EXTRA_COUNTS = {"StoveBurner": (4, 4)}
# ALFRED's scene initialisation: up to 3 instances of an object class, the pickup target 1-4 times
INSTANCES = (1, 1, 1, 2, 2, 3)
TARGET_INSTANCES = (1, 2, 3, 4)
TARGET_INSTANCES_PICK_TWO = (2, 3, 4)


def escape_id(text: str) -> str:
    """ALFRED object id -> PDDL name (``|``->``_bar_``, ``-``->``_minus_``, ``+``->``_plus_``, ``.``->``_dot_``,
    ``,``->``_comma_``), the escaping ALFWorld's Demangler undoes."""
    text = text.replace("-", "_minus_")
    for a, b in (("|", "_bar_"), ("+", "_plus_"), (".", "_dot_"), (",", "_comma_")):
        text = text.replace(a, b)
    return text


def _seeded(*parts) -> random.Random:
    digest = hashlib.blake2b("|".join(map(str, parts)).encode(), digest_size=8).digest()
    return random.Random(int.from_bytes(digest, "little"))


def _coord(v: float) -> str:
    return f"{v:+06.2f}"


@dataclass
class Receptacle:
    id: str  # ALFRED-style id, e.g. Cabinet|+00.68|+00.50|-02.20 or Sink|...|SinkBasin
    rtype: str
    location: str  # loc|x|z|rot|horizon


@dataclass
class Obj:
    id: str
    otype: str
    parent: Receptacle


@dataclass
class Scene:
    scene_num: int
    receptacles: list[Receptacle]
    objects: list[Obj] = field(default_factory=list)
    agent_location: str = ""


@dataclass
class TaskSpec:
    task_type: str
    object_target: str
    parent_target: str = ""
    toggle_target: str = ""


@dataclass
class GenStats:
    written: int = 0
    dropped_unsolvable: int = 0
    rejected_candidates: int = 0  # sampled task impossible in the sampled scene (no game built)
    task_types: dict[str, int] = field(default_factory=dict)  # of the games written by this run
    kept: int = 0  # finished games found on disk (resumed run) and kept
    skipped: list[int] = field(default_factory=list)  # game indices with no solvable candidate in max_attempts
    seconds: float = 0.0

    def as_dict(self) -> dict:
        return {"written": self.written, "kept": self.kept, "skipped": list(self.skipped),
                "dropped_unsolvable": self.dropped_unsolvable, "rejected_candidates": self.rejected_candidates,
                "task_types": dict(sorted(self.task_types.items())), "seconds": round(self.seconds, 2)}


# --------------------------------------------------------------------------------------------- rules
class Rules:
    """What ALFRED's constants allow: receptacle classes, which objects fit where, object affordances."""

    def __init__(self) -> None:
        c = assets.constants()
        self.static_receptacles = set(c.RECEPTACLES) - set(c.MOVABLE_RECEPTACLES)
        self.movable_receptacles = set(c.MOVABLE_RECEPTACLES)
        self.openable = set(c.OPENABLE_CLASS_LIST)
        self.fits = {r: set(objs) for r, objs in c.VAL_RECEPTACLE_OBJECTS.items()}
        self.actions = {k: set(v) for k, v in c.VAL_ACTION_OBJECTS.items()}
        pickupable = set()
        for objs in self.fits.values():
            pickupable |= {o for o in objs if "Sliced" not in o}
        self.pickupable = pickupable
        self.all_types = sorted(set(c.OBJECTS))

    def receptacles_for(self, otype: str, scene: Scene, exclude: Iterable[str] = ()) -> list[Receptacle]:
        ex = set(exclude)
        return [r for r in scene.receptacles if otype in self.fits.get(r.rtype, ()) and r.rtype not in ex]


# --------------------------------------------------------------------------------------------- scenes
def _loc(x: float, z: float, rot: float, hor: float) -> str:
    """ALFRED's location name for an interaction pose: grid cell (0.25 m), rotation index (0-3), camera horizon."""
    return f"loc|{int(round(x / 0.25))}|{int(round(z / 0.25))}|{int(round(rot / 90)) % 4}|{int(round(hor))}"


def build_receptacles(scene_num: int, rules: Rules, rng: random.Random) -> list[Receptacle]:
    """Receptacle instances of a floor plan: the layout's listed ones with their ids and poses (receptacles with the
    same pose share a location, as in ALFRED), plus synthesized instances of each other receptacle class the floor
    plan contains (their poses are not in the wheel: random, one location each)."""
    types, poses = assets.scene_layout(scene_num)
    present = set(types)
    used_locs: set[str] = set()

    recs: list[Receptacle] = []
    seen_types = set()
    for rid in sorted(poses):
        cls = rid.split("|", 1)[0]
        x, z, rot, hor = poses[rid]
        if cls == "Sink":
            rid, rtype = rid + "|SinkBasin", "SinkBasin"
        elif cls == "Bathtub":
            rid, rtype = rid + "|BathtubBasin", "BathtubBasin"
        else:
            rtype = cls
        if rtype not in rules.static_receptacles or not rules.fits.get(rtype):
            continue
        loc = _loc(x, z, rot, hor)
        used_locs.add(loc)
        recs.append(Receptacle(rid, rtype, loc))
        seen_types.add(rtype)
    # receptacle classes the floor plan has but the layout does not list
    for cls in sorted(present):
        rtype = {"Sink": "SinkBasin", "Bathtub": "BathtubBasin"}.get(cls, cls)
        if rtype in seen_types or rtype not in rules.static_receptacles or not rules.fits.get(rtype):
            continue
        lo, hi = EXTRA_COUNTS.get(rtype, (1, 1))
        for _ in range(rng.randint(lo, hi)):
            x, y, z = rng.uniform(-3, 3), rng.uniform(0, 2), rng.uniform(-3, 3)
            base = f"{rtype.replace('Basin', '') if rtype.endswith('Basin') else rtype}|{_coord(x)}|{_coord(y)}|{_coord(z)}"
            rid = base + ("|" + rtype if rtype.endswith("Basin") else "")
            rot, hor = rng.choice([0, 90, 180, 270]), rng.choice([0, 30, 60])
            loc = _loc(x, z, rot, hor)
            while loc in used_locs:  # a synthesized receptacle never joins a real pose's location by accident
                x += 0.25
                loc = _loc(x, z, rot, hor)
            used_locs.add(loc)
            recs.append(Receptacle(rid, rtype, loc))
        seen_types.add(rtype)
    return recs


def feasible_tasks(task_type: str, scene_types: set[str], recs: list[Receptacle], rules: Rules) -> list[TaskSpec]:
    """Every (object, receptacle[, lamp]) combination of ``task_type`` the scene allows."""
    rtypes = {r.rtype for r in recs}
    objs = sorted(scene_types & rules.pickupable)
    out: list[TaskSpec] = []

    def placeable_elsewhere(o: str, goal_rtype: str | None) -> bool:
        return any(o in rules.fits.get(rt, ()) for rt in rtypes if rt != goal_rtype)

    if task_type == "look_at_obj_in_light":
        lamps = [lamp for lamp in LAMPS if lamp in scene_types]
        if not lamps or not rtypes & set(LAMP_SURFACES):
            return []
        for lamp in lamps:
            for o in objs:
                if placeable_elsewhere(o, None):
                    out.append(TaskSpec(task_type, o, "", lamp))
        return out
    need = {"pick_clean_then_place_in_recep": ("Cleanable", "SinkBasin"),
            "pick_heat_then_place_in_recep": ("Heatable", "Microwave"),
            "pick_cool_then_place_in_recep": ("Coolable", "Fridge")}.get(task_type)
    if need is not None:
        affordance, appliance = need
        if appliance not in rtypes:
            return []
        objs = [o for o in objs if o in rules.actions[affordance]]
    for o in objs:
        for rt in sorted(rtypes):
            if o not in rules.fits.get(rt, ()) or (need is not None and rt in (need[1], "SinkBasin", "BathtubBasin")):
                continue
            if placeable_elsewhere(o, rt):
                out.append(TaskSpec(task_type, o, rt))
    return out


def populate(scene: Scene, spec: TaskSpec, scene_types: set[str], rules: Rules, rng: random.Random,
             max_distractor_types: int | None = None) -> None:
    """Place the target object(s), a lamp when needed, and every other pickupable class of the floor plan
    (``max_distractor_types`` caps the number of classes; None = all, as in ALFRED's scenes) in receptacles that
    may hold them. No instance of the target starts in a receptacle of the goal class (the goal would hold at the
    start)."""
    def new_id(otype: str) -> str:
        while True:
            oid = f"{otype}|{_coord(rng.uniform(-3, 3))}|{_coord(rng.uniform(0, 2))}|{_coord(rng.uniform(-3, 3))}"
            if all(o.id != oid for o in scene.objects):
                return oid

    def place(otype: str, n: int, exclude: Iterable[str] = ()) -> None:
        cands = rules.receptacles_for(otype, scene, exclude)
        for _ in range(n):
            if not cands:
                return
            parent = rng.choice(cands)
            scene.objects.append(Obj(new_id(otype), otype, parent))

    goal_rtype = spec.parent_target or None
    counts = TARGET_INSTANCES_PICK_TWO if spec.task_type == "pick_two_obj_and_place" else TARGET_INSTANCES
    place(spec.object_target, rng.choice(counts), exclude=[goal_rtype] if goal_rtype else [])
    if spec.toggle_target:
        surfaces = [r for r in scene.receptacles if r.rtype in LAMP_SURFACES]
        parent = rng.choice(surfaces)
        scene.objects.append(Obj(new_id(spec.toggle_target), spec.toggle_target, parent))
    others = sorted((scene_types & rules.pickupable) - {spec.object_target})
    if max_distractor_types is not None and len(others) > max_distractor_types:
        rng.shuffle(others)
        others = sorted(others[:max_distractor_types])
    for otype in others:
        # a goal-class receptacle never starts holding the target class; distractors go anywhere they fit
        place(otype, rng.choice(INSTANCES))


# --------------------------------------------------------------------------------------------- PDDL
def problem_pddl(name: str, scene: Scene, spec: TaskSpec, rules: Rules) -> str:
    """The PDDL problem in ALFWorld's conventions (escaped ALFRED ids, one location per receptacle)."""
    e = escape_id
    rtypes_all = sorted(rules.static_receptacles)
    otypes_all = sorted(t for t in rules.all_types if t not in rules.static_receptacles)
    objects = ["agent1 - agent"]
    objects += [f"{e(o.id)} - object" for o in scene.objects]
    objects += [f"{e(r.id)} - receptacle" for r in scene.receptacles]
    locs = sorted({r.location for r in scene.receptacles} | {scene.agent_location})
    objects += [f"{e(loc)} - location" for loc in locs]
    objects += [f"{t}Type - otype" for t in otypes_all]
    objects += [f"{t}Type - rtype" for t in rtypes_all]

    init = [f"(atLocation agent1 {e(scene.agent_location)})"]
    scene_otypes = sorted({o.otype for o in scene.objects})
    for r in scene.receptacles:
        init.append(f"(receptacleType {e(r.id)} {r.rtype}Type)")
        init.append(f"(receptacleAtLocation {e(r.id)} {e(r.location)})")
        if r.rtype in rules.openable:
            init.append(f"(openable {e(r.id)})")
    for o in scene.objects:
        oid = e(o.id)
        init.append(f"(objectType {oid} {o.otype}Type)")
        init.append(f"(inReceptacle {oid} {e(o.parent.id)})")
        init.append(f"(objectAtLocation {oid} {e(o.parent.location)})")
        if o.otype in rules.pickupable:
            init.append(f"(pickupable {oid})")
        if o.otype in rules.movable_receptacles:
            init.append(f"(isReceptacleObject {oid})")
        for affordance, pred in (("Cleanable", "cleanable"), ("Heatable", "heatable"), ("Coolable", "coolable"),
                                 ("Sliceable", "sliceable"), ("Toggleable", "toggleable")):
            if o.otype in rules.actions[affordance]:
                init.append(f"({pred} {oid})")
    for rt in sorted({r.rtype for r in scene.receptacles}):
        for ot in scene_otypes:
            if ot in rules.fits.get(rt, ()):
                init.append(f"(canContain {rt}Type {ot}Type)")

    goal = assets.goal_library()[spec.task_type]["pddl"].format(
        obj=spec.object_target, recep=spec.parent_target, toggle=spec.toggle_target, mrecep="")
    goal = goal.replace(" # ", " - ").replace("#", "-")
    body = "\n".join([
        f"(define (problem {name})",
        "(:domain alfred)",
        "(:objects",
        *objects,
        ")",
        "(:init",
        *init,
        ")",
    ])
    # the goal-library entry ends with the parenthesis closing ``define``
    return body + "\n" + goal.strip() + "\n"


def task_text(spec: TaskSpec, rng: random.Random) -> str:
    template = rng.choice(assets.goal_library()[spec.task_type]["templates"])
    return template.format(obj=spec.object_target.lower(), recep=spec.parent_target.lower(),
                           toggle=spec.toggle_target.lower(), mrecep="")


# --------------------------------------------------------------------------------------------- writing
def game_dir_name(spec: TaskSpec, scene_num: int) -> str:
    recep = spec.toggle_target if spec.task_type == "look_at_obj_in_light" else spec.parent_target
    return f"{spec.task_type}-{spec.object_target}-None-{recep}-{scene_num}"


# --------------------------------------------------------------------------------------------- task mix
def type_counts(split: str, num_games: int, task_types: Iterable[int] = (1, 2, 3, 4, 5, 6)) -> dict[int, int]:
    """Games per task type id for ``num_games`` games of ``split``: the real split's per-type counts restricted to
    ``task_types``, scaled to ``num_games`` with largest-remainder rounding (floors first, then one more game to the
    types with the largest fractional parts; ties go to the type with more real games, then the lower id). For the
    real sizes (train 3553, valid_seen 140, valid_unseen 134, all six types) this is exactly the real mix."""
    if split not in assets.REAL_SPLIT_COUNTS:
        raise ValueError(f"unknown split {split!r}; expected one of {assets.SPLITS}")
    ids = sorted({assets.task_type_id(t) for t in task_types})
    if not ids:
        raise ValueError("no task types")
    if num_games < 0:
        raise ValueError(f"num_games must be >= 0, got {num_games}")
    real = assets.REAL_SPLIT_COUNTS[split]
    total = sum(real[t] for t in ids)
    quotas = {t: num_games * real[t] / total for t in ids}
    counts = {t: int(quotas[t]) for t in ids}
    order = sorted(ids, key=lambda t: (-(quotas[t] - counts[t]), -real[t], t))
    for t in order[: num_games - sum(counts.values())]:
        counts[t] += 1
    return counts


def type_schedule(split: str, num_games: int, task_types: Iterable[int] = (1, 2, 3, 4, 5, 6)) -> list[str]:
    """Task type name of each game index: :func:`type_counts` interleaved so that every prefix of the run is close
    to the target mix (game ``i`` takes the type furthest behind its share of the first ``i + 1`` games)."""
    counts = type_counts(split, num_games, task_types)
    done = {t: 0 for t in counts}
    out = []
    for i in range(num_games):
        t = max(counts, key=lambda k: (counts[k] * (i + 1) / num_games - done[k], -k))
        done[t] += 1
        out.append(TASK_TYPES[t])
    return out


_FEASIBLE: dict[tuple[str, str], list[int]] = {}


def feasible_scenes(split: str, task_type: str, rules: Rules) -> list[int]:
    """Floor plans of ``split`` where ``task_type`` has at least one feasible (object, receptacle) combination."""
    key = (split, task_type)
    if key not in _FEASIBLE:
        out = []
        for n in assets.scene_numbers(split):
            recs = build_receptacles(n, rules, random.Random(0))  # receptacle classes do not depend on the rng
            if feasible_tasks(task_type, set(assets.scene_layout(n)[0]), recs, rules):
                out.append(n)
        _FEASIBLE[key] = out
    return _FEASIBLE[key]


def subset_receptacles(recs: list[Receptacle], spec: TaskSpec, rules: Rules, rng: random.Random,
                       max_receptacles: int) -> list[Receptacle]:
    """At most ``max_receptacles`` of ``recs`` (an easier, documented subset: shorter search), keeping what
    ``spec`` needs: one receptacle of the goal class, the task's appliance (sink basin / microwave / fridge), a lamp
    surface for ``look_at_obj_in_light``, and one receptacle outside the goal class that can hold the target object
    (where it starts). The rest is a seeded random choice; the kept receptacles stay in their original order."""
    appliance = {"pick_clean_then_place_in_recep": "SinkBasin", "pick_heat_then_place_in_recep": "Microwave",
                 "pick_cool_then_place_in_recep": "Fridge"}.get(spec.task_type)
    goal = spec.parent_target or None
    keep: list[int] = []

    def need(pred) -> None:
        if any(pred(recs[i]) for i in keep):
            return
        cands = [i for i, r in enumerate(recs) if pred(r)]
        if cands:
            keep.append(rng.choice(cands))

    if goal:
        need(lambda r: r.rtype == goal)
    if appliance:
        need(lambda r: r.rtype == appliance)
    if spec.toggle_target:
        need(lambda r: r.rtype in LAMP_SURFACES)
    need(lambda r: r.rtype != goal and spec.object_target in rules.fits.get(r.rtype, ()))
    rest = [i for i in range(len(recs)) if i not in keep]
    rng.shuffle(rest)
    keep += rest[: max(0, max_receptacles - len(keep))]
    return [recs[i] for i in sorted(keep)]


def _sample_candidate(split: str, seed: int, index: int, attempt: int, task_type: str, rules: Rules,
                      max_distractor_types: int | None = None, max_receptacles: int | None = None):
    rng = _seeded("alfworld-gen", GENERATOR_VERSION, split, seed, index, attempt)
    scenes = feasible_scenes(split, task_type, rules)
    if not scenes:
        return None
    scene_num = rng.choice(scenes)
    scene_types = set(assets.scene_layout(scene_num)[0])
    recs = build_receptacles(scene_num, rules, rng)
    specs = feasible_tasks(task_type, scene_types, recs, rules)
    if not specs:
        return None
    spec = rng.choice(specs)
    if max_receptacles is not None:
        recs = subset_receptacles(recs, spec, rules, rng, max_receptacles)
    scene = Scene(scene_num, recs)
    gx = rng.randint(-40, 40)
    scene.agent_location = f"loc|{gx}|{rng.randint(-40, 40)}|{rng.randint(0, 3)}|30"
    while scene.agent_location in {r.location for r in recs}:
        gx += 1
        scene.agent_location = f"loc|{gx}|0|0|30"
    populate(scene, spec, scene_types, rules, rng, max_distractor_types=max_distractor_types)
    n_target = sum(o.otype == spec.object_target for o in scene.objects)
    if n_target < (2 if spec.task_type == "pick_two_obj_and_place" else 1):
        return None
    text = task_text(spec, rng)
    return rng, scene, spec, text


# --------------------------------------------------------------------------------------------- resume
def _run_args(split: str, seed: int, num_games: int, ids: list[int], max_distractor_types: int | None,
              max_receptacles: int | None = None) -> dict:
    args = {"tool": "agents.alfworld.generator", "version": GENERATOR_VERSION, "split": split, "seed": seed,
            "num_games": num_games, "task_types": ids, "max_distractor_types": max_distractor_types}
    if max_receptacles is not None:  # recorded only when used: older markers (full rooms) still resume
        args["max_receptacles"] = max_receptacles
    return args


def _write_json_atomic(path: str, obj: dict) -> None:
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp-", suffix=".json")
    with os.fdopen(fd, "w") as f:
        json.dump(obj, f, indent=1, sort_keys=True)
    os.replace(tmp, path)


def _check_resume(split_dir: str, args: dict) -> None:
    """Refuse to mix runs: an existing split folder must come from the same generator arguments."""
    marker = os.path.join(split_dir, GENERATED_MARKER)
    if os.path.isfile(marker):
        with open(marker) as f:
            old = json.load(f).get("args", {})
        if old != args:
            diff = {k: (old.get(k), v) for k, v in args.items() if old.get(k) != v}
            raise ValueError(f"{split_dir} holds games generated with other arguments {diff} (existing, requested); "
                             "re-run with the same arguments to resume, or use another --out")
        return
    for _root, _dirs, files in os.walk(split_dir):
        if TRAJ_FILE in files:
            raise ValueError(f"{split_dir} already holds games that this generator version did not write "
                             f"(no {GENERATED_MARKER}); use another --out")


def _existing_games(split_dir: str, seed: int) -> dict[int, str]:
    """index -> task type of the finished games of this run found on disk (both files readable, solvable)."""
    prefix = f"trial_G{seed}_"
    out: dict[int, str] = {}
    for gdir in os.listdir(split_dir):
        full = os.path.join(split_dir, gdir)
        if gdir.startswith(".") or not os.path.isdir(full):
            continue
        for trial in os.listdir(full):
            if not trial.startswith(prefix):
                continue
            try:
                with open(os.path.join(full, trial, TRAJ_FILE)) as f:
                    traj = json.load(f)
                with open(os.path.join(full, trial, GAME_FILE)) as f:
                    ok = json.load(f).get("solvable") and traj["generator"]["seed"] == seed
                if ok:
                    out[int(traj["generator"]["index"])] = traj["task_type"]
            except (OSError, ValueError, KeyError, TypeError):
                continue  # unreadable: regenerated (written atomically, so this means outside damage)
    return out


# --------------------------------------------------------------------------------------------- generate
@dataclass(frozen=True)
class _GameJob:
    """Everything one game index needs (picklable: a worker process builds the game from it alone)."""

    out_split_dir: str
    split: str
    seed: int
    index: int
    task_type: str
    max_attempts: int
    max_steps: int
    expert_tries: int
    max_distractor_types: int | None
    max_receptacles: int | None
    # goal keys and opening digests (agents.alfworld.disjoint) of other splits: a candidate matching one is rejected
    exclude_goals: frozenset = frozenset()
    exclude_openings: frozenset = frozenset()


@dataclass
class _GameResult:
    index: int
    task_type: str | None = None  # of the game written; None: skipped
    dropped_unsolvable: int = 0
    rejected_candidates: int = 0


_WORKER: dict = {}  # per process: the engine, rules and assets text, built on a process's first game


def _make_game(job: _GameJob) -> _GameResult:
    """Build, expert-validate and write game ``job.index`` (its candidates depend only on split, seed, index and
    attempt, so any process can make any game and the files are the same)."""
    from agents.alfworld.engine import GameEngine
    from agents.alfworld.expert import run_expert

    if not _WORKER:
        from agents.alfworld.engine import DiskCache, disk_cache_dir

        disk = disk_cache_dir()  # one DiskCache per process (its versions tag reads package metadata)
        _WORKER.update(engine=GameEngine(cache_size=2, request_facts=True, disk_cache=None), rules=Rules(),
                       domain=assets.domain_text(), grammar=assets.grammar_text(),
                       disk=DiskCache(disk) if disk else None)
    engine, rules = _WORKER["engine"], _WORKER["rules"]
    res = _GameResult(job.index)
    for attempt in range(job.max_attempts):
        cand = _sample_candidate(job.split, job.seed, job.index, attempt, job.task_type, rules,
                                 job.max_distractor_types, job.max_receptacles)
        if cand is None:
            res.rejected_candidates += 1
            continue
        rng, scene, spec, text = cand
        if goal_key(scene.scene_num, spec.object_target, spec.parent_target) in job.exclude_goals:
            res.rejected_candidates += 1  # another split's (floor plan, goal object, goal receptacle)
            continue
        trial = f"trial_G{job.seed}_{job.index:06d}_{attempt:02d}"
        name = f"plan_{job.split}_{trial}"
        game = {
            "pddl_domain": _WORKER["domain"],
            "grammar": _WORKER["grammar"].replace("UNKNOWN GOAL", text),
            "pddl_problem": problem_pddl(name, scene, spec, rules),
            "solvable": False,
        }
        pddl_params = {"object_target": spec.object_target, "parent_target": spec.parent_target,
                       "toggle_target": spec.toggle_target, "mrecep_target": "", "object_sliced": False}
        traj = {
            "task_id": trial,
            "task_type": spec.task_type,
            "pddl_params": pddl_params,
            "scene": {"floor_plan": f"FloorPlan{scene.scene_num}", "scene_num": scene.scene_num},
            "turk_annotations": {"anns": [{"task_desc": text, "high_descs": [], "votes": []}]},
            "generator": {"tool": "agents.alfworld.generator", "version": GENERATOR_VERSION,
                          "split": job.split, "seed": job.seed, "index": job.index, "attempt": attempt,
                          "note": "ALFWorld format and rules; not ALFWorld's task distribution"},
        }
        tmp_dir = tempfile.mkdtemp(prefix=f"alfworld-gen-{job.index}-")
        try:
            tmp_game = os.path.join(tmp_dir, GAME_FILE)
            with open(tmp_game, "w") as f:
                json.dump(game, f)
            best, opening = None, ""
            for k in range(job.expert_tries):
                walk = run_expert(engine, tmp_game, spec.task_type, pddl_params,
                                  seed=int(rng.random() * 2**31) + k, max_steps=job.max_steps)
                if walk is not None and (best is None or len(walk) < len(best)):
                    best = walk
            if best is not None:  # the game is loaded: its first observation identifies it across splits
                opening = opening_digest(engine.reset()["feedback"])
                if opening in job.exclude_openings:
                    best = None
                    res.rejected_candidates += 1
            if best is not None and _WORKER["disk"]:
                # the translation made for the expert, stored under the written file's key: SFT demonstrations,
                # evaluation and RL load it instead of translating the game again (~0.15 s a game on 2 cores)
                final = dict(game, solvable=True, walkthrough=best)
                engine.cache_translation_as(tmp_game, final, _game_text(final).encode(), _WORKER["disk"])
            engine.close()
        finally:
            shutil.rmtree(tmp_dir, ignore_errors=True)
        if best is None:
            if not opening or opening not in job.exclude_openings:
                res.dropped_unsolvable += 1
            continue
        traj["generator"]["opening"] = opening
        game["solvable"] = True
        game["walkthrough"] = best
        _write_game(job.out_split_dir, game_dir_name(spec, scene.scene_num), trial, game, traj)
        res.task_type = spec.task_type
        return res
    return res


def generate(out: str, split: str, num_games: int, seed: int, task_types: Iterable[int] = (1, 2, 3, 4, 5, 6),
             max_attempts: int = 40, max_steps: int = 50, expert_tries: int = 3,
             max_distractor_types: int | None = None, max_receptacles: int | None = None,
             progress: Callable[[int, int], None] | None = None, workers: int = 1,
             exclude_splits: Iterable[str] = ()) -> GenStats:
    """Write ``num_games`` expert-validated games of ``split`` under ``out/json_2.1.1/<split>/``.

    Task types follow :func:`type_schedule` (the real split's mix over ``task_types``). Candidates the expert
    cannot win within ``max_steps`` commands (best of ``expert_tries`` seeds) are dropped and counted in
    ``GenStats.dropped_unsolvable``; a game with no solvable candidate in ``max_attempts`` is skipped and listed in
    ``GenStats.skipped`` (the run continues). Re-running the same command resumes: finished games are kept
    (``GenStats.kept``). Different arguments on an existing split folder raise ValueError (nothing is touched).

    Easier subsets (documented as such wherever used; None = ALFRED's full rooms): ``max_distractor_types`` caps
    the other object classes placed, ``max_receptacles`` the receptacles of a room (:func:`subset_receptacles`).

    ``exclude_splits``: split folders (``<root>/json_2.1.1/<split>``) whose games this split must not repeat: a
    candidate with one of their goal keys (floor plan, goal object, goal receptacle) or first observations is
    rejected (:mod:`agents.alfworld.disjoint`); validation and test splits are generated this way.

    ``workers`` > 1 builds games in that many processes (each game depends only on its index, so the files are the
    same as with one process); ``progress`` then counts games as they finish, in any order.
    """
    if split not in assets.SPLITS:
        raise ValueError(f"unknown split {split!r}; expected one of {assets.SPLITS}")
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    ids = sorted({assets.task_type_id(t) for t in task_types})
    if max_receptacles is not None and max_receptacles < 3:
        raise ValueError(f"max_receptacles must be >= 3 (goal, start and appliance receptacles), got {max_receptacles}")
    if max_distractor_types is not None and max_distractor_types < 0:
        raise ValueError(f"max_distractor_types must be >= 0, got {max_distractor_types}")
    schedule = type_schedule(split, num_games, ids)
    stats = GenStats()
    t0 = time.perf_counter()
    split_dir = os.path.join(out, JSON_DIR, split)
    os.makedirs(split_dir, exist_ok=True)
    exclude_dirs = sorted(os.path.abspath(d) for d in exclude_splits)
    ex_goals, ex_openings = excluded_keys(exclude_dirs) if exclude_dirs else (frozenset(), frozenset())
    args = _run_args(split, seed, num_games, ids, max_distractor_types, max_receptacles)
    if exclude_dirs:  # recorded only when used: older markers still resume
        digest = hashlib.sha1("\n".join(sorted(ex_goals) + sorted(ex_openings)).encode()).hexdigest()[:16]
        args["exclude"] = {"splits": exclude_dirs, "keys_sha1": digest}
    _check_resume(split_dir, args)
    marker = os.path.join(split_dir, GENERATED_MARKER)
    _write_json_atomic(marker, {"args": args, "complete": False,
                                "type_counts": {TASK_TYPES[t]: n for t, n in type_counts(split, num_games, ids).items()},
                                "note": "generated by agents.alfworld.generator: ALFWorld's format and rules, not "
                                        "its human-validated games; results are not comparable to published numbers"})
    for name in os.listdir(split_dir):  # leftovers of an interrupted run (never renamed into place)
        if name.startswith(".tmp-"):
            shutil.rmtree(os.path.join(split_dir, name), ignore_errors=True)
    existing = _existing_games(split_dir, seed)
    jobs = []
    for index, task_type in enumerate(schedule):
        if existing.get(index) == task_type:
            stats.kept += 1
        else:
            jobs.append(_GameJob(split_dir, split, seed, index, task_type, max_attempts, max_steps, expert_tries,
                                 max_distractor_types, max_receptacles, ex_goals, ex_openings))
    done = stats.kept
    if progress is not None and done:
        progress(done, num_games)
    results = []
    if workers > 1 and len(jobs) > 1:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor, as_completed

        # spawn, not fork: the caller may hold threads (a fork would copy their locks mid-use)
        with ProcessPoolExecutor(min(workers, len(jobs)), mp_context=multiprocessing.get_context("spawn")) as pool:
            for fut in as_completed([pool.submit(_make_game, job) for job in jobs]):
                results.append(fut.result())
                done += 1
                if progress is not None:
                    progress(done, num_games)
    else:
        for job in jobs:
            results.append(_make_game(job))
            done += 1
            if progress is not None:
                progress(done, num_games)
        _WORKER.clear()  # this process's engine: not kept between calls
    for res in sorted(results, key=lambda r: r.index):
        stats.dropped_unsolvable += res.dropped_unsolvable
        stats.rejected_candidates += res.rejected_candidates
        if res.task_type is None:
            stats.skipped.append(res.index)
            warnings.warn(f"game {res.index} ({schedule[res.index]}, {split}): no solvable candidate in "
                          f"{max_attempts} attempts; skipped", RuntimeWarning, stacklevel=2)
        else:
            stats.written += 1
            stats.task_types[res.task_type] = stats.task_types.get(res.task_type, 0) + 1
    stats.seconds = time.perf_counter() - t0
    with open(marker) as f:
        info = json.load(f)
    info.update(complete=not stats.skipped, last_run=stats.as_dict())
    _write_json_atomic(marker, info)
    return stats


def _game_text(game: dict) -> str:
    """The bytes of a written game file (its translation-cache key is computed from them)."""
    return json.dumps(game, indent=1)


def _write_game(split_dir: str, dirname: str, trial: str, game: dict, traj: dict) -> None:
    """Write both files of a game into a hidden temporary folder, then rename it into place (atomic: a game folder
    either is complete or does not exist, whatever interrupts the run)."""
    tmp = os.path.join(split_dir, f".tmp-{trial}-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    with open(os.path.join(tmp, GAME_FILE), "w") as f:
        f.write(_game_text(game))
    with open(os.path.join(tmp, TRAJ_FILE), "w") as f:
        json.dump(traj, f, indent=1, sort_keys=True)
    final_parent = os.path.join(split_dir, dirname)
    os.makedirs(final_parent, exist_ok=True)
    final = os.path.join(final_parent, trial)
    if os.path.isdir(final):  # a damaged copy of the same game: replace it
        shutil.rmtree(final)
    os.rename(tmp, final)
