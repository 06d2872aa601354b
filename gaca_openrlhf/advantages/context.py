"""StepContext: the shared, lazily computed building blocks (docs/design.md §3 rules 1-6) of every estimator.

An estimator is a pure function ``(ctx, cfg) -> AdvantageResult``; it pulls the parts it needs from ``ctx``
(episode advantage, step advantage under a singleton rule, criticality, ...). Each part is computed once per batch,
fully vectorized (unique / sort / index_add / one vector step per trajectory position), in float64, and returned in the input row order.
"""

from __future__ import annotations

from functools import cached_property
from typing import Optional

import torch

from .batch import AdvantageResult, StepBatch
from .config import AdvantageConfig
from .segment import compact, compact_pair, discounted_suffix_sum, normalize, segment_sum


class StepContext:
    """Index structures and cached estimator parts for one validated :class:`StepBatch`."""

    def __init__(self, batch: StepBatch, cfg: AdvantageConfig, estimator: str = ""):
        self.batch = batch
        self.cfg = cfg
        self.estimator = estimator
        self.n = len(batch)

    # ---------------------------------------------------------------- indices
    @cached_property
    def group(self) -> tuple[torch.Tensor, int]:
        """(compact task-group index per sample, number of groups)."""
        return compact(self.batch.group_id)

    @cached_property
    def traj(self) -> tuple[torch.Tensor, int]:
        """(compact trajectory index per sample, number of trajectories); a trajectory is a (group, traj) pair."""
        g, n_g = self.group
        idx, n_traj = compact(self.batch.traj_id)
        # Fast path: traj ids unique across groups (the usual case) -> the traj id alone identifies the pair.
        lo = torch.full((n_traj,), n_g, dtype=g.dtype).scatter_reduce_(0, idx, g, "amin")
        hi = torch.full((n_traj,), -1, dtype=g.dtype).scatter_reduce_(0, idx, g, "amax")
        if torch.equal(lo, hi):
            return idx, n_traj
        idx, n_traj, _ = compact_pair(g, n_g, self.batch.traj_id)
        return idx, n_traj

    @cached_property
    def order(self) -> torch.Tensor:
        """Permutation sorting the samples by (trajectory, step index): each trajectory contiguous, in time order."""
        tr, _ = self.traj
        t = self.batch.step_index
        t_span = int(t.max()) + 1
        key = tr * t_span + t
        key_sorted, order = torch.sort(key, stable=True)
        dup = (key_sorted[1:] == key_sorted[:-1]).nonzero().flatten()
        if dup.numel():
            i, j = order[dup[0]].item(), order[dup[0] + 1].item()
            raise ValueError(
                f"step_index repeated within a trajectory: samples {i} and {j} "
                f"(group {self.batch.group_id[i].item()}, traj {self.batch.traj_id[i].item()}, "
                f"t = {t[i].item()}); {dup.numel()} duplicate(s) in all"
            )
        return order

    @cached_property
    def traj_sizes(self) -> torch.Tensor:
        tr, n_traj = self.traj
        return torch.bincount(tr, minlength=n_traj)

    @cached_property
    def step_group(self) -> tuple[torch.Tensor, int, torch.Tensor]:
        """(anchor-group index per sample, number of anchor groups, size of each) -- rule 4: same group, same anchor."""
        g, n_g = self.group
        return compact_pair(g, n_g, self.batch.anchor_id)

    # ---------------------------------------------------------------- rules 1-4
    @cached_property
    def penalty(self) -> torch.Tensor:
        """c * inv_i, local to the step (rules 1-2)."""
        return self.cfg.invalid_penalty * (~self.batch.valid).to(torch.float64)

    @cached_property
    def episode_score(self) -> torch.Tensor:
        """Rule 1: S_i = sum of the env rewards of the trajectory - c * inv_i."""
        tr, n_traj = self.traj
        total = segment_sum(self.batch.reward, tr, n_traj)
        return total[tr] - self.penalty

    @cached_property
    def step_return(self) -> torch.Tensor:
        """Rule 2: R_i = sum_{k >= t} gamma^(k - t) r_k - c * inv_i (penalty after discounting, not propagated)."""
        tr, _ = self.traj
        order = self.order
        returns_sorted = discounted_suffix_sum(
            self.batch.reward[order], tr[order], self.cfg.gamma, int(self.traj_sizes.max())
        )
        returns = torch.empty_like(returns_sorted).index_copy_(0, order, returns_sorted)
        return returns - self.penalty

    @cached_property
    def episode_advantage(self) -> torch.Tensor:
        """Rule 3: A^E_i, S normalized over the task group (a one-sample group uses mean 0, std 1).

        episode_stats='trajectories': mean/std over one score per trajectory, the score of its first step sample
        (lowest t, which carries that step's own penalty) as in the public GiGPO code; every sample is then
        normalized with those statistics (a group with one trajectory uses mean 0, std 1).
        """
        cfg = self.cfg
        g, n_g = self.group
        s = self.episode_score
        if cfg.episode_stats == "steps":
            return normalize(s, g, n_g, cfg.mode, cfg.eps, singleton="unit")[0]
        tr, n_traj = self.traj
        first = self.order[torch.cumsum(self.traj_sizes, 0) - self.traj_sizes]  # first sample of each trajectory
        count = torch.bincount(g[first], minlength=n_g)
        mean = segment_sum(s[first], g[first], n_g) / count.clamp(min=1)
        dev = s[first] - mean[g[first]]
        var = segment_sum(dev * dev, g[first], n_g) / (count - 1).clamp(min=1)
        single = count == 1
        mean = torch.where(single, torch.zeros_like(mean), mean)
        std = torch.where(single, torch.ones_like(var), var.sqrt())
        out = s - mean[g]
        return out / (std[g] + cfg.eps) if cfg.mode == "mean_std_norm" else out

    @cached_property
    def group_return_advantage(self) -> torch.Tensor:
        """Rule 4 (GACA fallback): R_i normalized with all step returns of its task group; 0 for a one-sample group."""
        g, n_g = self.group
        return normalize(self.step_return, g, n_g, self.cfg.mode, self.cfg.eps, singleton="zero")[0]

    @cached_property
    def anchor_advantage(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Rule 4: (R normalized within its anchor group with singletons at 0, anchor-group size per sample)."""
        sg, n_sg, _ = self.step_group
        return normalize(self.step_return, sg, n_sg, self.cfg.mode, self.cfg.eps, singleton="zero")

    @property
    def step_group_size(self) -> torch.Tensor:
        sg, _, counts = self.step_group
        return counts[sg]

    def step_advantage(self, singleton_rule: str) -> torch.Tensor:
        """Rule 4: A^S_i; a singleton anchor group gets 0 ('zero', GiGPO) or the group-wide fallback ('group', GACA)."""
        a_s, size = self.anchor_advantage
        if singleton_rule == "zero":
            return a_s
        if singleton_rule == "group":
            return torch.where(size == 1, self.group_return_advantage, a_s)
        raise ValueError(f"unknown singleton_rule {singleton_rule!r}")

    # ---------------------------------------------------------------- rules 5-6
    def criticality(self, permute: bool = False) -> torch.Tensor:
        """Rule 5: c_i = l_i / mean_{j in tau} l_j (1 where that mean is not positive or not finite).

        permute=True (ablation): the trajectory's criticalities are shuffled among its own steps with a generator
        seeded by ``cfg.permutation_seed`` (the random keys follow (trajectory, t) order, so the result does not
        depend on the row order of the batch). Then the NLL share: c' = alpha_c c + (1 - alpha_c) (rule 7).
        """
        if self.batch.nll is None:
            raise ValueError(f"estimator {self.estimator!r} needs StepBatch.nll (mean response NLL per step)")
        tr, n_traj = self.traj
        nll = self.batch.nll
        traj_mean = segment_sum(nll, tr, n_traj) / self.traj_sizes.clamp(min=1)
        ok = (traj_mean > 0) & torch.isfinite(traj_mean)
        c = torch.where(ok[tr], nll / torch.where(ok, traj_mean, torch.ones_like(traj_mean))[tr], torch.ones_like(nll))
        if permute:
            c = self._permute_within_trajectories(c)
        a_c = self.cfg.alpha_c
        return c if a_c == 1.0 else a_c * c + (1.0 - a_c)

    def _permute_within_trajectories(self, x: torch.Tensor) -> torch.Tensor:
        tr, _ = self.traj
        order = self.order  # canonical (trajectory, t) order
        gen = torch.Generator().manual_seed(int(self.cfg.permutation_seed))
        rank = torch.randperm(self.n, generator=gen)  # random key per canonical position, no ties
        shuffled = order[torch.argsort(tr[order] * self.n + rank)]  # same trajectory blocks, random order inside
        out = torch.empty_like(x)
        out[order] = x[shuffled]
        return out

    def gate(self, c: torch.Tensor) -> torch.Tensor:
        """Rule 6: lambda_i = clip(lambda0 (1 + alpha c_i), 0, 1)."""
        return (self.cfg.lambda0 * (1.0 + self.cfg.alpha * c)).clamp(0.0, 1.0)

    # ---------------------------------------------------------------- output
    def result(
        self,
        advantage: torch.Tensor,
        step_advantage: torch.Tensor,
        criticality: Optional[torch.Tensor] = None,
        lambda_: Optional[torch.Tensor] = None,
    ) -> AdvantageResult:
        """Bundle an estimator's output with the shared parts (episode advantage, returns, scores, group sizes)."""
        return AdvantageResult(
            estimator=self.estimator,
            advantage=advantage,
            episode_advantage=self.episode_advantage,
            step_advantage=step_advantage,
            step_return=self.step_return,
            episode_score=self.episode_score,
            step_group_size=self.step_group_size,
            criticality=criticality,
            lambda_=lambda_,
            entropy=self.batch.entropy,
        )
