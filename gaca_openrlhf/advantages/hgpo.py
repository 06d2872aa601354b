"""HGPO's hierarchical history groups, vectorized (rules of verl-agent ``recipe/hgpo/core_hgpo.py``).

For k = 1 .. history_length + 1, a step at position p >= k - 1 of its trajectory (in step order) belongs to the
history group keyed by (task group, anchors at positions p - k + 1 .. p). Within every history group of >= 2 steps
the step returns R are normalized with the *population* std ('mean_std_norm': (R - mean) / (std + eps);
'mean_norm': R - mean). A step's advantage is the weighted mean of its non-zero group advantages with weights
(k + 1)^length_weight_alpha, normalized to sum 1 (``/ (sum + eps)`` as the public code): items that are exactly 0
(singleton groups, groups of equal returns, a return equal to its group mean) do not count. With ``base_group`` the
episode advantage A^E enters as an extra k = 0 item (weight 1^alpha = 1), also only when non-zero.

Keys are exact: level k's id is the dense id of the pair (level k-1 id, anchor k-1 positions back), so there are no
hash collisions. Cost: history_length + 1 passes of sort/unique over at most N keys -> O(K N log N) time, O(N)
memory; no Python loop over samples.
"""

from __future__ import annotations

import torch

from .segment import compact, compact_pair, segment_sum


def _population_normalize(x: torch.Tensor, seg: torch.Tensor, n: int, mode: str, eps: float) -> torch.Tensor:
    """x normalized within its segment (population std); exactly 0 in segments of one sample or of equal values."""
    count = torch.bincount(seg, minlength=n).to(x.dtype)
    mean = segment_sum(x, seg, n) / count.clamp(min=1)
    dev = x - mean[seg]
    # Equal values must give an exact 0 (it decides whether the item counts): compare min and max of the segment.
    lo = torch.full((n,), float("inf"), dtype=x.dtype).scatter_reduce_(0, seg, x, "amin")
    hi = torch.full((n,), float("-inf"), dtype=x.dtype).scatter_reduce_(0, seg, x, "amax")
    flat = (count < 2) | (lo == hi)
    if mode == "mean_std_norm":
        std = torch.sqrt(segment_sum(dev * dev, seg, n) / count.clamp(min=1))
        dev = dev / (std[seg] + eps)
    return torch.where(flat[seg], torch.zeros_like(dev), dev)


def history_group_advantage(
    group: torch.Tensor,
    n_groups: int,
    traj: torch.Tensor,
    order: torch.Tensor,
    traj_sizes: torch.Tensor,
    anchor_id: torch.Tensor,
    step_return: torch.Tensor,
    history_length: int,
    length_weight_alpha: float,
    mode: str,
    eps: float,
    base: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(HGPO advantage, weighted history-group part without the base item), in input row order.

    Args:
        group / n_groups: compact task-group index per sample and the number of groups.
        traj: compact trajectory index per sample; ``order`` sorts samples by (trajectory, step index);
            ``traj_sizes`` = steps per trajectory.
        anchor_id: int64 anchor id per sample (exact or similarity-clustered).
        step_return: R_i (rule 2, penalty included), float64.
        base: the episode advantage per sample to add as the k = 0 item, or None (no base group).
    """
    n = step_return.numel()
    g_s = group[order]
    tr_s = traj[order]
    r_s = step_return[order]
    a_s, _ = compact(anchor_id[order])
    start = torch.cumsum(traj_sizes, 0) - traj_sizes
    pos = torch.arange(n) - start[tr_s]  # position of each sorted sample within its trajectory

    num = torch.zeros(n, dtype=step_return.dtype)
    den = torch.zeros(n, dtype=step_return.dtype)
    key, n_keys, _ = compact_pair(g_s, n_groups, a_s)  # k = 1: (task group, current anchor)
    members = torch.arange(n)  # sorted positions taking part at this level
    for k in range(1, history_length + 2):
        if k > 1:
            keep = pos[members] >= k - 1
            members = members[keep]
            if members.numel() == 0:
                break
            key, n_keys, _ = compact_pair(key[keep], n_keys, a_s[members - (k - 1)])
        adv = _population_normalize(r_s[members], key, n_keys, mode, eps)
        w = float(k + 1) ** length_weight_alpha
        nz = adv != 0
        num.index_add_(0, members, torch.where(nz, w * adv, torch.zeros_like(adv)))
        den.index_add_(0, members, nz.to(adv.dtype) * w)

    hist = num / (den + eps)
    if base is not None:
        b = base[order]
        nz = b != 0
        num = num + torch.where(nz, b, torch.zeros_like(b))
        den = den + nz.to(b.dtype)
    total = num / (den + eps)
    out = torch.empty_like(total).index_copy_(0, order, total)
    hist_out = torch.empty_like(hist).index_copy_(0, order, hist)
    return out, hist_out
