"""``bench/choice.py``: a setting chosen on the validation panel across committed records.

Hand-made records (record.json + per-episode files), so every expected number is counted by hand here, not by the
code under test."""
from __future__ import annotations

import json

import pytest

from gaca_openrlhf.bench.choice import check_comparable, choose, chosen, game_id, render_choice
from gaca_openrlhf.bench.records import render_readme

GAMES = [f"pick_and_place_simple-Obj-None-Rec-{i}/trial_{i:02d}" for i in range(4)]
BASE = {"env": "alfworld", "rl_iterations": 8, "rl_validity": "admissible", "rl_seeds": [0], "methods": ["gaca"],
        "num_envs": 16}


def write_record(root, name, lr, runs, root_dir="/root/.cache/q/json_2.1.1/valid_seen", **cfg):
    """``runs``: {(method, seed): {panel: [won per game]}}."""
    d = root / name
    (d / "episodes").mkdir(parents=True)
    (d / "record.json").write_text(json.dumps({"config": {**BASE, "rl_lr": lr, **cfg}, "what": name}))
    for (method, seed), panels in runs.items():
        ep = d / "episodes" / f"{method}_seed{seed}"
        ep.mkdir()
        for panel, wins in panels.items():
            (ep / f"{panel}.jsonl").write_text("".join(
                json.dumps({"task": f"{root_dir}/{g}", "won": bool(w), "steps": 5}) + "\n"
                for g, w in zip(GAMES, wins)))
    return d


def test_the_best_validation_mean_is_chosen_on_shared_seeds_and_the_test_panel_is_never_read(tmp_path):
    a = write_record(tmp_path, "lr_a", 1e-4, {("gaca", 0): {"val": [1, 0, 0, 0], "test": [0, 0, 0, 0]},
                                              ("grpo", 0): {"val": [1, 1, 0, 0]}})
    # b: better on gaca's validation panel (2/4 vs 1/4) but worse on its test panel; its seed 1 (perfect) has no
    # counterpart in a and must not count; grpo ties (2/4): the first record, the default, keeps it
    b = write_record(tmp_path, "lr_b", 3e-4, {("gaca", 0): {"val": [1, 1, 0, 0], "test": [1, 1, 1, 1]},
                                              ("gaca", 1): {"val": [1, 1, 1, 1]},
                                              ("grpo", 0): {"val": [0, 0, 1, 1]}},
                     root_dir="/tmp/other_cache/json_2.1.1/valid_seen")  # another machine's data folder
    table = choose([a, b], "rl_lr")
    assert set(table) == {"gaca", "grpo"}
    gaca = table["gaca"]
    assert [o.value for o in gaca] == [1e-4, 3e-4] and [o.record for o in gaca] == ["lr_a", "lr_b"]
    assert [o.success.mean for o in gaca] == [0.25, 0.5] and gaca[1].success.seeds == 1
    assert gaca[0].vs_first is None and gaca[1].vs_first.mean == pytest.approx(0.25)
    assert chosen(gaca).value == 3e-4
    assert chosen(table["grpo"]).value == 1e-4  # a tie keeps the default
    # paired by game: b's grpo wins other games than a's, at the same rate -> difference 0
    assert table["grpo"][1].vs_first.mean == 0.0


def test_a_record_that_differs_in_another_setting_is_refused():
    check_comparable({"a": {**BASE, "rl_lr": 1e-4}, "b": {**BASE, "rl_lr": 3e-4, "rl_seeds": [0, 1], "num_envs": 8}},
                     "rl_lr")  # seeds, methods, batch width: neutral
    with pytest.raises(ValueError, match=r"differ in \['rl_validity'\] besides rl_lr"):
        check_comparable({"a": {**BASE, "rl_lr": 1e-4}, "b": {**BASE, "rl_lr": 3e-4, "rl_validity": "format"}},
                         "rl_lr")
    with pytest.raises(ValueError, match="share the same rl_lr"):
        check_comparable({"a": {**BASE, "rl_lr": 1e-4}, "b": {**BASE, "rl_lr": 1e-4}}, "rl_lr")
    with pytest.raises(ValueError, match="no setting 'rl_lr'"):
        check_comparable({"a": {**BASE, "rl_lr": 1e-4}, "b": dict(BASE)}, "rl_lr")


def test_game_identity_ignores_the_data_folder():
    here, there = "/root/.cache/x/json_2.1.1/valid_seen/pick-A/trial_1", "/tmp/y/valid_seen/pick-A/trial_1/"
    assert game_id(here) == game_id(there) == "pick-A/trial_1"
    assert game_id("/r/valid_seen/pick-A/trial_1") != game_id("/r/valid_seen/pick-B/trial_1")


def test_the_readme_block_is_rendered_and_a_missing_record_is_named(tmp_path):
    write_record(tmp_path, "lr_a", 1e-4, {("gaca", 0): {"val": [1, 0, 0, 0]}})
    write_record(tmp_path, "lr_b", 3e-4, {("gaca", 0): {"val": [1, 1, 1, 0]}})
    text = "intro\n<!-- choice:rl_lr:lr_a,lr_b -->\nstale\n<!-- /choice:rl_lr -->\nend\n"
    out = render_readme(text, tmp_path)
    assert "stale" not in out and out.startswith("intro\n<!-- choice:rl_lr:lr_a,lr_b -->\n")
    row = next(line for line in out.splitlines() if line.startswith("| GACA"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[1] == "1" and cells[2].startswith("25.0 [") and cells[3].startswith("75.0 [")
    assert cells[3].split(" / ")[1].startswith("+50.0 [") and cells[-1] == "0.0003"
    assert render_readme(out, tmp_path) == out  # rendering again changes nothing
    with pytest.raises(FileNotFoundError, match="results/lr_c"):
        render_choice(tmp_path, ["lr_a", "lr_c"], "rl_lr")


def test_no_shared_seed_is_said_not_guessed(tmp_path):
    write_record(tmp_path, "lr_a", 1e-4, {("gaca", 0): {"val": [1, 0, 0, 0]}})
    write_record(tmp_path, "lr_b", 3e-4, {("gaca", 1): {"val": [1, 1, 1, 0]}})
    assert choose([tmp_path / "lr_a", tmp_path / "lr_b"], "rl_lr") == {}
    assert "no method has a training seed in every record yet" in render_choice(tmp_path, ["lr_a", "lr_b"], "rl_lr")
