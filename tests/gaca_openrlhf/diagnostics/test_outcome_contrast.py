"""Outcome contrast of task groups, on hand-made episode lists whose figures are counted by hand."""
import json

import pytest

from gaca_openrlhf.diagnostics.outcome_contrast import contrast, main


def eps(task, outcomes, steps):
    return [{"task": task, "episode": k, "won": w, "steps": s} for k, (w, s) in enumerate(zip(outcomes, steps))]


def test_figures_counted_by_hand():
    episodes = (eps("a", [1, 0, 1, 1, 1, 1, 1, 1], [3, 15, 4, 5, 2, 2, 2, 2])   # groups: mixed, all won
                + eps("b", [0, 0, 0, 0, 0, 0, 1, 0], [15] * 8)                   # groups: all lost, mixed
                + eps("c", [0] * 8, [10] * 8))                                   # never won
    f = contrast(episodes, group_size=4)
    assert (f["episodes"], f["tasks"], f["groups"]) == (24, 3, 6)
    assert f["success"] == pytest.approx(8 / 24)
    assert f["mixed_groups"] == pytest.approx(2 / 6)
    # steps in mixed groups: a's first group 3+15+4+5 = 27, b's second 60; all steps 35 + 120 + 80 = 235
    assert f["mixed_step_share"] == pytest.approx(87 / 235)
    assert f["tasks_ever_won"] == pytest.approx(2 / 3) and f["tasks_always_won"] == 0.0
    # groups of 2: a (1,0) mixed, (1,1), (1,1), (1,1); b (0,0) x3, (1,0) mixed; c none: 2 of 12
    assert contrast(episodes, group_size=2)["mixed_groups"] == pytest.approx(2 / 12)


def test_order_of_episodes_does_not_matter():
    episodes = eps("a", [1, 0, 0, 0], [1, 2, 3, 4]) + eps("b", [1, 1, 1, 1], [1, 1, 1, 1])
    assert contrast(episodes[::-1], 4) == contrast(episodes, 4)


@pytest.mark.parametrize("bad, match", [
    (eps("a", [1, 0, 1], [1, 1, 1]), "multiple of the group size"),
    ([{"task": "a", "episode": k, "won": 1, "steps": 1} for k in (0, 1, 2, 2)], "episodes 0..K-1"),
    ([{"task": "a", "episode": k, "won": 1, "steps": 1} for k in (0, 1, 2, 5)], "episodes 0..K-1"),
    ([], "no episodes"),
])
def test_bad_input_is_refused(bad, match):
    with pytest.raises(ValueError, match=match):
        contrast(bad, 4)
    with pytest.raises(ValueError, match="group_size"):
        contrast(eps("a", [1, 0], [1, 1]), 1)


def test_cli_reads_eval_results(tmp_path, capsys):
    path = tmp_path / "r.json"
    path.write_text(json.dumps({"config": {"temperature": 1.0, "seed": 0},
                                "episodes": eps("a", [1, 0], [2, 3]) + eps("b", [0, 0], [1, 1])}))
    assert main([str(path), "--group-size", "2", "--json", str(tmp_path / "o.json")]) == 0
    got = json.loads((tmp_path / "o.json").read_text())[str(path)]
    assert got["mixed_groups"] == 0.5 and got["temperature"] == 1.0 and got["mixed_step_share"] == pytest.approx(5 / 7)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"episodes": eps("a", [1], [1])}))
    assert main([str(bad), "--group-size", "2"]) == 2
