"""Edges of the panel resolution (``eval/panels.py``) found by mutation testing: the generated-data check per game
(data made before the generator's marker, or games outside a data root) and the WebShop panel messages."""
import json
import os

import pytest

from agents.alfworld.assets import GENERATED_MARKER, JSON_DIR
from agents.alfworld.eval_panels import alfworld_generated
from gaca_openrlhf.eval.panels import PanelError, resolve_panel


def _game(root, name, traj):
    os.makedirs(os.path.join(root, name), exist_ok=True)
    if traj is not None:
        with open(os.path.join(root, name, "traj_data.json"), "w") as f:
            f.write(traj if isinstance(traj, str) else json.dumps(traj))


def test_generated_marker_of_the_data_root(tmp_path):
    """A data root marked by the generator is generated, whatever the games say."""
    os.makedirs(tmp_path / JSON_DIR / "valid_seen")
    assert not alfworld_generated(str(tmp_path), [])
    (tmp_path / JSON_DIR / "valid_seen" / GENERATED_MARKER).write_text("")
    assert alfworld_generated(str(tmp_path), [])


def test_generated_games_found_one_by_one(tmp_path):
    """Without a marked root, any game whose traj_data.json has the generator's entry makes the panel generated;
    unreadable or missing files are skipped (not the end of the search)."""
    root = str(tmp_path)
    _game(root, "real", {"task_type": "pick"})
    _game(root, "missing", None)
    _game(root, "broken", "{not json")
    _game(root, "made", {"task_type": "pick", "generator": {"tool": "agents.alfworld.generator"}})
    assert not alfworld_generated(root, ["real"])
    assert alfworld_generated(root, ["real", "missing", "broken", "made"])
    assert not alfworld_generated(root, None)


def test_absolute_game_paths_without_a_data_root(tmp_path):
    _game(str(tmp_path), "made", {"generator": {}})
    assert alfworld_generated(None, [str(tmp_path / "made")])
    assert not alfworld_generated(None, [str(tmp_path / "nothing")])


def test_webshop_train_split_needs_a_size():
    with pytest.raises(PanelError, match=r"^the WebShop train split is open-ended: pass --num-tasks N$"):
        resolve_panel("webshop", "train")
    assert resolve_panel("webshop", "train", num_tasks=2).tasks == ["train:0", "train:1"]


def test_relative_games_without_a_data_root_are_read_from_the_working_directory(tmp_path, monkeypatch):
    _game(str(tmp_path), "made", {"generator": {}})
    monkeypatch.chdir(tmp_path)
    assert alfworld_generated(None, ["made"])


def test_webshop_panel_name_meta_and_size_checks():
    """The panel's name and provenance go into every results file; one task is a valid panel."""
    p = resolve_panel("webshop", "eval", num_tasks=1)
    assert (p.name, p.tasks, p.meta) == ("eval[:1]", ["eval:0"], {"split": "eval", "first_n": 1})
    with pytest.raises(PanelError, match=r"^--num-tasks must be positive, got 0$"):
        resolve_panel("webshop", "test", num_tasks=0)
    with pytest.raises(PanelError, match=r"^WebShop split 'test' has 500 goals, asked for 501$"):
        resolve_panel("webshop", "test", num_tasks=501)
