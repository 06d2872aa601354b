"""Fast checks of the generator's rules and the prompt/panel plumbing (no TextWorld engine)."""
from __future__ import annotations

import json
import os

import pytest

pytest.importorskip("alfworld")

from agents.alfworld import assets
from agents.alfworld.generator import (Rules, Scene, _sample_candidate, build_receptacles, escape_id,
                                       feasible_tasks, game_dir_name, problem_pddl)
from agents.alfworld.panels import build_panel, list_games
from agents.prompts import StepMemory, render_step_prompt


def test_escape_id_matches_alfworld_demangler_convention():
    assert escape_id("Cabinet|+00.68|-02.20,x") == "Cabinet_bar__plus_00_dot_68_bar__minus_02_dot_20_comma_x"


def test_receptacles_one_location_each_and_basins_named_for_demangler():
    import random

    rules = Rules()
    for scene in (1, 201, 301, 401, 402):
        recs = build_receptacles(scene, rules, random.Random(0))
        assert len({r.location for r in recs}) == len(recs)
        assert len({r.id for r in recs}) == len(recs)
        for r in recs:
            assert r.rtype in rules.static_receptacles
            if r.rtype == "SinkBasin":
                assert r.id.startswith("Sink|") and r.id.endswith("|SinkBasin")
            if r.rtype == "BathtubBasin":
                assert r.id.startswith("Bathtub|") and r.id.endswith("|BathtubBasin")


@pytest.mark.parametrize("task_type", sorted(assets.TASK_TYPES))
def test_candidates_are_well_formed(task_type):
    rules = Rules()
    name = assets.TASK_TYPES[task_type]
    for attempt in range(40):
        cand = _sample_candidate("train", 0, 0, attempt, name, rules, 16)
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


def test_unseen_split_uses_held_out_scenes():
    assert set(assets.scene_numbers("valid_unseen")).isdisjoint(assets.scene_numbers("train"))
    with pytest.raises(ValueError):
        assets.scene_numbers("test")


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
    from agents.alfworld.env import make_env

    with pytest.raises(ValueError):
        make_env(backend="thor")


def test_registry_exports():
    from agents.registry import ENVIRONMENTS

    mod, factory, template = ENVIRONMENTS["alfworld"]
    import importlib

    m = importlib.import_module(mod)
    assert callable(getattr(m, factory)) and getattr(m, template).first
