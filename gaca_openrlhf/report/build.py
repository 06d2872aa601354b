"""Plots (PNG, matplotlib Agg) and ``report.md`` comparing runs; see :mod:`gaca_openrlhf.report.cli`."""
from __future__ import annotations

import json
import math
import os
import re
from datetime import datetime, timezone

from gaca_openrlhf.report.data import NAN, Run
from gaca_openrlhf.report.reference import PAPER_NOTES, benchmarks, paper_results, setup

#: the last FINAL_WINDOW logged iterations make a run's "final" training value
FINAL_WINDOW = 5
#: the model label of an evaluation of the run's own (final) model folder
FINAL = "final"
SMOOTH = 5


def generated_data_warning() -> str:
    """The report's warning when an evaluation ran on generated data (each benchmark's generated stand-in named)."""
    kinds = ", or ".join(s.benchmark.generated_data for s in benchmarks() if s.benchmark.generated_data)
    return (f"**Generated data.** Some evaluations here ran on generated data ({kinds}), not on the benchmarks' real "
            "data: their numbers are NOT comparable with published results.")


def score_title() -> str:
    """The training-score plot's title: what ``rollout/score`` is per benchmark (own scores first, then the
    benchmarks whose score is their success)."""
    marks = benchmarks()
    parts = ([f"{s.title} score" for s in marks if s.benchmark.score == "score"]
             + [f"{s.title}: {s.benchmark.score}" for s in marks if s.benchmark.score != "score"])
    return f"Training score ({'; '.join(parts)})"


#: plots of series logged only on some iterations (drawn point to point)
SPARSE_PLOTS = ("validation.png",)


def line_plots() -> dict:
    """file name -> (title, [(metric key, y label)])"""
    return {
        "success_rate.png": ("Training success rate", [("rollout/success_rate", "success rate")]),
        "score.png": (score_title(), [("rollout/score", "score")]),
        "lambda.png": ("GACA gate", [("adv/lambda_mean", "mean lambda"),
                                     ("adv/lambda_saturated_frac", "share lambda = 1")]),
        "valid_action_ratio.png": ("Valid-action ratio", [("rollout/valid_action_ratio", "valid-action ratio"),
                                                          ("rollout/off_list_frac", "off-list action share")]),
        # is the run learning? (issue 35): what the updates can learn from, and how large they are
        "learning_signal.png": ("Learning signal", [
            ("policy/entropy", "policy entropy (nats/token)"),
            ("rollout/mixed_outcome_group_frac", "groups with mixed outcomes"),
            ("adv/nonzero_frac", "step samples with A != 0"),
            ("adv/advantage_mean", "mean advantage (> 0: self-imitation)")]),
        "updates.png": ("Optimizer updates", [("train/grad_norm_mean", "grad norm, mean over updates"),
                                              ("train/grad_norm_max", "grad norm, max over updates"),
                                              ("actor_lr", "learning rate")]),
        "episode_length.png": ("Episode length", [("rollout/num_steps", "steps per episode")]),
        # validation during training (issue 37, train_ppo --eval.dataset): logged every --eval.steps iterations
        "validation.png": ("Validation during training (held-out panel, evaluation temperature, fixed seeds)", [
            ("val/success_rate", "validation success"), ("val/num_steps", "steps per episode")]),
        "timings.png": ("Time per iteration", [("timing/generation", "generation (s)"),
                                               ("timing/environment", "environment (s)"),
                                               ("timing/experience", "experience (s)"),
                                               ("timing/training", "training (s)"), ("timing/sync", "weight sync (s)"),
                                               ("adv/seconds", "advantages (s)")]),
    }


def _fin(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _mean(xs):
    xs = [x for x in xs if _fin(x)]
    return sum(xs) / len(xs) if xs else NAN


def final_value(run: Run, key: str, window: int = FINAL_WINDOW) -> float:
    """Mean of the key over the last ``window`` iterations that logged a finite value."""
    vals = run.finite(key)
    return _mean(vals[-window:]) if vals else NAN


def moving_average(values: list[float], window: int) -> list[float]:
    """Trailing mean over the finite values in each window (NaN where the window has none)."""
    out = []
    for i in range(len(values)):
        out.append(_mean(values[max(0, i - window + 1): i + 1]))
    return out


def task_types(run: Run) -> list[str]:
    prefix = "rollout/success_rate/"
    return sorted(k[len(prefix):] for k in run.keys() if k.startswith(prefix))


# ------------------------------------------------------------------------------------------------ plots
def _plt():
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def _no_data(ax, what: str) -> None:
    ax.text(0.5, 0.5, f"no data: {what}", ha="center", va="center", transform=ax.transAxes, color="gray")


def _line_plot(runs: list[Run], path: str, title: str, panels: list[tuple[str, str]], smooth: bool,
               sparse: bool = False) -> None:
    plt = _plt()
    from matplotlib.ticker import MaxNLocator

    n = len(panels)
    cols = min(n, 3)
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(5.2 * cols, 3.6 * rows), squeeze=False)
    for i, (key, label) in enumerate(panels):
        ax = axes[i // cols][i % cols]
        drawn = False
        for j, run in enumerate(runs):
            x, y = run.series(key)
            if not any(_fin(v) for v in y):
                continue
            color = f"C{j % 10}"
            if sparse:  # logged every N iterations (validation): join the points that exist
                pts = [(a, b) for a, b in zip(x, y) if _fin(b)]
                ax.plot([a for a, _ in pts], [b for _, b in pts], color=color, marker="o", label=run.name)
            elif smooth and len(y) > SMOOTH:
                ax.plot(x, y, color=color, alpha=0.25, linewidth=0.8)
                ax.plot(x, moving_average(y, SMOOTH), color=color, label=f"{run.name} (avg {SMOOTH})")
            else:
                ax.plot(x, y, color=color, marker="." if len(y) < 30 else None, label=run.name)
            drawn = True
        ax.set_xlabel("iteration")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_ylabel(label)
        ax.set_title(key, fontsize=9)
        ax.grid(alpha=0.3)
        if drawn:
            ax.legend(fontsize=7)
        else:
            _no_data(ax, key)
    for k in range(n, rows * cols):
        axes[k // cols][k % cols].axis("off")
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _eval_plot(runs: list[Run], path: str) -> None:
    """One bar per (run, model, panel, temperature): mean success over seeds, population-SD error bar."""
    plt = _plt()
    names = [r.name for r in runs]
    rows = [(run.name, g) for run in runs for g in eval_groups(eval_records(run))[0] if g["num_results"]]
    fig, ax = plt.subplots(figsize=(max(5.0, 1.0 + 0.9 * len(rows)), 3.8))
    if rows:
        labels = [f"{name}\n{g['model']}\n{g['panel']} T={g['temperature']}" for name, g in rows]
        vals = [g["mean_success"] for _, g in rows]
        errs = [g["std_success"] if _fin(g["std_success"]) else 0.0 for _, g in rows]
        ax.bar(range(len(rows)), vals, yerr=errs, capsize=3,
               color=[f"C{names.index(n) % 10}" for n, _ in rows])
        ax.set_xticks(range(len(rows)), labels, fontsize=6)
        ax.set_ylim(0, 1.05)
        ax.set_ylabel("eval success (mean over seeds)")
        for i, (v, (_, g)) in enumerate(zip(vals, rows)):
            ax.text(i, min(v + 0.02, 1.0), f"{v:.3f}\nn={g['num_results']}", ha="center", fontsize=6)
    else:
        _no_data(ax, "no eval*.json results")
    ax.set_title("Evaluation success (fixed panels; error bar: population SD over seeds)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def make_plots(runs: list[Run], out_dir: str) -> list[str]:
    written = []
    for name, (title, panels) in line_plots().items():
        path = os.path.join(out_dir, name)
        _line_plot(runs, path, title, panels, smooth=name == "success_rate.png", sparse=name in SPARSE_PLOTS)
        written.append(path)
    types = sorted({t for r in runs for t in task_types(r)})
    if types:
        path = os.path.join(out_dir, "success_by_task_type.png")
        _line_plot(runs, path, "Training success by task type",
                   [(f"rollout/success_rate/{t}", t) for t in types], smooth=True)
        written.append(path)
    path = os.path.join(out_dir, "eval.png")
    _eval_plot(runs, path)
    written.append(path)
    return written


# ------------------------------------------------------------------------------------------------ tables
def _pct(x) -> str:
    return f"{100 * x:.2f}" if _fin(x) else "n/a"


def _f(x, digits=3) -> str:
    return f"{x:.{digits}f}" if _fin(x) else "n/a"


def _table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def _panel_of(ev: dict) -> str:
    cfg = ev.get("config") or {}
    return str(cfg.get("panel") or os.path.splitext(os.path.basename(ev.get("_file", "")))[0])


def model_label(ev: dict, run: Run) -> str:
    """Which model an evaluation ran: ``final`` (the run folder itself, the trained model), a checkpoint folder
    relative to the run (``ckpt/global_step5_hf``), another path as given, or ``unrecorded``."""
    model = (ev.get("config") or {}).get("model")
    if not model:
        return "unrecorded"
    model = os.path.normpath(str(model))
    root = os.path.normpath(run.path)
    if model == root:
        return FINAL
    if model.startswith(root + os.sep):
        return os.path.relpath(model, root).replace(os.sep, "/")
    return model


def checkpoint_step(label: str) -> float:
    """The training step in a checkpoint label (``global_step5_hf`` -> 5); final: +inf; none: NaN."""
    if label == FINAL:
        return math.inf
    m = re.search(r"(?:global_step|step|iter(?:ation)?)[_-]?(\d+)", label)
    return float(m.group(1)) if m else NAN


def population_sd(xs: list[float]) -> float:
    """Population standard deviation (divide by n), as the GACA paper reports over seeds."""
    if not xs:
        return NAN
    mu = sum(xs) / len(xs)
    return (sum((x - mu) ** 2 for x in xs) / len(xs)) ** 0.5


def sample_sd(xs: list[float]) -> float:
    """Sample standard deviation (divide by n - 1); NaN for fewer than two values."""
    if len(xs) < 2:
        return NAN
    mu = sum(xs) / len(xs)
    return (sum((x - mu) ** 2 for x in xs) / (len(xs) - 1)) ** 0.5


def _seed_key(seed) -> tuple:
    num = isinstance(seed, (int, float)) and not isinstance(seed, bool)
    return (seed is None, not num, seed if num else 0, str(seed))


def eval_groups(evals: list[dict]) -> tuple[list[dict], list[str]]:
    """Group evaluation results by (model, panel, temperature) -- never pooled across models or checkpoints -- and
    aggregate each group's success over its seeds (mean, population SD; sample SD beside it). A seed evaluated twice
    in one group is counted once (the first file) and reported in the returned warnings."""
    groups: dict[tuple, dict] = {}
    warnings: list[str] = []
    for e in evals:
        key = (e["model"], e["panel"], e["temperature"])
        g = groups.setdefault(key, {"model": key[0], "panel": key[1], "temperature": key[2], "seeds": [],
                                    "success_rates": [], "files": [], "duplicate_seeds": [],
                                    "generated_data": False})
        if e["model"] == "unrecorded":
            warnings.append(f"{e['file']}: the evaluated model is not recorded (config.model); such results are "
                            "grouped together")
        if not _fin(e["success_rate"]):
            warnings.append(f"{e['file']}: no success rate, left out of the statistics")
            continue
        if e["seed"] is None:
            warnings.append(f"{e['file']}: no seed recorded; seeds cannot be checked distinct")
        elif e["seed"] in g["seeds"]:
            g["duplicate_seeds"].append(e["seed"])
            warnings.append(f"{e['file']}: seed {e['seed']} of model {key[0]!r}, panel {key[1]!r}, T {key[2]} was "
                            f"already evaluated ({g['files'][g['seeds'].index(e['seed'])]}): counted once")
            continue
        g["seeds"].append(e["seed"])
        g["success_rates"].append(float(e["success_rate"]))
        g["files"].append(e["file"])
        g["generated_data"] = g["generated_data"] or bool(e.get("generated_data"))
    out = []
    for g in groups.values():
        order = sorted(range(len(g["seeds"])), key=lambda i: _seed_key(g["seeds"][i]))
        for k in ("seeds", "success_rates", "files"):
            g[k] = [g[k][i] for i in order]
        xs = g["success_rates"]
        g.update(num_results=len(xs), mean_success=_mean(xs), std_success=population_sd(xs),
                 std_success_sample=sample_sd(xs), step=checkpoint_step(g["model"]))
        out.append(g)
    out.sort(key=lambda g: (str(g["panel"]), str(g["temperature"]), -1.0 if math.isnan(g["step"]) else g["step"],
                            g["model"]))
    return out, warnings


def best_checkpoints(groups: list[dict]) -> list[dict]:
    """Per (panel, temperature): the final model's group and the best model -- the highest mean success over seeds
    among the final model and the checkpoints (ties: the final model, else the later checkpoint), as the paper
    reports the best checkpoint next to the final one."""
    by: dict[tuple, list[dict]] = {}
    for g in groups:
        if g["num_results"]:
            by.setdefault((g["panel"], g["temperature"]), []).append(g)
    out = []
    for (panel, temp), gs in sorted(by.items(), key=lambda kv: (str(kv[0][0]), str(kv[0][1]))):
        final = next((g for g in gs if g["model"] == FINAL), None)
        best = max(gs, key=lambda g: (g["mean_success"], g["step"] if not math.isnan(g["step"]) else -1.0))
        out.append({"panel": panel, "temperature": temp, "final": final, "best": best, "num_models": len(gs)})
    return out


def eval_records(run: Run) -> list[dict]:
    """One row per evaluation result file of the run (which model, panel, seed, T, success, ...)."""
    rows = []
    for ev in run.evals:
        cfg = ev.get("config") or {}
        rows.append({
            "file": ev.get("_file"), "model": model_label(ev, run), "panel": _panel_of(ev),
            "num_episodes": ev.get("num_episodes"), "num_failed": ev.get("num_failed"),
            "success_rate": ev.get("success_rate"), "mean_score": ev.get("mean_score"),
            "mean_steps": ev.get("mean_steps"), "valid_action_ratio": ev.get("valid_action_ratio"),
            "seed": cfg.get("seed"), "temperature": cfg.get("temperature"),
            "generated_data": cfg.get("generated_data"),
            "per_task_type": {t: v.get("success_rate") for t, v in (ev.get("per_task_type") or {}).items()
                              if isinstance(v, dict)},
        })
    return rows


def validation_summary(run: Run) -> dict | None:
    """The run's validation rounds (``val/success_rate`` by iteration): first, last and best (the checkpoint the
    trainer keeps as ``best_global_step<N>``; ties: the earlier round, as OpenRLHF keeps the first best), or None
    when the run validated nothing."""
    rounds = [(it, v) for it, v in zip(*run.series("val/success_rate")) if _fin(v)]
    if not rounds:
        return None
    best = max(rounds, key=lambda r: (r[1], -r[0]))
    return {"rounds": len(rounds), "first_iteration": rounds[0][0], "first": rounds[0][1],
            "last_iteration": rounds[-1][0], "last": rounds[-1][1], "best_iteration": best[0], "best": best[1],
            "episodes": _mean(run.series("val/num_episodes")[1])}


def run_summary(run: Run) -> dict:
    """Numbers of one run (what the tables show), JSON-friendly (None for missing)."""
    def clean(x):
        return x if _fin(x) else None

    iters = run.iterations
    out = {
        "name": run.name, "path": run.path, "iterations": len(iters),
        "last_iteration": clean(iters[-1]) if iters else None, "bad_lines": run.bad_lines,
        "final_success": clean(final_value(run, "rollout/success_rate")),
        "final_score": clean(final_value(run, "rollout/score")),
        "final_valid_action_ratio": clean(final_value(run, "rollout/valid_action_ratio")),
        "final_num_steps": clean(final_value(run, "rollout/num_steps")),
        "final_lambda_mean": clean(final_value(run, "adv/lambda_mean")),
        "mean_iteration_seconds": clean(_mean(run.series("timing/step_total")[1])),
        "final_success_by_task_type": {t: clean(final_value(run, f"rollout/success_rate/{t}")) for t in task_types(run)},
        "validation": validation_summary(run),
        "evals": eval_records(run),
    }
    groups, warnings = eval_groups(out["evals"])
    out["eval_groups"] = [{k: (clean(v) if isinstance(v, float) else v) for k, v in g.items()} for g in groups]
    out["eval_best"] = [
        {"panel": b["panel"], "temperature": b["temperature"], "num_models": b["num_models"],
         "final_model": b["final"]["model"] if b["final"] else None,
         "final_mean_success": clean(b["final"]["mean_success"]) if b["final"] else None,
         "final_std_success": clean(b["final"]["std_success"]) if b["final"] else None,
         "final_num_seeds": b["final"]["num_results"] if b["final"] else 0,
         "best_model": b["best"]["model"], "best_mean_success": clean(b["best"]["mean_success"]),
         "best_std_success": clean(b["best"]["std_success"]), "best_num_seeds": b["best"]["num_results"]}
        for b in best_checkpoints(groups)]
    out["eval_warnings"] = warnings
    out["generated_data"] = any(bool(e["generated_data"]) for e in out["evals"])
    return out


def _pm(mean, sd) -> str:
    return f"{_pct(mean)} ± {_pct(sd)}" if _fin(sd) else _pct(mean)


def render_markdown(runs: list[Run], summaries: list[dict], plots: list[str], out_dir: str) -> str:
    md = ["# GACA / GiGPO / GRPO comparison report", "",
          f"Generated {datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M UTC')} by `python -m gaca_openrlhf.report`.",
          ""]
    generated = any(s["generated_data"] for s in summaries)
    warning = generated_data_warning()
    if generated:
        md += [warning, ""]
    md += ["## Runs", ""]
    md.append(_table(["run", "folder", "iterations logged", "last iteration", "eval results"],
                     [[s["name"], f"`{s['path']}`", str(s["iterations"]),
                       _f(s["last_iteration"], 0), str(len(s["evals"]))] for s in summaries]))
    warnings = [f"- {r.name}: {w}" for r in runs for w in r.warnings]
    warnings += [f"- {s['name']}: {w}" for s in summaries for w in s["eval_warnings"]]
    if warnings:
        md += ["", "Warnings:", ""] + warnings
    md += ["", "## Measured: training (this project's runs)", "",
           f"Success rates in %. *final* = mean over the last {FINAL_WINDOW} logged iterations of the training "
           "rollouts (training temperature; not an evaluation, and not used to pick a checkpoint).", ""]
    md.append(_table(
        ["run", "final rollout success (%)", "final score", "valid-action ratio", "steps / episode",
         "mean lambda", "s / iteration"],
        [[s["name"], _pct(s["final_success"]), _f(s["final_score"]),
          _f(s["final_valid_action_ratio"]), _f(s["final_num_steps"], 2), _f(s["final_lambda_mean"]),
          _f(s["mean_iteration_seconds"], 1)] for s in summaries]))
    types = sorted({t for s in summaries for t in s["final_success_by_task_type"]})
    if types:
        md += ["", f"### Training success by task type (%, final = last {FINAL_WINDOW} iterations)", ""]
        md.append(_table(["run"] + types, [[s["name"]] + [_pct(s["final_success_by_task_type"].get(t)) for t in types]
                                           for s in summaries]))
    val_rows = [s for s in summaries if s.get("validation")]
    if val_rows:
        md += ["", "### Validation during training (`val/success_rate`, %)", "",
               "The validation panel played by the training engines every `--eval.steps` iterations and after the "
               "last (evaluation temperature, the same seeds every round); *best* is the round whose checkpoint the "
               "trainer keeps (`best_global_step<N>`). A choice made here is made on validation, never on a test "
               "panel.", ""]
        md.append(_table(["run", "rounds", "episodes / round", "first (iteration)", "last (iteration)",
                          "best (iteration)"],
                         [[s["name"], str(v["rounds"]), f"{v['episodes']:.0f}",
                           f"{_pct(v['first'])} ({v['first_iteration']:.0f})",
                           f"{_pct(v['last'])} ({v['last_iteration']:.0f})",
                           f"{_pct(v['best'])} ({v['best_iteration']:.0f})"]
                          for s in val_rows for v in [s["validation"]]]))
    md += ["", "## Measured: evaluation (fixed panels and seeds, `python -m gaca_openrlhf.eval`)", ""]
    best_rows = [(s, b) for s in summaries for b in s["eval_best"]]
    if best_rows:
        md += ["Success in %, mean ± **population** SD over seeds (the paper's convention) of one model on one panel at "
               "one temperature; evaluations of different models or checkpoints are never pooled. *best* = the "
               f"model (the final one, `{FINAL}`, or a checkpoint) with the highest mean success over seeds.", ""]
        md.append(_table(
            ["run", "panel", "T", "final model (%)", "seeds", "best checkpoint", "best (%)", "seeds",
             "models compared"],
            [[s["name"], str(b["panel"]), str(b["temperature"]), _pm(b["final_mean_success"], b["final_std_success"])
              if b["final_model"] else "not evaluated", str(b["final_num_seeds"]), b["best_model"],
              _pm(b["best_mean_success"], b["best_std_success"]), str(b["best_num_seeds"]), str(b["num_models"])]
             for s, b in best_rows]))
        md += ["", "### Every model over seeds (%, population SD; sample SD beside it, labelled)", ""]
        md.append(_table(
            ["run", "model", "panel", "T", "seeds", "mean success (%)", "population SD (%)", "sample SD (%)"],
            [[s["name"], g["model"], str(g["panel"]), str(g["temperature"]),
              ", ".join(str(x) for x in g["seeds"]), _pct(g["mean_success"]), _pct(g["std_success"]),
              _pct(g["std_success_sample"])]
             for s in summaries for g in s["eval_groups"] if g["num_results"]]))
    eval_rows = [(s, e) for s in summaries for e in s["evals"]]
    if eval_rows:
        md += ["", "### Every evaluation result", ""]
        md.append(_table(
            ["run", "model", "panel", "T", "seed", "episodes", "failed", "success (%)", "mean score", "mean steps",
             "valid-action ratio", "data", "file"],
            [[s["name"], e["model"], e["panel"], str(e["temperature"]), str(e["seed"]), str(e["num_episodes"]),
              str(e["num_failed"]), _pct(e["success_rate"]), _f(e["mean_score"]), _f(e["mean_steps"], 2),
              _f(e["valid_action_ratio"]),
              {True: "generated", False: "real"}.get(e["generated_data"], "unrecorded"),
              f"`{os.path.basename(e['file'] or '')}`"] for s, e in eval_rows]))
        etypes = sorted({t for _, e in eval_rows for t in e["per_task_type"]})
        if etypes:
            md += ["", "### Evaluation success by task type (%, per result)", ""]
            md.append(_table(["run", "model", "panel", "seed"] + etypes,
                             [[s["name"], e["model"], e["panel"], str(e["seed"])]
                              + [_pct(e["per_task_type"].get(t)) for t in etypes] for s, e in eval_rows]))
    else:
        md.append("No evaluation results (`eval*.json` in a run folder) were found.")
    for run in runs:  # `python -m gaca_openrlhf.diagnostics --run DIR --out DIR/diagnostics` (H13)
        for cand in (os.path.join(run.path, "diagnostics", "diagnostics.md"), os.path.join(run.path, "diagnostics.md")):
            if os.path.isfile(cand):
                with open(cand) as f:
                    md += ["", f.read().strip().replace("## Diagnostics", f"### {run.name}: diagnostics", 1)]
                break
    for run in runs:  # `python -m gaca_openrlhf.diagnostics.audit_command ... --out DIR/audit` (docs/credit_audit.md)
        cand = os.path.join(run.path, "audit", "audit.md")
        if os.path.isfile(cand):
            with open(cand) as f:
                md += ["", f.read().strip().replace("## Credit audit", f"### {run.name}: credit audit", 1)]
    md += ["", "## Plots", ""]
    for p in plots:
        rel = os.path.relpath(p, out_dir)
        md.append(f"![{rel}]({rel})")
    marks = benchmarks()
    real = "/".join(s.title for s in marks)
    stand_ins = ", ".join(s.benchmark.generated_runs for s in marks if s.benchmark.generated_runs)
    md += ["", "## Reference numbers from the papers (NOT measured in this project)", "",
           "Published success rates (%), copied from the papers as summarised in the project's FACTS.md. They come "
           f"from real {real} data, Qwen2.5 models and the authors' verl-agent setup "
           f"({setup()}); runs on {stand_ins} or other models are not comparable to them.", ""]
    if generated:
        md += [warning, ""]
    md.append(_table(["source", "benchmark", "model", "method / setting", "success (%, published)"],
                     [[a, b, c, d, f"{v:.2f}"] for a, b, c, d, v in paper_results()]))
    md += [""] + [f"- {src}: {what}: {val} (published)" for src, what, val in PAPER_NOTES] + [""]
    return "\n".join(md)


def build_report(runs: list[Run], out_dir: str) -> dict:
    os.makedirs(out_dir, exist_ok=True)
    plots = make_plots(runs, out_dir)
    summaries = [run_summary(r) for r in runs]
    md = render_markdown(runs, summaries, plots, out_dir)
    with open(os.path.join(out_dir, "report.md"), "w") as f:
        f.write(md)
    summary = {"runs": summaries, "plots": [os.path.relpath(p, out_dir) for p in plots],
               "final_window": FINAL_WINDOW, "generated_data": any(s["generated_data"] for s in summaries),
               "sd_convention": "population (divide by n) over seeds; std_success_sample divides by n - 1"}
    with open(os.path.join(out_dir, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
    return summary
