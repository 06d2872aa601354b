"""Similarity anchor grouping (GiGPO's enable_similarity): the clustering rule against difflib, its bound, its use by
GiGPO/GACA/HGPO and the CLI."""

import json
import random
from collections import Counter
from difflib import SequenceMatcher

import pytest
import torch

from gaca_openrlhf.advantages import AdvantageConfig, StepBatch, compute_advantages, hash_anchor
from gaca_openrlhf.advantages.cli import run_case
from gaca_openrlhf.advantages.similarity import cluster_texts, similarity_anchor_ids

BASE = "You are in the middle of a room. Looking quickly around you, you see a cabinet 1, a countertop 1, a drawer 1."
NEAR = BASE.replace("drawer 1", "drawer 2")  # one character apart: ratio ~0.99
FAR = "You arrive at the sinkbasin 1. On the sinkbasin 1, you see a apple 2, a knife 1."


def test_near_duplicates_share_an_id_within_a_group_only():
    assert SequenceMatcher(None, NEAR, BASE).ratio() >= 0.95
    ids = similarity_anchor_ids([BASE, NEAR, FAR, NEAR], torch.tensor([0, 0, 0, 1])).tolist()
    assert ids[0] == ids[1] == hash_anchor(BASE)  # BASE and NEAR tie on frequency; BASE sorts first -> representative
    assert ids[2] == hash_anchor(FAR)
    assert ids[3] == hash_anchor(NEAR)  # alone in group 1


def test_without_merges_ids_are_the_exact_ids():
    texts = [BASE, FAR, BASE, "nothing happens."]
    ids = similarity_anchor_ids(texts, torch.zeros(4, dtype=torch.long)).tolist()
    assert ids == [hash_anchor(t) for t in texts]


def test_threshold_is_respected():
    ratio = SequenceMatcher(None, NEAR, BASE).ratio()
    zeros = torch.zeros(2, dtype=torch.long)
    assert similarity_anchor_ids([BASE, NEAR], zeros, threshold=ratio + 1e-9).unique().numel() == 2
    assert similarity_anchor_ids([BASE, NEAR], zeros, threshold=ratio).unique().numel() == 1


def _random_texts(rng, n):
    words = ["cabinet", "drawer", "apple", "knife", "sink", "table", "shelf", "mug"]
    base = [" ".join(rng.choice(words) + f" {rng.randint(1, 3)}" for _ in range(12)) for _ in range(4)]
    out = []
    for _ in range(n):
        t = list(rng.choice(base))
        for _ in range(rng.choice([0, 0, 1, 3, 20])):  # a few edits keep the ratio high, many do not
            t[rng.randrange(len(t))] = rng.choice("abc123 ")
        out.append("".join(t))
    return out


@pytest.mark.parametrize("seed", range(5))
def test_greedy_leader_rule_against_difflib(seed):
    """Each text joins a representative it matches (ratio >= thresh, difflib directly); representatives, in visiting
    order (frequency desc, text), do not match any earlier representative; every cheap bound is only a shortcut."""
    texts = _random_texts(random.Random(seed), 60)
    rep_of, _ = cluster_texts(texts, 0.95, max_comparisons=10**9)
    counts = Counter(texts)
    visit = sorted(counts, key=lambda t: (-counts[t], t))
    reps = [t for t in visit if rep_of[t] == t]
    for t in visit:
        rep = rep_of[t]
        if rep != t:
            assert SequenceMatcher(None, t, rep).ratio() >= 0.95
            earlier = reps[: reps.index(rep)]  # joins the FIRST matching cluster
            assert all(SequenceMatcher(None, t, r).ratio() < 0.95 for r in earlier)
    for i, r in enumerate(reps):
        assert all(SequenceMatcher(None, r, q).ratio() < 0.95 for q in reps[:i])
    assert len(reps) < len(counts)  # the data does contain merges


def test_comparison_cap_bounds_the_work():
    texts = _random_texts(random.Random(1), 80)
    _, used = cluster_texts(texts, 0.95, max_comparisons=10**9)
    assert used > 5
    rep_of, used_capped = cluster_texts(texts, 0.95, max_comparisons=5)
    assert used_capped == 5
    rep_of0, used0 = cluster_texts(texts, 0.95, max_comparisons=0)
    assert used0 == 0 and all(rep_of0[t] == t for t in texts)  # no full ratio -> exact grouping


def test_row_order_does_not_matter():
    texts = _random_texts(random.Random(2), 40)
    groups = torch.tensor([i % 3 for i in range(40)])
    ids = similarity_anchor_ids(texts, groups)
    perm = torch.randperm(40, generator=torch.Generator().manual_seed(0))
    ids_perm = similarity_anchor_ids([texts[i] for i in perm.tolist()], groups[perm])
    assert torch.equal(ids[perm], ids_perm)


# Two trajectories of one task; step 0 anchors are near-duplicates, so with similarity they form a step group of 2.
ROWS = dict(group_id=[0, 0, 0, 0], traj_id=[0, 0, 1, 1], step_index=[0, 1, 0, 1], reward=[0.0, 10.0, 0.0, 0.0],
            valid=[True] * 4, nll=[1.0, 2.0, 1.5, 0.5])
TEXT = [BASE, FAR, NEAR, "You arrive at the garbagecan 1."]


def _batch():
    return StepBatch.from_lists(anchor_id=[hash_anchor(t) for t in TEXT], **ROWS)


@pytest.mark.parametrize("estimator", ["gigpo", "gaca", "hgpo"])
def test_estimators_use_similarity_groups(estimator):
    exact = compute_advantages(_batch(), AdvantageConfig(estimator=estimator, mode="mean_norm"))
    sim = compute_advantages(_batch(), AdvantageConfig(estimator=estimator, mode="mean_norm", similarity_grouping=True),
                             anchor_text=TEXT)
    assert exact.step_group_size.tolist() == [1, 1, 1, 1]
    assert sim.step_group_size.tolist() == [2, 1, 2, 1]
    # step 0 returns: 9.5 (traj 0) vs 0 (traj 1) -> +-4.75 in the merged group
    if estimator == "gigpo":
        assert exact.step_advantage[0].item() == 0.0
        assert sim.step_advantage[[0, 2]].tolist() == pytest.approx([4.75, -4.75])
    else:
        assert not torch.allclose(exact.advantage, sim.advantage)


def test_similarity_needs_text():
    cfg = AdvantageConfig(estimator="gigpo", similarity_grouping=True)
    with pytest.raises(ValueError, match="anchor text"):
        compute_advantages(_batch(), cfg)
    with pytest.raises(ValueError, match="entries"):
        compute_advantages(_batch(), cfg, anchor_text=TEXT[:2])
    with pytest.raises(ValueError, match="text anchors"):
        compute_advantages(_batch(), cfg, anchor_text=[1, 2, 3, 4])
    with pytest.raises(ValueError, match="similarity_threshold"):
        AdvantageConfig(similarity_threshold=1.0)


def test_cli_case_with_enable_similarity(tmp_path):
    case = {"name": "sim", "estimator": "gigpo", "mode": "mean_norm", "params": {"enable_similarity": True,
            "similarity_thresh": 0.95},
            "steps": {"group": [0, 0, 0, 0], "traj": [0, 0, 1, 1], "t": [0, 1, 0, 1], "anchor": TEXT,
                      "reward": ROWS["reward"], "valid": ROWS["valid"]}}
    out = run_case(json.loads(json.dumps(case)))
    assert out["step_group_size"] == [2, 1, 2, 1]
    assert out["step_advantage"][0] == pytest.approx(4.75)
