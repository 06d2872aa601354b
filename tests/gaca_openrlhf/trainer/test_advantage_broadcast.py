"""Step samples -> per-step advantage -> response tokens, through the real advantage hook (no Ray).

Known episodes (valid and invalid steps, two groups, a padding copy), split over 2 DP ranks by
``StepExperienceMaker.split_rollout_samples`` (so micro-batch order differs from rollout order), then
``compute_advantages_and_returns``. Expected values are worked out by hand below (GRPO, ``mean_norm``: A = S - mean
over the group's step samples, S = episode reward sum - 0.1 x invalid), not by the estimator module.
Catches: a flipped sign, rows mapped to another step's advantage, the validity flag dropped when gathering, padding
copies left in the loss (non-zero mask or advantage).
"""
from types import SimpleNamespace

import pytest
import torch

from gaca_openrlhf.advantages import AdvantageConfig
from gaca_openrlhf.trainer.experience import StepExperienceMaker
from gaca_openrlhf.trainer.samples import pad_to_multiple, step_experience


def _step(t, reward, valid, prompt_len, resp_len):
    return dict(prompt_ids=list(range(1, prompt_len + 1)), response_ids=list(range(50, 50 + resp_len)),
                logprobs=[-0.5] * resp_len, reward=reward, valid=valid, anchor_id=100 + t, step_index=t,
                truncated=False)


def _episode(steps):
    return dict(prompt="task", label="", steps=steps, failed=False, error="", won=False, score=0.0)


def _maker(dp=2, rollout_micro=2):
    maker = StepExperienceMaker.__new__(StepExperienceMaker)
    maker.args = SimpleNamespace(
        actor=SimpleNamespace(num_nodes=1, num_gpus_per_node=dp), ds=SimpleNamespace(ring_attn_size=1,
                                                                                   tensor_parallel_size=1),
        rollout=SimpleNamespace(micro_batch_size=rollout_micro), train=SimpleNamespace(dynamic_batch_enable=False))
    maker.tokenizer = SimpleNamespace(pad_token_id=0)
    maker.advantage_estimator = "grpo"
    maker.adv_config = AdvantageConfig(estimator="grpo", mode="mean_norm")
    maker.dump_dir, maker.last_stats, maker.iteration = None, {}, 1
    return maker


def _rollout():
    # group 0: traj 0 = 2 valid steps, reward 10 at the end (S = 10, 10);
    #          traj 1 = steps (valid, invalid), no reward (S = 0, -0.1); group mean = 19.9 / 4 = 4.975
    # group 1: traj 0 = 1 valid step, reward 10 (S = 10); traj 1 = 1 valid step (S = 0); mean 5
    episodes = [
        (0, 0, [_step(0, 0.0, True, 3, 2), _step(1, 10.0, True, 4, 3)]),
        (0, 1, [_step(0, 0.0, True, 3, 1), _step(1, 0.0, False, 5, 2)]),
        (1, 0, [_step(0, 10.0, True, 2, 2)]),
        (1, 1, [_step(0, 0.0, True, 3, 3)]),
    ]
    samples = []
    for group, traj, steps in episodes:
        samples += [step_experience(s, group, traj, _episode(steps)) for s in steps]
    expected = [5.025, 5.025, -4.975, -5.075, 5.0, -5.0]  # by rollout position
    return samples, expected


def test_token_advantages_exact_with_padding_copy():
    samples, expected = _rollout()
    samples = pad_to_multiple(samples, 8, seed=3)  # 6 -> 8: two padding copies
    copies = {i: int(s.info["gaca/dup_of"]) for i, s in enumerate(samples) if int(s.info["gaca/dup_of"]) >= 0}
    assert sorted(copies) == [6, 7]
    masks = {i: s.action_mask[0].clone() for i, s in enumerate(samples)}
    maker = _maker()
    micro = maker.split_rollout_samples(samples)
    # 2 ranks x 2 micro-batches of 2: rank 0 holds rows 0, 2, 4, 6 and rank 1 rows 1, 3, 5, 7
    assert [e.index for e in micro] == [[0, 2], [4, 6], [1, 3], [5, 7]]
    out = maker.compute_advantages_and_returns(micro)
    seen = set()
    for exp in out:
        for r, row in enumerate(exp.index):
            seen.add(row)
            width = masks[row].numel()
            token_adv, mask = exp.advantages[r, :width], exp.action_mask[r, :width]
            assert float(exp.advantages[r, width:].abs().sum()) == 0.0  # right padding of the micro-batch
            if row in copies:
                assert float(mask.sum()) == 0 and float(token_adv.abs().sum()) == 0.0, "copy left in the loss"
                assert float(exp.info["advantage"][r]) == 0.0
                continue
            want = torch.tensor(expected[row]) * masks[row].float()
            assert torch.allclose(token_adv, want, atol=1e-5), (row, token_adv, want)
            assert torch.equal(mask.bool(), masks[row].bool())
            assert float(exp.info["advantage"][r]) == pytest.approx(expected[row], abs=1e-5)
    assert seen == set(range(8))
    assert maker.last_stats["adv/num_samples"] == 6.0  # the copies are not in the estimator's batch


def test_response_tokens_only_and_sign():
    """The step's scalar sits exactly on its response tokens (positions p-1 .. p+r-2 of the shifted mask)."""
    samples, _ = _rollout()
    samples = pad_to_multiple(samples, 2, seed=0)  # even already: no copies
    out = _maker(dp=1, rollout_micro=8).compute_advantages_and_returns(_maker(dp=1, rollout_micro=8)
                                                                       .split_rollout_samples(samples))
    adv = out[0].advantages
    # row 1 of the rollout: prompt 4, response 3 tokens -> mask positions 3, 4, 5 of 6; advantage +5.025
    assert adv[1, :6].tolist() == pytest.approx([0, 0, 0, 5.025, 5.025, 5.025], abs=1e-5)
    # row 3: prompt 5, response 2, the invalid step -> -5.075 on positions 4, 5
    assert adv[3, :6].tolist() == pytest.approx([0, 0, 0, 0, -5.075, -5.075], abs=1e-5)


def test_split_gives_every_rank_the_same_work():
    """3 ranks, rollout micro 4: 12 samples -> each rank 4 samples in 1 micro-batch; 2 x 3 = 6 -> 2 per rank."""
    samples, _ = _rollout()
    maker = _maker(dp=3, rollout_micro=4)
    micro = maker.split_rollout_samples(list(samples))  # 6 samples
    assert [len(e.index) for e in micro] == [2, 2, 2]
    more = pad_to_multiple(list(samples), 12, seed=1)
    micro = maker.split_rollout_samples(more)
    assert [len(e.index) for e in micro] == [4, 4, 4]
    maker5 = _maker(dp=2, rollout_micro=4)
    micro = maker5.split_rollout_samples(pad_to_multiple(list(samples), 10, seed=1))  # 5 per rank -> 3 + 2
    assert [len(e.index) for e in micro] == [3, 2, 3, 2]
    with pytest.raises(ValueError, match="evenly"):
        _maker(dp=4).split_rollout_samples(list(samples))
