"""Anchor hashing: raw environment observation -> stable 64-bit id (docs/design.md §2.2).

Stable across processes and machines (unlike Python's salted ``hash``): BLAKE2b with an 8-byte digest, read as a
signed int64 so that it fits a torch.int64 tensor. Anchor groups compare ids, i.e. exact text equality up to a
2^-64 collision chance.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Iterable

import torch


def hash_anchor(obs: Any) -> int:
    """int64 id of an observation; strings are hashed as UTF-8, other JSON-able values via canonical JSON."""
    if isinstance(obs, bool) or not isinstance(obs, (str, bytes)):
        obs = "\x00json:" + json.dumps(obs, sort_keys=True, separators=(",", ":"))
    data = obs if isinstance(obs, bytes) else obs.encode("utf-8")
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "little", signed=True)


def hash_anchors(observations: Iterable[Any]) -> torch.Tensor:
    """int64 tensor of :func:`hash_anchor` over ``observations``."""
    return torch.tensor([hash_anchor(o) for o in observations], dtype=torch.int64)
