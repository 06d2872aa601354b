"""Task files for ``--data.prompt_dataset``: one JSON line ``{"input": <task id>}`` per task.

The rollout passes the ``input`` string to ``env.reset(task)``: an ALFWorld game id (relative to the data root),
a WebShop goal index, or a toy-env integer.

    python -m gaca_openrlhf.rollout.tasks alfworld --data DIR --split train --out tasks.jsonl [--limit N]
    python -m gaca_openrlhf.rollout.tasks webshop --start 1500 --num 8 --out tasks.jsonl   # train goals: 1500+
    python -m gaca_openrlhf.rollout.tasks toy --num 4 --out tasks.jsonl

``--holdout N --holdout-out val.jsonl`` moves N of the tasks into a validation panel (``train_ppo --eval.dataset``,
gaca_openrlhf.trainer.validation) and leaves them out of ``--out``: the N tasks whose ids hash lowest, so the panel
depends on the task ids only (the same for every training seed and method), never on the order or the seed.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os


def write_tasks(task_ids, out: str) -> int:
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with open(out, "w") as f:
        for t in task_ids:
            f.write(json.dumps({"input": str(t)}) + "\n")
    return len(task_ids)


def split_holdout(task_ids, n: int) -> tuple[list, list]:
    """(training tasks in their order, the ``n`` held-out tasks): those whose ids' SHA-256 is lowest."""
    if n < 0 or n > len(task_ids):
        raise ValueError(f"--holdout {n}: there are {len(task_ids)} tasks")
    key = lambda t: hashlib.sha256(str(t).encode()).hexdigest()  # noqa: E731
    held = set(sorted({str(t) for t in task_ids}, key=key)[:n])
    return [t for t in task_ids if str(t) not in held], sorted((t for t in task_ids if str(t) in held), key=key)


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
        s.add_argument("--holdout", type=int, default=0,
                       help="move this many tasks (the lowest id hashes) into --holdout-out, a validation panel")
        s.add_argument("--holdout-out", help="where the held-out tasks go (with --holdout)")
        by_name[spec.name] = spec
    args = p.parse_args(argv)
    if args.holdout and not args.holdout_out:
        p.error("--holdout needs --holdout-out FILE")
    ids = by_name[args.env].task_ids(args)
    try:
        ids, held = split_holdout(ids, args.holdout)
    except ValueError as e:
        p.error(str(e))
    print(f"wrote {write_tasks(ids, args.out)} {args.env} tasks to {args.out}")
    if args.holdout:
        print(f"wrote {write_tasks(held, args.holdout_out)} held-out {args.env} tasks to {args.holdout_out}")


if __name__ == "__main__":
    main()
