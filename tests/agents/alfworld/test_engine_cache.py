"""Thread safety of the in-process engine and the node-wide translation cache (real TextWorld engine; slow)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading

import pytest

pytestmark = pytest.mark.slow

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def test_eight_concurrent_in_process_episodes_match_sequential_play(paths, walkthrough, tmp_path, monkeypatch, play):
    """8 threads, each with its own in-process env, reset and step at the same time (the group pattern on the
    local backend). Without ENGINE_LOCK most of them crash in TextWorld's parser / the translator."""
    from agents.alfworld.env import AlfworldEnv

    games = [paths[t] for t in sorted(paths)]
    jobs = [(games[i % len(games)], walkthrough(games[i % len(games)])[:6]) for i in range(8)]
    expected = {}
    monkeypatch.setenv("GACA_ALFWORLD_CACHE", "0")
    ref = AlfworldEnv(cache_size=8)
    for path, cmds in jobs:
        expected.setdefault(path, play(ref, path, cmds))
    ref.close()
    monkeypatch.setenv("GACA_ALFWORLD_CACHE", str(tmp_path / "cache"))  # the threads start on an empty cache

    barrier = threading.Barrier(8)
    results: dict[int, list] = {}
    errors: dict[int, BaseException] = {}

    def worker(k: int) -> None:
        try:
            env = AlfworldEnv(cache_size=2)
            barrier.wait(timeout=60)
            path, cmds = jobs[k]
            results[k] = [play(env, path, cmds) for _ in range(2)]  # a miss then a hit
            env.close()
        except BaseException as e:  # noqa: BLE001 - reported below
            errors[k] = e

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=600)
    assert not errors, {k: repr(e) for k, e in errors.items()}
    assert sorted(results) == list(range(8))
    for k, (path, _cmds) in enumerate(jobs):
        assert results[k][0] == expected[path] and results[k][1] == expected[path]


def test_sys_argv_restored_and_translation_reused_across_engines(paths, walkthrough, tmp_path):
    """A second engine (another worker) reads the translation from the disk cache instead of translating."""
    from agents.alfworld.engine import GameEngine

    cache = str(tmp_path / "cache")
    path = paths["pick_heat_then_place_in_recep"]
    argv = list(sys.argv)
    a = GameEngine(cache_size=2, disk_cache=cache)
    a.load(path)
    first = a.reset()
    assert sys.argv == argv
    assert a.cache_info["disk_misses"] == 1 and a.cache_info["disk_hits"] == 0
    b = GameEngine(cache_size=2, disk_cache=cache)
    b.load(path)
    again = b.reset()
    assert b.cache_info["disk_hits"] == 1 and b.cache_info["disk_misses"] == 0
    assert again["feedback"] == first["feedback"]
    assert again["admissible_commands"] == first["admissible_commands"]
    for cmd in walkthrough(path):
        state, _, _ = b.step(cmd)
    assert state["won"]


def test_corrupt_cache_entry_is_a_miss_and_is_rewritten(paths, tmp_path):
    from agents.alfworld.engine import DiskCache, GameEngine

    cache = str(tmp_path / "cache")
    path = paths["pick_and_place_simple"]
    a = GameEngine(cache_size=2, disk_cache=cache)
    a.load(path)
    good = a.reset()["admissible_commands"]
    d = DiskCache(cache)
    entry = os.path.join(cache, d.key_of(path) + ".pkl.z")
    with open(entry, "r+b") as f:  # a torn write (cannot happen with os.replace, but disks fail)
        f.truncate(100)
    b = GameEngine(cache_size=2, disk_cache=cache)
    b.load(path)
    assert b.reset()["admissible_commands"] == good
    assert b.cache_info["disk_misses"] == 1
    assert d.get(d.key_of(path)) is not None  # rewritten whole


def test_changed_game_file_gets_a_new_cache_key(paths, tmp_path):
    from agents.alfworld.engine import DiskCache

    d = DiskCache(str(tmp_path / "cache"))
    src = paths["pick_and_place_simple"]
    copy = tmp_path / "game.tw-pddl"
    data = json.load(open(src))
    copy.write_text(json.dumps(data))
    k1 = d.key_of(str(copy))
    data["grammar"] = data["grammar"].replace("Your task is to: ", "Your task is to: quickly ")
    copy.write_text(json.dumps(data))
    assert d.key_of(str(copy)) != k1


_WORKER = r"""
import json, sys, time
from agents.alfworld.engine import GameEngine
e = GameEngine(cache_size=2)
e.load(sys.argv[1])
s = e.reset()
out = [s["feedback"], s["admissible_commands"]]
for c in json.load(open(sys.argv[1]))["walkthrough"]:
    s, _, _ = e.step(c)
    out.append([s["feedback"], s["admissible_commands"]])
print(json.dumps({"won": bool(s["won"]), "info": e.cache_info, "out": out}))
"""


def test_concurrent_processes_translate_a_game_once_and_play_identically(paths, tmp_path):
    """4 worker processes reset the same new game at once: one translates (under the per-game flock), the others
    read its entry -- and every process (fresh hash salt) plays exactly what an uncached engine plays."""
    path = paths["pick_cool_then_place_in_recep"]
    env = {**os.environ, "GACA_ALFWORLD_CACHE": str(tmp_path / "cache"), "PYTHONPATH": ROOT}
    procs = [subprocess.Popen([sys.executable, "-c", _WORKER, path], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, cwd=ROOT) for _ in range(4)]
    outs = []
    for p in procs:
        stdout, stderr = p.communicate(timeout=600)
        assert p.returncode == 0, stderr[-2000:]
        outs.append(json.loads(stdout.strip().splitlines()[-1]))
    assert sum(o["info"]["disk_misses"] for o in outs) == 1
    assert sum(o["info"]["disk_hits"] for o in outs) == 3
    ref_env = {**env, "GACA_ALFWORLD_CACHE": "0", "GACA_ALFWORLD_NO_SPEEDUPS": "1"}
    ref = subprocess.run([sys.executable, "-c", _WORKER, path], env=ref_env, capture_output=True, text=True,
                         cwd=ROOT, timeout=600, check=True)
    ref_out = json.loads(ref.stdout.strip().splitlines()[-1])
    assert ref_out["won"] and "disk_hits" not in ref_out["info"]
    for o in outs:
        assert o["won"] and o["out"] == ref_out["out"]
