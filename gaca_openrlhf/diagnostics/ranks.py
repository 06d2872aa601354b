"""Rank statistics for the credit audit: average ranks with ties and Spearman's rank correlation (pure NumPy).

Kept here rather than taken from SciPy, which the project does not install.
"""
from __future__ import annotations

import numpy as np


def average_ranks(x) -> np.ndarray:
    """Ranks 1..n of the 1-D array ``x``, tied values sharing the mean of their ranks (SciPy's ``rankdata``)."""
    a = np.asarray(x, dtype=np.float64)
    if a.ndim != 1:
        raise ValueError(f"average_ranks needs a 1-D array, got shape {a.shape}")
    if not np.isfinite(a).all():
        raise ValueError("average_ranks: the values hold NaN or inf")
    n = a.size
    order = np.argsort(a, kind="stable")
    s = a[order]
    # a new tie block starts wherever the sorted value changes
    start = np.r_[True, s[1:] != s[:-1]] if n else np.zeros(0, dtype=bool)
    block = np.cumsum(start) - 1
    first = np.flatnonzero(start)
    last = np.r_[first[1:], n] - 1
    mean_rank = (first + last) / 2.0 + 1.0
    ranks = np.empty(n, dtype=np.float64)
    ranks[order] = mean_rank[block]
    return ranks


def spearman(x, y) -> float:
    """Spearman's rank correlation of two equal-length 1-D arrays (Pearson on average ranks).

    NaN when fewer than 2 values or when either side is constant (no ranking to correlate)."""
    a, b = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"spearman needs two 1-D arrays of one length, got shapes {a.shape} and {b.shape}")
    if a.size < 2:
        return float("nan")
    ra, rb = average_ranks(a), average_ranks(b)
    ra -= ra.mean()
    rb -= rb.mean()
    den = np.sqrt((ra * ra).sum() * (rb * rb).sum())
    return float((ra * rb).sum() / den) if den > 0 else float("nan")
