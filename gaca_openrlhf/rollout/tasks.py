"""Task files for ``--data.prompt_dataset``: one JSON line ``{"input": <task id>}`` per task.

The rollout passes the ``input`` string to ``env.reset(task)``: an ALFWorld game id (relative to the data root),
a WebShop goal index, or a toy-env integer.

    python -m gaca_openrlhf.rollout.tasks alfworld --data DIR --split train --out tasks.jsonl [--limit N]
    python -m gaca_openrlhf.rollout.tasks webshop --start 1500 --num 8 --out tasks.jsonl   # train goals: 1500+
    python -m gaca_openrlhf.rollout.tasks toy --num 4 --out tasks.jsonl
"""
from __future__ import annotations

import argparse
import json
import os


def write_tasks(task_ids, out: str) -> int:
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with open(out, "w") as f:
        for t in task_ids:
            f.write(json.dumps({"input": str(t)}) + "\n")
    return len(task_ids)


def main(argv=None) -> None:
    from agents.registry import specs

    p = argparse.ArgumentParser(prog="python -m gaca_openrlhf.rollout.tasks", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="env", required=True)
    by_name = {}
    for spec in specs():  # one subcommand per environment, with its options (EnvSpec.add_task_args)
        s = sub.add_parser(spec.name)
        spec.add_task_args(s)
        s.add_argument("--out", required=True)
        by_name[spec.name] = spec
    args = p.parse_args(argv)
    ids = by_name[args.env].task_ids(args)
    print(f"wrote {write_tasks(ids, args.out)} {args.env} tasks to {args.out}")


if __name__ == "__main__":
    main()
