"""Evaluation seeds come from a game's identity (task folder/trial), not from where the data cache lives (issue 35:
the same model on the same machine scored 35.2 % with the cache in one folder and 29.7 % in another, because every
request seed hashed the game's absolute path).

The games here are real folders on disk, read by an environment whose episode depends on the game file (a
corridor whose goal is written in the game folder), registered as tests register scripted environments; the
generator answers from the request seed alone (as a seeded sampler does), so equal seeds give equal episodes."""
import shutil

import pytest

from agents.registry import ENVIRONMENTS
from agents.toy.env import PROMPT, ToyCorridorEnv
from gaca_openrlhf.eval.runner import RunConfig, run_episodes
from gaca_openrlhf.seeding import derive_seed, eval_episode_seed, game_identity
from test_eval_runner import ScriptedGenerator, encode  # same folder (rootdir import mode)


class FolderCorridor(ToyCorridorEnv):
    """The toy corridor whose task is a game folder holding ``goal.txt`` (the room to reach)."""

    def reset(self, task):
        with open(f"{task}/goal.txt") as f:
            goal = int(f.read())
        text, obs = super().reset(goal - 1)  # the toy env's goal is 1 + task % (length - 1)
        return text, obs


def make_env(**config):
    return FolderCorridor(**config)


TEMPLATE = PROMPT


def _games(root, names=("pick_and_place_simple-Mug-None-Desk-308/trial_G2000_000001_00",
                        "pick_and_place_simple-Pen-None-Shelf-10/trial_G2000_000002_00")):
    paths = []
    for i, name in enumerate(names):
        d = root / "json_2.1.1" / "valid_seen" / name
        d.mkdir(parents=True)
        (d / "goal.txt").write_text(str(1 + i % 3))
        paths.append(str(d))
    return paths


def _run(tasks):
    cfg = RunConfig(env="folder_corridor", env_kwargs={"length": 4, "max_steps": 6}, prompt_max_len=4000, seed=7,
                    episodes_per_task=2, num_envs=2)
    recs, _ = run_episodes(tasks, cfg, ScriptedGenerator(), encode, progress=False)
    return recs


def test_moving_the_cache_folder_changes_no_seed(tmp_path, monkeypatch):
    """Catches the seed derived from the absolute path again (the moved cache's seeds would all differ), or from
    something that ignores the game (the two games would share seeds)."""
    monkeypatch.setitem(ENVIRONMENTS, "folder_corridor", (__name__, "make_env", "TEMPLATE"))
    first = _games(tmp_path / "home_a" / ".cache" / "gaca_openrlhf")
    moved_root = tmp_path / "elsewhere" / "cache"
    shutil.copytree(tmp_path / "home_a", moved_root)
    moved = [p.replace(str(tmp_path / "home_a"), str(moved_root)) for p in first]
    a, b = _run(first), _run(moved)
    assert not any(r["failed"] for r in a + b) and all(r["steps"] >= 1 for r in a)  # the games were played
    assert [r["seed"] for r in a] == [r["seed"] for r in b]
    strip = lambda recs: [{k: v for k, v in r.items() if k != "task"} for r in recs]  # noqa: E731
    assert strip(a) == strip(b)  # the same episodes, step by step
    assert len({r["seed"] for r in a}) == 4  # 2 games x 2 episodes: distinct seeds
    assert a[0]["seed"] == derive_seed(7, "pick_and_place_simple-Mug-None-Desk-308/trial_G2000_000001_00", 0)
    assert a[0]["seed"] != derive_seed(7, first[0], 0)  # not the path's (the committed records' seeds)


def test_game_identity_by_hand():
    """Catches the split kept in the identity (valid_seen/...: seeds would change with the split folder's name) or
    a trailing slash making another game."""
    assert game_identity("/root/.cache/x/json_2.1.1/valid_seen/pick-A-None-B-325/trial_G2000_000087_00") == \
        "pick-A-None-B-325/trial_G2000_000087_00"
    assert game_identity("/other/place/valid_seen/pick-A-None-B-325/trial_G2000_000087_00/") == \
        "pick-A-None-B-325/trial_G2000_000087_00"
    assert game_identity("12") == "12" and game_identity(3) == "3"  # WebShop goals, toy tasks: unchanged
    assert eval_episode_seed(0, "12", 1) == derive_seed(0, "12", 1)  # so their seeds are unchanged too
