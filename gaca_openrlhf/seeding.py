"""Stable seeds derived from parts: what makes a sampled episode a function of (run seed, task, episode, step).

vLLM draws from one engine-wide generator unless a request carries its own ``seed``; with concurrent episodes the
order in which requests reach that generator depends on timing, so an unseeded rollout is not reproducible. Every
request of this project (evaluation and RL rollouts) carries ``derive_seed(...)`` of what identifies it instead.
"""
from __future__ import annotations

import hashlib
from typing import Any


def derive_seed(*parts: Any) -> int:
    """A stable 31-bit seed from any parts (same on every machine and run; not Python's salted ``hash``)."""
    digest = hashlib.blake2b("|".join(map(str, parts)).encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "little") % (2**31 - 1)
