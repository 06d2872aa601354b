"""Critic-free step-level advantage estimators: GRPO, GiGPO, GACA and the GACA paper's ablations, and the closest
published peers HGPO (verl-agent's recipe, :mod:`.hgpo`) and EMPG (arXiv 2509.09265); GiGPO's similarity grouping
of anchor texts (:mod:`.similarity`) is an option of every anchor-based estimator.

Pure PyTorch (no Ray, vLLM or DeepSpeed), vectorized over the whole batch. docs/design.md §3 defines each rule;
comments cite them as "rule N".

    from gaca_openrlhf.advantages import AdvantageConfig, StepBatch, compute_advantages
    result = compute_advantages(batch, AdvantageConfig(estimator="gaca"))
    advantages = result.advantage[:, None] * action_mask    # rule 8

Command line: ``python -m gaca_openrlhf.advantages --cases IN.json --out OUT.json [--time]``.
"""

from . import estimators as _estimators  # noqa: F401  (registers the built-in estimators)
from .batch import AdvantageResult, StepBatch, mean_response_nll
from .config import AdvantageConfig
from .context import StepContext
from .hashing import hash_anchor, hash_anchors
from .metrics import summary_metrics
from .registry import (EstimatorSpec, compute_advantages, get_estimator, is_step_estimator, list_estimators,
                       register_estimator)
from .segment import discounted_suffix_sum

__all__ = [
    "AdvantageConfig",
    "AdvantageResult",
    "EstimatorSpec",
    "StepBatch",
    "StepContext",
    "compute_advantages",
    "discounted_suffix_sum",
    "get_estimator",
    "hash_anchor",
    "hash_anchors",
    "is_step_estimator",
    "list_estimators",
    "mean_response_nll",
    "register_estimator",
    "summary_metrics",
]

