"""How much learning signal an iteration carries: outcome contrast of task groups, non-zero advantages.

Pure PyTorch, vectorised over the batch (no per-sample Python loops). The trainer logs these every iteration
(``rollout/mixed_outcome_group_frac``, ``adv/nonzero_frac``, ``adv/nonzero_frac/<estimator>``; docs/design.md §4)
and the dynamic filter of step samples drops groups by :func:`group_has_contrast`.
"""
from __future__ import annotations

import dataclasses
from typing import Optional, Sequence

import torch

from .batch import StepBatch
from .config import AdvantageConfig
from .registry import compute_advantages, get_estimator, list_estimators
from .similarity import similarity_anchor_ids

#: |A| at or below this counts as zero: a homogeneous group's (x - mean) / (std + eps) is exactly 0 in exact
#: arithmetic but may come out as ~1e-16 in float64 (a mean of equal values is not always bit-equal to them)
ZERO_TOL = 1e-6
#: two episode scores closer than this are the same outcome
SCORE_TOL = 1e-9


def group_has_contrast(group_id: torch.Tensor, score: torch.Tensor, tol: float = SCORE_TOL):
    """(groups, has_contrast): the distinct group ids (sorted) and, per group, whether its episode scores vary
    (max - min > ``tol``). A group with a single episode has no contrast.

    ``group_id`` and ``score`` hold one entry per episode (not per step).
    """
    group_id = torch.as_tensor(group_id, dtype=torch.long).reshape(-1)
    score = torch.as_tensor(score, dtype=torch.float64).reshape(-1)
    if group_id.numel() != score.numel():
        raise ValueError(f"group_id has {group_id.numel()} entries, score {score.numel()}: one each per episode")
    if not bool(torch.isfinite(score).all()):
        raise ValueError(f"non-finite episode scores at positions {torch.nonzero(~torch.isfinite(score)).flatten().tolist()}")
    groups, inverse = torch.unique(group_id, return_inverse=True)
    lo = torch.full((len(groups),), float("inf"), dtype=torch.float64).scatter_reduce(0, inverse, score, "amin")
    hi = torch.full((len(groups),), float("-inf"), dtype=torch.float64).scatter_reduce(0, inverse, score, "amax")
    return groups, (hi - lo) > tol


def mixed_group_share(group_id: torch.Tensor, score: torch.Tensor, tol: float = SCORE_TOL) -> float:
    """Share of task groups whose episode scores are not all equal (NaN for no episodes)."""
    groups, contrast = group_has_contrast(group_id, score, tol)
    return float(contrast.double().mean()) if len(groups) else float("nan")


def nonzero_share(advantage: torch.Tensor, tol: float = ZERO_TOL) -> float:
    """Share of step samples with |advantage| > ``tol`` (NaN for an empty batch): the samples that move the policy
    loss (a zero advantage gives the clipped policy loss a zero gradient)."""
    advantage = torch.as_tensor(advantage).reshape(-1)
    return float((advantage.abs() > tol).double().mean()) if advantage.numel() else float("nan")


def advantages_by_estimator(batch: StepBatch, cfg: AdvantageConfig, estimators: Optional[Sequence[str]] = None,
                            anchor_text: Optional[Sequence[str]] = None) -> tuple[dict, dict]:
    """Every registered estimator (or ``estimators``) on the same ``batch``, each with ``cfg``'s other fields (its own
    singleton rule under ``auto``): ``({name: AdvantageResult}, {name: why it was not run})``. An estimator whose input
    the batch lacks (EMPG without ``batch.entropy``, GACA without ``batch.nll``) is listed as skipped. Similarity
    grouping clusters the anchors once for all of them. The trainer computes this once per iteration and hands it to
    both the learning signal (:func:`nonzero_share_by_estimator`) and the credit audit
    (:func:`gaca_openrlhf.diagnostics.credit_audit.credit_audit`)."""
    names = list(estimators) if estimators is not None else list_estimators()
    if cfg.similarity_grouping and len(batch):  # cluster the anchors once, not once per estimator
        if anchor_text is None or len(anchor_text) != len(batch):
            raise ValueError("similarity_grouping needs the anchor text of every step (anchor_text=...)")
        batch = dataclasses.replace(batch, anchor_id=similarity_anchor_ids(
            anchor_text, batch.group_id, cfg.similarity_threshold, cfg.similarity_max_comparisons))
        cfg, anchor_text = dataclasses.replace(cfg, similarity_grouping=False), None
    results, skipped = {}, {}
    for name in names:
        spec = get_estimator(name)
        if spec.needs_entropy and batch.entropy is None:
            skipped[name] = "needs StepBatch.entropy (the policy's full-vocabulary entropy)"
        elif spec.needs_nll and batch.nll is None:
            skipped[name] = "needs StepBatch.nll"
        else:
            results[name] = compute_advantages(batch, dataclasses.replace(cfg, estimator=name),
                                               anchor_text=anchor_text)
    return results, skipped


def nonzero_share_by_estimator(batch: StepBatch, cfg: AdvantageConfig, estimators: Optional[Sequence[str]] = None,
                               anchor_text: Optional[Sequence[str]] = None,
                               results: Optional[dict] = None) -> dict[str, float]:
    """{estimator: share of step samples with a non-zero advantage} on the same ``batch``: of ``results`` (an
    :func:`advantages_by_estimator` of this batch) when given, else of every estimator the batch has inputs for."""
    if results is None:
        results, _ = advantages_by_estimator(batch, cfg, estimators, anchor_text)
    return {name: nonzero_share(r.advantage) for name, r in results.items()}


def advantage_mean_by_estimator(results: dict) -> dict[str, float]:
    """{estimator: mean advantage over the step samples} of an :func:`advantages_by_estimator` result (NaN for an
    empty batch). With the token-mean policy loss a mean m shifts every sampled token's log-prob gradient by m:
    m > 0 imitates the batch's own samples, m < 0 pushes them all down, whatever the credit says
    (``AdvantageConfig.center`` removes it)."""
    return {name: float(r.advantage.double().mean()) if r.advantage.numel() else float("nan")
            for name, r in results.items()}


def token_weighted_mean(row_mean: torch.Tensor, tokens: torch.Tensor) -> float:
    """Mean per token of a per-row mean (``row_mean``) over rows of ``tokens`` tokens each: sum(row_mean x tokens)
    / sum(tokens), i.e. the mean over all tokens (NaN when there are none)."""
    row_mean = torch.as_tensor(row_mean, dtype=torch.float64).reshape(-1)
    tokens = torch.as_tensor(tokens, dtype=torch.float64).reshape(-1)
    if row_mean.numel() != tokens.numel():
        raise ValueError(f"{row_mean.numel()} row means for {tokens.numel()} token counts")
    total = float(tokens.sum())
    return float((row_mean * tokens).sum()) / total if total > 0 else float("nan")
