"""Learning-signal measures (``advantages/signals.py``) on hand-made batches whose answers are worked out by hand."""
import math

import pytest
import torch

from gaca_openrlhf.advantages import AdvantageConfig, StepBatch, list_estimators
from gaca_openrlhf.advantages.signals import (group_has_contrast, mixed_group_share, nonzero_share,
                                              nonzero_share_by_estimator, token_weighted_mean)


def test_group_contrast_by_hand():
    """Groups 3: scores (1, 0) mixed; 7: (0, 0, 0) uniform; 5: one episode (no contrast). Catches: a group with
    one episode counted as mixed, groups not sorted/aligned with their flags, min/max swapped (all False)."""
    groups, contrast = group_has_contrast(torch.tensor([3, 7, 3, 7, 5, 7]),
                                          torch.tensor([1.0, 0.0, 0.0, 0.0, 1.0, 0.0]))
    assert groups.tolist() == [3, 5, 7] and contrast.tolist() == [True, False, False]
    assert mixed_group_share(torch.tensor([3, 7, 3, 7, 5, 7]), torch.tensor([1.0, 0.0, 0.0, 0.0, 1.0, 0.0])) == 1 / 3


def test_scores_that_differ_below_the_tolerance_are_one_outcome():
    """WebShop-like continuous scores: 0.5 vs 0.5 + 1e-12 is no contrast, 0.5 vs 0.6 is. Catches ``>= tol`` -> any
    float noise counted as an outcome difference."""
    _, contrast = group_has_contrast(torch.tensor([0, 0, 1, 1]), torch.tensor([0.5, 0.5 + 1e-12, 0.5, 0.6]))
    assert contrast.tolist() == [False, True]


def test_contrast_rejects_bad_input():
    with pytest.raises(ValueError, match="one each per episode"):
        group_has_contrast(torch.tensor([0, 1]), torch.tensor([1.0]))
    with pytest.raises(ValueError, match="non-finite"):
        group_has_contrast(torch.tensor([0, 0]), torch.tensor([1.0, float("nan")]))
    assert math.isnan(mixed_group_share(torch.tensor([], dtype=torch.long), torch.tensor([])))


def test_nonzero_share_by_hand():
    """|A| > 1e-6 counts: 3 of 5. Catches a signed test (A > tol drops the negative one) or tol ignored (1e-9)."""
    assert nonzero_share(torch.tensor([0.7, -0.7, 0.0, 1e-9, 2.0])) == 3 / 5
    assert math.isnan(nonzero_share(torch.tensor([])))


def _batch(invalid_in_failed_group=False):
    """Group 0: two one-step episodes, rewards 10 (won) and 0. Group 1: two one-step episodes, both reward 0, on the
    same anchor. All valid unless ``invalid_in_failed_group`` (group 1's second step then invalid)."""
    return StepBatch.from_lists(group_id=[0, 0, 1, 1], traj_id=[0, 1, 0, 1], step_index=[0, 0, 0, 0],
                                anchor_id=[11, 11, 22, 22], reward=[10.0, 0.0, 0.0, 0.0],
                                valid=[True, True, True, not invalid_in_failed_group], nll=[0.5, 0.5, 0.5, 0.5])


def test_nonzero_share_per_estimator_by_hand():
    """Without penalties the uniform group 1 gives every estimator A = 0 (scores and returns are all 0): share 2/4
    for GRPO, GiGPO and GACA alike. One invalid step in group 1 (S = 0 and -0.1) makes its GRPO advantages +-0.707,
    so the share becomes 4/4: per-step penalties give a group without outcome contrast a gradient (docs/design.md
    §4, dynamic filtering). Catches the estimator override ignored (every entry equal to cfg's estimator's, which
    the penalised EMPG-free case would not show) and an estimator missing from the default list."""
    cfg = AdvantageConfig(estimator="gaca")
    plain = nonzero_share_by_estimator(_batch(), cfg, estimators=["grpo", "gigpo", "gaca"])
    assert plain == {"grpo": 0.5, "gigpo": 0.5, "gaca": 0.5}
    penalised = nonzero_share_by_estimator(_batch(invalid_in_failed_group=True), cfg, estimators=["grpo"])
    assert penalised == {"grpo": 1.0}
    every = nonzero_share_by_estimator(_batch(), cfg)
    assert sorted(every) == sorted(n for n in list_estimators() if n != "empg")  # EMPG needs the entropy
    with_entropy = StepBatch.from_lists(**{k: getattr(_batch(), k).tolist() for k in (
        "group_id", "traj_id", "step_index", "anchor_id", "reward", "valid", "nll")}, entropy=[1.0, 2.0, 3.0, 4.0])
    assert "empg" in nonzero_share_by_estimator(with_entropy, cfg)


def test_similarity_grouping_needs_the_texts():
    cfg = AdvantageConfig(estimator="gigpo", similarity_grouping=True)
    with pytest.raises(ValueError, match="anchor text"):
        nonzero_share_by_estimator(_batch(), cfg, estimators=["gigpo"])
    texts = ["room a", "room a", "room b", "room b"]
    assert nonzero_share_by_estimator(_batch(), cfg, estimators=["gigpo"], anchor_text=texts) == {"gigpo": 0.5}


def test_token_weighted_mean_by_hand():
    """Rows of 1 and 3 tokens with mean entropies 2.0 and 0.4: per token (2 + 1.2) / 4 = 0.8, not the row mean 1.2.
    Catches the unweighted mean of row means."""
    assert token_weighted_mean(torch.tensor([2.0, 0.4]), torch.tensor([1, 3])) == pytest.approx(0.8)
    assert math.isnan(token_weighted_mean(torch.tensor([1.0]), torch.tensor([0])))
    with pytest.raises(ValueError, match="row means"):
        token_weighted_mean(torch.tensor([1.0, 2.0]), torch.tensor([1]))
