"""Plain-Python loop implementation of docs/design.md §3 -- an independent oracle, not for training.

Written the obvious way (dicts of lists, one sample at a time, ``math`` only) so that it can be read against the
rules line by line. Tests compare the vectorized estimators to it on random batches; ``--time`` and
``scripts/bench_advantages.py`` time it to show what vectorization buys.

The ``gaca_permuted`` ablation here shuffles with :class:`random.Random`, so its permutation differs from the
vectorized one (same distribution, different draw).
"""

from __future__ import annotations

import math
import random
from collections import defaultdict
from typing import Optional, Sequence

from .config import AdvantageConfig


def _stats(values: list[float]) -> tuple[float, float]:
    """(mean, unbiased std) of a list with >= 2 values."""
    m = sum(values) / len(values)
    var = sum((v - m) ** 2 for v in values) / (len(values) - 1)
    return m, math.sqrt(var)


def _norm(x: float, mean: float, std: float, cfg: AdvantageConfig) -> float:
    return (x - mean) / (std + cfg.eps) if cfg.mode == "mean_std_norm" else x - mean


#: estimators this loop implements (the CLI's --time compares only these)
LOOP_ESTIMATORS = ("grpo", "gigpo", "fixed_mixture", "gaca", "gaca_permuted", "hgpo", "empg")


def _pool_steps(group, score) -> dict:
    pool = defaultdict(list)
    for i in range(len(score)):
        pool[group[i]].append(score[i])
    return pool


def _hgpo_loop(group, steps_of, anchor, ret, ep_adv, cfg: AdvantageConfig) -> tuple[list[float], list[float]]:
    """HGPO as the recipe states it: dicts keyed by (group, k, last k anchors), population std, weighted items."""
    n = len(ret)
    clusters = defaultdict(list)
    for (g, _), idxs in steps_of.items():
        for p, i in enumerate(idxs):
            for k in range(1, min(cfg.history_length + 1, p + 1) + 1):
                clusters[(g, k, tuple(anchor[j] for j in idxs[p - k + 1 : p + 1]))].append(i)
    items = defaultdict(list)  # sample -> [(k, adv)]
    for (_, k, _), idxs in clusters.items():
        if len(idxs) < 2:
            continue
        vals = [ret[i] for i in idxs]
        m = sum(vals) / len(vals)
        sd = math.sqrt(sum((v - m) ** 2 for v in vals) / len(vals))
        for i in idxs:
            if max(vals) == min(vals):
                a = 0.0
            else:
                a = (ret[i] - m) / (sd + cfg.eps) if cfg.mode == "mean_std_norm" else ret[i] - m
            items[i].append((k, a))

    def agg(its):
        its = [(k, a) for k, a in its if a != 0.0]
        w = [(k + 1) ** cfg.length_weight_alpha for k, _ in its]
        return sum(wi * a for wi, (_, a) in zip(w, its)) / (sum(w) + cfg.eps) if its else 0.0

    hist = [agg(items[i]) for i in range(n)]
    total = [agg(([(0, ep_adv[i])] if cfg.base_group else []) + items[i]) for i in range(n)]
    return total, hist


def _empg_loop(steps_of, entropy, ep_adv, cfg: AdvantageConfig) -> tuple[list[float], list[float]]:
    """EMPG (arXiv 2509.09265, Eqs. 10-12 + modulation + zero-mean), one sample at a time."""
    n = len(ep_adv)
    lo, hi = min(entropy), max(entropy)
    hn = [(h - lo) / (hi - lo + 1e-8) for h in entropy]
    graw = [math.exp(-cfg.empg_k * h) for h in hn]
    gm = sum(graw) / n
    g = [x / (gm + 1e-8) for x in graw]
    f = [math.exp(-cfg.empg_k_future * h) for h in hn]
    bonus = [0.0] * n
    for idxs in steps_of.values():
        for p, i in enumerate(idxs[:-1]):
            bonus[i] = cfg.empg_zeta * f[idxs[p + 1]]
    mod = [g[i] * ep_adv[i] + bonus[i] for i in range(n)]
    if cfg.empg_zero_mean:
        m = sum(mod) / n
        mod = [x - m for x in mod]
    return mod, bonus


def reference_advantages(
    group: Sequence,
    traj: Sequence,
    t: Sequence[int],
    anchor: Sequence,
    reward: Sequence[float],
    valid: Sequence[bool],
    nll: Optional[Sequence[float]] = None,
    cfg: Optional[AdvantageConfig] = None,
    estimator: Optional[str] = None,
    entropy: Optional[Sequence[float]] = None,
) -> dict[str, list]:
    """Per-sample parts for one batch given as plain lists (ids and anchors may be any hashable values)."""
    cfg = cfg or AdvantageConfig()
    est = estimator or cfg.estimator
    n = len(reward)
    pen = [cfg.invalid_penalty * (0.0 if v else 1.0) for v in valid]

    # Trajectories = (group, traj) pairs, steps in t order.
    steps_of = defaultdict(list)
    for i in range(n):
        steps_of[(group[i], traj[i])].append(i)
    for key in steps_of:
        steps_of[key].sort(key=lambda i: t[i])

    # Rule 2: discounted return, penalty after discounting. Rule 1: episode score.
    ret = [0.0] * n
    score = [0.0] * n
    for idxs in steps_of.values():
        running = 0.0
        for i in reversed(idxs):
            running = reward[i] + cfg.gamma * running
            ret[i] = running - pen[i]
        total = sum(reward[i] for i in idxs)
        for i in idxs:
            score[i] = total - pen[i]

    # Rule 3: episode advantage over the group's step samples (or one score per trajectory).
    pool = defaultdict(list)
    if cfg.episode_stats == "steps":
        for i in range(n):
            pool[group[i]].append(score[i])
    else:
        for (g, _), idxs in steps_of.items():
            pool[g].append(score[idxs[0]])
    ep_stats = {g: (_stats(v) if len(v) > 1 else (0.0, 1.0)) for g, v in pool.items()}
    ep_adv = [_norm(score[i], *ep_stats[group[i]], cfg) for i in range(n)]

    # Rule 4: anchor-state groups.
    members = defaultdict(list)
    for i in range(n):
        members[(group[i], anchor[i])].append(i)
    group_returns = defaultdict(list)
    for i in range(n):
        group_returns[group[i]].append(ret[i])
    singleton_rule = cfg.singleton_rule
    if singleton_rule == "auto":
        singleton_rule = "zero" if est in ("grpo", "gigpo", "fixed_mixture") else "group"
    step_adv = [0.0] * n
    size = [0] * n
    for (g, _), idxs in members.items():
        for i in idxs:
            size[i] = len(idxs)
        if len(idxs) > 1:
            m, s = _stats([ret[i] for i in idxs])
            for i in idxs:
                step_adv[i] = _norm(ret[i], m, s, cfg)
        elif singleton_rule == "group" and len(group_returns[g]) > 1:
            m, s = _stats(group_returns[g])
            step_adv[idxs[0]] = _norm(ret[idxs[0]], m, s, cfg)
        # else: 0

    out = {"step_return": ret, "episode_score": score, "episode_advantage": ep_adv, "step_advantage": step_adv,
           "step_group_size": size}
    if est == "grpo":
        out["advantage"] = list(ep_adv)
    elif est == "gigpo":
        out["advantage"] = [ep_adv[i] + cfg.omega * step_adv[i] for i in range(n)]
    elif est == "fixed_mixture":
        lam = [cfg.fixed_lambda] * n
        out["lambda"] = lam
        out["advantage"] = [(1 - lam[i]) * ep_adv[i] + lam[i] * step_adv[i] for i in range(n)]
    elif est in ("gaca", "gaca_permuted"):
        # Rule 5: criticality; rule 6: gate; rule 7: mixture.
        crit = [1.0] * n
        rng = random.Random(cfg.permutation_seed)
        for idxs in steps_of.values():
            m = sum(nll[i] for i in idxs) / len(idxs)
            if m > 0 and math.isfinite(m):
                for i in idxs:
                    crit[i] = nll[i] / m
            if est == "gaca_permuted":
                vals = [crit[i] for i in idxs]
                rng.shuffle(vals)
                for i, v in zip(idxs, vals):
                    crit[i] = v
        crit = [cfg.alpha_c * c + (1 - cfg.alpha_c) for c in crit]
        lam = [min(1.0, max(0.0, cfg.lambda0 * (1 + cfg.alpha * c))) for c in crit]
        out["criticality"] = crit
        out["lambda"] = lam
        out["advantage"] = [(1 - lam[i]) * ep_adv[i] + lam[i] * step_adv[i] for i in range(n)]
    elif est == "hgpo":
        # the base item always uses statistics over all step samples (public code)
        pools = _pool_steps(group, score)
        base_stats = {g: (_stats(v) if len(v) > 1 else (0.0, 1.0)) for g, v in pools.items()}
        # a group whose step samples all have the same score has no base item (exactly 0, as a flat history group):
        # whether rounding noise in (x - mean) counts as an item must not decide the weighted mean
        flat = {g for g, v in pools.items() if len(v) > 1 and max(v) == min(v)}
        base = [0.0 if group[i] in flat else _norm(score[i], *base_stats[group[i]], cfg) for i in range(n)]
        out["advantage"], out["step_advantage"] = _hgpo_loop(group, steps_of, anchor, ret, base, cfg)
    elif est == "empg":
        out["advantage"], out["step_advantage"] = _empg_loop(steps_of, entropy, ep_adv, cfg)
    else:
        raise ValueError(f"reference loop has no estimator {est!r}")
    return out
