"""Generator runs on the real engine: scene split through the CLI, resume after an interruption, skip instead of
abort (slow: each game is translated and played by the expert)."""
from __future__ import annotations

import json
import os
import shutil

import pytest

pytestmark = pytest.mark.slow

UNSEEN = {10, 219, 308, 424}


def _games(root: str, split: str) -> dict[str, dict]:
    """relative trial dir -> traj_data of every game under the split."""
    out = {}
    base = os.path.join(root, "json_2.1.1", split)
    for d, _dirs, files in os.walk(base):
        if "traj_data.json" in files:
            with open(os.path.join(d, "traj_data.json")) as f:
                out[os.path.relpath(d, base)] = json.load(f)
    return out


def _tree(root: str) -> dict[str, bytes]:
    out = {}
    for d, _dirs, files in os.walk(root):
        for name in files:
            if name != "generated.json":
                p = os.path.join(d, name)
                out[os.path.relpath(p, root)] = open(p, "rb").read()
    return out


def test_cli_splits_never_share_floor_plans_and_runs_resume(tmp_path, capsys):
    from agents.alfworld import is_generated
    from agents.alfworld.__main__ import main

    root = str(tmp_path / "gen")
    args = ["generate", "--out", root, "--num-games", "3", "--seed", "1", "--task-types", "1,2", "--no-progress"]
    assert main(args + ["--split", "valid_unseen"]) == 0
    assert main(args + ["--split", "train"]) == 0
    unseen, train = _games(root, "valid_unseen"), _games(root, "train")
    assert len(unseen) == 3 and len(train) == 3
    assert {t["scene"]["scene_num"] for t in unseen.values()} <= UNSEEN
    assert not {t["scene"]["scene_num"] for t in train.values()} & UNSEEN
    # valid_unseen 24:18 of types 1:2 -> 3 games = 2 + 1 (largest remainder)
    assert sorted(t["task_type"] for t in unseen.values()) == [
        "look_at_obj_in_light", "pick_and_place_simple", "pick_and_place_simple"]
    assert is_generated(root)
    capsys.readouterr()

    # interrupted run: one game lost, a half-written temporary folder left behind
    before = _tree(os.path.join(root, "json_2.1.1", "valid_unseen"))
    lost = sorted(unseen)[0]
    shutil.rmtree(os.path.join(root, "json_2.1.1", "valid_unseen", lost))
    os.makedirs(os.path.join(root, "json_2.1.1", "valid_unseen", ".tmp-trial_G1_000009_00-1"))
    assert main(args + ["--split", "valid_unseen"]) == 0
    stats = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert stats["kept"] == 2 and stats["written"] == 1 and stats["skipped"] == []
    assert _tree(os.path.join(root, "json_2.1.1", "valid_unseen")) == before  # byte-identical, tmp removed

    # other arguments on the same folder: a clear error, nothing touched
    assert main(["generate", "--out", root, "--num-games", "4", "--seed", "1", "--task-types", "1,2",
                 "--no-progress", "--split", "valid_unseen"]) == 2
    assert "other arguments" in capsys.readouterr().err
    assert _tree(os.path.join(root, "json_2.1.1", "valid_unseen")) == before


def test_unplaceable_game_is_skipped_and_the_run_goes_on(tmp_path):
    from agents.alfworld.generator import generate

    root = str(tmp_path / "gen")
    # the expert cannot win any game in one step: every candidate is dropped, each game is skipped
    with pytest.warns(RuntimeWarning, match="skipped"):
        stats = generate(root, "valid_unseen", 2, seed=0, task_types=[1], max_attempts=2, max_steps=1,
                         expert_tries=1)
    assert stats.skipped == [0, 1] and stats.written == 0 and stats.dropped_unsolvable == 4
    marker = json.load(open(os.path.join(root, "json_2.1.1", "valid_unseen", "generated.json")))
    assert marker["complete"] is False and marker["last_run"]["skipped"] == [0, 1]


def test_worker_processes_write_the_same_games_and_resume(tmp_path):
    from agents.alfworld.generator import generate

    one, two = str(tmp_path / "one"), str(tmp_path / "two")
    kw = dict(task_types=[1, 2], max_receptacles=6)
    assert generate(one, "train", 4, seed=2, **kw).written == 4
    seen = []
    stats = generate(two, "train", 4, seed=2, workers=2, progress=lambda i, n: seen.append((i, n)), **kw)
    assert stats.written == 4 and stats.skipped == [] and seen == [(1, 4), (2, 4), (3, 4), (4, 4)]
    split = os.path.join("json_2.1.1", "train")
    assert _tree(os.path.join(two, split)) == _tree(os.path.join(one, split)) != {}
    # resume with workers: the missing game is rebuilt byte for byte, the others kept
    lost = sorted(_games(two, "train"))[1]
    shutil.rmtree(os.path.join(two, split, lost))
    stats = generate(two, "train", 4, seed=2, workers=2, **kw)
    assert (stats.kept, stats.written) == (3, 1)
    assert _tree(os.path.join(two, split)) == _tree(os.path.join(one, split))


def test_worker_processes_report_skipped_games_in_index_order(tmp_path):
    from agents.alfworld.generator import generate

    with pytest.warns(RuntimeWarning, match="skipped"):
        stats = generate(str(tmp_path / "gen"), "valid_unseen", 3, seed=0, task_types=[1], max_attempts=2,
                         max_steps=1, expert_tries=1, workers=2)
    assert stats.skipped == [0, 1, 2] and stats.written == 0 and stats.dropped_unsolvable == 6
    with pytest.raises(ValueError, match="workers"):
        generate(str(tmp_path / "gen2"), "train", 1, seed=0, workers=0)


def test_generator_caches_the_translation_of_every_written_game(tmp_path, monkeypatch, play):
    """The generator translates each game to validate it; it stores that translation under the *written* file's
    key, so readers (SFT demonstrations, evaluation, RL) skip the translation and play exactly as a cold engine."""
    from agents.alfworld.engine import DiskCache
    from agents.alfworld.env import AlfworldEnv
    from agents.alfworld.generator import generate

    cache = tmp_path / "cache"
    monkeypatch.setenv("GACA_ALFWORLD_CACHE", str(cache))
    root = str(tmp_path / "gen")
    assert generate(root, "train", 2, seed=4, task_types=[1], max_receptacles=6).written == 2
    base = os.path.join(root, "json_2.1.1", "train")
    games = sorted(os.path.join(base, d, "game.tw-pddl") for d in _games(root, "train"))
    disk = DiskCache(str(cache))
    assert {p.name[:-len(".pkl.z")] for p in cache.glob("*.pkl.z")} == {disk.key_of(g) for g in games}
    warm = AlfworldEnv(cache_size=8)
    monkeypatch.setenv("GACA_ALFWORLD_CACHE", "0")
    cold = AlfworldEnv(cache_size=8)
    for g in games:
        walk = json.load(open(g))["walkthrough"]
        played = play(warm, g, walk)
        assert warm.engine._pddl.walkthrough == walk  # the cached entry carries the written file's data
        assert played == play(cold, g, walk) and played[-1][-1] is True  # same play, and the walkthrough wins
    assert warm.engine.cache_info["disk_hits"] == 2 and warm.engine.cache_info["disk_misses"] == 0
    warm.close()
    cold.close()


def test_cached_translation_must_be_of_the_same_game(tmp_path):
    from agents.alfworld.engine import GameEngine
    from agents.alfworld.generator import generate

    root = str(tmp_path / "gen")
    generate(root, "train", 2, seed=4, task_types=[1], max_receptacles=6)
    base = os.path.join(root, "json_2.1.1", "train")
    a, b = sorted(os.path.join(base, d, "game.tw-pddl") for d in _games(root, "train"))
    engine = GameEngine(cache_size=2, disk_cache=None)
    assert engine.cache_translation_as(a, {}, b"", str(tmp_path / "c")) is False  # not loaded: nothing written
    engine.load(a)
    other = json.load(open(b))
    with pytest.raises(ValueError, match="not the game"):
        engine.cache_translation_as(a, other, json.dumps(other).encode(), str(tmp_path / "c"))
    assert not list((tmp_path / "c").glob("*.pkl.z"))
    engine.close()
