"""Bias of every registered step estimator on a known MDP (:mod:`.known_mdp`), against its exact advantages.

``python -m gaca_openrlhf.diagnostics.estimator_bias [--groups 4000] [--seed 0] [--json OUT]`` samples task groups
of the corridor MDP, runs each estimator on batches of 16 groups (a training iteration's size: EMPG normalises over
the batch), and compares its advantage of every step with the true A[t, s, a] of the behaviour policy:

- *stated scale* (bias in reward units): ``gamma = 1`` for estimators and truth alike, ``mode = mean_norm``
  (centring kept: it is the baseline; the std division, a per-group rescaling, dropped);
- *default scale*: the estimators' defaults (``gamma = 0.95``, ``mean_std_norm``) against A at gamma 0.95 -- only
  signs and ranks, which a positive per-group scale does not change... except across groups.

Per estimator: mean signed bias over all steps, over the first steps, over won and failed episodes' steps; the
share of steps whose advantage has the sign of the true one (|A| > ``SIGN_TOL``); Spearman's rank correlation over
steps; and per cell (t, s, a) the expected advantage (mean over its samples): RMS bias and mean within-cell std
(visit-weighted), sign agreement and rank correlation of the cell means with the truth. docs/credit_audit.md states
the results and why each bias arises.
"""
from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np
import torch

from gaca_openrlhf.advantages import AdvantageConfig, StepBatch, compute_advantages, list_estimators

from .known_mdp import KnownMDP, SampledGroups, corridor, sample_groups
from .ranks import spearman

SIGN_TOL = 0.05  # |A| below this counts as "no preferred sign" (reward units at gamma 1)
BATCH_GROUPS = 16  # groups per estimator call: the paper's tasks per iteration
MIN_CELL = 30  # samples a (t, s, a) cell needs to enter the cell-level figures

STATED = {"gamma": 1.0, "mode": "mean_norm", "dtype": "float64"}
DEFAULT = {"dtype": "float64"}


@dataclass(frozen=True)
class Variant:
    """One estimator run: a display label, the registered name and the config fields that differ."""

    label: str
    estimator: str
    overrides: tuple = ()

    def config(self, base: dict) -> AdvantageConfig:
        return AdvantageConfig(estimator=self.estimator, **{**base, **dict(self.overrides)})


def default_variants() -> list[Variant]:
    """Every registered estimator with its defaults, plus the two contrasts the doc discusses: GRPO with
    per-trajectory statistics (the per-turn normalisation's alternative) and the step term alone."""
    out = [Variant(name, name) for name in list_estimators()]
    out.append(Variant("grpo[episode_stats=trajectories]", "grpo", (("episode_stats", "trajectories"),)))
    out.append(Variant("step term alone (fixed_mixture, lambda=1)", "fixed_mixture", (("fixed_lambda", 1.0),)))
    return out


def advantages_by_batch(batch: StepBatch, cfg: AdvantageConfig, batch_groups: int = BATCH_GROUPS) -> np.ndarray:
    """The estimator's advantage of every row, computed on consecutive batches of ``batch_groups`` task groups
    (rows must come grouped, as :func:`.known_mdp.sample_groups` writes them)."""
    g = batch.group_id.numpy()
    if (np.diff(g) < 0).any():
        raise ValueError("rows must be sorted by group_id")
    chunk = g // batch_groups
    bounds = np.flatnonzero(np.r_[True, chunk[1:] != chunk[:-1], True])
    out = np.empty(len(batch), dtype=np.float64)
    for lo, hi in zip(bounds[:-1], bounds[1:]):  # one call per training-sized batch, not per sample
        idx = torch.arange(lo, hi)
        out[lo:hi] = compute_advantages(batch.index_select(idx), cfg).advantage.numpy()
    return out


def length_shift(sampled: SampledGroups) -> np.ndarray:
    """Per row, (episode advantage with per-step statistics) - (with per-trajectory statistics), mean_norm, by
    the closed form -cov(L, S) / mean(L) over the row's group's trajectories (population covariance of episode
    lengths L and scores S): the per-turn normalisation's baseline is the length-weighted mean score."""
    b = sampled.batch
    first = b.step_index.numpy() == 0
    g = b.group_id.numpy()[first]
    score = np.where(sampled.won[first], 1.0, 0.0) * 10.0  # the corridor's only reward: 10 on a win
    length = sampled.length[first].astype(np.float64)
    n_g = int(g.max()) + 1
    cnt = np.bincount(g, minlength=n_g)
    mean_l = np.bincount(g, length, n_g) / cnt
    mean_s = np.bincount(g, score, n_g) / cnt
    cov = np.bincount(g, (length - mean_l[g]) * (score - mean_s[g]), n_g) / cnt
    return (-cov / mean_l)[b.group_id.numpy()]


def _sign_agree(est: np.ndarray, true: np.ndarray, tol: float) -> float:
    keep = np.abs(true) > tol
    return float((np.sign(est[keep]) == np.sign(true[keep])).mean()) if keep.any() else float("nan")


def cell_means(sampled: SampledGroups, values: np.ndarray, n_actions: int, n_states: int, horizon: int,
               min_count: int = MIN_CELL) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(cell index, count, mean, variance) of ``values`` per (t, s, a) cell with at least ``min_count`` rows."""
    t = sampled.batch.step_index.numpy()
    cell = (t * n_states + sampled.state) * n_actions + sampled.action
    size = horizon * n_states * n_actions
    cnt = np.bincount(cell, minlength=size)
    mean = np.bincount(cell, values, size) / np.maximum(cnt, 1)
    var = np.bincount(cell, (values - mean[cell]) ** 2, size) / np.maximum(cnt - 1, 1)
    keep = np.flatnonzero(cnt >= min_count)
    return keep, cnt[keep], mean[keep], var[keep]


def measure(adv: np.ndarray, sampled: SampledGroups, mdp: KnownMDP, gamma: float) -> dict:
    """Bias / sign / rank figures of one estimator's advantages ``adv`` against A[t, s, a] at ``gamma``."""
    true = sampled.true_advantage(mdp, gamma)
    err = adv - true
    t = sampled.batch.step_index.numpy()
    keep, cnt, mean, var = cell_means(sampled, adv, mdp.n_actions, mdp.n_states, mdp.horizon)
    true_cell = mdp.advantages(gamma).reshape(-1)[keep]
    w = cnt / cnt.sum()
    return {
        "bias_mean": float(err.mean()),
        "bias_first_step": float(err[t == 0].mean()),
        "bias_won": float(err[sampled.won].mean()),
        "bias_failed": float(err[~sampled.won].mean()),
        "sign_agree": _sign_agree(adv, true, SIGN_TOL),
        "spearman": spearman(adv, true),
        "cell_rms_bias": float(np.sqrt((w * (mean - true_cell) ** 2).sum())),
        "cell_std": float((w * np.sqrt(var)).sum()),
        "cell_sign_agree": _sign_agree(mean, true_cell, SIGN_TOL),
        "cell_spearman": spearman(mean, true_cell),
        "cells": int(keep.size),
    }


def audit_known_mdp(n_groups: int = 4000, n_per_group: int = 8, seed: int = 0, mdp: Optional[KnownMDP] = None,
                    variants: Optional[Sequence[Variant]] = None, anchor: str = "state") -> dict:
    """Sample the MDP once and measure every variant at the stated and the default scale (see module doc).
    ``anchor``: as :func:`.known_mdp.sample_groups` (``"time_state"``: Markov anchors, the well-specified case)."""
    mdp = mdp or corridor()
    variants = list(variants or default_variants())
    sampled = sample_groups(mdp, n_groups, n_per_group, seed=seed, anchor=anchor)
    first = sampled.batch.step_index.numpy() == 0
    won, length = sampled.won[first], sampled.length[first]
    out = {
        "mdp": {"n_states": mdp.n_states, "n_actions": mdp.n_actions, "horizon": mdp.horizon},
        "groups": n_groups, "per_group": n_per_group, "seed": seed, "anchor": anchor, "steps": len(sampled.batch),
        "win_rate": float(won.mean()),
        "mean_length_won": float(length[won].mean()), "mean_length_failed": float(length[~won].mean()),
        "length_shift_mean": float(length_shift(sampled)[first].mean()),
        "estimators": {},
    }
    for v in variants:
        stated = measure(advantages_by_batch(sampled.batch, v.config(STATED)), sampled, mdp, 1.0)
        default = measure(advantages_by_batch(sampled.batch, v.config(DEFAULT)), sampled, mdp, 0.95)
        out["estimators"][v.label] = {
            "stated": stated,
            "default": {k: default[k] for k in ("sign_agree", "spearman", "cell_sign_agree", "cell_spearman")},
        }
    return out


def render(result: dict) -> str:
    """Markdown tables of :func:`audit_known_mdp`'s result."""
    lines = [
        f"corridor MDP: {result['mdp']['n_states']} positions, {result['mdp']['n_actions']} actions, step limit "
        f"{result['mdp']['horizon']}, anchors {result['anchor']}; {result['groups']} groups x "
        f"{result['per_group']} episodes (seed {result['seed']}), {result['steps']} steps; win rate {result['win_rate']:.3f}; mean length won "
        f"{result['mean_length_won']:.2f}, failed {result['mean_length_failed']:.2f}; per-turn normalisation shift "
        f"-cov(L,S)/mean(L) averaged over groups: {result['length_shift_mean']:+.3f}",
        "",
        "Stated scale (gamma 1, mean_norm; bias in reward units):",
        "",
        "| estimator | bias all | bias t=0 | bias won | bias failed | sign agree | Spearman | cell RMS bias "
        "| cell std | cell sign agree | cell Spearman |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, r in result["estimators"].items():
        s = r["stated"]
        lines.append(f"| {name} | {s['bias_mean']:+.3f} | {s['bias_first_step']:+.3f} | {s['bias_won']:+.3f} | "
                     f"{s['bias_failed']:+.3f} | {s['sign_agree']:.3f} | {s['spearman']:.3f} | "
                     f"{s['cell_rms_bias']:.3f} | {s['cell_std']:.3f} | {s['cell_sign_agree']:.3f} | "
                     f"{s['cell_spearman']:.3f} |")
    lines += ["", "Default scale (gamma 0.95, mean_std_norm) against A at gamma 0.95:", "",
              "| estimator | sign agree | Spearman | cell sign agree | cell Spearman |", "|---|---|---|---|---|"]
    for name, r in result["estimators"].items():
        d = r["default"]
        lines.append(f"| {name} | {d['sign_agree']:.3f} | {d['spearman']:.3f} | {d['cell_sign_agree']:.3f} | "
                     f"{d['cell_spearman']:.3f} |")
    return "\n".join(lines)


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python -m gaca_openrlhf.diagnostics.estimator_bias",
                                description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--groups", type=int, default=4000, help="task groups sampled")
    p.add_argument("--per-group", type=int, default=8, help="episodes per group (n_samples_per_prompt)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--anchor", default="state", choices=["state", "time_state"],
                   help="the step's anchor: its position (revisits share it, as in a step-count-free observation) "
                   "or (t, position)")
    p.add_argument("--json", default=None, help="also write the figures as JSON here")
    p.add_argument("--audit", action="store_true",
                   help="instead: the credit audit (docs/credit_audit.md section 3) of every estimator on the sample, "
                        "with oracle progress = positions gained")
    p.add_argument("--bootstrap", type=int, default=500, help="bootstrap resamples of --audit")
    args = p.parse_args(argv)
    if args.groups < 1 or args.per_group < 2:
        p.error("need --groups >= 1 and --per-group >= 2")
    if args.audit:
        from .audit_rollouts import markdown
        from .credit_audit import credit_audit

        mdp = corridor()
        sampled = sample_groups(mdp, args.groups, args.per_group, seed=args.seed, anchor=args.anchor)
        prog = sampled.oracle_progress(mdp.n_states)
        result = credit_audit(sampled.batch, prog, sampled.won, AdvantageConfig(), n_boot=args.bootstrap,
                              seed=args.seed)
        result["progress_counts"] = {"positive": int((prog > 0).sum()), "zero": int((prog == 0).sum()),
                                     "negative": int((prog < 0).sum())}
        print(markdown(result, f"Credit audit on the corridor MDP ({args.groups} groups x {args.per_group} "
                               f"episodes, seed {args.seed}, anchors {args.anchor}, default estimator settings)"))
    else:
        result = audit_known_mdp(args.groups, args.per_group, args.seed, anchor=args.anchor)
        print(render(result))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
