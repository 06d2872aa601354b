"""The distribution of GACA's gate lambda (GACA paper, appendix H): mean, share saturated at 0 and at 1, quantiles,
per task type -- from a run's advantage dumps, its metrics, or per-step NLLs of a frozen policy.

Sources, best first:
- advantage dumps (``--run.dump_dir``: ``adv_iter_NNNN.pt``, written by the trainer's advantage hook): the
  iteration's StepBatch and AdvantageConfig; lambda is recomputed with the estimator that trained (so every step is
  counted), task types come from each row's prompt (the ALFWorld game path names its task type);
- ``metrics.jsonl``: per-iteration ``adv/lambda_mean`` and ``adv/lambda_saturated_frac`` only (no share at 0, no
  task types);
- a frozen policy's steps (:mod:`.disagreement` records each step's rollout NLL): lambda from rules 5-6.
"""
from __future__ import annotations

import glob
import json
import math
import os
import re
from collections import defaultdict
from typing import Iterable, Optional, Sequence

import torch

from gaca_openrlhf.advantages import AdvantageConfig, compute_advantages, get_estimator

_TYPE_RE: list = []  # the compiled pattern, built on first use from the environments' task types


def task_type_of(task: str) -> str:
    """The task type a task id/path names as a folder ``<type>-...`` (``EnvSpec.task_types``; e.g. ALFWorld's
    ``.../pick_two_obj_and_place-Obj-None-Recep-1/trial_x/...``), else ''."""
    if not _TYPE_RE:
        from agents.registry import specs

        types = [re.escape(t) for s in specs() for t in s.task_types]
        _TYPE_RE.append(re.compile(r"(?:^|[/\\])(" + "|".join(types) + r")-") if types else None)
    m = _TYPE_RE[0].search(str(task)) if _TYPE_RE[0] is not None else None
    return m.group(1) if m else ""


def lambda_stats(lam: Sequence[float], task_types: Optional[Sequence[str]] = None) -> dict:
    """{n, mean, share_at_0, share_at_1, p10, p50, p90} of ``lam``, and ``per_task_type`` when types are given."""
    x = torch.as_tensor(list(lam), dtype=torch.float64)
    if x.numel() == 0:
        return {"n": 0}
    q = torch.quantile(x, torch.tensor([0.1, 0.5, 0.9], dtype=torch.float64)).tolist()
    out = {"n": int(x.numel()), "mean": float(x.mean()), "share_at_0": float((x <= 0.0).double().mean()),
           "share_at_1": float((x >= 1.0).double().mean()), "p10": q[0], "p50": q[1], "p90": q[2]}
    if task_types is not None:
        by_type: dict[str, list[float]] = defaultdict(list)
        for v, t in zip(x.tolist(), task_types):
            by_type[t or "unknown"].append(v)
        out["per_task_type"] = {t: lambda_stats(v) for t, v in sorted(by_type.items())}
    return out


def find_dumps(run_dir: str, dump_dir: Optional[str] = None) -> list[str]:
    """``adv_iter_*.pt`` files in ``dump_dir`` (or anywhere under ``run_dir``), in iteration order."""
    if dump_dir:
        files = glob.glob(os.path.join(dump_dir, "adv_iter_*.pt"))
    else:
        files = glob.glob(os.path.join(run_dir, "**", "adv_iter_*.pt"), recursive=True)
    return sorted(files, key=lambda p: (os.path.basename(p), p))


def lambda_from_dumps(paths: Iterable[str], gate: Optional[AdvantageConfig] = None) -> dict:
    """Lambda over every step of the dumped iterations (recomputed with each dump's config).

    A dump of an estimator without a gate (grpo, gigpo, hgpo, empg) is recomputed as GACA with ``gate``'s
    lambda0/alpha (default 0.5/0.5) when it carries NLLs -- "the lambda GACA would have used on these steps" -- and
    is marked so (``recomputed_as``).
    """
    lam: list[float] = []
    types: list[str] = []
    iters = []
    recomputed_as = None
    for path in paths:
        d = torch.load(path, map_location="cpu", weights_only=False)
        batch, cfg = d["batch"], d["config"]
        # lambda depends on the NLLs only (rules 5-6), not on anchor groups: no anchor text needed
        cfg = cfg.replace(similarity_grouping=False) if getattr(cfg, "similarity_grouping", False) else cfg
        if not get_estimator(cfg.estimator).mixture:
            if batch.nll is None:
                continue
            g = gate or AdvantageConfig()
            cfg = cfg.replace(estimator="gaca", lambda0=g.lambda0, alpha=g.alpha, alpha_c=g.alpha_c)
            recomputed_as = "gaca"
        res = compute_advantages(batch, cfg)
        row_types = [""] * len(batch)
        if "row_pos" in d and d.get("prompts") is not None:
            for prompt, pos in zip(d["prompts"], d["row_pos"].tolist()):
                row_types[pos] = task_type_of(prompt)
        lam += res.lambda_.tolist()
        types += row_types
        m = re.search(r"adv_iter_(\d+)\.pt$", path)
        iters.append({"iteration": int(m.group(1)) if m else None, "n": len(batch),
                      "lambda_mean": float(res.lambda_.double().mean()) if len(batch) else None})
    out = {"source": "advantage dumps", "files": len(iters), "estimator_recomputed_as": recomputed_as,
           **lambda_stats(lam, types), "per_iteration": iters}
    return out


def lambda_from_metrics(path: str) -> dict:
    """What ``metrics.jsonl`` holds: per-iteration mean lambda and share at 1 (weighted by step samples)."""
    rows = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            rec = json.loads(line)
            lm, sat = rec.get("adv/lambda_mean"), rec.get("adv/lambda_saturated_frac")
            if isinstance(lm, (int, float)) and math.isfinite(lm):
                w = rec.get("adv/num_samples") or rec.get("rollout/num_step_samples") or 1.0
                rows.append((rec.get("iteration"), float(lm), sat if isinstance(sat, (int, float)) else None, float(w)))
    if not rows:
        return {"source": "metrics.jsonl", "n_iterations": 0}
    wsum = sum(r[3] for r in rows)
    sats = [(r[2], r[3]) for r in rows if r[2] is not None and math.isfinite(r[2])]
    out = {"source": "metrics.jsonl", "n_iterations": len(rows), "mean": sum(r[1] * r[3] for r in rows) / wsum,
           "last_iteration_mean": rows[-1][1],
           "per_iteration": [{"iteration": r[0], "lambda_mean": r[1], "share_at_1": r[2]} for r in rows]}
    if sats:
        out["share_at_1"] = sum(s * w for s, w in sats) / sum(w for _, w in sats)
    return out


def gate_lambda(nll_per_traj: Sequence[Sequence[float]], cfg: AdvantageConfig) -> list[list[float]]:
    """Rules 5-6 on plain lists: per trajectory, c_t = l_t / mean(l) (1 if the mean is not positive/finite) and
    lambda_t = clip(lambda0 (1 + alpha c_t), 0, 1)."""
    out = []
    for nlls in nll_per_traj:
        m = sum(nlls) / len(nlls) if nlls else 0.0
        crit = [(x / m) if (m > 0 and math.isfinite(m)) else 1.0 for x in nlls]
        crit = [cfg.alpha_c * c + (1 - cfg.alpha_c) for c in crit]
        out.append([min(1.0, max(0.0, cfg.lambda0 * (1 + cfg.alpha * c))) for c in crit])
    return out
