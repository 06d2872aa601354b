"""``python -m gaca_openrlhf.diagnostics.audit_command --model CKPT --env ENV --out DIR``: the offline credit audit.

Plays a fixed panel of tasks with the frozen checkpoint (``--episodes-per-task`` episodes each, fixed seeds, vLLM at
``--temperature``, the training one by default), with the environment's oracle switched on, and audits every
registered step estimator on the episodes (:mod:`.audit_rollouts`, docs/credit_audit.md); EMPG's step entropy comes
from one extra forward pass of the checkpoint over the recorded steps (:mod:`.step_entropy`; ``--no-entropy``
skips it and EMPG). Writes
``DIR/audit.json`` (the figures, the settings and the episodes' outcomes), ``DIR/audit.md`` (a report section) and
``DIR/audit.png`` (sign agreement per estimator with intervals). Environment options are the evaluation's
(``python -m gaca_openrlhf.eval``): --panel, --num-tasks, --data, the environment's own flags, ...
Exit status 2 on bad input, 4 when no step has oracle progress (an environment or task type without an oracle).
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time

from agents.registry import DEFAULT_ENV, names
from gaca_openrlhf.advantages import AdvantageConfig, list_estimators

from .cli import add_episode_args


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m gaca_openrlhf.diagnostics.audit_command", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True, help="frozen checkpoint (HF folder)")
    p.add_argument("--out", required=True, help="output folder (audit.json, audit.md, audit.png)")
    p.add_argument("--env", default=DEFAULT_ENV, choices=names())
    p.add_argument("--panel", default="eval_id", help="task panel (as python -m gaca_openrlhf.eval)")
    p.add_argument("--num-tasks", type=int, default=16, help="first N tasks of the panel (the task groups)")
    p.add_argument("--episodes-per-task", type=int, default=4, help="episodes per task (the group size)")
    p.add_argument("--temperature", type=float, default=1.0, help="sampling temperature (training: 1.0)")
    p.add_argument("--seed", type=int, default=0, help="base seed of every request and of the bootstrap")
    p.add_argument("--bootstrap", type=int, default=2000, help="bootstrap resamples (over task groups)")
    p.add_argument("--no-entropy", action="store_true",
                   help="skip the extra forward pass that gives every step's policy entropy (EMPG is then not audited)")
    p.add_argument("--center", default="none", choices=["none", "group", "batch"],
                   help="audit every estimator with its advantages centred (AdvantageConfig.center, docs/design.md "
                        "§3.4): separates the direction of credit from a mean shift")
    p.add_argument("--estimators", default=None,
                   help=f"comma-separated estimators to audit (default: all registered: {','.join(list_estimators())})")
    add_episode_args(p)
    p.add_argument("--progress", action="store_true")
    return p


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    estimators = None
    if args.estimators:
        estimators = [e.strip() for e in args.estimators.split(",") if e.strip()]
        unknown = [e for e in estimators if e not in list_estimators()]
        if unknown:
            print(f"error: unknown estimator(s) {unknown}; registered: {list_estimators()}", file=sys.stderr)
            return 2
    from agents.registry import spec as env_spec

    if not env_spec(args.env).oracle:
        print(f"error: environment {args.env!r} provides no oracle progress (EnvSpec.oracle): nothing to audit",
              file=sys.stderr)
        return 2
    from gaca_openrlhf.eval.session import EvalSession, write_json

    from .audit_rollouts import markdown, plot, run_audit
    from .disagreement import make_scoring_generator

    t0 = time.time()
    with EvalSession(args) as session:
        panel = session.panel(args.panel, args.num_tasks)
        generator = session.start(make_scoring_generator).generator
        policy = None
        if not args.no_entropy:
            from .step_entropy import load_policy

            policy = load_policy(session.model)
        try:
            result = run_audit(panel.tasks[: args.num_tasks], session.run_config(args.seed), generator,
                               session.encode, adv_cfg=AdvantageConfig(center=args.center), estimators=estimators,
                               n_boot=args.bootstrap, task_types=panel.task_types, progress=args.progress,
                               policy=policy, temperature=args.temperature)
        except ValueError as e:
            print(f"error: {e}", file=sys.stderr)
            return 4
    result["config"] = {"model": session.model, "env": args.env, "panel": panel.name, "num_tasks": len(panel.tasks),
                        "episodes_per_task": args.episodes_per_task, "temperature": args.temperature,
                        "seed": args.seed, "center": args.center, "vllm": generator.settings}
    result["seconds"] = time.time() - t0
    os.makedirs(args.out, exist_ok=True)
    write_json(os.path.join(args.out, "audit.json"), result)
    title = (f"Credit audit: {os.path.basename(os.path.normpath(session.model))} on {args.env} "
             f"({panel.name}, temperature {args.temperature}"
             + (f", advantages centred per {args.center}" if args.center != "none" else "") + ")")
    with open(os.path.join(args.out, "audit.md"), "w") as f:
        f.write(markdown(result, title))
    plot(result, os.path.join(args.out, "audit.png"))
    print(f"wrote audit.json, audit.md and audit.png to {args.out}", file=sys.stderr)
    print(json.dumps({name: r["all"]["sign_agree"]["value"] if r["all"]["sign_agree"] else None
                      for name, r in result["estimators"].items()}))
    return 0


if __name__ == "__main__":  # vLLM starts its engine in a spawned process: keep the guard
    sys.exit(main())
