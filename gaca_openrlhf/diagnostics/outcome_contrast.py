"""Outcome contrast of a policy's task groups: the signal a critic-free update has to learn from.

A group-normalised estimator (GRPO, and the episode term of GiGPO and GACA) gives every step of a group whose n
episodes all won, or all lost, a zero episode advantage: without outcome contrast a group teaches nothing (only
per-step penalties or step-level terms move it). This reads evaluation results (``python -m gaca_openrlhf.eval
--episodes-per-task K``; every task played K times with fixed seeds) and reports, for groups of ``n`` episodes of
one task (episodes 0..n-1, n..2n-1, ... of each task, as training draws n rollouts per task):

- ``success``: share of episodes won;
- ``mixed_groups``: share of groups with 0 < wins < n;
- ``mixed_step_share``: share of the episodes' steps that lie in mixed groups (the steps whose GRPO advantage is not 0
  under the format validity rule);
- ``tasks_ever_won`` / ``tasks_always_won``: share of tasks won in at least one / in every episode.

    python -m gaca_openrlhf.diagnostics.outcome_contrast RESULTS.json [RESULTS.json ...] --group-size 4 [--json OUT]
"""
from __future__ import annotations

import argparse
import json
import sys

import numpy as np


def contrast(episodes: list[dict], group_size: int) -> dict:
    """The module docstring's figures for ``episodes`` (dicts with ``task``, ``episode``, ``won``, ``steps``).

    Every task must have a multiple of ``group_size`` episodes, numbered 0..K-1 (ValueError otherwise): a group is
    episodes ``[g * n, (g + 1) * n)`` of one task."""
    if group_size < 2:
        raise ValueError(f"group_size must be >= 2 (a group of 1 has no contrast), got {group_size}")
    if not episodes:
        raise ValueError("no episodes")
    tasks = sorted({str(ep["task"]) for ep in episodes})
    index = {t: i for i, t in enumerate(tasks)}
    task = np.array([index[str(ep["task"])] for ep in episodes])
    k = np.array([int(ep["episode"]) for ep in episodes])
    won = np.array([bool(ep["won"]) for ep in episodes], dtype=float)
    steps = np.array([int(ep["steps"]) for ep in episodes], dtype=float)
    per_task = np.bincount(task, minlength=len(tasks))
    if (per_task % group_size).any() or len(set(zip(task.tolist(), k.tolist()))) != len(episodes) \
            or (k >= per_task[task]).any():
        raise ValueError(f"every task needs episodes 0..K-1 with K a multiple of the group size {group_size}: "
                         f"episodes per task {sorted(set(per_task.tolist()))}")
    groups_per_task = per_task // group_size
    offsets = np.concatenate([[0], np.cumsum(groups_per_task)[:-1]])
    group = offsets[task] + k // group_size
    n_groups = int(groups_per_task.sum())
    wins = np.bincount(group, weights=won, minlength=n_groups)
    mixed = (wins > 0) & (wins < group_size)
    task_wins = np.bincount(task, weights=won, minlength=len(tasks))
    return {
        "episodes": len(episodes), "tasks": len(tasks), "groups": n_groups, "group_size": group_size,
        "success": float(won.mean()),
        "mixed_groups": float(mixed.mean()),
        "mixed_step_share": float(steps[mixed[group]].sum() / steps.sum()) if steps.sum() else 0.0,
        "tasks_ever_won": float((task_wins > 0).mean()),
        "tasks_always_won": float((task_wins == per_task).mean()),
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m gaca_openrlhf.diagnostics.outcome_contrast", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("results", nargs="+", help="evaluation results JSON (python -m gaca_openrlhf.eval --out)")
    p.add_argument("--group-size", type=int, default=4, help="episodes per group (training's n)")
    p.add_argument("--json", default=None, help="also write the figures here")
    a = p.parse_args(argv)
    out = {}
    for path in a.results:
        with open(path) as f:
            data = json.load(f)
        cfg = data.get("config", {})
        try:
            figures = contrast(data["episodes"], a.group_size)
        except (KeyError, ValueError) as e:
            print(f"{path}: {e}", file=sys.stderr)
            return 2
        out[path] = dict(figures, temperature=cfg.get("temperature"), seed=cfg.get("seed"))
        print(json.dumps({"results": path, **out[path]}))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1, sort_keys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
