"""The generator's easier-subset options (--max-receptacles, --max-distractor-types) on the real engine; the
default (ALFRED's full rooms) is untouched."""
from __future__ import annotations

import json
import os

import pytest

from agents.alfworld.generator import _run_args, generate


def _games(root: str, split: str):
    base = os.path.join(root, "json_2.1.1", split)
    for d, _dirs, files in os.walk(base):
        if "game.tw-pddl" in files:
            with open(os.path.join(d, "game.tw-pddl")) as f:
                game = json.load(f)
            with open(os.path.join(d, "traj_data.json")) as f:
                yield game, json.load(f)


def test_max_receptacles_caps_rooms_through_the_cli(tmp_path, capsys):
    from agents.alfworld.__main__ import main

    root = str(tmp_path / "r4")
    rc = main(["generate", "--out", root, "--split", "train", "--num-games", "6", "--task-types", "1,2,3,4,5,6",
               "--max-receptacles", "4", "--max-distractor-types", "2", "--no-progress"])
    stats = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    # bug caught: a subset that drops the goal/appliance/start receptacle makes games unsolvable (skipped)
    assert rc == 0 and stats["written"] == 6 and not stats["skipped"], stats
    types = set()
    for game, traj in _games(root, "train"):
        problem = game["pddl_problem"]
        receptacles = [ln for ln in problem.splitlines() if ln.endswith(" - receptacle") and not ln.lstrip().startswith("?")]
        # bug caught: the option not reaching the generator (rooms keep all their receptacles)
        assert 1 <= len(receptacles) <= 4, len(receptacles)
        assert game["solvable"] and game["walkthrough"]
        types.add(traj["task_type"])
    assert len(types) == 6
    with open(os.path.join(root, "json_2.1.1", "train", "generated.json")) as f:
        args = json.load(f)["args"]
    assert args["max_receptacles"] == 4 and args["max_distractor_types"] == 2  # recorded: resume refuses a mix


def test_default_arguments_record_no_subset_key():
    # older split folders (full rooms) must still resume: their markers have no max_receptacles key.
    # Bug caught: always writing the new key, which makes every existing folder refuse to resume
    assert "max_receptacles" not in _run_args("train", 0, 4, [1], None)
    assert _run_args("train", 0, 4, [1], None, 5)["max_receptacles"] == 5


def test_max_receptacles_below_three_is_rejected_before_writing(tmp_path):
    with pytest.raises(ValueError, match="max_receptacles"):
        generate(str(tmp_path / "x"), "train", 2, seed=0, task_types=[1], max_receptacles=2)
    assert not (tmp_path / "x").exists()  # bug caught: validating after the split folder is created
