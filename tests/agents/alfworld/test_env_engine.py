"""The env adapter on the real TextWorld engine with generated games (slow: loads PDDL games)."""
from __future__ import annotations

import filecmp
import json
import os
import subprocess
import sys
import time

import pytest

from agents.base import AgentEnv, EnvError

pytestmark = pytest.mark.slow

ALL_TYPES = {"pick_and_place_simple", "look_at_obj_in_light", "pick_clean_then_place_in_recep",
             "pick_heat_then_place_in_recep", "pick_cool_then_place_in_recep", "pick_two_obj_and_place"}


@pytest.fixture(scope="module")
def env():
    from agents.alfworld.backends import make_env

    e = make_env(backend="local", cache_size=8)
    yield e
    e.close()


def test_check_command_all_six_types_won(six_games, paths, walkthrough, capsys):
    from agents.alfworld.__main__ import main

    rc = main(["check", "--data", six_games, "--split", "train", "--no-progress"])
    last = capsys.readouterr().out.strip().splitlines()[-1]
    res = json.loads(last)
    assert rc == 0
    assert res["games"] == 6 and res["won"] == 6
    assert set(res["task_types"]) == ALL_TYPES and all(v == 1 for v in res["task_types"].values())
    assert res["reset_ms_p50"] > 0 and res["step_ms_p50"] > 0


def test_first_observation_reads_like_alfworld(six_games, paths, walkthrough, env):
    assert isinstance(env, AgentEnv)
    path = paths["pick_and_place_simple"]
    task, step = env.reset(path)
    assert step.observation.startswith("-= Welcome to TextWorld, ALFRED! =-")
    assert "Your task is to: " in step.observation and step.observation.endswith(task)
    assert step.anchor == step.observation and step.reward == 0.0 and not step.done
    assert "look" in step.admissible_actions and "help" not in step.admissible_actions
    assert any(a.startswith("go to ") for a in step.admissible_actions)
    assert step.info["task_type"] == 1 and step.info["task_type_name"] == "pick_and_place_simple"


def test_game_id_relative_to_data_root(six_games):
    from agents.alfworld.env import AlfworldEnv
    from agents.alfworld.panels import list_games

    e = AlfworldEnv(data_dir=six_games)
    gid, _ = list_games(six_games, "train")[0]
    task, step = e.reset(gid)
    assert task and step.observation.startswith("-= Welcome")
    with pytest.raises(FileNotFoundError):
        e.reset("json_2.1.1/train/nope/trial_x")
    e.close()


def test_invalid_and_unknown_commands_do_not_crash_or_execute(six_games, paths, walkthrough, env):
    path = paths["pick_and_place_simple"]
    _, first = env.reset(path)
    go = next(a for a in first.admissible_actions if a.startswith("go to "))
    # an invalid action is not executed even if its text is admissible
    s = env.step(go, valid=False)
    assert s.observation == "Nothing happens." and s.anchor == "Nothing happens."
    assert s.reward == 0.0 and not s.done and s.admissible_actions == first.admissible_actions
    s = env.step("<think>hmm</think> dance wildly", valid=False)
    assert s.observation == "Nothing happens."
    # unknown but well-formed commands go to the engine, which answers the same way
    for cmd in ("dance wildly", "", "take moon from sky", "go to narnia 1"):
        s = env.step(cmd)
        assert s.observation == "Nothing happens." and s.reward == 0.0
    s = env.step(go)
    assert s.observation.startswith("You arrive at ")
    assert s.info["steps"] == 7


def test_step_limit_ends_episode_without_reward(six_games, paths, walkthrough, env):
    path = paths["pick_and_place_simple"]
    env.reset(path)
    for i in range(env.max_steps):
        s = env.step("look")
        assert s.done == (i == env.max_steps - 1)
    assert s.done and not s.won and s.reward == 0.0 and s.info["truncated"]
    with pytest.raises(EnvError):
        env.step("look")


@pytest.mark.parametrize("task_type", ["pick_two_obj_and_place", "look_at_obj_in_light"])
def test_walkthrough_wins_with_reward_10_on_last_step_only(six_games, paths, walkthrough, env, task_type):
    path = paths[task_type]
    env.reset(path)
    cmds = walkthrough(path)
    for i, cmd in enumerate(cmds):
        s = env.step(cmd)
        last = i == len(cmds) - 1
        assert s.done == last and s.won == last and s.reward == (10.0 if last else 0.0)
    assert s.info["won"] and not s.info["truncated"]


def test_repeated_resets_use_the_cache(six_games, paths, walkthrough):
    from agents.alfworld.env import AlfworldEnv

    e = AlfworldEnv(cache_size=4)
    argv = list(sys.argv)
    a, b = paths["pick_heat_then_place_in_recep"], paths["pick_and_place_simple"]
    t0 = time.perf_counter()
    _, first = e.reset(a)
    cold = time.perf_counter() - t0
    warm = []
    for p in (a, b, a, b, a):
        t0 = time.perf_counter()
        _, s = e.reset(p)
        warm.append(time.perf_counter() - t0)
        if p == a:
            assert s.observation == first.observation
    assert sys.argv == argv  # Fast Downward's translator rewrites sys.argv; the engine restores it
    info = e.cache_info()
    assert info["misses"] == 2 and info["hits"] >= 4  # each game translated once
    assert min(warm) < cold
    # state is fresh after reset (no carry-over from the previous episode)
    cmds = walkthrough(a)
    for cmd in cmds:
        s = e.step(cmd)
    assert s.won
    _, again = e.reset(a)
    assert again.observation == first.observation and again.admissible_actions == first.admissible_actions
    e.close()


def test_speedups_do_not_change_observations(six_games, paths, walkthrough, tmp_path):
    """The memoized TextWorld parsers produce exactly the same observations/commands as the originals."""
    path = paths["pick_and_place_simple"]
    script = (
        "import json,sys\n"
        "from agents.alfworld.env import AlfworldEnv\n"
        "e=AlfworldEnv(); _,s=e.reset(sys.argv[1]); out=[[s.observation,s.admissible_actions]]\n"
        "for c in json.load(open(sys.argv[1]))['walkthrough']+[]:\n"
        "    s=e.step(c); out.append([s.observation,s.admissible_actions,s.reward])\n"
        "print(json.dumps(out))\n"
    )
    runs = []
    for flag in ("", "1"):
        envv = {**os.environ, "GACA_ALFWORLD_NO_SPEEDUPS": flag}
        if not flag:
            envv.pop("GACA_ALFWORLD_NO_SPEEDUPS")
        out = subprocess.run([sys.executable, "-c", script, path], env=envv, capture_output=True, text=True,
                             timeout=300, check=True).stdout
        runs.append(json.loads(out.strip().splitlines()[-1]))
    assert runs[0] == runs[1] and runs[0][-1][2] == 10.0


def test_generation_is_deterministic_per_split_and_seed(tmp_path):
    from agents.alfworld.generator import generate

    dirs = []
    for name, seed in (("a", 7), ("b", 7), ("c", 8)):
        root = str(tmp_path / name)
        stats = generate(root, "valid_unseen", 1, seed=seed, task_types=[1])
        assert stats.written == 1 and stats.task_types == {"pick_and_place_simple": 1}
        dirs.append(root)

    def files(root):
        out = {}
        for d, _, fs in os.walk(root):
            for f in fs:
                if f != "generated.json":  # the run marker records timings
                    out[os.path.relpath(os.path.join(d, f), root)] = os.path.join(d, f)
        return out

    fa, fb, fc = files(dirs[0]), files(dirs[1]), files(dirs[2])
    assert sorted(fa) == sorted(fb) and len(fa) == 2
    assert all(filecmp.cmp(fa[k], fb[k], shallow=False) for k in fa)
    assert {open(p).read() for p in fa.values()} != {open(p).read() for p in fc.values()}
    game = json.load(open(next(p for k, p in fa.items() if k.endswith("game.tw-pddl"))))
    assert game["solvable"] and game["walkthrough"] and "UNKNOWN GOAL" not in game["grammar"]


def test_standard_panels_on_generated_data(six_games, paths, walkthrough, tmp_path):
    from agents.alfworld.panels import build_standard_panels, load_panel

    written = build_standard_panels(six_games, str(tmp_path))
    assert set(written) == {"train"}  # no valid_seen/valid_unseen games in this folder
    panel = load_panel(written["train"])
    assert panel["num_games"] == 6 and len(panel["task_types"]) == 6
