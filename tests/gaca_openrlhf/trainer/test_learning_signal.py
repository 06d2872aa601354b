"""The experience maker's per-iteration learning signals (``StepExperienceMaker.learning_signal``) through the real
advantage hook (no Ray), on the hand-made rollout of test_advantage_broadcast plus a group without outcome contrast.

Expected values are worked out by hand below, not by the functions that log them.
"""
import pytest
import torch

from gaca_openrlhf.trainer.entropy import ENTROPY_KEY
from gaca_openrlhf.trainer.samples import pad_to_multiple, step_experience
from test_advantage_broadcast import _episode, _maker, _rollout, _step  # same folder (rootdir import mode)

# per rollout row: response lengths 2, 3, 1, 2, 2, 3 (test_advantage_broadcast._rollout) then 2, 2 (group 2)
ENTROPY = [1.0, 2.0, 0.5, 3.0, 0.0, 1.0, 0.25, 0.75]
# per token: (1x2 + 2x3 + 0.5x1 + 3x2 + 0x2 + 1x3 + 0.25x2 + 0.75x2) / 17 = 19.5 / 17
ENTROPY_PER_TOKEN = 19.5 / 17


def _samples():
    samples, _ = _rollout()
    # group 2: two one-step episodes, both valid, both reward 0: no outcome contrast, GRPO advantage 0 for both
    steps = [_step(0, 0.0, True, 3, 2), _step(0, 0.0, True, 3, 2)]
    samples += [step_experience(s, 2, traj, _episode([s])) for traj, s in enumerate(steps)]
    for s, h in zip(samples, ENTROPY):
        s.info[ENTROPY_KEY] = torch.tensor([h])
    return samples


def test_entropy_per_token_and_nonzero_share_by_hand():
    """Catches: the entropy averaged per row (unweighted: 8.5 / 8 = 1.0625) or with the padding copies counted, the
    non-zero share over all rows including copies, or per-estimator shares missing."""
    samples = pad_to_multiple(_samples(), 12, seed=3)  # 8 -> 12: four copies, each carrying its source's entropy
    maker = _maker()
    out = maker.compute_advantages_and_returns(maker.split_rollout_samples(samples))
    stats = maker.last_stats
    assert stats["policy/entropy"] == pytest.approx(ENTROPY_PER_TOKEN)
    # GRPO, mean_norm: the 6 rows of groups 0-1 are non-zero (test_advantage_broadcast), group 2's two are 0
    assert stats["adv/nonzero_frac"] == pytest.approx(6 / 8)
    assert stats["adv/nonzero_frac/grpo"] == pytest.approx(6 / 8)
    assert {"adv/nonzero_frac/gigpo", "adv/nonzero_frac/gaca", "adv/nonzero_frac/empg"} <= set(stats)
    # mean advantage over the 8 real rows: (5.025 + 5.025 - 4.975 - 5.075 + 5.0 - 5.0 + 0 + 0) / 8 = 0 for GRPO
    # (zero-mean per group over its steps; float32 advantages)
    assert stats["adv/mean/grpo"] == pytest.approx(0.0, abs=1e-6)
    assert {"adv/mean/gigpo", "adv/mean/gaca", "adv/mean/empg"} <= set(stats)
    assert sum(float((e.action_mask.sum(-1) > 0).sum()) for e in out) == 8  # copies still masked out after it


def test_no_entropy_in_the_samples_means_no_entropy_metric():
    """OpenRLHF's own estimators never request the entropy: the key is then absent, not 0 (0 would read as a
    collapsed policy)."""
    samples = [s for s in _samples()]
    for s in samples:
        s.info.pop(ENTROPY_KEY)
    maker = _maker(dp=1, rollout_micro=8)
    maker.compute_advantages_and_returns(maker.split_rollout_samples(samples))
    assert "policy/entropy" not in maker.last_stats and maker.last_stats["adv/nonzero_frac"] == pytest.approx(0.75)
    assert "adv/nonzero_frac/empg" not in maker.last_stats  # EMPG cannot run without the entropy
