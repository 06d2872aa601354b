"""``python -m gaca_openrlhf.report --run NAME=DIR [--run NAME=DIR ...] --out OUTDIR``.

Reads each run's ``metrics.jsonl`` (training, one record per iteration) and its evaluation results
(``eval*.json``, ``eval/*.json``, ``eval*/*.json`` written by ``python -m gaca_openrlhf.eval``) and writes to OUTDIR:
PNG plots (training success rate per method, score, GACA's lambda, valid-action ratio, episode length, timings,
success by task type, evaluation success), ``report.md`` (comparison tables of measured numbers, then the papers'
reference numbers in a separate, labelled section) and ``summary.json`` (the tables' numbers).

Evaluations follow the GACA paper's protocol: results are grouped by (model or checkpoint, panel, temperature),
never pooled across checkpoints; each group reports the mean success and the population SD over its seeds (the
sample SD beside it, labelled); a seed evaluated twice in a group is counted once, with a warning; per (panel,
temperature) the best model by mean success over seeds is reported next to the final model. Reports on generated
data (offline ALFWorld games, the generated WebShop catalog) say that published numbers are not comparable.
"""
from __future__ import annotations

import argparse
import sys

from gaca_openrlhf.report.build import build_report
from gaca_openrlhf.report.data import load_run, parse_run_arg


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m gaca_openrlhf.report", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--run", action="append", required=True, metavar="NAME=DIR",
                   help="a run folder (holding metrics.jsonl and/or eval*.json); repeat for each method")
    p.add_argument("--out", required=True, help="output folder for the plots, report.md and summary.json")
    return p


def main(argv=None) -> int:
    p = build_parser()
    args = p.parse_args(argv)
    runs = []
    seen = set()
    for text in args.run:
        try:
            name, path = parse_run_arg(text)
        except ValueError as e:
            p.error(str(e))
        if name in seen:
            p.error(f"duplicate run name {name!r}")
        seen.add(name)
        try:
            runs.append(load_run(name, path))
        except FileNotFoundError as e:
            p.error(str(e))
    for run in runs:
        for w in run.warnings:
            print(f"warning: {run.name}: {w}", file=sys.stderr)
    if not any(r.records or r.evals for r in runs):
        print("warning: no metrics.jsonl records or eval results in any run; the report will be empty", file=sys.stderr)
    summary = build_report(runs, args.out)
    for s in summary["runs"]:
        for w in s["eval_warnings"]:
            print(f"warning: {s['name']}: {w}", file=sys.stderr)
    if summary["generated_data"]:
        print("warning: evaluations on generated data: not comparable with published numbers", file=sys.stderr)
    print(f"wrote {args.out}/report.md, summary.json and {len(summary['plots'])} plots")
    return 0
