"""Diagnosis step 2's helpers (``diagnostics/fixed_games.py``) on hand-written evaluation results."""
import json

import pytest

from gaca_openrlhf.diagnostics.fixed_games import compare, main, mixed_games, relative_ids


def ep(task, k, won, seed=None, failed=False):
    return {"task": task, "episode": k, "won": won, "failed": failed, "seed": seed if seed is not None else k}


def test_mixed_games_are_won_sometimes_and_a_failed_win_is_a_loss():
    eps = [ep("a", 0, True), ep("a", 1, False),                      # mixed
           ep("b", 0, True), ep("b", 1, True),                       # always won
           ep("c", 0, False), ep("c", 1, False),                     # never won
           ep("d", 0, True), ep("d", 1, True, failed=True)]          # won once, the other failed: mixed
    assert sorted(mixed_games(eps)) == ["a", "d"]


def test_relative_ids_and_a_game_outside_the_root(tmp_path):
    root = str(tmp_path)
    assert relative_ids([f"{root}/json/train/x", "json/train/y"], root) == ["json/train/x", "json/train/y"]
    with pytest.raises(ValueError, match="not under the data root"):
        relative_ids(["/elsewhere/json/train/z"], root)


def test_compare_counts_paired_changes():
    """Before: a0 won, a1 lost, b0 lost, b1 lost. After: a0 lost, a1 won, b0 won, b1 lost -> 2 gained, 1 lost.
    Catches: unpaired counting (success only), gains and losses swapped."""
    before = [ep("a", 0, True), ep("a", 1, False), ep("b", 0, False), ep("b", 1, False)]
    after = [ep("a", 0, False), ep("a", 1, True), ep("b", 0, True), ep("b", 1, False)]
    out = compare(before, after)
    assert (out["lost_to_won"], out["won_to_lost"], out["unchanged"]) == (2, 1, 1)
    assert (out["success_before"], out["success_after"]) == (0.25, 0.5)
    assert out["per_game"]["b"] == {"wins_before": 0, "wins_after": 1, "episodes": 2}


def test_compare_refuses_other_pairs_or_seeds():
    with pytest.raises(ValueError, match="different \\(game, episode\\) pairs"):
        compare([ep("a", 0, True)], [ep("a", 1, True)])
    with pytest.raises(ValueError, match="different seeds"):
        compare([ep("a", 0, True, seed=1)], [ep("a", 0, True, seed=2)])


def test_select_writes_a_panel_and_tasks(tmp_path):
    root = tmp_path / "data"
    eps = [ep(f"{root}/json/train/g{i}", k, k == 0) for i in range(3) for k in range(2)]  # all three mixed
    res = tmp_path / "res.json"
    res.write_text(json.dumps({"episodes": eps}))
    panel, tasks = tmp_path / "panel.json", tmp_path / "tasks.jsonl"
    assert main(["select", str(res), "--data-root", str(root), "--num", "2", "--panel", str(panel),
                 "--tasks", str(tasks)]) == 0
    games = json.loads(panel.read_text())["games"]
    assert len(games) == 2 and all(g.startswith("json/train/g") for g in games)
    assert [json.loads(x)["input"] for x in tasks.read_text().splitlines()] == games
    assert main(["select", str(res), "--data-root", str(root), "--num", "5", "--panel", str(panel),
                 "--tasks", str(tasks)]) == 2  # too few mixed games: a clear error


def test_compare_reads_gzipped_results(tmp_path, capsys):
    # records keep evaluations with recorded actions gzipped; bug caught: a .gz read as plain JSON (a crash)
    import gzip

    before, after = tmp_path / "before.json", tmp_path / "after.json.gz"
    before.write_text(json.dumps({"episodes": [ep("a", 0, False), ep("a", 1, True)]}))
    with gzip.open(after, "wt") as f:
        json.dump({"episodes": [ep("a", 0, True), ep("a", 1, True)]}, f)
    assert main(["compare", str(before), str(after)]) == 0
    assert json.loads(capsys.readouterr().out)["lost_to_won"] == 1
