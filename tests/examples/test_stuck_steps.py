"""examples/cpu/stuck_steps.py: steps that change nothing, on hand-built action sequences."""
from __future__ import annotations

import gzip
import importlib.util
import json
from pathlib import Path

_PATH = Path(__file__).resolve().parents[2] / "examples" / "cpu" / "stuck_steps.py"
_spec = importlib.util.spec_from_file_location("stuck_steps", _PATH)
stuck_steps = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(stuck_steps)


def test_flags_mark_staying_and_opening_again_only():
    acts = ["go to desk 1", "go to desk 1", "open drawer 1", "open drawer 1", "close drawer 1", "open drawer 1",
            "go to shelf 1", "take book 1 from shelf 1", "go to desk 1"]
    # bugs caught: the first visit counted as staying, a close not resetting what is open, a go-to elsewhere flagged
    assert stuck_steps.stuck_flags(acts) == ["", "stay", "", "open_again", "", "", "", "", ""]


def test_summary_counts_lost_episodes_only(tmp_path):
    def ep(won, actions):
        return {"won": won, "actions": [{"action": a, "valid": True} for a in actions]}

    path = tmp_path / "eval.json.gz"
    with gzip.open(path, "wt") as f:
        json.dump({"episodes": [ep(True, ["go to a 1", "go to a 1"]), ep(False, ["go to a 1", "go to a 1", "look",
                                                                            "go to b 1"])]}, f)
    s = stuck_steps.summarise(str(path))
    assert (s["success"], s["lost"], s["lost_steps"]) == (0.5, 1, 4)
    assert s["stuck_share"] == 0.25 and s["stay_share_of_gos"] == 1 / 3
    # the lost episode went to a 1 and b 1 (a 1 twice): 2 places, took nothing; the won one is not counted
    assert s["lost_distinct_places"] == 2 and s["lost_took_share"] == 0
