"""``python -m agents.alfworld {generate,check,panels}``.

generate: write expert-validated offline games in ALFWorld's layout (see agents/alfworld/generator.py): ALFRED's
          scene split (valid_unseen only on floor plans 10/219/308/424, never on the others) and the real split's
          task-type mix; re-running the same command resumes an interrupted run.
check:    replay every stored walkthrough through the training env adapter; the last line printed is JSON
          {"games", "won", "task_types", "reset_ms_p50", "step_ms_p50"}.
panels:   write the standard task panels (train / eval_id = 128 of valid_seen / eval_ood) of a data root.
stats:    distribution figures of a split (expert steps per task type, objects/receptacles/locations per scene by
          room type, floor plans used); works on real and generated data. Prints JSON.
"""
from __future__ import annotations

import argparse
import json
import sys


def _bar(total: int, desc: str):
    from tqdm import tqdm

    bar = tqdm(total=total, desc=desc, file=sys.stderr, dynamic_ncols=True)

    def update(done: int, _total: int) -> None:
        bar.n = done
        bar.refresh()
        if done >= total:
            bar.close()

    return update


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m agents.alfworld", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)

    g = sub.add_parser("generate", help="generate offline games")
    g.add_argument("--out", required=True, help="data root to write (json_2.1.1/<split>/... is created below it)")
    g.add_argument("--split", required=True, choices=["train", "valid_seen", "valid_unseen"])
    g.add_argument("--num-games", type=int, required=True)
    g.add_argument("--seed", type=int, default=0)
    g.add_argument("--task-types", default="1,2,3,4,5,6",
                   help="comma-separated task type ids (1..6); mixed in the real split's proportions")
    g.add_argument("--max-attempts", type=int, default=40, help="candidates per game before skipping it")
    g.add_argument("--max-receptacles", type=int, default=None,
                   help="easier subset: at most N receptacles per room (default: the floor plan's all)")
    g.add_argument("--max-distractor-types", type=int, default=None,
                   help="easier subset: at most N other object classes per room (default: all)")
    g.add_argument("--workers", type=int, default=1,
                   help="processes building games (the files do not depend on it)")
    g.add_argument("--exclude-split", action="append", default=[], metavar="SPLIT_DIR",
                   help="a split folder (<root>/json_2.1.1/<split>) whose goals (floor plan, object, receptacle) and "
                        "first observations this split must not repeat; repeatable (validation/test splits)")
    g.add_argument("--no-progress", action="store_true")

    dj = sub.add_parser("disjoint", help="assert that split folders share no goal key or first observation")
    dj.add_argument("splits", nargs="+", metavar="NAME=SPLIT_DIR")

    c = sub.add_parser("check", help="replay stored walkthroughs through the env adapter")
    c.add_argument("--data", required=True, help="data root (contains json_2.1.1/)")
    c.add_argument("--split", required=True, choices=["train", "valid_seen", "valid_unseen"])
    c.add_argument("--backend", default="local", choices=["local", "ray"])
    c.add_argument("--no-progress", action="store_true")
    c.add_argument("--verbose", action="store_true", help="list games not won")

    pn = sub.add_parser("panels", help="write the standard task panels of a data root")
    pn.add_argument("--data", required=True)
    pn.add_argument("--out", required=True, help="folder for train.json / eval_id.json / eval_ood.json")
    pn.add_argument("--seed", type=int, default=0)

    st = sub.add_parser("stats", help="distribution figures of a split (real or generated)")
    st.add_argument("--data", required=True)
    st.add_argument("--split", required=True, choices=["train", "valid_seen", "valid_unseen"])

    args = p.parse_args(argv)
    if args.cmd == "disjoint":
        from agents.alfworld.disjoint import OverlapError, check_disjoint

        try:
            counts = check_disjoint(dict(s.split("=", 1) for s in args.splits))
        except (OverlapError, ValueError) as e:
            print(f"error: {e}", file=sys.stderr)
            return 1
        print(json.dumps({"disjoint": True, "games": counts}))
        return 0
    if args.cmd == "generate":
        from agents.alfworld.generator import generate

        types = [int(t) for t in args.task_types.split(",") if t.strip()]
        progress = None if args.no_progress else _bar(args.num_games, f"generate {args.split}")
        try:
            stats = generate(args.out, args.split, args.num_games, args.seed, task_types=types,
                             max_attempts=args.max_attempts, max_receptacles=args.max_receptacles,
                             max_distractor_types=args.max_distractor_types, progress=progress,
                             workers=args.workers, exclude_splits=args.exclude_split)
        except (ValueError, FileNotFoundError) as e:  # bad arguments, or an --out that holds other games: nothing was written
            print(f"error: {e}", file=sys.stderr)
            return 2
        if stats.skipped:
            print(f"warning: {len(stats.skipped)} game(s) skipped (no solvable candidate): indices "
                  f"{stats.skipped[:10]}", file=sys.stderr)
        print(json.dumps(stats.as_dict()))
        return 0
    if args.cmd == "check":
        from agents.alfworld.check import check_split
        from agents.alfworld.panels import list_games

        n = len(list_games(args.data, args.split))
        progress = None if args.no_progress or n == 0 else _bar(n, f"check {args.split}")
        res = check_split(args.data, args.split, backend=args.backend, progress=progress, verbose=args.verbose)
        failures = res.pop("_failures")
        expert = res.pop("_expert_played")
        if failures:
            print(f"{len(failures)} game(s) not won, e.g. {failures[:3]}", file=sys.stderr)
        if expert:
            print(f"{expert} game(s) had no stored walkthrough and were played by the expert", file=sys.stderr)
        print(json.dumps(res))
        return 0 if res["games"] > 0 and res["won"] == res["games"] else 1
    if args.cmd == "stats":
        from agents.alfworld import is_generated
        from agents.alfworld.check import split_stats

        res = split_stats(args.data, args.split)
        res["generated"] = is_generated(args.data)
        print(json.dumps(res))
        return 0 if res["games"] else 1
    if args.cmd == "panels":
        from agents.alfworld.panels import build_standard_panels

        written = build_standard_panels(args.data, args.out, seed=args.seed)
        print(json.dumps(written))
        return 0 if written else 1
    return 2


if __name__ == "__main__":
    sys.exit(main())
