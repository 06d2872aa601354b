"""examples/cpu/listed_actions.py: the share of each action kind on the admissible list, on hand-built episodes."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

_PATH = Path(__file__).resolve().parents[2] / "examples" / "cpu" / "listed_actions.py"
_spec = importlib.util.spec_from_file_location("listed_actions", _PATH)
listed_actions = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(listed_actions)


def test_kinds_separate_product_clicks_from_other_clicks():
    kinds = [listed_actions.action_kind(a) for a in
             ("click[b0kqo1hsg6]", "click[b02w6]", "click[buy now]", "search[red cap]", "go to desk 1", "[x]")]
    assert kinds == ["click-product", "click-product", "click", "search", "go", ""]


def test_summary_counts_listed_steps_per_kind_and_side(tmp_path):
    def ep(won, score, steps):
        return {"won": won, "score": score,
                "actions": [{"action": a, "valid": True, "listed": on} for a, on in steps]}

    path = tmp_path / "eval.json"
    path.write_text(json.dumps({"episodes": [
        ep(True, 1.0, [("search[cap]", True), ("click[b0aaaaaaaa]", True), ("click[buy now]", True)]),
        ep(False, 0.25, [("search[cap]", True), ("click[b0x]", False), ("click[b0aaaaaaaa]", True),
                         ("click[b0y]", False), ("look", None)]),
    ]}))
    s = listed_actions.summarise(str(path))
    assert (s["episodes"], s["success"], s["mean_score"]) == (2, 0.5, 0.625)
    p = s["kinds"]["click-product"]
    # bugs caught: unlisted-as-listed, won and lost pooled, steps with no list (None) counted as off the list
    assert (p["steps"], p["listed_share"]) == (4, 0.5)
    assert (p["won_steps"], p["won_listed_share"], p["lost_steps"], p["lost_listed_share"]) == (1, 1.0, 3, 1 / 3)
    assert s["kinds"]["click"]["lost_listed_share"] is None and "look" not in s["kinds"]
    assert s["kinds"]["search"]["listed_share"] == 1.0


def test_files_without_the_flag_are_refused(tmp_path):
    path = tmp_path / "old.json"
    path.write_text(json.dumps({"episodes": [{"won": False, "actions": [{"action": "look", "valid": True}]}]}))
    with pytest.raises(SystemExit, match="no 'listed' flag"):
        listed_actions.summarise(str(path))
