"""Shared fixtures: one generated game of each task type (real TextWorld engine, no mocks).

(No __init__.py here: a package named ``alfworld`` would shadow the real ``alfworld`` module.)
"""
from __future__ import annotations

import glob
import json
import os

import pytest


@pytest.fixture(scope="session", autouse=True)
def _private_translation_cache(tmp_path_factory):
    """Tests use their own node-wide translation cache (agents/alfworld/engine.py), not ~/.cache."""
    old = os.environ.get("GACA_ALFWORLD_CACHE")
    os.environ["GACA_ALFWORLD_CACHE"] = str(tmp_path_factory.mktemp("alfworld_translations"))
    yield
    if old is None:
        os.environ.pop("GACA_ALFWORLD_CACHE", None)
    else:
        os.environ["GACA_ALFWORLD_CACHE"] = old


@pytest.fixture(scope="session")
def six_games(tmp_path_factory) -> str:
    """A data root with one expert-validated game of each of the six task types (train split, seed 0)."""
    import alfworld  # noqa: F401  (default install: a missing part fails)
    import textworld  # noqa: F401
    from agents.alfworld.generator import generate

    root = str(tmp_path_factory.mktemp("alfworld_six"))
    stats = generate(root, "train", 6, seed=0)
    assert stats.written == 6, stats.as_dict()
    return root


def _game_paths(root: str, split: str = "train") -> dict[str, str]:
    """task type -> game.tw-pddl path (first one of each type)."""
    out: dict[str, str] = {}
    for path in sorted(glob.glob(os.path.join(root, "json_2.1.1", split, "*", "*", "game.tw-pddl"))):
        with open(os.path.join(os.path.dirname(path), "traj_data.json")) as f:
            out.setdefault(json.load(f)["task_type"], path)
    return out


def _walkthrough(path: str) -> list[str]:
    with open(path) as f:
        return json.load(f)["walkthrough"]


@pytest.fixture(scope="session")
def paths(six_games) -> dict[str, str]:
    """task type name -> game.tw-pddl path of the six generated games."""
    return _game_paths(six_games)


@pytest.fixture(scope="session")
def walkthrough():
    """walkthrough(path) -> the stored command list of a game."""
    return _walkthrough


def _play(env, path: str, commands: list[str]) -> list:
    _, s = env.reset(path)
    out = [[s.observation, s.admissible_actions]]
    for cmd in commands:
        s = env.step(cmd)
        out.append([s.observation, s.admissible_actions, s.reward, s.won])
    return out


@pytest.fixture
def play():
    """``play(env, game, commands)``: what an env shows at reset and after each command (observation, admissible
    actions, then reward and won) -- to compare two ways of playing the same game."""
    return _play
