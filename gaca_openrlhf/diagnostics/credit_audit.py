"""The credit audit: do the step estimators' advantages point the way oracle progress says? (docs/credit_audit.md §3)

For one batch of step samples whose environment reported oracle progress (the decrease of the distance to the goal
across the step, e.g. ALFWorld's ``info["oracle_distance"]``), every registered step estimator is computed on the
same batch, and for each:

- **sign agreement**: the share of steps with non-zero progress whose advantage has the sign of their progress (an
  advantage of exactly 0 agrees with nothing);
- **rank correlation**: Spearman's rho between advantage and progress over the steps with progress (0 included);
- both on the subsets where credit is hard: good steps (progress > 0) in failed episodes, bad steps (progress < 0)
  in won episodes, and repeated states (a step whose anchor its trajectory already visited);
- **paired differences** of sign agreement between every two estimators, with percentile bootstrap intervals that
  resample task groups (both estimators see the same resampled groups: paired);
- for mixtures (GACA, its ablations): the mean gate weight lambda on the step term over steps whose progress
  disagrees with their episode's outcome (good in failed, bad in won) and over steps where it agrees, and their
  difference with its interval. GACA's claim predicts a positive difference.

Shares are pooled over steps (sum of agreements / sum of steps); the bootstrap resamples groups and recomputes the
pooled share, so the interval is the share's own (a ratio estimator), not that of a mean of per-group shares.
Pure PyTorch/NumPy: no Ray, vLLM or DeepSpeed.
"""
from __future__ import annotations

import itertools
from typing import Optional, Sequence

import numpy as np

from gaca_openrlhf.advantages import AdvantageConfig, StepBatch
from gaca_openrlhf.advantages.signals import advantages_by_estimator
from gaca_openrlhf.report.stats import Interval

from .ranks import spearman

SUBSETS = ("all", "good_in_failed", "bad_in_won", "repeated")
DEFAULT_BOOTSTRAP = 2000


def repeated_states(batch: StepBatch) -> np.ndarray:
    """Per row: whether the row's trajectory visited the same anchor at an earlier step (vectorised: sort by
    (trajectory, anchor, t) and mark every row but the first of each run)."""
    b = batch.validated()
    g, tr, a, t = (x.numpy() for x in (b.group_id, b.traj_id, b.anchor_id, b.step_index))
    order = np.lexsort((t, a, tr, g))
    same = np.zeros(len(b), dtype=bool)
    if len(b) > 1:
        gs, trs, as_ = g[order], tr[order], a[order]
        same[1:] = (gs[1:] == gs[:-1]) & (trs[1:] == trs[:-1]) & (as_[1:] == as_[:-1])
    out = np.zeros(len(b), dtype=bool)
    out[order] = same
    return out


def subset_masks(progress: np.ndarray, won: np.ndarray, repeated: np.ndarray) -> dict:
    """The audit's subsets as boolean masks over rows (rows without progress, NaN, are in none)."""
    has = np.isfinite(progress)
    p = np.where(has, progress, 0.0)
    nonzero = has & (p != 0)
    return {
        "all": nonzero,
        "good_in_failed": has & (p > 0) & ~won,
        "bad_in_won": has & (p < 0) & won,
        "repeated": nonzero & repeated,
    }


def _ratio_interval(num: np.ndarray, den: np.ndarray, boot_idx: np.ndarray, level: float) -> Interval:
    """sum(num) / sum(den) over groups, with the percentile interval of the same ratio over resampled groups
    (``boot_idx``: (resamples, groups) indices). Resamples with no steps are dropped."""
    point = float(num.sum() / den.sum())
    bn, bd = num[boot_idx].sum(1), den[boot_idx].sum(1)
    ok = bd > 0
    lo, hi = np.quantile(bn[ok] / bd[ok], [(1 - level) / 2, (1 + level) / 2])
    return Interval(point, float(lo), float(hi), 1, int(num.size))


def _diff_interval(num_a, den_a, num_b, den_b, boot_idx, level) -> Interval:
    point = float(num_a.sum() / den_a.sum() - num_b.sum() / den_b.sum())
    ba, bad = num_a[boot_idx].sum(1), den_a[boot_idx].sum(1)
    bb, bbd = num_b[boot_idx].sum(1), den_b[boot_idx].sum(1)
    ok = (bad > 0) & (bbd > 0)
    d = ba[ok] / bad[ok] - bb[ok] / bbd[ok]
    lo, hi = np.quantile(d, [(1 - level) / 2, (1 + level) / 2])
    return Interval(point, float(lo), float(hi), 1, int(num_a.size))


def _iv(x: Optional[Interval]) -> Optional[dict]:
    return None if x is None else {"value": x.mean, "lo": x.lo, "hi": x.hi, "groups": x.games}


def audit_advantages(
    advantages: dict,
    progress,
    won,
    group_id,
    repeated,
    lambdas: Optional[dict] = None,
    n_boot: int = DEFAULT_BOOTSTRAP,
    seed: int = 0,
    level: float = 0.95,
) -> dict:
    """The audit's figures for given advantages (``{estimator: per-row tensor or array}``) against ``progress``
    (per row, NaN where the environment gave none), ``won`` (per row: its episode's outcome), ``group_id`` (the
    bootstrap's unit) and ``repeated`` (per row, :func:`repeated_states`). ``lambdas``: ``{estimator: per-row gate
    weight}`` for the mixtures. See the module docstring for each figure.

    Raises ValueError on mismatched lengths or when no step has progress."""
    prog = np.asarray(progress, dtype=np.float64)
    n = prog.size
    won = np.asarray(won, dtype=bool)
    rep = np.asarray(repeated, dtype=bool)
    g_raw = np.asarray(group_id)
    adv = {k: np.asarray(v, dtype=np.float64) for k, v in advantages.items()}
    lam = {k: np.asarray(v, dtype=np.float64) for k, v in (lambdas or {}).items()}
    for name, x in [("won", won), ("group_id", g_raw), ("repeated", rep), *adv.items(), *lam.items()]:
        if x.shape != (n,):
            raise ValueError(f"{name} has shape {x.shape}; expected ({n},) like progress")
    masks = subset_masks(prog, won, rep)
    if not masks["all"].any():
        raise ValueError("no step has non-zero oracle progress: nothing to audit")
    _, g = np.unique(g_raw, return_inverse=True)
    n_g = int(g.max()) + 1
    rng = np.random.default_rng(seed)
    boot_idx = rng.integers(0, n_g, size=(n_boot, n_g))
    sign_p = np.sign(np.where(np.isfinite(prog), prog, 0.0))
    has = np.isfinite(prog)

    def per_group(x: np.ndarray) -> np.ndarray:
        return np.bincount(g, x.astype(np.float64), minlength=n_g)

    out = {"steps": n, "groups": n_g, "subsets": {k: int(m.sum()) for k, m in masks.items()}, "estimators": {},
           "paired": [], "gate": {}, "level": level, "bootstrap": n_boot, "seed": seed}
    agree_counts = {}
    for name, a in adv.items():
        agree = np.sign(a) == sign_p
        res = {}
        for sub, m in masks.items():
            if not m.any():
                res[sub] = {"n": 0, "sign_agree": None, "spearman": None}
                continue
            num, den = per_group(agree & m), per_group(m)
            rank_rows = has if sub == "all" else m  # "all": every step with progress, its zeros included
            rho = spearman(a[rank_rows], prog[rank_rows]) if rank_rows.sum() >= 2 else float("nan")
            res[sub] = {"n": int(m.sum()), "sign_agree": _iv(_ratio_interval(num, den, boot_idx, level)),
                        "spearman": None if np.isnan(rho) else rho}
            if sub == "all":
                agree_counts[name] = (num, den)
        out["estimators"][name] = res
    for a_name, b_name in itertools.combinations(sorted(agree_counts), 2):
        (na, da), (nb, db) = agree_counts[a_name], agree_counts[b_name]
        d = _diff_interval(na, da, nb, db, boot_idx, level)
        out["paired"].append({"a": a_name, "b": b_name, "sign_agree_diff": _iv(d)})
    disagree = masks["good_in_failed"] | masks["bad_in_won"]
    agree_outcome = has & (((prog > 0) & won) | ((prog < 0) & ~won))
    for name, lv in lam.items():
        if not disagree.any() or not agree_outcome.any():
            out["gate"][name] = {"n_disagree": int(disagree.sum()), "n_agree": int(agree_outcome.sum())}
            continue
        nd, dd = per_group(np.where(disagree, lv, 0.0)), per_group(disagree)
        na_, da_ = per_group(np.where(agree_outcome, lv, 0.0)), per_group(agree_outcome)
        out["gate"][name] = {
            "n_disagree": int(disagree.sum()), "n_agree": int(agree_outcome.sum()),
            "lambda_disagree": _iv(_ratio_interval(nd, dd, boot_idx, level)),
            "lambda_agree": _iv(_ratio_interval(na_, da_, boot_idx, level)),
            "difference": _iv(_diff_interval(nd, dd, na_, da_, boot_idx, level)),
        }
    return out


def credit_audit(
    batch: StepBatch,
    progress,
    won,
    cfg: Optional[AdvantageConfig] = None,
    estimators: Optional[Sequence[str]] = None,
    anchor_text: Optional[Sequence[str]] = None,
    n_boot: int = DEFAULT_BOOTSTRAP,
    seed: int = 0,
    results: Optional[tuple] = None,
) -> dict:
    """Audit every registered step estimator (or ``estimators``) on ``batch`` against ``progress``.

    ``cfg`` holds the shared settings (gamma, normalisation, ...; its ``estimator`` is replaced by each name in
    turn), ``anchor_text`` is passed on for similarity grouping. An estimator whose input the batch lacks (EMPG
    without ``StepBatch.entropy``, GACA without ``nll``) is listed under ``"skipped"`` with the reason, not run.
    ``results``: an :func:`~gaca_openrlhf.advantages.signals.advantages_by_estimator` of this batch, already computed
    (the trainer's, shared with the learning signal), instead of computing the estimators again.
    Returns :func:`audit_advantages`'s dict plus ``"skipped"``."""
    cfg = cfg or AdvantageConfig()
    if results is None:
        results = advantages_by_estimator(batch, cfg, estimators, anchor_text)
    by_name, skipped = results
    advantages = {name: r.advantage.double().numpy() for name, r in by_name.items()}
    lambdas = {name: r.lambda_.double().numpy() for name, r in by_name.items() if r.lambda_ is not None}
    out = audit_advantages(advantages, progress, won, batch.group_id.numpy(), repeated_states(batch),
                           lambdas=lambdas, n_boot=n_boot, seed=seed)
    out["skipped"] = dict(skipped)
    return out


def audit_metrics(result: dict, prefix: str = "audit") -> dict:
    """Flat ``{name: float}`` of a :func:`credit_audit` result for a metrics record: ``audit/<estimator>/sign_agree``
    (and ``_lo``/``_hi``), ``audit/<estimator>/spearman``, the same with ``_<subset>`` for the hard subsets,
    ``audit/<estimator>/n_<subset>``, and ``audit/gate/<estimator>/lambda_disagree|lambda_agree|difference``.
    Missing figures (an empty subset, a constant ranking) are left out rather than written as NaN."""
    flat = {}
    for name, res in result["estimators"].items():
        for sub, r in res.items():
            suffix = "" if sub == "all" else f"_{sub}"
            flat[f"{prefix}/{name}/n{suffix or '_all'}"] = float(r["n"])
            if r["sign_agree"] is not None:
                flat[f"{prefix}/{name}/sign_agree{suffix}"] = r["sign_agree"]["value"]
                flat[f"{prefix}/{name}/sign_agree{suffix}_lo"] = r["sign_agree"]["lo"]
                flat[f"{prefix}/{name}/sign_agree{suffix}_hi"] = r["sign_agree"]["hi"]
            if r["spearman"] is not None:
                flat[f"{prefix}/{name}/spearman{suffix}"] = r["spearman"]
    for name, r in result["gate"].items():
        for key in ("lambda_disagree", "lambda_agree", "difference"):
            if r.get(key) is not None:
                flat[f"{prefix}/gate/{name}/{key}"] = r[key]["value"]
    return flat
