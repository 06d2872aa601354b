"""Paired success differences of evaluations on the same (game, episode, seed) triples, per pair and averaged over
pairs (e.g. SFT seeds: each seed's new warm start against the same seed's old one), with percentile-bootstrap
intervals that resample games (issue 35, notebook §9).

    python examples/cpu/paired_over_seeds.py --pair LABEL=BEFORE.json:AFTER.json [--pair ...] [--json OUT]

Files: evaluation results (``.json`` / ``.json.gz``, :mod:`gaca_openrlhf.eval`) or a record's episode files
(``results/*/episodes/<label>/<panel>.jsonl``: one episode per game, ``episode`` 0). Games are paired by their identity
(:func:`gaca_openrlhf.seeding.game_identity`: task folder and trial), not by where a machine keeps its data.

Per pair: success before/after, lost->won, won->lost and the mean per-game difference with its interval
(:func:`gaca_openrlhf.diagnostics.fixed_games.compare`, :func:`gaca_openrlhf.diagnostics.disagreement.bootstrap_mean_ci`).
Over pairs: the per-game difference averaged over the pairs (every pair must cover the same games), then the same
bootstrap over games -- the games are what the pairs share, so their noise is not counted once per pair.
"""
from __future__ import annotations

import argparse
import json
import sys


def load_episodes(path: str) -> list[dict]:
    """Episodes of an evaluation result or a record's ``.jsonl``, each game named by its identity."""
    from gaca_openrlhf.diagnostics.fixed_games import read_episodes
    from gaca_openrlhf.seeding import game_identity

    return [{**e, "task": game_identity(e["task"]), "episode": e.get("episode", 0)} for e in read_episodes(path)]


def main(argv=None) -> int:
    from gaca_openrlhf.diagnostics.disagreement import bootstrap_mean_ci
    from gaca_openrlhf.diagnostics.fixed_games import compare

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pair", action="append", required=True, metavar="LABEL=BEFORE:AFTER")
    p.add_argument("--json")
    args = p.parse_args(argv)
    rows, per_game_all = {}, []
    for spec in args.pair:
        label, _, files = spec.partition("=")
        before, _, after = files.partition(":")
        if not (label and before and after):
            print(f"error: --pair {spec!r}: expected LABEL=BEFORE.json:AFTER.json", file=sys.stderr)
            return 2
        try:
            c = compare(load_episodes(before), load_episodes(after))
        except (ValueError, OSError) as e:
            print(f"error: {label}: {e}", file=sys.stderr)
            return 2
        diffs = {g: [(v["wins_after"] - v["wins_before"]) / v["episodes"]] for g, v in c["per_game"].items()}
        per_game_all.append(diffs)
        rows[label] = {k: c[k] for k in ("episodes", "games", "success_before", "success_after", "lost_to_won",
                                         "won_to_lost")} | {"diff": bootstrap_mean_ci(diffs)}
    games = set(per_game_all[0])
    if any(set(d) != games for d in per_game_all):
        print("error: the pairs cover different games; no mean over pairs", file=sys.stderr)
        return 2
    # sorted: the bootstrap draws by position, so a set's hash order would change the interval run to run
    mean = {g: [sum(d[g][0] for d in per_game_all) / len(per_game_all)] for g in sorted(games)}
    out = {"pairs": rows, "mean_over_pairs": bootstrap_mean_ci(mean),
           "success_before_mean": sum(r["success_before"] for r in rows.values()) / len(rows),
           "success_after_mean": sum(r["success_after"] for r in rows.values()) / len(rows)}
    for label, r in rows.items():
        d = r["diff"]
        print(f"{label}: {100 * r['success_before']:.1f} -> {100 * r['success_after']:.1f} %  "
              f"{100 * d['mean']:+.1f} [{100 * d['ci_low']:+.1f}, {100 * d['ci_high']:+.1f}]  "
              f"(lost->won {r['lost_to_won']}, won->lost {r['won_to_lost']})")
    m = out["mean_over_pairs"]
    print(f"mean over {len(rows)} pairs: {100 * out['success_before_mean']:.1f} -> {100 * out['success_after_mean']:.1f} %"
          f"  {100 * m['mean']:+.1f} [{100 * m['ci_low']:+.1f}, {100 * m['ci_high']:+.1f}]")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
