"""Validation/test splits share no game with training: the generator's exclusion and the disjointness check, on
freshly generated splits and the real engine (agents.alfworld.disjoint)."""
from __future__ import annotations

import json
import os
import shutil

import pytest

from agents.alfworld.disjoint import OverlapError, check_disjoint
from agents.alfworld.env import AlfworldEnv

SUBSET = ["--task-types", "1", "--max-receptacles", "3", "--max-distractor-types", "0", "--no-progress"]


def _gen(root, split, n, seed, *extra):
    from agents.alfworld.__main__ import main

    assert main(["generate", "--out", str(root), "--split", split, "--num-games", str(n), "--seed", str(seed),
                 *SUBSET, *extra]) == 0


def _split(root, split):
    return str(root / "json_2.1.1" / split)


def _games(split_dir):
    out = []
    for d, _dirs, files in os.walk(split_dir):
        if "traj_data.json" in files:
            out.append(d)
    return sorted(out)


def _goal_from_folder_name(game_dir):
    # ALFWorld's folder name <task>-<Obj>-<MRecep>-<Recep>-<scene>: read independently of the module's keys
    task, obj, _mrecep, recep, scene = os.path.basename(os.path.dirname(game_dir)).split("-")
    return scene, obj, recep


def _opening(game_dir):
    env = AlfworldEnv(data_dir=None)
    try:
        task_text, obs = env.reset(os.path.join(game_dir, "game.tw-pddl"))
        return " ".join((task_text + " " + obs.observation).split())
    finally:
        env.close()


@pytest.fixture(scope="module")
def splits(tmp_path_factory):
    base = tmp_path_factory.mktemp("disjoint")
    _gen(base / "a", "train", 6, 0)
    # the same seed and arguments would write the very same games; excluding split a forces other ones
    _gen(base / "b", "train", 6, 0, "--exclude-split", _split(base / "a", "train"))
    _gen(base / "a", "valid_unseen", 3, 0, "--exclude-split", _split(base / "a", "train"),
         "--exclude-split", _split(base / "b", "train"))
    return base


def test_excluded_split_shares_no_goal_and_no_opening(splits):
    a, b, u = _split(splits / "a", "train"), _split(splits / "b", "train"), _split(splits / "a", "valid_unseen")
    assert len(_games(a)) == 6 and len(_games(b)) == 6 and len(_games(u)) == 3
    goals_a = {_goal_from_folder_name(g) for g in _games(a)}
    goals_b = {_goal_from_folder_name(g) for g in _games(b)}
    # bug caught: the exclusion not reaching the worker (b repeats a's games: same seed)
    assert not goals_a & goals_b
    openings = [_opening(g) for g in _games(a) + _games(b) + _games(u)]
    owner = ["a"] * 6 + ["b"] * 6 + ["u"] * 3
    seen = {}
    for text, who in zip(openings, owner):
        assert seen.get(text, who) == who, f"two splits open with the same observation: {text[:120]}"
        seen[text] = who
    assert check_disjoint({"a": a, "b": b, "u": u}) == {"a": 6, "b": 6, "u": 3}
    with open(os.path.join(b, "generated.json")) as f:
        args = json.load(f)["args"]
    assert args["exclude"]["splits"] == [os.path.abspath(a)]  # resume refuses another exclusion set


def test_same_arguments_without_exclusion_overlap_and_are_caught(splits, tmp_path):
    _gen(tmp_path / "c", "train", 6, 0)  # split a again, no exclusion
    with pytest.raises(OverlapError, match="goal"):
        check_disjoint({"a": _split(splits / "a", "train"), "c": _split(tmp_path / "c", "train")})


def test_a_shared_opening_alone_is_caught(splits, tmp_path):
    # a copy of one game of split a moved to another floor plan in its metadata: goal keys differ, the opening not
    src = _games(_split(splits / "a", "train"))[0]
    dst = tmp_path / "d" / "json_2.1.1" / "valid_seen" / "x" / "trial_0"
    shutil.copytree(src, dst)
    with open(dst / "traj_data.json") as f:
        traj = json.load(f)
    traj["scene"]["scene_num"] = 9999
    with open(dst / "traj_data.json", "w") as f:
        json.dump(traj, f)
    with pytest.raises(OverlapError, match="opening"):
        check_disjoint({"a": _split(splits / "a", "train"), "d": str(tmp_path / "d" / "json_2.1.1" / "valid_seen")})


def test_opening_of_a_game_without_a_stored_digest_is_read_from_the_engine(splits, tmp_path):
    from agents.alfworld.disjoint import game_keys

    src = _games(_split(splits / "a", "train"))[0]
    dst = tmp_path / "g"
    shutil.copytree(src, dst)
    with open(dst / "traj_data.json") as f:
        traj = json.load(f)
    stored = traj["generator"].pop("opening")
    with open(dst / "traj_data.json", "w") as f:
        json.dump(traj, f)
    # bug caught: real ALFWorld games (no generator entry) getting an empty opening key, so nothing is compared
    assert game_keys(str(dst)).opening == stored


def test_missing_exclude_split_is_a_clear_error(tmp_path, capsys):
    from agents.alfworld.__main__ import main

    rc = main(["generate", "--out", str(tmp_path / "e"), "--split", "valid_seen", "--num-games", "1",
               "--exclude-split", str(tmp_path / "nowhere"), *SUBSET])
    assert rc == 2 and "nowhere" in capsys.readouterr().err


@pytest.mark.parametrize("only", ["goal", "opening"])
def test_each_key_alone_excludes(splits, tmp_path, monkeypatch, only):
    """The goal key and the opening each exclude on their own (the same seed would otherwise rewrite split a's
    games, which share both keys; with one key switched off the other must still keep them out)."""
    import agents.alfworld.generator as gen
    from agents.alfworld.disjoint import split_keys

    a = _split(splits / "a", "train")
    keys = split_keys(a)
    goals = frozenset(k.goal for k in keys) if only == "goal" else frozenset()
    openings = frozenset(k.opening for k in keys) if only == "opening" else frozenset()
    monkeypatch.setattr(gen, "excluded_keys", lambda dirs: (goals, openings))
    gen.generate(str(tmp_path / "x"), "train", 6, seed=0, task_types=[1], max_receptacles=3, max_distractor_types=0,
                 exclude_splits=[a])
    got = split_keys(_split(tmp_path / "x", "train"))
    assert len(got) == 6
    # bug caught: the exclusion of this key not applied (the games of split a come back)
    assert not {getattr(k, only) for k in got} & {getattr(k, only) for k in keys}
