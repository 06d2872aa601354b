"""Does RL fix what it trains on? (issue 35, diagnosis step 2; docs/learning_notebook.md)

Two subcommands around one experiment: train on a fixed set of training games whose outcome the warm start does not
decide (mixed outcomes across its episodes), and compare the same games, episodes and seeds before and after.

``select``: from evaluation results of the warm start (``python -m gaca_openrlhf.eval --episodes-per-task K``), the
games won in some but not all of their K episodes; the ``--num`` of them whose ids hash lowest (a choice that depends
on nothing but the ids), written as a panel JSON (``--panel``, for the evaluations) and a task file
(``--tasks``, ``train_ppo --data.prompt_dataset``), ids relative to ``--data-root``.

``compare``: two evaluation results of the same panel, episodes and seed (before / after), paired by (game, episode):
success before and after, the lost -> won and won -> lost counts, and per game the wins before and after.

    python -m gaca_openrlhf.diagnostics.fixed_games select RESULTS.json --data-root DIR --num 8 \\
        --panel fixed.json --tasks tasks.jsonl
    python -m gaca_openrlhf.diagnostics.fixed_games compare BEFORE.json AFTER.json [--json OUT]
"""
from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import sys
from collections import defaultdict


def read_episodes(path: str) -> list[dict]:
    """The episodes of an evaluation result (``.json``, or ``.json.gz`` as records keep those with actions) or of a
    record's episode file (``.jsonl``, one episode per line)."""
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt") as f:
        if str(path).endswith(".jsonl"):
            return [json.loads(line) for line in f if line.strip()]
        data = json.load(f)
    eps = data.get("episodes") if isinstance(data, dict) else None
    if not isinstance(eps, list):
        raise ValueError(f"{path}: no 'episodes' list (not a gaca_openrlhf.eval result)")
    return eps


def mixed_games(episodes: list[dict]) -> list[str]:
    """Games (``task``) won in at least one and lost in at least one of their episodes, sorted by SHA-256 of the id.
    A failed episode (environment fault) counts as lost."""
    wins = defaultdict(list)
    for ep in episodes:
        wins[str(ep["task"])].append(bool(ep.get("won")) and not ep.get("failed"))
    mixed = [t for t, w in wins.items() if any(w) and not all(w)]
    return sorted(mixed, key=lambda t: hashlib.sha256(t.encode()).hexdigest())


def relative_ids(games: list[str], data_root: str) -> list[str]:
    """Game ids relative to ``data_root`` (absolute ids must lie under it; relative ones are kept)."""
    root = os.path.abspath(data_root)
    out = []
    for g in games:
        if os.path.isabs(g):
            rel = os.path.relpath(g, root)
            if rel.startswith(".."):
                raise ValueError(f"game {g} is not under the data root {root}")
            g = rel
        out.append(g)
    return out


def compare(before: list[dict], after: list[dict]) -> dict:
    """Paired figures of two evaluations of the same (game, episode) pairs with the same seeds (ValueError when the
    pairs or their seeds differ: then the comparison would mix sampling noise into the change)."""
    key = lambda ep: (str(ep["task"]), int(ep["episode"]))  # noqa: E731
    b, a = {key(e): e for e in before}, {key(e): e for e in after}
    if set(b) != set(a):
        raise ValueError(f"the evaluations cover different (game, episode) pairs: {len(set(b) ^ set(a))} unpaired")
    seeds_differ = [k for k in b if b[k].get("seed") != a[k].get("seed")]
    if seeds_differ:
        raise ValueError(f"{len(seeds_differ)} episodes ran with different seeds (first {seeds_differ[0]})")
    won = lambda ep: bool(ep.get("won")) and not ep.get("failed")  # noqa: E731
    gained = sum(not won(b[k]) and won(a[k]) for k in b)
    lost = sum(won(b[k]) and not won(a[k]) for k in b)
    per_game = defaultdict(lambda: [0, 0, 0])
    for k in b:
        g = per_game[k[0]]
        g[0] += won(b[k])
        g[1] += won(a[k])
        g[2] += 1
    n = len(b)
    return {
        "episodes": n,
        "games": len(per_game),
        "success_before": sum(won(e) for e in b.values()) / n,
        "success_after": sum(won(e) for e in a.values()) / n,
        "lost_to_won": gained,
        "won_to_lost": lost,
        "unchanged": n - gained - lost,
        "per_game": {g: {"wins_before": v[0], "wins_after": v[1], "episodes": v[2]} for g, v in sorted(per_game.items())},
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m gaca_openrlhf.diagnostics.fixed_games", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("select", help="mixed-outcome games of an evaluation -> panel JSON + task file")
    s.add_argument("results")
    s.add_argument("--data-root", required=True)
    s.add_argument("--num", type=int, required=True)
    s.add_argument("--panel", required=True)
    s.add_argument("--tasks", required=True)
    c = sub.add_parser("compare", help="paired before/after figures of two evaluations")
    c.add_argument("before")
    c.add_argument("after")
    c.add_argument("--json")
    args = p.parse_args(argv)
    try:
        if args.cmd == "select":
            eps = read_episodes(args.results)
            games = relative_ids(mixed_games(eps), args.data_root)
            if len(games) < args.num:
                raise ValueError(f"only {len(games)} mixed-outcome games in {args.results} (--num {args.num})")
            games = games[: args.num]
            from gaca_openrlhf.rollout.tasks import write_tasks

            os.makedirs(os.path.dirname(os.path.abspath(args.panel)), exist_ok=True)
            with open(args.panel, "w") as f:  # a panel file (the evaluation's --panel FILE: a "games" list)
                json.dump({"name": "fixed_mixed", "split": "train", "num_games": len(games),
                           "selection": {"from": os.path.basename(args.results),
                                         "rule": "mixed outcomes, lowest SHA-256"}, "games": games}, f, indent=1)
            write_tasks(games, args.tasks)
            print(json.dumps({"mixed_games": len(mixed_games(eps)), "selected": len(games)}))
        else:
            out = compare(read_episodes(args.before), read_episodes(args.after))
            print(json.dumps({k: v for k, v in out.items() if k != "per_game"}))
            if args.json:
                with open(args.json, "w") as f:
                    json.dump(out, f, indent=1)
    except (ValueError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
