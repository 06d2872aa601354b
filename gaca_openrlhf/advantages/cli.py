"""``python -m gaca_openrlhf.advantages --cases IN.json --out OUT.json [--time]``

IN uses the format of ``shared/reference/*.json``: ``{"cases": [case, ...]}`` (or a bare list), each case with
    name, estimator (absent -> "gigpo" with weight ``step_advantage_w``), mode, gamma, invalid_penalty, epsilon,
    params ({lambda0, alpha, alpha_c, fixed_lambda, omega, permutation_seed, singleton_rule; HGPO: history_length,
    length_weight_alpha, base_group; similarity: enable_similarity, similarity_thresh; EMPG: k, k_f, zeta}),
    episode_stats_over ("all step samples of the group" | "one score per trajectory"),
    steps: {group, traj, t, anchor, reward, valid[, nll][, entropy]} as parallel lists.
Group/trajectory labels may be strings or ints; anchors (strings or JSON values) are hashed to int64 ids.

OUT: ``{"cases": [{name, estimator, advantage, episode_advantage, step_advantage, step_return, step_group_size,
lambda (mixtures), criticality (GACA variants), seconds (--time)}]}`` in input order. With ``--time``,
``seconds`` is the best of ``--repeats`` wall times of the estimator alone (after one warm-up call) on tensors
already in memory with anchors hashed; ``loop_seconds`` is one run of the plain-Python loop reference
(:mod:`.reference_loop`) on the same case, and ``speedup`` their ratio.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

import torch

from .batch import StepBatch
from .config import AdvantageConfig
from .hashing import hash_anchor
from .reference_loop import reference_advantages
from .reference_loop import LOOP_ESTIMATORS
from .registry import compute_advantages, get_estimator

_EPISODE_STATS = {
    "all step samples of the group": "steps",
    "steps": "steps",
    "one score per trajectory": "trajectories",
    "trajectories": "trajectories",
    "trajectory": "trajectories",
}
_PARAMS = {
    "lambda0": "lambda0",
    "alpha": "alpha",
    "alpha_c": "alpha_c",
    "fixed_lambda": "fixed_lambda",
    "lambda": "fixed_lambda",
    "omega": "omega",
    "step_advantage_w": "omega",
    "permutation_seed": "permutation_seed",
    "seed": "permutation_seed",
    "singleton_rule": "singleton_rule",
    "history_length": "history_length",
    "length_weight_alpha": "length_weight_alpha",
    "base_group": "base_group",
    "enable_similarity": "similarity_grouping",
    "similarity_grouping": "similarity_grouping",
    "similarity_thresh": "similarity_threshold",
    "similarity_threshold": "similarity_threshold",
    "similarity_max_comparisons": "similarity_max_comparisons",
    "k": "empg_k",
    "empg_k": "empg_k",
    "k_f": "empg_k_future",
    "empg_k_future": "empg_k_future",
    "zeta": "empg_zeta",
    "empg_zeta": "empg_zeta",
    "empg_zero_mean": "empg_zero_mean",
}


def case_config(case: dict[str, Any]) -> AdvantageConfig:
    """The :class:`AdvantageConfig` a reference-format case describes (float64 output)."""
    kw: dict[str, Any] = {"estimator": case.get("estimator", "gigpo"), "dtype": "float64"}
    for key, field_name in (("mode", "mode"), ("gamma", "gamma"), ("invalid_penalty", "invalid_penalty"),
                            ("epsilon", "eps"), ("eps", "eps"), ("step_advantage_w", "omega"),
                            ("singleton_rule", "singleton_rule")):
        if key in case:
            kw[field_name] = case[key]
    if "episode_stats_over" in case:
        try:
            kw["episode_stats"] = _EPISODE_STATS[case["episode_stats_over"]]
        except KeyError:
            raise ValueError(f"case {case.get('name')!r}: unknown episode_stats_over {case['episode_stats_over']!r}")
    for key, value in (case.get("params") or {}).items():
        if key not in _PARAMS:
            raise ValueError(f"case {case.get('name')!r}: unknown parameter {key!r} (known: {sorted(_PARAMS)})")
        kw[_PARAMS[key]] = value
    return AdvantageConfig(**kw)


def _labels_to_ids(values: list) -> list[int]:
    """Dense ids by first appearance (labels may be strings or ints)."""
    ids: dict = {}
    return [ids.setdefault(json.dumps(v, sort_keys=True) if isinstance(v, (list, dict)) else v, len(ids))
            for v in values]


def case_batch(case: dict[str, Any]) -> StepBatch:
    """The :class:`StepBatch` of a reference-format case (anchors hashed with :func:`hash_anchor`)."""
    steps = case["steps"]
    n = len(steps["reward"])
    return StepBatch.from_lists(
        group_id=_labels_to_ids(steps["group"]),
        traj_id=_labels_to_ids(steps["traj"]),
        step_index=steps["t"],
        anchor_id=[hash_anchor(a) for a in steps["anchor"]],
        reward=steps["reward"],
        valid=steps.get("valid", [True] * n),
        nll=steps.get("nll"),
        entropy=steps.get("entropy"),
    )


def case_anchor_text(case: dict[str, Any]) -> list | None:
    """The anchors as text for similarity grouping (non-strings as canonical JSON), or None when it is off."""
    if not case_config(case).similarity_grouping:
        return None
    return [a if isinstance(a, str) else json.dumps(a, sort_keys=True) for a in case["steps"]["anchor"]]


def run_case(case: dict[str, Any], timing: bool = False, repeats: int = 3, loop: bool = True) -> dict[str, Any]:
    cfg = case_config(case)
    batch = case_batch(case)
    text = case_anchor_text(case)
    result = compute_advantages(batch, cfg, anchor_text=text)
    out: dict[str, Any] = {"name": case.get("name"), **result.to_dict()}
    if not get_estimator(cfg.estimator).mixture:
        out.pop("lambda", None)
    if timing:
        best = float("inf")
        for _ in range(max(1, repeats)):
            t0 = time.perf_counter()
            compute_advantages(batch, cfg, anchor_text=text)
            best = min(best, time.perf_counter() - t0)
        out["seconds"] = best
        if loop and cfg.estimator in LOOP_ESTIMATORS and not cfg.similarity_grouping:
            steps = case["steps"]
            t0 = time.perf_counter()
            reference_advantages(steps["group"], steps["traj"], steps["t"], steps["anchor"], steps["reward"],
                                 steps.get("valid", [True] * len(batch)), steps.get("nll"), cfg)
            out["loop_seconds"] = time.perf_counter() - t0
            out["speedup"] = out["loop_seconds"] / max(best, 1e-12)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gaca_openrlhf.advantages", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", required=True, help="input JSON (reference-vector format)")
    parser.add_argument("--out", required=True, help="output JSON path ('-' for stdout)")
    parser.add_argument("--time", action="store_true", help="add 'seconds' (and loop_seconds/speedup) per case")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs per case with --time (best is reported)")
    parser.add_argument("--no-loop", action="store_true", help="with --time, skip timing the plain-Python loop")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1: one core)")
    args = parser.parse_args(argv)

    torch.set_num_threads(max(1, args.threads))
    with open(args.cases) as f:
        data = json.load(f)
    cases = data["cases"] if isinstance(data, dict) else data
    results = []
    for case in cases:
        try:
            res = run_case(case, timing=args.time, repeats=args.repeats, loop=not args.no_loop)
        except (ValueError, KeyError, TypeError) as e:
            print(f"error: case {case.get('name')!r}: {type(e).__name__}: {e}", file=sys.stderr)
            return 2
        results.append(res)
        if args.time:
            line = f"{res['name']}: {len(res['advantage'])} steps, {cfg_name(case)} {res['seconds'] * 1e3:.3f} ms"
            if "loop_seconds" in res:
                line += f", python loop {res['loop_seconds'] * 1e3:.1f} ms, speedup {res['speedup']:.1f}x"
            print(line, file=sys.stderr)
    payload = json.dumps({"cases": results})
    if args.out == "-":
        print(payload)
    else:
        with open(args.out, "w") as f:
            f.write(payload)
    return 0


def cfg_name(case: dict[str, Any]) -> str:
    return case.get("estimator", "gigpo")
