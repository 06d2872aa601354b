"""Steps that change nothing, read from evaluation episodes recorded with ``--record-actions`` (issue 35, notebook §8-§9).

    python examples/cpu/stuck_steps.py EVAL.json[.gz] [EVAL.json ...]

For each file, over the *lost* ALFWorld episodes: the share of steps that change nothing -- ``go to X`` where the agent
already stands (the target of its previous ``go to``), or ``open X`` when X was opened in this episode and not closed
since -- and the two parts (``stay``: go-to steps that stay, ``open_again``: opens that repeat); and how far lost
episodes search (``lost_distinct_places``: distinct receptacles gone to per lost episode; ``lost_took_share``: lost
episodes that took any object). Read from actions only
(the files keep no observations): a ``go to`` is taken to arrive, which holds for the receptacles the prompt lists.
"""
from __future__ import annotations

import json
import re
import sys

_GO = re.compile(r"go to (.+)$")
_OPEN = re.compile(r"open (.+)$")
_CLOSE = re.compile(r"close (.+)$")


def stuck_flags(actions: list[str]) -> list[str]:
    """Per action: ``"stay"``, ``"open_again"`` or ``""`` (changes something, as far as actions tell)."""
    here, opened, out = None, set(), []
    for a in actions:
        flag = ""
        if m := _GO.match(a):
            flag = "stay" if m.group(1) == here else ""
            here = m.group(1)
        elif m := _OPEN.match(a):
            flag = "open_again" if m.group(1) in opened else ""
            opened.add(m.group(1))
        elif m := _CLOSE.match(a):
            opened.discard(m.group(1))
        out.append(flag)
    return out


def summarise(path: str) -> dict:
    from gaca_openrlhf.diagnostics.fixed_games import read_episodes

    episodes = read_episodes(path)
    if not episodes or "actions" not in episodes[0]:
        raise SystemExit(f"{path}: no recorded actions (evaluate with --record-actions)")
    lost = [e for e in episodes if not e["won"]]
    flags = [f for e in lost for f in stuck_flags([a["action"] for a in e["actions"]])]
    gos = sum(1 for e in lost for a in e["actions"] if a["action"].startswith("go to "))
    n = max(1, len(flags))
    # how far lost episodes search: distinct receptacles gone to, and whether any object was ever taken
    places = [len({a["action"][len("go to "):] for a in e["actions"] if a["action"].startswith("go to ")})
              for e in lost]
    took = sum(any(a["action"].startswith("take ") for a in e["actions"]) for e in lost)
    return {"file": path, "episodes": len(episodes), "success": sum(e["won"] for e in episodes) / len(episodes),
            "lost": len(lost), "lost_steps": len(flags), "stuck_share": sum(bool(f) for f in flags) / n,
            "stay_share_of_gos": flags.count("stay") / max(1, gos), "open_again": flags.count("open_again"),
            "lost_distinct_places": sum(places) / max(1, len(places)), "lost_took_share": took / max(1, len(lost))}


def main(argv=None) -> int:
    paths = (argv if argv is not None else sys.argv[1:])
    if not paths:
        print(__doc__, file=sys.stderr)
        return 2
    for p in paths:
        print(json.dumps(summarise(p)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
