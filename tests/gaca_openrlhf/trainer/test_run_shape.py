"""``trainer/run_shape.py``: the run's shape (DP size, step estimator or not, mini-batch rule), computed once from the
parsed arguments. Hand-made argument namespaces check the arithmetic; the real CLI checks that ``parse_args``
attaches the shape and that it agrees with the options. Each test names the one-line bug it catches."""
from __future__ import annotations

import dataclasses
from types import SimpleNamespace as ns

import pytest

from gaca_openrlhf.advantages import is_step_estimator, list_estimators
from gaca_openrlhf.trainer.run_shape import RunShape, data_parallel_size, fixed_updates


def _args(nodes=2, gpus=4, ring=2, tp=2, micro=1, estimator="gaca", **run):
    run = {"mini_batch_steps": 0, "updates_per_iteration": 0, **run}
    return ns(run=ns(**run), rollout=ns(batch_size=4, n_samples_per_prompt=2),
              train=ns(batch_size=3, micro_batch_size=micro),
              actor=ns(num_nodes=nodes, num_gpus_per_node=gpus), ds=ns(ring_attn_size=ring, tensor_parallel_size=tp),
              algo=ns(advantage=ns(estimator=estimator)))


@pytest.mark.parametrize("nodes, gpus, ring, tp, dp", [
    (1, 1, 1, 1, 1),
    (1, 8, 1, 1, 8),
    (2, 8, 1, 1, 16),  # nodes multiply
    (2, 4, 2, 2, 2),  # 8 GPUs / (ring 2 x TP 2)
    (1, 8, 2, 1, 4),  # ring attention alone
    (1, 8, 1, 4, 2),  # tensor parallel alone
    (1, 5, 2, 1, 2),  # floor division
    (2, 4, 2, 8, 1),  # never 0
])
def test_dp_size_of_a_few_shapes(nodes, gpus, ring, tp, dp):
    """Catches: DP not GPUs (nodes x per node) / (ring attention x TP), true division, a lost floor of 1, or the
    shape not carrying the one definition's value."""
    a = _args(nodes, gpus, ring, tp)
    assert data_parallel_size(a) == dp and type(data_parallel_size(a)) is int
    assert RunShape.from_args(a).dp_size == dp


def test_step_estimator_flag_is_the_registry_predicate():
    """Catches: the shape's step-estimator flag not the registry's answer (an OpenRLHF estimator taken for a step
    one, or the reverse)."""
    for name in list_estimators():
        assert RunShape.from_args(_args(estimator=name)).step_estimator is True
    for name in ("gae", "reinforce", "rloo", "reinforce_baseline", "group_norm", "dr_grpo"):
        assert is_step_estimator(name) is False
        assert RunShape.from_args(_args(estimator=name)).step_estimator is False


def test_mini_batch_rule_and_its_plan():
    """Catches: the plan given the wrong micro batch, DP size or mini-batch size, or the deprecated fixed count kept
    alongside --run.mini_batch_steps."""
    shape = RunShape.from_args(_args(micro=2, mini_batch_steps=8))  # DP 2
    assert (shape.micro_batch_size, shape.mini_batch_steps, shape.updates_per_iteration) == (2, 8, 0)
    plan = shape.plan(10)
    assert (plan.updates, plan.padded, plan.grad_accum) == (2, 16, 2)  # mini 8 = 2 micro x 2 ranks x 2
    shape = RunShape.from_args(_args(mini_batch_steps=0, updates_per_iteration=3))
    assert shape.updates_per_iteration == 3 and (shape.plan(10).updates, shape.plan(10).padded) == (3, 12)
    shape = RunShape.from_args(_args(mini_batch_steps=4, updates_per_iteration=3))  # ignored with mini-batches
    assert shape.updates_per_iteration == 0 and shape.plan(8).updates == 2
    assert RunShape.from_args(_args()).plan(8).updates == 2  # neither: OpenRLHF's count, 4 x 2 // 3


def test_fixed_update_count_and_its_fallback():
    """Catches: the deprecated option ignored (``or`` -> ``and``, only values > 1 used), the fallback not
    floor(trajectories / train batch) or not at least 1, or None not treated as unset."""
    assert fixed_updates(_args(updates_per_iteration=5)) == 5
    assert fixed_updates(_args(updates_per_iteration=1)) == 1
    assert fixed_updates(_args(updates_per_iteration=0)) == 2  # 4 x 2 // 3
    assert fixed_updates(_args(updates_per_iteration=None)) == 2
    a = _args()
    a.train.batch_size = 16
    assert fixed_updates(a) == 1  # 8 // 16 = 0 -> at least one update


def test_the_shape_is_frozen():
    """Catches: a shape that code could change after the CLI computed it."""
    with pytest.raises(dataclasses.FrozenInstanceError):
        RunShape(dp_size=1, step_estimator=True, micro_batch_size=1).dp_size = 2


# ------------------------------------------------------------------------------------------------ the real CLI

BASE = ["--actor.model_name_or_path", "m", "--vllm.num_engines", "1", "--rollout.batch_size", "4",
        "--rollout.n_samples_per_prompt", "2", "--algo.kl.init_coef", "0", "--env.name", "toy"]


@pytest.mark.parametrize("nodes, gpus, ring, tp, micro, mini, dp", [
    (1, 1, 1, 1, 1, 4, 1),
    (1, 4, 1, 1, 2, 16, 4),
    (2, 4, 1, 2, 1, 8, 4),  # tensor-parallel pairs
    (1, 8, 1, 4, 1, 6, 2),  # TP 4; (ring attention needs packing, which step samples refuse with it)
])
def test_parse_args_attaches_the_shape(nodes, gpus, ring, tp, micro, mini, dp):
    """Catches: parse_args not attaching the shape, or a shape that disagrees with the options it came from."""
    from gaca_openrlhf.cli.train_ppo import parse_args

    args = parse_args(BASE + [
        "--algo.advantage.estimator", "grpo", "--actor.num_nodes", str(nodes), "--actor.num_gpus_per_node",
        str(gpus), "--ds.ring_attn_size", str(ring), "--ds.tensor_parallel_size", str(tp),
        "--train.micro_batch_size", str(micro), "--run.mini_batch_steps", str(mini)])
    assert args.run_shape == RunShape(dp_size=dp, step_estimator=True, micro_batch_size=micro,
                                      mini_batch_steps=mini)
    assert args.train.batch_size == mini  # DeepSpeed's start-up batch from the same rule


def test_parse_args_shape_of_an_openrlhf_estimator():
    """Catches: the shape of a run with OpenRLHF's own estimator marked as a step run."""
    from gaca_openrlhf.cli.train_ppo import parse_args

    args = parse_args(BASE[:-2] + ["--algo.advantage.estimator", "group_norm", "--reward.remote_url", "http://rm",
                                   "--actor.num_gpus_per_node", "2", "--train.batch_size", "4"])
    assert args.run_shape.step_estimator is False and args.run_shape.dp_size == 2
    assert args.run_shape.updates_per_iteration == 2  # 4 prompts x 2 samples // train batch 4
