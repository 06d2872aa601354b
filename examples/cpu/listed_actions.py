"""Which kinds of action land on the environment's admissible list, read from evaluation episodes recorded with
``--record-actions`` (per-step ``listed`` flag; notebook §10).

    python examples/cpu/listed_actions.py EVAL.json[.gz] [EVAL.json ...]

Per file, one JSON line: success, mean score, and per action kind the number of steps and the share of them on the
list (``listed_share``; steps where the environment listed nothing are left out), in won and in lost episodes. The
kind is the action's verb (``go``, ``take``, ``search``, ``click``), except that a WebShop click whose argument starts
with ``b0`` (a product ID, which the agent copies from the results page) is its own kind, ``click-product``: a copy
that is off the list is an ID the page does not show.
"""
from __future__ import annotations

import json
import sys
from collections import defaultdict


def action_kind(action: str) -> str:
    """``"click[b0kqo1hsg6]"`` -> ``click-product``; otherwise the action's leading letters (``""`` for none)."""
    from gaca_openrlhf.sft.train import action_verb  # the verb the SFT's --upsample names

    return "click-product" if action.startswith("click[b0") else action_verb(action)


def summarise(path: str) -> dict:
    from gaca_openrlhf.diagnostics.fixed_games import read_episodes

    episodes = read_episodes(path)
    if not episodes or "actions" not in episodes[0]:
        raise SystemExit(f"{path}: no recorded actions (evaluate with --record-actions)")
    if not any("listed" in a for e in episodes for a in e["actions"]):
        raise SystemExit(f"{path}: actions carry no 'listed' flag (recorded before 2026-12-06)")
    counts: dict[str, dict[str, list[int]]] = defaultdict(lambda: {"won": [0, 0], "lost": [0, 0]})
    for e in episodes:
        side = "won" if e.get("won") else "lost"
        for a in e["actions"]:
            if a.get("listed") is None:
                continue
            c = counts[action_kind(a["action"])][side]
            c[0] += bool(a["listed"])
            c[1] += 1
    kinds = {}
    for kind, sides in sorted(counts.items()):
        on, n = sides["won"][0] + sides["lost"][0], sides["won"][1] + sides["lost"][1]
        kinds[kind] = {"steps": n, "listed_share": on / n,
                       **{f"{s}_steps": sides[s][1] for s in ("won", "lost")},
                       **{f"{s}_listed_share": (sides[s][0] / sides[s][1] if sides[s][1] else None)
                          for s in ("won", "lost")}}
    scores = [e["score"] for e in episodes if e.get("score") is not None]
    return {"file": path, "episodes": len(episodes), "success": sum(bool(e.get("won")) for e in episodes) / len(episodes),
            "mean_score": sum(scores) / len(scores) if scores else None, "kinds": kinds}


def main(argv=None) -> int:
    paths = argv if argv is not None else sys.argv[1:]
    if not paths:
        print(__doc__, file=sys.stderr)
        return 2
    for p in paths:
        print(json.dumps(summarise(p)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
