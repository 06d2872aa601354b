"""``results/NAME/curves.png``, drawn from a record alone."""
from __future__ import annotations

import json
from pathlib import Path

from .files import _order, _read_jsonl


def plot_record(rec_dir) -> Path | None:
    """``results/NAME/curves.png``: training success per iteration (mean +- SD over training seeds, per method) and
    the validation curve (mean +- SD over training seeds of each seed's success on the panel), drawn from the record
    alone."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from gaca_openrlhf.report.stats import success_matrix

    rec_dir = Path(rec_dir)
    curves: dict = {}
    for f in sorted((rec_dir / "metrics").glob("*.jsonl")):
        method = f.stem.rsplit("_seed", 1)[0]
        recs = [r for r in _read_jsonl(f) if not r.get("rollout/skipped")]
        curves.setdefault(method, []).append([r.get("rollout/success_rate") for r in recs])
    if not curves:
        return None
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    for m in _order(curves):
        n = min(len(c) for c in curves[m])
        arr = np.array([[np.nan if v is None else v for v in c[:n]] for c in curves[m]], dtype=float)
        x = np.arange(1, n + 1)
        mean, sd = np.nanmean(arr, axis=0), np.nanstd(arr, axis=0)
        ax1.plot(x, 100 * mean, label=f"{m.upper()} ({arr.shape[0]} seeds)")
        ax1.fill_between(x, 100 * (mean - sd), 100 * (mean + sd), alpha=0.2)
    ax1.set(xlabel="RL iteration", ylabel="training success (%)", title="Training success (mean +- SD over seeds)")
    ax1.legend()
    ep = rec_dir / "episodes"
    steps = sorted({int(f.stem[8:]) for f in ep.glob("*/val_step*.jsonl")})
    final = json.loads((rec_dir / "record.json").read_text()).get("config", {}).get("rl_iterations")
    if (ep / "warm_start" / "val.jsonl").is_file():
        _, games = success_matrix({0: _read_jsonl(ep / "warm_start" / "val.jsonl")})
        warm = success_matrix({0: _read_jsonl(ep / "warm_start" / "val.jsonl")}, games)[0].mean()
        for m in _order(curves):
            runs = [d for d in sorted(ep.iterdir()) if d.name.rsplit("_seed", 1)[0] == m
                    and all((d / f"val_step{k}.jsonl").is_file() for k in steps) and (d / "val.jsonl").is_file()]
            if not runs:
                continue
            # per point: each training seed's success over the panel's games, then mean and SD over seeds (the band)
            per_seed = [np.full(len(runs), warm)] + [
                success_matrix({i: _read_jsonl(d / f"{name}.jsonl") for i, d in enumerate(runs)}, games)[0].mean(axis=1)
                for name in [f"val_step{k}" for k in steps] + ["val"]]
            ys, sds = np.array([p.mean() for p in per_seed]), np.array([p.std() for p in per_seed])
            xs = [0] + steps + [final]
            ax2.plot(xs, 100 * ys, marker="o", label=f"{m.upper()} ({len(runs)} seeds)")
            ax2.fill_between(xs, 100 * (ys - sds), 100 * (ys + sds), alpha=0.15)
        ax2.set(xlabel="RL iteration", ylabel="validation success (%)",
                title=f"Validation panel ({len(games)} games; mean +- SD over seeds)")
        ax2.legend()
    fig.tight_layout()
    out = rec_dir / "curves.png"
    fig.savefig(out, dpi=90)
    plt.close(fig)
    return out
