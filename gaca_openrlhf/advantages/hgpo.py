"""HGPO's hierarchical history groups, vectorized (rules of verl-agent ``recipe/hgpo/core_hgpo.py``).

For k = 1 .. history_length + 1, a step at position p >= k - 1 of its trajectory (in step order) belongs to the
history group keyed by (task group, anchors at positions p - k + 1 .. p). Within every history group of >= 2 steps
the step returns R are normalized with the *population* std ('mean_std_norm': (R - mean) / (std + eps);
'mean_norm': R - mean). A step's advantage is the weighted mean of its non-zero group advantages with weights
(k + 1)^length_weight_alpha, normalized to sum 1 (``/ (sum + eps)`` as the public code): items that are exactly 0
(singleton groups, groups of equal returns, a return equal to its group mean) do not count. With ``base_group`` the
episode advantage A^E enters as an extra k = 0 item (weight 1^alpha = 1), also only when non-zero.

Keys are exact: level k's id is the dense id of the pair (level k-1 id, anchor k-1 positions back), so there are no
hash collisions. Cost: level 1 reuses the anchor groups every estimator builds; each higher level is one sort/unique
over the steps still in a non-flat group -> O(K N log N) time at worst, O(N) memory; no Python loop over samples.
"""

from __future__ import annotations

import torch

from .segment import flat_segments, segment_sum


def _population_normalize(
    x: torch.Tensor, seg: torch.Tensor, n: int, mode: str, eps: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """(x normalized within its segment with the population std, per-segment 'flat' flag).

    A segment is flat when it has one sample or all its values are equal; its samples get exactly 0 (that decides
    whether the item counts, so it must not be rounding noise).
    """
    count = torch.bincount(seg, minlength=n).to(x.dtype)
    mean = segment_sum(x, seg, n) / count.clamp(min=1)
    dev = x - mean[seg]
    flat = flat_segments(x, seg, n, count)
    if mode == "mean_std_norm":
        std = torch.sqrt(segment_sum(dev * dev, seg, n) / count.clamp(min=1))
        dev = dev / (std[seg] + eps)
    return torch.where(flat[seg], torch.zeros_like(dev), dev), flat


def _dense_pair(a: torch.Tensor, b: torch.Tensor, n_b: int) -> tuple[torch.Tensor, int]:
    """Dense ids of the pairs (a, b), b in [0, n_b): a bincount/cumsum remap when the pair range is small (O(range)),
    else a sort (torch.unique)."""
    pair = a * n_b + b  # < N^2: fits int64
    span = int(pair.max()) + 1 if pair.numel() else 0
    if span <= 8 * pair.numel() + 4096:
        present = torch.bincount(pair, minlength=span) > 0
        remap = torch.cumsum(present, 0) - 1
        return remap[pair], int(remap[-1]) + 1 if span else 0
    uniq, inv = torch.unique(pair, sorted=True, return_inverse=True)
    return inv, int(uniq.numel())


def history_group_advantage(
    group: torch.Tensor,
    n_groups: int,
    traj: torch.Tensor,
    order: torch.Tensor,
    traj_sizes: torch.Tensor,
    anchor_group: torch.Tensor,
    n_anchor_groups: int,
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
        anchor_group / n_anchor_groups: compact (task group, anchor) index per sample, sorted by (group, anchor)
            as :func:`.segment.compact_pair` makes it -- the k = 1 history groups.
        step_return: R_i (rule 2, penalty included), float64.
        base: the episode advantage per sample to add as the k = 0 item, or None (no base group).

    A level-k group is a subset of one level-(k-1) group (one more anchor must match), so a step whose level-(k-1)
    group is flat (singleton or equal returns) only has flat groups above it: it leaves the computation early.
    """
    n = step_return.numel()
    tr_s = traj[order]
    r_s = step_return[order]
    # Earlier anchors are coded by their rank among the anchors of the task group: within one trajectory the task
    # group is fixed, so the rank identifies the anchor exactly. anchor_group ids are sorted by (group, anchor), so a
    # group's anchors are a contiguous id range and the rank is the id minus the group's first id (no extra sort).
    first = torch.full((n_groups,), n_anchor_groups, dtype=anchor_group.dtype).scatter_reduce_(
        0, group, anchor_group, "amin")
    local = anchor_group - first[group]
    n_local = int(local.max()) + 1 if n else 1
    a_s = local[order]
    start = torch.cumsum(traj_sizes, 0) - traj_sizes
    pos = torch.arange(n) - start[tr_s]  # position of each sorted sample within its trajectory

    num = torch.zeros(n, dtype=step_return.dtype)
    den = torch.zeros(n, dtype=step_return.dtype)
    key, n_keys = anchor_group[order], n_anchor_groups  # k = 1: (task group, current anchor)
    members = torch.arange(n)  # sorted positions still in a non-flat group
    for k in range(1, history_length + 2):
        if k > 1:
            keep = (pos[members] >= k - 1) & ~flat[key]
            members = members[keep]
            if members.numel() == 0:
                break
            key, n_keys = _dense_pair(key[keep], a_s[members - (k - 1)], n_local)
        adv, flat = _population_normalize(r_s[members], key, n_keys, mode, eps)
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
