"""Input (one batch of step samples) and output (advantage + its parts) of the estimators."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Optional, Sequence

import torch

_MAX_LISTED = 10  # offending sample indices named in an error message


@dataclass
class StepBatch:
    """One training batch of environment-step samples (docs/design.md §2.1), all 1-D tensors of length N.

    Rows may come in any order (rollout order, shuffled, ...): the estimators are equivariant to permutations of the
    samples. A trajectory is identified by the pair (group_id, traj_id), so traj ids only need to be unique within
    a group.

    Attributes:
        group_id: int64, the task group (the n rollouts of one task).
        traj_id: int64, the trajectory (episode) within its group.
        step_index: int64, t >= 0; unique within a trajectory. Steps are discounted by their rank in t order
            (equal to t when a trajectory's steps are 0..T-1, the normal case).
        anchor_id: int64, hash of the raw environment observation at this step (see :mod:`.hashing`).
        reward: float, env reward r_t of this step (the episode reward usually sits on the last step).
        valid: bool, whether the step's action was valid (an invalid one is penalized by ``invalid_penalty``).
        nll: float or None, mean over the response tokens of -log pi_old(token) (rule 5); only GACA needs it.
        entropy: float or None, mean over the response tokens of the full-distribution entropy of pi_old at that
            token (EMPG's step uncertainty H_t); only EMPG needs it.
    """

    group_id: torch.Tensor
    traj_id: torch.Tensor
    step_index: torch.Tensor
    anchor_id: torch.Tensor
    reward: torch.Tensor
    valid: torch.Tensor
    nll: Optional[torch.Tensor] = None
    entropy: Optional[torch.Tensor] = None

    def __len__(self) -> int:
        return int(self.reward.shape[0])

    @classmethod
    def from_lists(
        cls,
        group_id: Sequence[int],
        traj_id: Sequence[int],
        step_index: Sequence[int],
        anchor_id: Sequence[int],
        reward: Sequence[float],
        valid: Sequence[bool],
        nll: Optional[Sequence[float]] = None,
        entropy: Optional[Sequence[float]] = None,
    ) -> "StepBatch":
        """Build a batch from Python sequences of ints/floats/bools."""
        as_long = lambda xs: torch.as_tensor(list(xs), dtype=torch.int64)  # noqa: E731
        as_f64 = lambda xs: torch.as_tensor(list(xs), dtype=torch.float64)  # noqa: E731
        return cls(
            group_id=as_long(group_id),
            traj_id=as_long(traj_id),
            step_index=as_long(step_index),
            anchor_id=as_long(anchor_id),
            reward=as_f64(reward),
            valid=torch.as_tensor(list(valid), dtype=torch.bool),
            nll=None if nll is None else as_f64(nll),
            entropy=None if entropy is None else as_f64(entropy),
        )

    def index_select(self, index: torch.Tensor) -> "StepBatch":
        """The batch restricted/reordered to ``index`` (used e.g. by permutation tests)."""
        return StepBatch(**{f.name: (None if getattr(self, f.name) is None else getattr(self, f.name)[index])
                            for f in fields(self)})

    def validated(self) -> "StepBatch":
        """Checked and canonicalized copy: int64 ids, float64 reward/nll, bool valid.

        Raises:
            ValueError: on shape mismatches, non-integer ids, negative step indices, NaN/inf rewards or NLLs
                (naming the offending sample indices), or a step index repeated within a trajectory.
        """
        n = len(self)
        out = {}
        for f in fields(self):
            x = getattr(self, f.name)
            if x is None:
                out[f.name] = None
                continue
            if not isinstance(x, torch.Tensor):
                x = torch.as_tensor(x)
            if x.dim() != 1 or x.shape[0] != n:
                raise ValueError(f"StepBatch.{f.name} must be a 1-D tensor of length {n}, got shape {tuple(x.shape)}")
            if f.name in ("group_id", "traj_id", "step_index", "anchor_id"):
                if x.is_floating_point() or x.is_complex():
                    raise ValueError(f"StepBatch.{f.name} must hold integers, got dtype {x.dtype}")
                x = x.to(torch.int64)
            elif f.name == "valid":
                if x.is_floating_point():
                    _check_finite(x, "valid")
                x = x != 0
            else:  # reward, nll, entropy
                x = x.to(torch.float64)
                _check_finite(x, f.name)
            out[f.name] = x.cpu()
        bad = (out["step_index"] < 0).nonzero().flatten()
        if bad.numel():
            raise ValueError(f"negative step_index at sample indices {_list(bad)}")
        return StepBatch(**out)


def _list(idx: torch.Tensor) -> str:
    shown = idx[:_MAX_LISTED].tolist()
    more = f" ... ({idx.numel()} in all)" if idx.numel() > _MAX_LISTED else ""
    return f"{shown}{more}"


def _check_finite(x: torch.Tensor, name: str) -> None:
    bad = (~torch.isfinite(x)).nonzero().flatten()
    if bad.numel():
        raise ValueError(f"non-finite {name} (NaN or inf) at sample indices {_list(bad)}: {x[bad[:_MAX_LISTED]].tolist()}")


@dataclass
class AdvantageResult:
    """Per-step advantage and its parts, all 1-D tensors aligned with the input batch rows.

    Attributes:
        estimator: name of the estimator that produced it.
        advantage: A_i, to broadcast over the step's response tokens (rule 8).
        episode_advantage: A^E_i (rule 3).
        step_advantage: A^S_i (rule 4, with the estimator's singleton rule; GRPO reports GiGPO's A^S for logging).
        step_return: R_i (rule 2, penalty included).
        episode_score: S_i (rule 1, penalty included).
        step_group_size: size of the anchor-state group of sample i (int64).
        criticality: c_i of GACA variants (after permutation / NLL share), else None.
        lambda_: the mixing weight of mixtures (GACA variants, fixed_mixture), else None.
        entropy: the step's mean token entropy under pi_old when the batch carries it (EMPG's H_t), else None.
    """

    estimator: str
    advantage: torch.Tensor
    episode_advantage: torch.Tensor
    step_advantage: torch.Tensor
    step_return: torch.Tensor
    episode_score: torch.Tensor
    step_group_size: torch.Tensor
    criticality: Optional[torch.Tensor] = None
    lambda_: Optional[torch.Tensor] = None
    entropy: Optional[torch.Tensor] = None

    def to(self, dtype: torch.dtype) -> "AdvantageResult":
        """Floating tensors cast to ``dtype`` (ints and None kept)."""
        cast = lambda x: x.to(dtype) if isinstance(x, torch.Tensor) and x.is_floating_point() else x  # noqa: E731
        return AdvantageResult(**{f.name: cast(getattr(self, f.name)) for f in fields(self)})

    def to_dict(self) -> dict:
        """Plain-Python view (lists), omitting parts that are None; ``lambda_`` is written as ``lambda``."""
        out = {}
        for f in fields(self):
            x = getattr(self, f.name)
            if x is None:
                continue
            out["lambda" if f.name == "lambda_" else f.name] = x.tolist() if isinstance(x, torch.Tensor) else x
        return out


def mean_response_nll(log_probs: torch.Tensor, action_mask: torch.Tensor) -> torch.Tensor:
    """Rule 5's l_i from (B, A) rollout log-probs: the mean over response tokens of -log pi_old(token).

    Padding positions (action_mask 0) are ignored even if they hold -inf/NaN; a row without response tokens gets 0
    (a trajectory whose mean NLL is not positive falls back to criticality 1).
    """
    mask = action_mask.bool()
    nll = torch.where(mask, -log_probs.to(torch.float64), torch.zeros((), dtype=torch.float64))
    return nll.sum(dim=-1) / mask.sum(dim=-1).clamp(min=1).to(torch.float64)
