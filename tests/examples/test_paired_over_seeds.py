"""examples/cpu/paired_over_seeds.py on hand-written evaluation results."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

_PATH = Path(__file__).resolve().parents[2] / "examples" / "cpu" / "paired_over_seeds.py"
_spec = importlib.util.spec_from_file_location("paired_over_seeds", _PATH)
paired = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(paired)


def _result(path, wins):
    """wins: {game: [won per episode]}"""
    eps = [{"task": g, "episode": k, "seed": k, "won": w} for g, ws in wins.items() for k, w in enumerate(ws)]
    path.write_text(json.dumps({"episodes": eps}))
    return str(path)


def test_mean_over_pairs_averages_per_game_differences(tmp_path):
    b1 = _result(tmp_path / "b1.json", {"g1": [0, 0], "g2": [1, 1]})
    a1 = _result(tmp_path / "a1.json", {"g1": [1, 1], "g2": [1, 1]})   # g1 +1, g2 0 -> +0.5
    b2 = _result(tmp_path / "b2.json", {"g1": [0, 0], "g2": [1, 0]})
    a2 = _result(tmp_path / "a2.json", {"g1": [0, 0], "g2": [0, 0]})   # g1 0, g2 -0.5 -> -0.25
    out = tmp_path / "out.json"
    assert paired.main(["--pair", f"s1={b1}:{a1}", "--pair", f"s2={b2}:{a2}", "--json", str(out)]) == 0
    res = json.loads(out.read_text())
    assert res["pairs"]["s1"]["diff"]["mean"] == 0.5 and res["pairs"]["s2"]["diff"]["mean"] == -0.25
    # per game over pairs: g1 (1 + 0) / 2, g2 (0 - 0.5) / 2 -> mean 0.125; bug caught: before/after swapped
    assert res["mean_over_pairs"]["mean"] == 0.125
    assert res["success_before_mean"] == (0.5 + 0.25) / 2 and res["success_after_mean"] == (1.0 + 0.0) / 2


def test_pairs_over_other_games_or_bad_specs_are_refused(tmp_path):
    b1 = _result(tmp_path / "b1.json", {"g1": [0]})
    a1 = _result(tmp_path / "a1.json", {"g1": [1]})
    b2 = _result(tmp_path / "b2.json", {"g9": [0]})
    a2 = _result(tmp_path / "a2.json", {"g9": [1]})
    assert paired.main(["--pair", f"s1={b1}:{a1}", "--pair", f"s2={b2}:{a2}"]) == 2
    assert paired.main(["--pair", f"s1={b1}"]) == 2
    assert paired.main(["--pair", f"s1={b1}:{a2}"]) == 2  # the two evaluations are not paired


def test_record_episode_files_pair_by_game_identity(tmp_path):
    # a record's .jsonl (no "episode" key) against an evaluation result of the same games kept elsewhere; bug
    # caught: pairing by the absolute path (nothing pairs) or a missing "episode" key (a crash)
    rec = tmp_path / "test.jsonl"
    rec.write_text("\n".join(json.dumps({"task": f"/home/a/data/json/valid_seen/t{i}/trial_0", "seed": 0,
                                         "won": i == 0}) for i in range(2)))
    after = _result(tmp_path / "after.json", {f"/cache/b/json/valid_seen/t{i}/trial_0": [True] for i in range(2)})
    out = tmp_path / "out.json"
    assert paired.main(["--pair", f"s={rec}:{after}", "--json", str(out)]) == 0
    assert json.loads(out.read_text())["pairs"]["s"]["lost_to_won"] == 1
