"""Vectorized segment (grouped) operations: no Python loop over samples anywhere.

A "segment" is any partition of the batch (task groups, trajectories, anchor-state groups), given as a compact
index tensor ``seg`` with values in [0, n). Everything runs on float64 so that 50-step discounted sums and
(x - mean) / (std + 1e-6) stay accurate to far below the 1e-4 tolerance of the reference vectors.
"""

from __future__ import annotations

import torch


def compact(ids: torch.Tensor) -> tuple[torch.Tensor, int]:
    """Map arbitrary int64 ids to 0..n-1 (sorted by id). Returns (index per sample, n).

    Small non-negative ids (the usual task/trajectory counters) take an O(N) bincount path; others (e.g. anchor
    hashes) sort via ``torch.unique``. Both give the same result.
    """
    if ids.numel() and int(ids.min()) >= 0 and int(ids.max()) < 2 * ids.numel() + 1024:
        present = torch.bincount(ids) > 0
        remap = torch.cumsum(present, 0) - 1
        return remap[ids], int(remap[-1]) + 1
    uniq, inv = torch.unique(ids, sorted=True, return_inverse=True)
    return inv, int(uniq.numel())


def compact_pair(a: torch.Tensor, n_a: int, b_ids: torch.Tensor) -> tuple[torch.Tensor, int, torch.Tensor]:
    """Compact index of the pair (a, b) where a is already compact in [0, n_a) and b is arbitrary int64 ids.

    Returns (index per sample, number of pairs, size of each pair's segment).
    """
    b, n_b = compact(b_ids)
    key = a * n_b + b  # < n_a * n_b <= N^2: fits int64 for any realistic N
    uniq, inv, counts = torch.unique(key, sorted=True, return_inverse=True, return_counts=True)
    return inv, int(uniq.numel()), counts


def segment_sum(x: torch.Tensor, seg: torch.Tensor, n: int) -> torch.Tensor:
    return torch.zeros(n, dtype=x.dtype).index_add_(0, seg, x)


def segment_mean_std(x: torch.Tensor, seg: torch.Tensor, n: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per-segment (count, mean, unbiased std). Two-pass variance for accuracy; std of a 1-sample segment is 0."""
    count = torch.bincount(seg, minlength=n).to(x.dtype)
    mean = segment_sum(x, seg, n) / count.clamp(min=1)
    dev = x - mean[seg]
    sq_dev = segment_sum(dev * dev, seg, n)
    std = torch.sqrt(sq_dev / (count - 1).clamp(min=1))
    return count, mean, std


def flat_segments(x: torch.Tensor, seg: torch.Tensor, n: int, count: torch.Tensor) -> torch.Tensor:
    """Per segment: True when it has fewer than 2 samples or all its values are exactly equal (min == max), so that
    a caller can give it exactly 0 rather than the rounding noise of x - mean."""
    lo = torch.full((n,), float("inf"), dtype=x.dtype).scatter_reduce_(0, seg, x, "amin")
    hi = torch.full((n,), float("-inf"), dtype=x.dtype).scatter_reduce_(0, seg, x, "amax")
    return (count < 2) | (lo == hi)


def normalize(
    x: torch.Tensor, seg: torch.Tensor, n: int, mode: str, eps: float, singleton: str
) -> tuple[torch.Tensor, torch.Tensor]:
    """Normalize x within its segment (rules 3-4). Returns (normalized x, segment size per sample).

    mode: 'mean_std_norm' -> (x - mean) / (std + eps) with the unbiased std; 'mean_norm' -> x - mean.
    singleton: what a 1-sample segment gets:
        'unit' -> statistics mean 0, std 1 (rule 3: a one-sample group keeps its score, / (1 + eps));
        'zero' -> 0 (its own mean; rule 4 GiGPO and the GACA group fallback of a one-sample group).
    A zero-variance segment of >= 2 samples gives exactly 0 (x - mean = 0 up to rounding, / (0 + eps)).
    """
    count, mean, std = segment_mean_std(x, seg, n)
    single = count == 1
    if singleton == "unit":
        mean = torch.where(single, torch.zeros_like(mean), mean)
        std = torch.where(single, torch.ones_like(std), std)
    elif singleton == "zero":
        mean = torch.where(single, torch.zeros_like(mean), mean)  # value replaced below; avoids -0.0 noise
    else:
        raise ValueError(f"unknown singleton handling {singleton!r}")
    out = x - mean[seg]
    if mode == "mean_std_norm":
        out = out / (std[seg] + eps)
    if singleton == "zero":
        out = torch.where(single[seg], torch.zeros_like(out), out)
    return out, count[seg]


def discounted_suffix_sum(r: torch.Tensor, seg: torch.Tensor, gamma: float, max_len: int) -> torch.Tensor:
    """R_p = r_p + gamma R_{p+1} within each segment, on data sorted by (segment, position) (rule 2).

    The public code's backward recursion, run for all segments at once: the rewards are laid out as a
    [segments, max_len] matrix padded with 0 and one vector step per position replaces the per-sample loop
    (O(max_len) passes over the segments, max_len <= the env's step limit). Doing exactly the recursion's float
    operations matters: two steps whose reward suffixes are equal up to leading zeros (0, 10, x, -4 vs 10, x, -4)
    then get bit-identical returns, so a group of equal returns is exactly flat (HGPO/GiGPO's `!= 0` item rules
    and mean_std_norm's 1/eps amplification depend on it). A log-depth scan sums in another order and breaks ties.
    """
    n = r.numel()
    if n == 0:
        return r.clone()
    starts = torch.ones(n, dtype=torch.bool)
    starts[1:] = seg[1:] != seg[:-1]
    row = torch.cumsum(starts, 0) - 1  # dense segment index
    first = torch.nonzero(starts).squeeze(1)
    pos = torch.arange(n) - first[row]
    width = max(int(max_len), int(pos.max()) + 1)
    mat = torch.zeros(int(row[-1]) + 1, width, dtype=r.dtype)
    mat[row, pos] = r
    running = torch.zeros(mat.shape[0], dtype=r.dtype)
    for p in range(width - 1, -1, -1):  # positions, not samples
        running = mat[:, p] + gamma * running
        mat[:, p] = running
    return mat[row, pos]
