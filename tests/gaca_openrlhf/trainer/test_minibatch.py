"""Mini-batch plan (verl-agent semantics), per-iteration DeepSpeed batch and LR, HF-checkpoint rotation, probe padding.

The DeepSpeed engine is a fake here (its batch-size API only); tests/gaca_openrlhf/trainer/test_minibatch_deepspeed.py
runs the real engine on 2 gloo ranks.
"""
import math
import os
from types import SimpleNamespace

import pytest
import torch

from gaca_openrlhf.trainer.actors import StepPolicyMixin, _guard_empty_micro_batches, rotate_hf_checkpoints
from gaca_openrlhf.trainer.minibatch import balanced_sizes, plan_minibatches
from gaca_openrlhf.trainer.ppo_trainer import lr_schedule_iterations, pad_probe


@pytest.mark.parametrize("n, mini, micro, dp, updates, padded", [
    (1000, 256, 4, 8, 4, 1024),   # ceil(1000 / 256) = 4 updates of 256
    (1024, 256, 4, 8, 4, 1024),   # exact: no padding
    (1025, 256, 4, 8, 5, 1120),   # one more sample: a 5th update; 1120 = 5 x 224 (multiple of 5 x 32)
    (3000, 64, 2, 8, 47, 3008),   # WebShop-like: 47 updates
    (10, 4, 1, 2, 3, 12),
    (3, 4, 1, 2, 1, 4),
])
def test_plan_counts_updates_in_step_samples(n, mini, micro, dp, updates, padded):
    plan = plan_minibatches(n, micro=micro, dp=dp, mini_batch_steps=mini)
    assert plan.updates == updates == math.ceil(n / mini)
    assert plan.padded == padded and plan.padded % (updates * micro * dp) == 0
    assert plan.per_update * plan.updates == plan.padded and plan.grad_accum == plan.per_update // (micro * dp)
    assert plan.per_update <= mini  # never more samples per update than the mini-batch
    assert plan.num_padding < plan.per_update  # no update can be made of padding copies only


def test_deprecated_fixed_update_count():
    plan = plan_minibatches(10, micro=2, dp=1, updates_per_iteration=2)
    assert (plan.updates, plan.padded, plan.per_update, plan.grad_accum) == (2, 12, 6, 3)
    with pytest.raises(ValueError):
        plan_minibatches(10, micro=2, dp=1)


def test_balanced_sizes():
    assert balanced_sizes(10, 4) == [4, 3, 3] and balanced_sizes(8, 4) == [4, 4] and balanced_sizes(3, 8) == [3]
    assert balanced_sizes(0, 4) == []


class FakeEngine:
    """DeepSpeed engine's batch-size API (the real one: test_minibatch_deepspeed.py)."""

    def __init__(self, micro, dp):
        self.micro, self.dp_world_size, self.micro_steps, self.train_batch = micro, dp, 5, None

    def train_micro_batch_size_per_gpu(self):
        return self.micro

    def set_train_batch_size(self, n):
        self.train_batch = n


def _policy(micro, dp, scheduler=None):
    actor = StepPolicyMixin()
    actor.strategy = SimpleNamespace(accumulated_gradient=None)
    actor.actor = SimpleNamespace(model=FakeEngine(micro, dp))
    actor.actor_scheduler = scheduler
    return actor


def test_accumulation_uses_data_parallel_size():
    """2 ranks, 2 updates of 8 samples with micro batch 2: 8 / (2 x 2) = 2 micro-batches per rank per update."""
    actor = _policy(micro=2, dp=2)
    assert actor.set_iteration_batch(plan_minibatches(16, micro=2, dp=2, mini_batch_steps=8)) == 2
    assert actor.strategy.accumulated_gradient == 2 and actor.actor.model.train_batch == 8
    assert actor.actor.model.micro_steps == 0
    with pytest.raises(ValueError, match="cannot form"):
        actor.set_iteration_batch(plan_minibatches(12, micro=1, dp=2, updates_per_iteration=2))  # 6: not 2 x 2


def _cosine(lr=1.0, steps=4):
    from transformers.trainer import get_scheduler

    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=lr)
    return opt, get_scheduler("cosine", opt, num_warmup_steps=0, num_training_steps=steps)


def test_lr_is_positioned_per_iteration():
    """Cosine over 4 iterations: iteration i uses lr 0.5 (1 + cos(pi i / 4)), however many updates it makes."""
    opt, sched = _cosine()
    actor = _policy(micro=1, dp=1, scheduler=sched)
    for it in (0, 1, 2, 3, 1):  # including a jump back (resume at an earlier iteration)
        actor.set_iteration_batch(plan_minibatches(4, micro=1, dp=1, mini_batch_steps=2), iteration=it)
        want = 0.5 * (1 + math.cos(math.pi * it / 4))
        assert opt.param_groups[0]["lr"] == pytest.approx(want) and sched.get_last_lr()[0] == pytest.approx(want)


def test_lr_schedule_length_in_iterations():
    args = SimpleNamespace(rollout=SimpleNamespace(batch_size=16), train=SimpleNamespace(num_episodes=2),
                           run=SimpleNamespace(max_iterations=0))
    assert lr_schedule_iterations(args, 3553) == 2 * 223  # ceil(3553 / 16) per episode
    args.run.max_iterations = 150
    assert lr_schedule_iterations(args, 3553) == 150  # the schedule ends where the run stops
    args.run.max_iterations = 1000
    assert lr_schedule_iterations(args, 3553) == 446


def test_hf_checkpoints_rotated(tmp_path):
    for step in (2, 4, 6, 8, 10):
        (tmp_path / f"global_step{step}_hf").mkdir()
    (tmp_path / "best_global_step4_hf").mkdir()
    (tmp_path / "_actor").mkdir()
    removed = rotate_hf_checkpoints(str(tmp_path), max_num=2)
    assert sorted(os.path.basename(p) for p in removed) == ["global_step2_hf", "global_step4_hf", "global_step6_hf"]
    assert sorted(os.listdir(tmp_path)) == ["_actor", "best_global_step4_hf", "global_step10_hf", "global_step8_hf"]


@pytest.mark.parametrize("items, ranks, want", [(4, 8, 8), (5, 4, 8), (4, 4, 4), (3, 2, 4), (1, 3, 3)])
def test_probe_padded_to_a_multiple_of_ranks(items, ranks, want):
    seqs = [torch.tensor([[i]]) for i in range(items)]
    s, m, v = pad_probe(seqs, list(seqs), list(seqs), ranks)
    assert len(s) == len(m) == len(v) == want
    assert [int(x) for x in s[:items]] == list(range(items))  # originals first, in order


def test_empty_micro_batch_guard():
    """A micro-batch of padding copies only: NaN per-micro-batch means become 0, a zero normalizer becomes 1."""
    seen = {}

    def training_step(experience, kl_ctl, step, loss_batch_info=None):
        seen["info"] = loss_batch_info
        return {"metrics": {"ppo_clip_ratio": torch.tensor(float("nan")), "reward": torch.tensor([1.0])},
                "weights": {"ppo_clip_ratio": "token", "reward": "sample"},
                "num_samples": 1.0, "num_action_tokens": 0.0}

    step = _guard_empty_micro_batches(training_step)
    status = step(None, 0.0, 0, {"dp_size": 2, "batch_num_tokens": torch.tensor(0.0),
                                 "global_batch_size": torch.tensor(0.0)})
    assert float(seen["info"]["batch_num_tokens"]) == 1.0 and float(seen["info"]["global_batch_size"]) == 1.0
    assert float(status["metrics"]["ppo_clip_ratio"]) == 0.0 and float(status["metrics"]["reward"]) == 1.0
    assert 0 < status["num_action_tokens"] <= 1e-6  # ppo_train divides by the summed token count of all ranks
