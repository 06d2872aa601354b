"""Similarity-based anchor grouping (GiGPO's ``enable_similarity`` / ``similarity_thresh``), with a bounded cost.

The public GiGPO code (verl-agent ``gigpo/core_gigpo.py``, ``build_step_group``) clusters the anchor observations of
each task group greedily: an observation joins the first existing cluster whose representative (its first member)
has ``difflib.SequenceMatcher(None, obs, rep).ratio() >= similarity_thresh`` (0.95), else it starts a new cluster.
That compares every observation with every cluster: O(n_g * C_g) full ratios per group of n_g steps and C_g
clusters, each O(L^2) in the text length L in the worst case.

Here the same rule runs over *distinct* texts only (identical texts always share a cluster), cheapest checks first:
1. the length bound ratio <= 2 min(|a|, |b|) / (|a| + |b|) (difflib's ``real_quick_ratio``, O(1)),
2. the character-multiset bound ``quick_ratio`` (O(L)),
3. the full ``ratio`` (at most ``max_comparisons`` per task group; past that cap a text that has not matched yet
   keeps its own exact-match cluster, so the worst case is bounded by U_g * C_g cheap checks +
   max_comparisons full ratios per group, U_g = distinct texts).
Bounds 1-2 are upper bounds of the ratio, so pruning never changes a decision below the cap.

Order: within a task group, distinct texts are visited by decreasing frequency, then text (the most common text
becomes the first representative), so the clustering does not depend on the row order of the batch; the public code
visits rows in batch order. A cluster's id is :func:`.hashing.hash_anchor` of its representative, so without any
merge the ids equal the exact-match ids.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from difflib import SequenceMatcher
from typing import Sequence

import torch

from .hashing import hash_anchor


def cluster_texts(texts: Sequence[str], threshold: float, max_comparisons: int) -> tuple[dict[str, str], int]:
    """Greedy leader clustering of the distinct ``texts`` (see module doc). Returns (text -> representative, full
    ratio computations used)."""
    counts = Counter(texts)
    reps: list[tuple[str, SequenceMatcher]] = []  # (representative, matcher with seq2 = representative)
    rep_of: dict[str, str] = {}
    full = 0
    for text in sorted(counts, key=lambda t: (-counts[t], t)):
        chosen = None
        for rep, matcher in reps:
            la, lb = len(text), len(rep)
            if la + lb == 0 or 2.0 * min(la, lb) / (la + lb) < threshold:
                continue
            matcher.set_seq1(text)  # a = the new observation, b = the representative, as the public code
            if matcher.quick_ratio() < threshold:
                continue
            if full >= max_comparisons:
                break
            full += 1
            if matcher.ratio() >= threshold:
                chosen = rep
                break
        if chosen is None:
            matcher = SequenceMatcher(None)
            matcher.set_seq2(text)
            reps.append((text, matcher))
            chosen = text
        rep_of[text] = chosen
    return rep_of, full


def similarity_anchor_ids(
    anchor_text: Sequence[str], group_id: torch.Tensor, threshold: float = 0.95, max_comparisons: int = 20000
) -> torch.Tensor:
    """int64 anchor ids where similar texts of the same task group share one id (the representative's hash).

    Raises:
        ValueError: if an anchor is not a string (similarity is defined on text observations only).
    """
    groups: dict[int, list[str]] = defaultdict(list)
    gids = group_id.tolist()
    for i, (g, text) in enumerate(zip(gids, anchor_text)):
        if not isinstance(text, str):
            raise ValueError(f"similarity grouping needs text anchors; sample {i} has {type(text).__name__}")
        groups[g].append(text)
    rep_of = {g: cluster_texts(texts, threshold, max_comparisons)[0] for g, texts in groups.items()}
    hashes: dict[str, int] = {}
    out = []
    for g, text in zip(gids, anchor_text):
        rep = rep_of[g][text]
        if rep not in hashes:
            hashes[rep] = hash_anchor(rep)
        out.append(hashes[rep])
    return torch.tensor(out, dtype=torch.int64)
