"""Stable seeds derived from parts: what makes a sampled episode a function of (run seed, task, episode, step).

vLLM draws from one engine-wide generator unless a request carries its own ``seed``; with concurrent episodes the
order in which requests reach that generator depends on timing, so an unseeded rollout is not reproducible. Every
request of this project (evaluation and RL rollouts) carries ``derive_seed(...)`` of what identifies it instead.
Evaluation seeds identify a game by :func:`game_identity`, not by its path, so moving the data cache changes none.
"""
from __future__ import annotations

import hashlib
from typing import Any


def derive_seed(*parts: Any) -> int:
    """A stable 31-bit seed from any parts (same on every machine and run; not Python's salted ``hash``)."""
    digest = hashlib.blake2b("|".join(map(str, parts)).encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "little") % (2**31 - 1)


def game_identity(task: Any) -> str:
    """A panel game's identity independent of where its data folder lives: for a path-like task (an ALFWorld game
    folder) its last two parts, the task folder and the trial (``pick_and_place_simple-.../trial_G2000_000087_00``),
    which is how the committed records pair games across machines (``bench/choice.py:game_id``); a task without a
    ``/`` (a WebShop goal index, a toy task) as it is."""
    return "/".join(str(task).rstrip("/").split("/")[-2:])


def eval_episode_seed(run_seed: int, task: Any, episode: int) -> int:
    """The seed of evaluation episode ``episode`` of ``task`` (its step t samples with ``derive_seed(this, t)``):
    from the game's :func:`game_identity`, so the same game gets the same seeds wherever ``$GACA_CACHE`` lives."""
    return derive_seed(run_seed, game_identity(task), episode)
