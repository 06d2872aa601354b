"""Token-budget micro-batch planning (``trainer/minibatch.py``) and the replay-buffer plan of the policy actor."""
import random
from types import SimpleNamespace

import pytest
import torch

from gaca_openrlhf.trainer.minibatch import (MiniBatchPlan, min_token_budget_parts, plan_minibatches,
                                             token_budget_micro_batches, token_budget_partition)


def test_partition_holds_every_index_once_and_is_balanced():
    rng = random.Random(0)
    for _ in range(200):
        n = rng.randint(1, 30)
        lengths = [rng.randint(1, 500) for _ in range(n)]
        k = rng.randint(1, n)
        parts = token_budget_partition(lengths, k)
        assert len(parts) == k and all(parts)
        assert sorted(i for p in parts for i in p) == list(range(n))
        loads = [sum(lengths[i] for i in p) for p in parts]
        assert max(loads) - min(loads) <= max(lengths)  # LPT bound
    with pytest.raises(ValueError):
        token_budget_partition([1, 2], 3)


def test_min_parts_respects_budget():
    rng = random.Random(1)
    for _ in range(200):
        n = rng.randint(1, 25)
        lengths = [rng.randint(1, 300) for _ in range(n)]
        budget = rng.randint(300, 1000)  # >= every length (the lower bound below assumes it)
        k = min_token_budget_parts(lengths, budget)
        parts = token_budget_partition(lengths, k)
        assert all(sum(lengths[i] for i in p) <= budget or len(p) == 1 for p in parts)
        assert k >= -(-sum(lengths) // budget)  # never fewer than the token count allows
    assert min_token_budget_parts([], 10) == 0
    assert min_token_budget_parts([50, 50], 10) == 2  # longer than the budget: one sample per micro-batch


def test_micro_batches_equal_count_over_ranks():
    plans = token_budget_micro_batches([[100, 100, 100, 100], [10, 10, 10, 10]], budget=200)
    assert len(plans[0]) == len(plans[1]) == 2


def _item(tokens, action):
    mask = torch.zeros(tokens - 1, dtype=torch.long)
    mask[tokens - 1 - action:] = 1
    return SimpleNamespace(attention_mask=torch.ones(tokens, dtype=torch.long), action_mask=mask)


def test_replay_buffer_plan_windows_and_normalizers():
    """Update windows of equal size (the mini-batch plan), the window's token count as every micro-batch's loss
    normalizer, an optimizer step at each window's end, copies (zero action mask) counted in neither total."""
    from gaca_openrlhf.trainer.actors import setup_step_dynamic_batch

    rng = random.Random(2)
    items = [_item(rng.randint(20, 400), rng.randint(1, 15)) for _ in range(11)] + [_item(300, 0)]  # + a copy
    buffer = SimpleNamespace(items=items)
    setup_step_dynamic_batch(buffer, SimpleNamespace(ds_device_mesh=None), updates=3, budget=600, seed=5)
    steps = buffer.dynamic_optimizer_step
    assert sum(steps) == 3 and steps[-1] == 1
    windows, cur = [], []
    for idx, last in zip(buffer.dynamic_indices, steps):
        cur.extend(idx)
        if last:
            windows.append(cur)
            cur = []
    assert [len(w) for w in windows] == [4, 4, 4]
    assert sorted(i for w in windows for i in w) == list(range(12))
    pos = 0
    for w in windows:
        tokens = float(sum(int(items[i].action_mask.sum()) for i in w))
        real = float(sum(int(items[i].action_mask.sum() > 0) for i in w))
        while True:
            assert buffer.dynamic_batch_num_tokens[pos] == tokens
            assert buffer.dynamic_global_batch_size[pos] == real
            assert sum(int(items[i].attention_mask.sum()) for i in buffer.dynamic_indices[pos]) <= 600 \
                or len(buffer.dynamic_indices[pos]) == 1
            pos += 1
            if steps[pos - 1]:
                break
    assert buffer.sample_batch_size == 1
    with pytest.raises(ValueError):
        setup_step_dynamic_batch(buffer, SimpleNamespace(ds_device_mesh=None), updates=5, budget=600, seed=5)


def test_policy_actor_dynamic_mode_plans_the_update_windows():
    """With --train.dynamic_batch_enable: set_iteration_batch keeps the update count (no DeepSpeed batch re-set,
    grad-accum 1) and fit installs the step plan as the replay buffer's setup_dynamic_batch."""
    from gaca_openrlhf.trainer.actors import StepPolicyMixin

    class Base:
        def fit(self, kl_ctl=0):
            self.trainer.replay_buffer.setup_dynamic_batch(self.strategy)  # what OpenRLHF's ppo_train does first
            return {}

    class Actor(StepPolicyMixin, Base):
        pass

    a = Actor()
    engine = SimpleNamespace(train_micro_batch_size_per_gpu=lambda: 1, dp_world_size=1, global_steps=0,
                             lr_scheduler=None, set_train_batch_size=lambda n: pytest.fail("re-set in dynamic mode"))
    a.actor = SimpleNamespace(model=engine)
    a.strategy = SimpleNamespace(ds_device_mesh=None, args=SimpleNamespace(
        train=SimpleNamespace(dynamic_batch_enable=True, seed=3, max_tokens_per_gpu=500)))
    items = [_item(100 + 40 * i, 5) for i in range(6)]
    a.trainer = SimpleNamespace(training_step=lambda *x: {}, replay_buffer=SimpleNamespace(items=items))
    assert a.set_iteration_batch(plan_minibatches(6, micro=1, dp=1, mini_batch_steps=3), iteration=None) == 1
    with pytest.raises(ValueError):
        a.set_iteration_batch(MiniBatchPlan(num_samples=7, updates=2, padded=7, per_update=3, grad_accum=3))
    a.fit(0.0)
    buffer = a.trainer.replay_buffer
    assert sum(buffer.dynamic_optimizer_step) == 2 and buffer.sample_batch_size == 1
    assert sorted(i for idx in buffer.dynamic_indices for i in idx) == list(range(6))
