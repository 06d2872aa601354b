"""``bench/choice.py``: a setting chosen on the validation panel across committed records.

Hand-made records (record.json + per-episode files), so every expected number is counted by hand here, not by the
code under test."""
from __future__ import annotations

import json

import pytest

from gaca_openrlhf.bench.choice import check_comparable, choose, chosen, game_id, render_choice
from gaca_openrlhf.bench.records import render_chosen, render_readme

GAMES = [f"pick_and_place_simple-Obj-None-Rec-{i}/trial_{i:02d}" for i in range(4)]
BASE = {"env": "alfworld", "rl_iterations": 8, "rl_validity": "admissible", "rl_seeds": [0], "methods": ["gaca"],
        "num_envs": 16}


def write_record(root, name, lr, runs, root_dir="/root/.cache/q/json_2.1.1/valid_seen", warm=None, **cfg):
    """``runs``: {(method, seed): {panel: [won per game]}}; ``warm``: the warm start's {panel: [won per game]}."""
    d = root / name
    (d / "episodes").mkdir(parents=True)
    (d / "record.json").write_text(json.dumps({"config": {**BASE, "rl_lr": lr, **cfg}, "what": name}))
    labels = {**({"warm_start": warm} if warm else {}), **{f"{m}_seed{s}": v for (m, s), v in runs.items()}}
    for label, panels in labels.items():
        ep = d / "episodes" / label
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


# ------------------------------------------------------------------ the compare at each method's chosen value
WARM = {"test": [1, 0, 0, 0], "val": [1, 0, 0, 0]}


def _rows(text):
    return {line.split("|")[1].strip(): [c.strip() for c in line.strip("|").split("|")]
            for line in text.splitlines() if line.startswith("| ")}


def test_each_method_is_reported_from_the_record_of_its_chosen_value_with_all_its_seeds(tmp_path):
    # choice on seed 0 (the seed both records have): grpo ties (val 2/4 both) -> keeps lr 1e-4 (record a, 2 seeds);
    # gaca 1/4 at 1e-4, 3/4 at 3e-4 -> record b (its 1 seed)
    write_record(tmp_path, "a", 1e-4, {("grpo", 0): {"test": [1, 1, 0, 0], "val": [1, 1, 0, 0]},
                                       ("grpo", 1): {"test": [1, 1, 1, 1], "val": [0, 0, 0, 0]},
                                       ("gaca", 0): {"test": [1, 1, 1, 1], "val": [1, 0, 0, 0]},
                                       ("gaca", 1): {"test": [1, 1, 1, 1], "val": [1, 1, 1, 1]}}, warm=WARM)
    write_record(tmp_path, "b", 3e-4, {("grpo", 0): {"test": [0, 0, 0, 0], "val": [0, 0, 1, 1]},
                                       ("gaca", 0): {"test": [0, 1, 1, 0], "val": [1, 1, 1, 0]}}, warm=WARM,
                 root_dir="/elsewhere/valid_seen")  # another machine's data folder: still the same games
    out = render_chosen(tmp_path, ["a", "b"], "rl_lr")
    rows = _rows(out)
    # GRPO from a, seeds 0-1: test (2 + 4) / 8 = 75 %, gain over the warm start's 25 %: +50
    assert rows["GRPO (rl_lr 0.0001)"][1] == "2" and rows["GRPO (rl_lr 0.0001)"][2].startswith("75.0 [")
    assert rows["GRPO (rl_lr 0.0001)"][2].split(" / ")[1].startswith("+50.0 [")
    # GACA from b, seed 0 only: test 2/4 = 50 %; a's perfect gaca runs must not leak in
    assert rows["GACA (rl_lr 0.0003)"][1] == "1" and rows["GACA (rl_lr 0.0003)"][2].startswith("50.0 [")
    assert rows["warm start"][2].startswith("25.0 [")
    assert "GACA (rl_lr 0.0003) - GRPO (rl_lr 0.0001): test: valid_seen -25.0 [" in out
    assert "lr chosen per method" in out and "lr 0.0001" not in out.split("\n")[0].split("setting as in")[1]
    # in the README: rendered between its marks, and rendering again changes nothing
    text = "x\n<!-- chosen:rl_lr:a,b -->\nstale\n<!-- /chosen:rl_lr -->\n"
    once = render_readme(text, tmp_path)
    assert "stale" not in once and out in once and render_readme(once, tmp_path) == once


def test_records_with_different_warm_starts_are_not_one_compare(tmp_path):
    write_record(tmp_path, "a", 1e-4, {("gaca", 0): {"test": [1, 1, 0, 0], "val": [1, 0, 0, 0]}}, warm=WARM)
    write_record(tmp_path, "b", 3e-4, {("gaca", 0): {"test": [1, 1, 0, 0], "val": [1, 1, 0, 0]}},
                 warm={"test": [0, 1, 0, 0], "val": [1, 0, 0, 0]})
    with pytest.raises(ValueError, match="different warm starts on panel 'test'"):
        render_chosen(tmp_path, ["a", "b"], "rl_lr")


def test_two_games_with_one_identity_are_refused(tmp_path):
    d = write_record(tmp_path, "a", 1e-4, {("gaca", 0): {"test": [1, 0, 0, 0], "val": [1, 0, 0, 0]}}, warm=WARM)
    f = d / "episodes" / "warm_start" / "test.jsonl"
    f.write_text(f.read_text().replace("/root/.cache/q/json_2.1.1/valid_seen/" + GAMES[1],
                                       "/other/valid_seen/" + GAMES[0], 1))  # two folders, one task/trial
    write_record(tmp_path, "b", 3e-4, {("gaca", 0): {"test": [1, 0, 0, 0], "val": [1, 1, 0, 0]}}, warm=WARM)
    with pytest.raises(ValueError, match="4 games but 3 game identities"):
        render_chosen(tmp_path, ["a", "b"], "rl_lr")


def test_settings_added_later_read_as_their_implicit_value():
    """A record committed before --rl-lr-scheduler existed ran OpenRLHF's default schedule: it compares equal to a
    new record that states that default, and differs from one that chose another schedule. Catches a missing key
    read as None (every old record would "differ" from every new one)."""
    check_comparable({"a": {**BASE, "rl_lr": 1e-4},
                      "b": {**BASE, "rl_lr": 3e-4, "rl_lr_scheduler": "cosine_with_min_lr", "rl_min_lr_ratio": 0.1}},
                     "rl_lr")
    with pytest.raises(ValueError, match=r"differ in \['rl_lr_scheduler'\]"):
        check_comparable({"a": {**BASE, "rl_lr": 1e-4}, "b": {**BASE, "rl_lr": 3e-4, "rl_lr_scheduler": "constant"}},
                         "rl_lr")
