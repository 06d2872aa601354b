"""Summary metrics of one advantage computation, for the training logs."""

from __future__ import annotations

import torch

from .batch import AdvantageResult


def summary_metrics(result: AdvantageResult, prefix: str = "adv/") -> dict[str, float]:
    """Scalars worth logging each iteration (empty batch -> 0.0 everywhere).

    Keys (after ``prefix``): advantage_mean, advantage_std, step_group_size_mean, singleton_frac (share of step
    samples whose anchor group has one sample), and for mixtures lambda_mean, lambda_saturated_frac (share with
    lambda == 1, i.e. pure step advantage; FACTS.md: 2.68% under a frozen policy); for GACA criticality_mean;
    entropy_mean (EMPG's step entropy H_t) when the batch carries it.
    """
    n = int(result.advantage.numel())

    def mean(x: torch.Tensor) -> float:
        return float(x.double().mean()) if n else 0.0

    out = {
        "advantage_mean": mean(result.advantage),
        "advantage_std": float(result.advantage.double().std()) if n > 1 else 0.0,
        "step_group_size_mean": mean(result.step_group_size),
        "singleton_frac": mean(result.step_group_size == 1),
    }
    if result.lambda_ is not None:
        out["lambda_mean"] = mean(result.lambda_)
        out["lambda_saturated_frac"] = mean(result.lambda_ >= 1.0)
    if result.entropy is not None:
        out["entropy_mean"] = mean(result.entropy)
    if result.criticality is not None:
        out["criticality_mean"] = mean(result.criticality)
    return {prefix + k: v for k, v in out.items()}
