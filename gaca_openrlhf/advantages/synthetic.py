"""Synthetic ALFWorld-like step batches for benchmarks and tests (vectorized generation, seeded)."""

from __future__ import annotations

from typing import Any

import torch

from .batch import StepBatch


def synthetic_batch(
    n_tasks: int = 16,
    n_rollouts: int = 8,
    max_steps: int = 50,
    *,
    seed: int = 0,
    full_length: bool = False,
    n_states: int = 6,
    success_prob: float = 0.4,
    invalid_prob: float = 0.1,
) -> StepBatch:
    """A batch of ``n_tasks x n_rollouts`` trajectories of up to ``max_steps`` steps, in rollout (step-major) order.

    Anchors repeat within a task (each step visits one of ``n_states`` states, so anchor groups of many sizes,
    singletons included, appear); successful trajectories earn reward 10 on their last step; NLLs are log-normal;
    step entropies uniform in [0, 2).
    ``full_length=True`` makes every trajectory exactly ``max_steps`` long (the paper-sized worst case).
    """
    gen = torch.Generator().manual_seed(seed)
    n_traj = n_tasks * n_rollouts
    if full_length:
        lengths = torch.full((n_traj,), max_steps, dtype=torch.int64)
    else:
        lengths = torch.randint(1, max_steps + 1, (n_traj,), generator=gen)
    t = torch.arange(max_steps).repeat_interleave(n_traj)  # step-major rollout order
    traj = torch.arange(n_traj).repeat(max_steps)
    keep = t < lengths[traj]
    t, traj = t[keep], traj[keep]
    n = int(t.numel())
    group = traj // n_rollouts
    # State index per step: the start state is shared by the whole task; later ones drawn from a small pool.
    state = torch.randint(0, n_states, (n,), generator=gen)
    state = torch.where(t == 0, torch.zeros_like(state), state + 1)
    anchor = group * (n_states + 2) + state
    success = torch.rand(n_traj, generator=gen) < success_prob
    last = t == lengths[traj] - 1
    reward = torch.where(last & success[traj], 10.0, 0.0).to(torch.float64)
    valid = torch.rand(n, generator=gen) >= invalid_prob
    nll = torch.exp(torch.randn(n, generator=gen, dtype=torch.float64) * 0.5 - 1.0)
    entropy = torch.rand(n, generator=gen, dtype=torch.float64) * 2.0  # drawn last: earlier fields keep their values
    return StepBatch(group_id=group, traj_id=traj, step_index=t, anchor_id=anchor, reward=reward, valid=valid, nll=nll,
                     entropy=entropy)


def batch_to_case(batch: StepBatch, name: str, estimator: str = "gaca", **fields: Any) -> dict[str, Any]:
    """A reference-format case (as read by the CLI) holding ``batch``; anchors written as strings."""
    steps = {
        "group": batch.group_id.tolist(),
        "traj": batch.traj_id.tolist(),
        "t": batch.step_index.tolist(),
        "anchor": [f"obs-{a}" for a in batch.anchor_id.tolist()],
        "reward": batch.reward.tolist(),
        "valid": batch.valid.tolist(),
    }
    if batch.nll is not None:
        steps["nll"] = batch.nll.tolist()
    if batch.entropy is not None:
        steps["entropy"] = batch.entropy.tolist()
    return {"name": name, "estimator": estimator, "mode": "mean_std_norm", "gamma": 0.95, "invalid_penalty": 0.1,
            "epsilon": 1e-6, "params": {}, **fields, "steps": steps}
