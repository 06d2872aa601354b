"""Intervals for success rates over training seeds and test games (a crossed bootstrap).

An RL result has two sources of chance: the training seed (which run we got) and the test games (which tasks the
panel happens to hold). ``success[s, g]`` is the success of training seed ``s`` on test game ``g`` (averaged over
evaluation seeds when there are several). The reported number is the mean over both; its 95 % interval resamples
seeds and games independently, with replacement (a two-way crossed bootstrap, percentile interval):

    mean* = mean over (s in S*, g in G*) of success[s, g]

A gain or a method difference is a difference of two such means. Its games are the same panel for both sides, so
they are resampled once and shared (paired by game); the two sides' seeds are independent runs and are resampled
independently (a warm start evaluated once is a side with one "seed").

Pure numpy; no Ray, vLLM or DeepSpeed.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

DEFAULT_BOOTSTRAP = 10_000


@dataclass(frozen=True)
class Interval:
    """``mean`` with its 95 % bootstrap interval [``lo``, ``hi``]; ``seeds`` and ``games`` it rests on."""

    mean: float
    lo: float
    hi: float
    seeds: int
    games: int

    def fmt(self, scale: float = 100.0, digits: int = 1) -> str:
        return f"{scale * self.mean:+.{digits}f} [{scale * self.lo:+.{digits}f}, {scale * self.hi:+.{digits}f}]"

    def fmt_level(self, scale: float = 100.0, digits: int = 1) -> str:
        return f"{scale * self.mean:.{digits}f} [{scale * self.lo:.{digits}f}, {scale * self.hi:.{digits}f}]"


def _matrix(x) -> np.ndarray:
    a = np.asarray(x, dtype=np.float64)
    if a.ndim == 1:
        a = a[None, :]
    if a.ndim != 2 or a.shape[0] < 1 or a.shape[1] < 1:
        raise ValueError(f"expected a (training seeds, games) matrix, got shape {a.shape}")
    if not np.isfinite(a).all():
        raise ValueError("success matrix holds NaN or inf (a missing evaluation?)")
    return a


def _boot_means(a: np.ndarray, games_idx: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Mean of ``a`` over resampled seeds (drawn here) and the given resampled games, one per bootstrap draw."""
    n = games_idx.shape[0]
    seeds_idx = rng.integers(0, a.shape[0], size=(n, a.shape[0]))
    # mean over (s*, g*) of a[s*, g*] = mean over g* of (mean over s* of a[s*, g]) -- seed means first, (n, G)
    seed_mean = a[seeds_idx].mean(axis=1)
    return np.take_along_axis(seed_mean, games_idx, axis=1).mean(axis=1)


def interval(success, n_boot: int = DEFAULT_BOOTSTRAP, seed: int = 0, level: float = 0.95) -> Interval:
    """Mean success of a (training seeds, games) matrix with its crossed-bootstrap interval."""
    a = _matrix(success)
    rng = np.random.default_rng(seed)
    games_idx = rng.integers(0, a.shape[1], size=(n_boot, a.shape[1]))
    means = _boot_means(a, games_idx, rng)
    lo, hi = np.quantile(means, [(1 - level) / 2, (1 + level) / 2])
    return Interval(float(a.mean()), float(lo), float(hi), a.shape[0], a.shape[1])


def difference(a, b, n_boot: int = DEFAULT_BOOTSTRAP, seed: int = 0, level: float = 0.95) -> Interval:
    """mean(a) - mean(b) for two (seeds, games) matrices over the same games (same columns, same order): games
    resampled once for both (paired by game), each side's seeds on their own."""
    a, b = _matrix(a), _matrix(b)
    if a.shape[1] != b.shape[1]:
        raise ValueError(f"paired by game: both sides need the same games, got {a.shape[1]} and {b.shape[1]}")
    rng = np.random.default_rng(seed)
    games_idx = rng.integers(0, a.shape[1], size=(n_boot, a.shape[1]))
    diff = _boot_means(a, games_idx, rng) - _boot_means(b, games_idx, rng)
    lo, hi = np.quantile(diff, [(1 - level) / 2, (1 + level) / 2])
    return Interval(float(a.mean() - b.mean()), float(lo), float(hi), a.shape[0], a.shape[1])


def success_matrix(evals_by_seed: dict, games: list | None = None) -> tuple[np.ndarray, list]:
    """(training seeds, games) success matrix from ``{training seed: [episode dicts]}`` (each with ``task`` and
    ``won``; several episodes of a game -- evaluation seeds -- are averaged). Games are the sorted union unless
    given; a seed that lacks a game raises (no silent gaps)."""
    per_seed = {}
    for s, episodes in sorted(evals_by_seed.items()):
        acc: dict = {}
        for ep in episodes:
            acc.setdefault(str(ep["task"]), []).append(float(bool(ep["won"])))
        per_seed[s] = {g: sum(v) / len(v) for g, v in acc.items()}
    if games is None:
        games = sorted(set().union(*[set(d) for d in per_seed.values()])) if per_seed else []
    rows = []
    for s, d in per_seed.items():
        missing = [g for g in games if g not in d]
        if missing:
            raise ValueError(f"training seed {s}: no episode of {len(missing)} game(s), e.g. {missing[0]}")
        rows.append([d[g] for g in games])
    return np.asarray(rows, dtype=np.float64), list(games)
