"""Evaluate one model on a fixed panel for several seeds with one vLLM engine.

    python -m gaca_openrlhf.bench.evaluate --seeds 0,1,2 --out-dir DIR <every python -m gaca_openrlhf.eval option>

It parses the options with the eval CLI's own parser (:func:`gaca_openrlhf.eval.cli.build_parser`; ``--out`` is
ignored) and writes ``DIR/seed<S>.json`` per seed in the eval CLI's format (its ``config`` with
``tasks_sha1``, what the quickstart's ``--resume`` checks, and ``engine`` but no ``generated_data``; no total
time), through the eval CLI's own session (:class:`gaca_openrlhf.eval.session.EvalSession`: panels, environment
config, generator, episodes, Ray). The only
difference to calling ``python -m gaca_openrlhf.eval --seed S`` once per seed is that the engine starts once: every
request carries its own seed derived from (seed, task, episode, step), so the sampled tokens do not depend on which
engine serves them (the engine's own seed is unused). On 2 CPU cores an engine start is 20-60 s, a third of a
smoke run's evaluation time.

``--extra-panel NAME=PANEL`` (repeatable) evaluates further panels with the same engine and seeds and writes them to
``DIR/NAME/seed<S>.json`` (the quickstart's validation and unseen test panels; for WebShop a goal split, cut to
``--num-tasks`` like the main panel).
"""
from __future__ import annotations

import argparse
import json
import os
import sys


def main(argv=None) -> int:
    from gaca_openrlhf.eval.cli import build_parser
    from gaca_openrlhf.eval.session import EvalSession, die, write_json

    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--seeds", required=True, help="comma-separated evaluation seeds, e.g. 0,1,2")
    pre.add_argument("--out-dir", required=True, help="folder for seed<S>.json")
    pre.add_argument("--extra-panel", action="append", default=[], metavar="NAME=PANEL",
                     help="another panel of the same env, written to DIR/NAME/seed<S>.json (repeatable)")
    own, rest = pre.parse_known_args(argv)
    seeds = [int(s) for s in own.seeds.split(",") if s.strip()]
    if not seeds:
        die("--seeds is empty")
    args = build_parser().parse_args(rest + ["--out", os.path.join(own.out_dir, "unused.json")])
    panels = [("", args.panel)]
    for spec in own.extra_panel:
        name, sep, value = spec.partition("=")
        if not sep or not name or not value or os.sep in name:
            die(f"--extra-panel wants NAME=PANEL, got {spec!r}")
        panels.append((name, value))
    with EvalSession(args) as session:
        # extra panels that are files hold all their tasks; others (goal splits) are cut to the main panel's size
        resolved = [(name, arg, session.panel(arg, None if name and session.spec.panel_files else args.num_tasks))
                    for name, arg in panels]
        session.start(seed=seeds[0])  # the engine's own seed is unused: every request carries its own
        briefs = {}
        for (name, panel_arg, panel), seed in ((p, s) for p in resolved for s in seeds):
            episodes, timing = session.run(panel, seed, desc=f"eval {name or args.panel} seed {seed}")
            result = session.results(panel, panel_arg, seed, episodes, timing, tasks_sha1=True,
                                     engine="one engine for all seeds (gaca_openrlhf.bench.evaluate)")
            write_json(os.path.join(own.out_dir, name, f"seed{seed}.json"), result)
            briefs[f"{name}/{seed}" if name else seed] = result["success_rate"]
        print(json.dumps({"success_rate_by_seed": briefs}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
