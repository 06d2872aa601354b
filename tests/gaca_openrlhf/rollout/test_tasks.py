"""``gaca_openrlhf.rollout.tasks``: the task files for ``--data.prompt_dataset`` (one ``{"input": <id>}`` line per
task), from a real (tiny, hand-written) ALFWorld data tree read by ``agents.alfworld.panels.list_games``."""

import json
import os
import random

import pytest

from agents.alfworld.eval_panels import alfworld_tasks
from gaca_openrlhf.rollout.tasks import main, write_tasks


def _games(root, split, n):
    ids = []
    for i in range(n):
        rel = f"json_2.1.1/{split}/pick_and_place_simple-Obj{i}-None-Recep-1/trial_{i}"
        d = os.path.join(root, rel)
        os.makedirs(d)
        with open(os.path.join(d, "traj_data.json"), "w") as f:
            json.dump({"task_type": "pick_and_place_simple"}, f)
        with open(os.path.join(d, "game.tw-pddl"), "w") as f:
            json.dump({"solvable": True}, f)
        ids.append(rel)
    return sorted(ids)


def _read(path):
    with open(path) as f:
        return [json.loads(line) for line in f]


def test_write_tasks_makes_the_folder_and_writes_string_inputs(tmp_path):
    """Catches: the folder not created, a non-string ``input``, a wrong key or a wrong count."""
    out = tmp_path / "new" / "dir" / "tasks.jsonl"
    assert write_tasks([3, "a/b"], str(out)) == 2
    assert _read(out) == [{"input": "3"}, {"input": "a/b"}]
    assert out.read_text().endswith("\n") and out.read_text().count("\n") == 2


def test_alfworld_tasks_are_the_games_in_a_seeded_shuffle(tmp_path):
    """Catches: the order not shuffled or not by ``seed``, the limit ignored or off by one, game ids as tuples."""
    ids = _games(str(tmp_path), "train", 6)
    for seed in (0, 3):
        want = list(ids)
        random.Random(seed).shuffle(want)
        assert alfworld_tasks(str(tmp_path), "train", seed=seed) == want
        assert alfworld_tasks(str(tmp_path), "train", limit=2, seed=seed) == want[:2]
    assert alfworld_tasks(str(tmp_path), "train", seed=0) != alfworld_tasks(str(tmp_path), "train", seed=3)


def test_alfworld_without_games_says_how_to_make_them(tmp_path):
    """Catches: an empty task file written silently instead of a clear error."""
    with pytest.raises(SystemExit, match=r"no ALFWorld games under .* \(valid_seen\).*agents.alfworld generate"):
        alfworld_tasks(str(tmp_path), "valid_seen")


def test_cli_alfworld_defaults_are_train_all_games_seed_0(tmp_path, capsys):
    """Catches: a wrong default split, limit or seed of the ``alfworld`` sub-command."""
    ids = _games(str(tmp_path), "train", 5)
    _games(str(tmp_path), "valid_seen", 2)
    out = tmp_path / "t.jsonl"
    main(["alfworld", "--data", str(tmp_path), "--out", str(out)])
    want = list(ids)
    random.Random(0).shuffle(want)
    assert [r["input"] for r in _read(out)] == want
    assert capsys.readouterr().out.strip() == f"wrote 5 alfworld tasks to {out}"

    main(["alfworld", "--data", str(tmp_path), "--split", "valid_seen", "--limit", "1", "--seed", "2",
          "--out", str(out)])
    assert len(_read(out)) == 1 and _read(out)[0]["input"].startswith("json_2.1.1/valid_seen/")


def test_cli_webshop_goals_start_at_1500_by_default(tmp_path, capsys):
    """Catches: a wrong default first goal (the WebShop train split starts at 1500) or an off-by-one range."""
    out = tmp_path / "w.jsonl"
    main(["webshop", "--num", "3", "--out", str(out)])
    assert [r["input"] for r in _read(out)] == ["1500", "1501", "1502"]
    main(["webshop", "--start", "7", "--num", "2", "--out", str(out)])
    assert [r["input"] for r in _read(out)] == ["7", "8"]
    assert capsys.readouterr().out.splitlines()[-1] == f"wrote 2 webshop tasks to {out}"


def test_cli_toy_tasks_are_0_to_num(tmp_path, capsys):
    """Catches: toy task ids not 0..num-1."""
    out = tmp_path / "toy.jsonl"
    main(["toy", "--num", "3", "--out", str(out)])
    assert [r["input"] for r in _read(out)] == ["0", "1", "2"]
    assert capsys.readouterr().out.strip() == f"wrote 3 toy tasks to {out}"


@pytest.mark.parametrize("argv", [[], ["toy", "--out", "x"], ["webshop", "--num", "2"], ["webshop", "--out", "x"],
                                  ["alfworld", "--out", "x"],
                                  ["nope", "--num", "1", "--out", "x"]])
def test_cli_rejects_missing_or_unknown_arguments(argv):
    """Catches: a sub-command or a required option made optional."""
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2


def test_alfworld_default_seed_is_0(tmp_path):
    """Catches: a changed default ``seed`` of ``alfworld_tasks`` (the task order of every default run)."""
    ids = _games(str(tmp_path), "train", 6)
    want = list(ids)
    random.Random(0).shuffle(want)
    assert alfworld_tasks(str(tmp_path), "train") == want


def test_cli_seed_is_an_integer(tmp_path):
    """Catches: ``--seed`` parsed as a string (``random.Random("3")`` shuffles differently from ``Random(3)``)."""
    ids = _games(str(tmp_path), "train", 6)
    want, as_text = list(ids), list(ids)
    random.Random(3).shuffle(want)
    random.Random("3").shuffle(as_text)
    assert want != as_text  # so that the check below can tell them apart
    out = tmp_path / "t.jsonl"
    main(["alfworld", "--data", str(tmp_path), "--seed", "3", "--out", str(out)])
    assert [r["input"] for r in _read(out)] == want


def test_cli_help_shows_the_module_usage_and_examples(capsys):
    """Catches: the program name, the description (the example commands) or its raw formatting dropped, and the
    ``--start`` help of ``webshop`` (where the WebShop train goals start) lost."""
    with pytest.raises(SystemExit) as e:
        main(["--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: python -m gaca_openrlhf.rollout.tasks ")
    assert "\n    python -m gaca_openrlhf.rollout.tasks toy --num 4 --out tasks.jsonl\n" in out
    with pytest.raises(SystemExit):
        main(["webshop", "--help"])
    words = " ".join(capsys.readouterr().out.split()) + " "
    assert "--start START first goal index (WebShop splits: train is 1500+) " in words


def test_holdout_panel_is_disjoint_and_does_not_depend_on_the_seed(tmp_path):
    """``--holdout 3``: 3 games leave the training file for the validation panel; the panel is the same whatever
    the training seed (shuffle), and training keeps every other game. Catches: overlap, a seed-dependent panel,
    games lost from both files."""
    root = str(tmp_path / "data")
    games = _games(root, "train", 10)
    panels, trains = [], []
    for seed in (0, 1):
        out, val = tmp_path / f"train{seed}.jsonl", tmp_path / f"val{seed}.jsonl"
        main(["alfworld", "--data", root, "--seed", str(seed), "--out", str(out), "--holdout", "3",
              "--holdout-out", str(val)])
        train_ids, val_ids = [r["input"] for r in _read(out)], [r["input"] for r in _read(val)]
        assert len(val_ids) == 3 and not set(val_ids) & set(train_ids)
        assert sorted(train_ids + val_ids) == games
        panels.append(val_ids)
        trains.append(train_ids)
    assert panels[0] == panels[1] and trains[0] != trains[1]  # the shuffle moved, the panel did not


def test_holdout_errors_are_clear(tmp_path, capsys):
    root = str(tmp_path / "data")
    _games(root, "train", 2)
    with pytest.raises(SystemExit):
        main(["alfworld", "--data", root, "--out", str(tmp_path / "t.jsonl"), "--holdout", "1"])
    assert "--holdout needs --holdout-out" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["alfworld", "--data", root, "--out", str(tmp_path / "t.jsonl"), "--holdout", "5",
              "--holdout-out", str(tmp_path / "v.jsonl")])
    assert "there are 2 tasks" in capsys.readouterr().err
