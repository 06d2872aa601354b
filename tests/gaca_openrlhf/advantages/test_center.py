"""``AdvantageConfig.center``: the final advantages minus their task group's (or the batch's) mean over step samples.
Expected values are computed here with numpy group-bys, not with the package's segment helpers."""
import numpy as np
import pytest
import torch

from gaca_openrlhf.advantages import AdvantageConfig, StepBatch, compute_advantages
from gaca_openrlhf.advantages.signals import advantage_mean_by_estimator, advantages_by_estimator
from gaca_openrlhf.advantages.synthetic import synthetic_batch


def _group_means(x: np.ndarray, g: np.ndarray) -> np.ndarray:
    return np.array([x[g == k].mean() for k in g])


@pytest.mark.parametrize("estimator", ["gaca", "gigpo", "hgpo"])
def test_group_centring_subtracts_each_group_s_own_mean(estimator):
    batch = synthetic_batch(n_tasks=6, n_rollouts=4, max_steps=12, seed=7)
    raw = compute_advantages(batch, AdvantageConfig(estimator=estimator, dtype="float64")).advantage.numpy()
    got = compute_advantages(batch, AdvantageConfig(estimator=estimator, center="group",
                                                    dtype="float64")).advantage.numpy()
    g = batch.group_id.numpy()
    np.testing.assert_allclose(got, raw - _group_means(raw, g), atol=1e-12)
    np.testing.assert_allclose(_group_means(got, g), 0.0, atol=1e-12)


def test_batch_centring_and_the_published_estimators_are_untouched():
    batch = synthetic_batch(n_tasks=5, n_rollouts=3, max_steps=12, seed=1)
    raw = compute_advantages(batch, AdvantageConfig(estimator="gaca", dtype="float64")).advantage.numpy()
    got = compute_advantages(batch, AdvantageConfig(estimator="gaca", center="batch", dtype="float64")).advantage
    np.testing.assert_allclose(got.numpy(), raw - raw.mean(), atol=1e-12)
    # 'none' is the default: the estimator as published (the reference vectors pin those values elsewhere)
    assert AdvantageConfig().center == "none"


def test_a_group_of_equal_advantages_centres_to_exact_zero():
    """Two one-step episodes with the same reward: GiGPO gives both the same value; centred it is exactly 0, not the
    ~1e-17 of x - mean (a zero advantage must stay a zero: the non-zero share counts |A| > 1e-6)."""
    batch = StepBatch.from_lists([0, 0, 1, 1], [0, 1, 2, 3], [0, 0, 0, 0], [5, 5, 6, 7], [0.3, 0.3, 1.0, 0.0],
                                 [True] * 4)
    out = compute_advantages(batch, AdvantageConfig(estimator="gigpo", center="group", dtype="float64")).advantage
    assert out[:2].tolist() == [0.0, 0.0] and out[2] > 0 > out[3]


def test_center_rejects_unknown_values():
    with pytest.raises(ValueError, match="center"):
        AdvantageConfig(center="trajectory")


def test_mean_by_estimator_by_hand():
    """GRPO's episode term over the step samples of a group is zero-mean by construction (episode_stats 'steps'):
    group 0 steps S = (1, 1, 0): A = (1/3, 1/3, -2/3) -> mean 0; GACA's per-step gate weights its two terms unequally,
    so its mean need not be 0; centred, every estimator's mean is 0."""
    batch = StepBatch.from_lists([0, 0, 0], [0, 0, 1], [0, 1, 0], [1, 2, 1], [0.0, 1.0, 0.0], [True] * 3,
                                 nll=[0.1, 2.0, 0.5])
    means = advantage_mean_by_estimator(advantages_by_estimator(batch, AdvantageConfig(mode="mean_norm"))[0])
    assert means["grpo"] == pytest.approx(0.0, abs=1e-12)
    assert abs(means["gaca"]) > 1e-3
    centred = advantage_mean_by_estimator(advantages_by_estimator(batch, AdvantageConfig(center="group", dtype="float64"))[0])
    assert all(abs(m) < 1e-12 for m in centred.values())
    assert np.isnan(advantage_mean_by_estimator({"x": type("R", (), {"advantage": torch.zeros(0)})()})["x"])


@pytest.mark.parametrize("estimator", ["grpo", "gigpo"])
def test_centring_an_already_centred_estimator_changes_nothing_bit_for_bit(estimator):
    """GRPO and GiGPO are zero-mean per task group up to rounding (~1e-17): centring them must return the same
    tensor, zeros included (x - 1e-17 would turn a zero advantage into a signed one, which the credit audit's sign
    agreement and a rank correlation read as credit)."""
    batch = synthetic_batch(n_tasks=8, n_rollouts=4, max_steps=12, seed=3)
    raw = compute_advantages(batch, AdvantageConfig(estimator=estimator, dtype="float64")).advantage
    got = compute_advantages(batch, AdvantageConfig(estimator=estimator, center="group", dtype="float64")).advantage
    assert (raw == 0).any() and torch.equal(got, raw)
