"""Estimator registry (in the style of verl's ``core_algos.register_adv_est``) and the one entry point.

Adding an estimator is one decorated function::

    @register_estimator("my_estimator", mixture=False)
    def my_estimator(ctx: StepContext, cfg: AdvantageConfig) -> AdvantageResult:
        return ctx.result(advantage=ctx.episode_advantage, step_advantage=ctx.step_advantage("zero"))
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Callable, Optional, Sequence

import torch

from .batch import AdvantageResult, StepBatch
from .config import AdvantageConfig
from .context import StepContext
from .segment import flat_segments, segment_sum
from .similarity import similarity_anchor_ids

EstimatorFn = Callable[[StepContext, AdvantageConfig], AdvantageResult]


@dataclass(frozen=True)
class EstimatorSpec:
    name: str
    fn: EstimatorFn
    mixture: bool  # produces a per-step lambda (reported as "lambda")
    needs_nll: bool
    needs_entropy: bool = False  # reads StepBatch.entropy (EMPG)


_REGISTRY: dict[str, EstimatorSpec] = {}


def register_estimator(name: str, *, mixture: bool = False, needs_nll: bool = False, needs_entropy: bool = False):
    """Decorator registering ``fn(ctx, cfg) -> AdvantageResult`` under ``name``."""

    def deco(fn: EstimatorFn) -> EstimatorFn:
        if name in _REGISTRY and _REGISTRY[name].fn is not fn:
            raise ValueError(f"advantage estimator {name!r} is already registered")
        _REGISTRY[name] = EstimatorSpec(name=name, fn=fn, mixture=mixture, needs_nll=needs_nll,
                                        needs_entropy=needs_entropy)
        return fn

    return deco


def get_estimator(name: str) -> EstimatorSpec:
    try:
        return _REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown advantage estimator {name!r}; registered: {list_estimators()}") from None


def list_estimators() -> list[str]:
    return sorted(_REGISTRY)


def is_step_estimator(name: str) -> bool:
    """Whether ``name`` is one of this registry's estimators (one sample per environment step, the step-level agent
    rollouts), as opposed to OpenRLHF's own (``gae``, ``reinforce``, ``rloo``, ``group_norm``, ...): the one test of
    "is this a step estimator?" that the CLI, the trainer and the experience maker share."""
    return name in _REGISTRY


def compute_advantages(
    batch: StepBatch,
    cfg: Optional[AdvantageConfig] = None,
    estimator: Optional[str] = None,
    anchor_text: Optional[Sequence[str]] = None,
) -> AdvantageResult:
    """Per-step advantages of ``batch`` with the estimator ``estimator`` (default: ``cfg.estimator``).

    Validates the batch (NaN/inf rewards or NLLs raise ``ValueError`` naming the samples), runs the estimator in
    float64 and returns tensors of ``cfg.dtype`` aligned with the batch rows. An empty batch gives empty tensors.
    With ``cfg.similarity_grouping``, ``anchor_text`` (one string per row) replaces exact anchor ids by
    similarity clusters first (:func:`.similarity.similarity_anchor_ids`); it is ignored otherwise.
    """
    cfg = cfg or AdvantageConfig()
    spec = get_estimator(estimator or cfg.estimator)
    batch = batch.validated()
    if spec.needs_nll and batch.nll is None:
        raise ValueError(f"estimator {spec.name!r} needs StepBatch.nll (mean response NLL per step)")
    if spec.needs_entropy and batch.entropy is None:
        raise ValueError(f"estimator {spec.name!r} needs StepBatch.entropy (mean token entropy per step)")
    if cfg.similarity_grouping and len(batch):
        if anchor_text is None:
            raise ValueError("similarity_grouping needs the anchor text of every step (anchor_text=...)")
        if len(anchor_text) != len(batch):
            raise ValueError(f"anchor_text has {len(anchor_text)} entries for {len(batch)} steps")
        batch = dataclasses.replace(batch, anchor_id=similarity_anchor_ids(
            anchor_text, batch.group_id, cfg.similarity_threshold, cfg.similarity_max_comparisons))
    if len(batch) == 0:
        empty = torch.zeros(0, dtype=cfg.torch_dtype)
        return AdvantageResult(
            estimator=spec.name,
            advantage=empty,
            episode_advantage=empty.clone(),
            step_advantage=empty.clone(),
            step_return=empty.clone(),
            episode_score=empty.clone(),
            step_group_size=torch.zeros(0, dtype=torch.int64),
            criticality=empty.clone() if spec.needs_nll else None,
            lambda_=empty.clone() if spec.mixture else None,
            entropy=empty.clone() if batch.entropy is not None else None,
        )
    ctx = StepContext(batch, cfg, estimator=spec.name)
    result = spec.fn(ctx, cfg)
    if cfg.center != "none":
        seg, n = ctx.group if cfg.center == "group" else (torch.zeros(len(batch), dtype=torch.long), 1)
        result = dataclasses.replace(result, advantage=center_segments(result.advantage, seg, n))
    return result.to(cfg.torch_dtype)


#: a segment mean at or below this share of the segment's largest |x| is rounding noise of an already centred segment
CENTER_RTOL = 1e-12


def center_segments(x: torch.Tensor, seg: torch.Tensor, n: int) -> torch.Tensor:
    """``x`` minus the mean of its segment (``AdvantageConfig.center``). Exact where the answer is known: a segment
    whose values are all equal gets 0, and a segment already centred (GRPO's, GiGPO's: mean ~1e-17) is left as it
    is, so its zero advantages stay exactly 0 instead of becoming +-1e-17 (which a sign would read as credit)."""
    count = torch.bincount(seg, minlength=n).to(x.dtype)
    mean = segment_sum(x, seg, n) / count.clamp(min=1)
    scale = torch.zeros(n, dtype=x.dtype).scatter_reduce_(0, seg, x.abs(), "amax")
    mean = torch.where(mean.abs() <= CENTER_RTOL * scale, torch.zeros_like(mean), mean)
    return torch.where(flat_segments(x, seg, n, count)[seg], torch.zeros_like(x), x - mean[seg])
