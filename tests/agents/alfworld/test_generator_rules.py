"""Fast checks of the generator's rules and the prompt/panel plumbing (no TextWorld engine)."""
from __future__ import annotations

import json
import os

import pytest

from agents.alfworld import assets
from agents.alfworld.generator import (Rules, Scene, _sample_candidate, build_receptacles, escape_id,
                                       feasible_tasks, game_dir_name, problem_pddl)
from agents.alfworld.panels import build_panel, list_games
from agents.prompts import StepMemory, render_step_prompt


def test_escape_id_matches_alfworld_demangler_convention():
    assert escape_id("Cabinet|+00.68|-02.20,x") == "Cabinet_bar__plus_00_dot_68_bar__minus_02_dot_20_comma_x"


def test_receptacles_share_a_location_exactly_when_their_layout_poses_coincide():
    import random
    from collections import defaultdict

    rules = Rules()
    shared_somewhere = 0
    for scene in (1, 10, 201, 219, 301, 308, 401, 424, 402):
        recs = build_receptacles(scene, rules, random.Random(0))
        assert len({r.id for r in recs}) == len(recs)
        _types, poses = assets.scene_layout(scene)
        by_pose = defaultdict(set)  # pose -> ids, straight from the layout file
        for rid, pose in poses.items():
            by_pose[tuple(pose)].add(rid)
        listed = {r.id.replace("|SinkBasin", "").replace("|BathtubBasin", ""): r for r in recs}
        for r_id, r in listed.items():
            same_loc = {k for k, o in listed.items() if o.location == r.location}
            if r_id in poses:
                assert same_loc == by_pose[tuple(poses[r_id])] & set(listed), (scene, r_id)
                shared_somewhere += len(same_loc) > 1
            else:  # synthesized (no pose in the wheel): a location of its own
                assert same_loc == {r_id}
        for r in recs:
            assert r.rtype in rules.static_receptacles
            if r.rtype == "SinkBasin":
                assert r.id.startswith("Sink|") and r.id.endswith("|SinkBasin")
            if r.rtype == "BathtubBasin":
                assert r.id.startswith("Bathtub|") and r.id.endswith("|BathtubBasin")
    assert shared_somewhere > 0


def test_location_names_follow_alfred_grid_convention():
    from agents.alfworld.generator import _loc

    # x, z on the 0.25 m grid, rotation as index 0-3, camera horizon in degrees
    assert _loc(-0.25, 0.75, 90, 30) == "loc|-1|3|1|30"
    assert _loc(1.0, -2.0, 270, -30) == "loc|4|-8|3|-30"


def test_kitchen_scenes_hold_every_pickupable_class_of_the_floor_plan():
    rules = Rules()
    for attempt in range(20):
        cand = _sample_candidate("train", 3, 0, attempt, "pick_heat_then_place_in_recep", rules)
        if cand is not None:
            break
    _rng, scene, spec, _text = cand
    classes = set(assets.scene_layout(scene.scene_num)[0]) & rules.pickupable
    placeable = {c for c in classes if rules.receptacles_for(c, scene)}
    present = {o.otype for o in scene.objects}
    assert placeable <= present and len(present) > 16  # more classes than the old cap of 16 distractor types
    counts = {c: sum(o.otype == c for o in scene.objects) for c in present - {spec.object_target}}
    assert max(counts.values()) <= 3 and min(counts.values()) >= 1
    assert 1 <= sum(o.otype == spec.object_target for o in scene.objects) <= 4


@pytest.mark.parametrize("task_type", sorted(assets.TASK_TYPES))
def test_candidates_are_well_formed(task_type):
    rules = Rules()
    name = assets.TASK_TYPES[task_type]
    for attempt in range(40):
        cand = _sample_candidate("train", 0, 0, attempt, name, rules)
        if cand is not None:
            break
    assert cand is not None
    _rng, scene, spec, text = cand
    pddl = problem_pddl("p", scene, spec, rules)
    assert pddl.count("(") == pddl.count(")")
    assert "(:goal" in pddl and f"{spec.object_target}Type" in pddl
    # the goal never holds at the start: no target instance starts in a goal-class receptacle
    if spec.parent_target:
        assert not any(o.otype == spec.object_target and o.parent.rtype == spec.parent_target for o in scene.objects)
    if name == "pick_two_obj_and_place":
        assert sum(o.otype == spec.object_target for o in scene.objects) >= 2
    if name == "look_at_obj_in_light":
        assert any(o.otype == spec.toggle_target for o in scene.objects)
    assert game_dir_name(spec, scene.scene_num).startswith(name + "-" + spec.object_target + "-None-")
    assert spec.object_target.lower() in text


def test_feasible_tasks_respect_appliances():
    import random

    rules = Rules()
    bedroom_types = set(assets.scene_layout(301)[0])
    recs = build_receptacles(301, rules, random.Random(0))
    assert feasible_tasks("pick_heat_then_place_in_recep", bedroom_types, recs, rules) == []
    kitchen_types = set(assets.scene_layout(1)[0])
    recs = build_receptacles(1, rules, random.Random(0))
    heat = feasible_tasks("pick_heat_then_place_in_recep", kitchen_types, recs, rules)
    assert heat and all(s.object_target in rules.actions["Heatable"] and s.parent_target != "Microwave" for s in heat)


def test_scene_split_follows_alfred():
    unseen = {10, 219, 308, 424}
    assert set(assets.scene_numbers("valid_unseen")) == unseen
    train = set(assets.scene_numbers("train"))
    assert train == set(assets.scene_numbers("valid_seen"))
    assert not train & unseen and len(train) == 116  # the wheel's 120 floor plans minus the four held out
    with pytest.raises(ValueError):
        assets.scene_numbers("test")


@pytest.mark.parametrize("task_type", sorted(assets.TASK_TYPES))
def test_sampled_scenes_never_cross_the_scene_split(task_type):
    rules = Rules()
    name = assets.TASK_TYPES[task_type]
    unseen = {10, 219, 308, 424}
    seen_scenes = {"train": set(), "valid_unseen": set()}
    for split in seen_scenes:
        for index in range(60):
            cand = _sample_candidate(split, 0, index, 0, name, rules)
            if cand is not None:
                seen_scenes[split].add(cand[1].scene_num)
    assert seen_scenes["valid_unseen"] and seen_scenes["valid_unseen"] <= unseen
    assert len(seen_scenes["train"]) > 10 and not seen_scenes["train"] & unseen


def test_real_split_sizes_give_the_real_task_mix():
    from agents.alfworld.generator import type_counts, type_schedule

    assert type_counts("train", 3553) == {1: 790, 2: 308, 3: 650, 4: 459, 5: 533, 6: 813}
    assert type_counts("valid_seen", 140) == {1: 35, 2: 13, 3: 27, 4: 16, 5: 25, 6: 24}
    assert type_counts("valid_unseen", 134) == {1: 24, 2: 18, 3: 31, 4: 23, 5: 21, 6: 17}
    sched = type_schedule("valid_unseen", 134)
    assert [sched.count(assets.TASK_TYPES[t]) for t in range(1, 7)] == [24, 18, 31, 23, 21, 17]


def test_other_sizes_are_proportional_with_largest_remainder():
    from agents.alfworld.generator import type_counts, type_schedule

    # 100 train games: quotas 22.23 8.67 18.29 12.92 15.00 22.88 -> floors 22 8 18 12 15 22 (97); the three
    # largest remainders (.92 heat, .88 pick two, .67 look) get one more
    assert type_counts("train", 100) == {1: 22, 2: 9, 3: 18, 4: 13, 5: 15, 6: 23}
    assert type_counts("train", 6) == {t: 1 for t in range(1, 7)}
    # a subset keeps the real ratio among the chosen types (valid_seen 35:13)
    assert type_counts("valid_seen", 2, [1, 2]) == {1: 1, 2: 1}
    assert type_counts("valid_seen", 48, [1, 2]) == {1: 35, 2: 13}
    for n in (0, 1, 7, 33, 500):
        c = type_counts("valid_seen", n)
        assert sum(c.values()) == n
        assert all(abs(c[t] - n * v / 140) < 1 for t, v in assets.REAL_SPLIT_COUNTS["valid_seen"].items())
    # every prefix of the schedule stays within one game of its share
    sched = type_schedule("train", 300)
    final = type_counts("train", 300)
    for i in range(1, 301):
        for t, n in final.items():
            assert abs(sched[:i].count(assets.TASK_TYPES[t]) - n * i / 300) < 1.5
    with pytest.raises(ValueError):
        type_counts("train", 5, [7])


def test_is_generated_marker_and_legacy_traj(tmp_path):
    from agents.alfworld import is_generated

    real = tmp_path / "real"
    d = real / "json_2.1.1" / "valid_seen" / "pick_and_place_simple-Apple-None-Fridge-1" / "trial_1"
    d.mkdir(parents=True)
    (d / "traj_data.json").write_text(json.dumps({"task_type": "pick_and_place_simple"}))
    assert not is_generated(str(real)) and not is_generated(str(tmp_path / "none")) and not is_generated(None)
    legacy = tmp_path / "legacy"
    d = legacy / "json_2.1.1" / "train" / "x" / "trial_G0_000000_00"
    d.mkdir(parents=True)
    (d / "traj_data.json").write_text(json.dumps({"task_type": "pick_and_place_simple", "generator": {}}))
    assert is_generated(str(legacy))
    marked = tmp_path / "marked" / "json_2.1.1" / "valid_unseen"
    marked.mkdir(parents=True)
    (marked / "generated.json").write_text("{}")
    assert is_generated(str(tmp_path / "marked"))


def test_prompt_template_renders_both_variants():
    from agents.alfworld.env import PROMPT

    mem = StepMemory(k=2)
    first = render_step_prompt(PROMPT, "put a cd in garbagecan.", mem, "-= Welcome =- ...", ["look", "go to desk 1"])
    assert "ALFRED Embodied Environment" in first and "['look'\n 'go to desk 1']" in first
    assert "Your task is to" not in first and "<think> </think>" in first  # verl-agent's first step: no task line
    mem.add("obs a", "look")
    later = render_step_prompt(PROMPT, "put a cd in garbagecan.", mem, "obs b", ["look"])
    assert "Your task is to: put a cd in garbagecan." in later and "step 2" in later
    assert "[Observation 1: 'obs a', Action 1: 'look']" in later


def _fake_game(root, split, dirname, trial, task_type, solvable=True):
    d = os.path.join(root, "json_2.1.1", split, dirname, trial)
    os.makedirs(d)
    with open(os.path.join(d, "traj_data.json"), "w") as f:
        json.dump({"task_type": task_type}, f)
    with open(os.path.join(d, "game.tw-pddl"), "w") as f:
        json.dump({"solvable": solvable}, f)


def test_panels_are_deterministic_and_filter_like_alfredtwenv(tmp_path):
    root = str(tmp_path)
    for i in range(200):
        _fake_game(root, "valid_seen", f"pick_and_place_simple-Apple-None-Fridge-{i}", "trial_1",
                   "pick_and_place_simple")
    _fake_game(root, "valid_seen", "pick_and_place_with_movable_recep-Apple-Bowl-Fridge-1", "trial_1",
               "pick_and_place_with_movable_recep")
    _fake_game(root, "valid_seen", "pick_heat_then_place_in_recep-AppleSliced-None-Fridge-1", "trial_1",
               "pick_heat_then_place_in_recep")
    _fake_game(root, "valid_seen", "pick_two_obj_and_place-Apple-None-Fridge-1", "trial_1",
               "pick_two_obj_and_place", solvable=False)
    assert len(list_games(root, "valid_seen")) == 200
    a = build_panel(root, "eval_id", "valid_seen", size=128, seed=0)
    b = build_panel(root, "eval_id", "valid_seen", size=128, seed=0)
    c = build_panel(root, "eval_id", "valid_seen", size=128, seed=1)
    assert a == b and a["num_games"] == 128 and a["games"] == sorted(a["games"])
    assert a["games"] != c["games"]
    assert all(g.startswith("json_2.1.1/valid_seen/") for g in a["games"])


def test_make_env_rejects_unknown_backend():
    from agents.alfworld.backends import make_env

    with pytest.raises(ValueError):
        make_env(backend="thor")


def test_registry_exports():
    from agents.registry import ENVIRONMENTS, spec

    assert ENVIRONMENTS["alfworld"] == "agents.alfworld.spec"
    s = spec("alfworld")
    assert callable(s.make_env) and s.prompt.first


def test_split_stats_counts_from_game_files(tmp_path):
    from agents.alfworld.check import room_type, split_stats

    d = tmp_path / "json_2.1.1" / "valid_seen" / "pick_and_place_simple-Apple-None-Fridge-12" / "trial_1"
    d.mkdir(parents=True)
    (d / "traj_data.json").write_text(json.dumps({"task_type": "pick_and_place_simple", "scene": {"scene_num": 12}}))
    problem = ("(:objects\nagent1 - agent\nApple_bar_1 - object\nMug_bar_2 - object\nMug_bar_3 - object\n"
               "Cabinet_bar_1 - receptacle\nCabinet_bar_2 - receptacle\nFridge_bar_1 - receptacle\n"
               "loc_bar_1 - location\nloc_bar_2 - location\n)\n(:init\n"
               "(receptacleAtLocation Cabinet_bar_1 loc_bar_1)\n(receptacleAtLocation Cabinet_bar_2 loc_bar_1)\n"
               "(receptacleAtLocation Fridge_bar_1 loc_bar_2)\n)\n"
               "(:goal (exists (?r - receptacle)\n(?o - object) (and (inReceptacle ?o ?r) (receptacleAtLocation ?r ?l))))")
    (d / "game.tw-pddl").write_text(json.dumps({"solvable": True, "pddl_problem": problem,
                                                "walkthrough": ["look", "go to fridge 1", "open fridge 1"]}))
    res = split_stats(str(tmp_path), "valid_seen")
    assert res["games"] == 1 and res["floor_plans"] == [12]
    assert res["expert_steps"]["pick_and_place_simple"]["mean"] == 3
    kitchen = res["per_room"]["kitchen"]
    assert kitchen["objects"]["p50"] == 3 and kitchen["receptacles"]["p50"] == 3 and kitchen["locations"]["p50"] == 2
    assert res["receptacles_sharing_a_location"] == round(2 / 3, 3)
    assert [room_type(n) for n in (1, 230, 301, 424)] == ["kitchen", "living_room", "bedroom", "bathroom"]
