"""``eval/panels.py``: task types read from the ALFWorld games, the toy panel, and ``resolve_panel``'s options
(mutmut survivors of the 2026-12-01 fourth-session run). Each test names the one-line bug it catches."""
from __future__ import annotations

import json
import os

import pytest

from gaca_openrlhf.eval.panels import PanelError, resolve_panel


def _game(root, rel, traj):
    d = root / rel
    d.mkdir(parents=True)
    if traj is not None:
        (d / "traj_data.json").write_text(traj if isinstance(traj, str) else json.dumps(traj))
    (d / "game.tw-pddl").write_text(json.dumps({"solvable": True}))
    return rel


def test_task_types_only_where_the_game_states_one(tmp_path):
    """Catches: a game without ``task_type`` in traj_data.json (or without traj_data.json, or with a broken one)
    given a made-up type ("None", "XXXX") instead of none: its episodes would count under a fake task type."""
    games = [_game(tmp_path, "g/typed/trial_0", {"task_type": "pick_and_place_simple"}),
             _game(tmp_path, "g/untyped/trial_0", {"other": 1}),
             _game(tmp_path, "g/no_traj/trial_0", None),
             _game(tmp_path, "g/broken/trial_0", "{not json")]
    panel = tmp_path / "p.json"
    panel.write_text(json.dumps({"name": "mine", "games": games}))
    p = resolve_panel("alfworld", str(panel), data_root=str(tmp_path))
    assert p.tasks == games and p.name == "mine"
    assert p.task_types == {"g/typed/trial_0": "pick_and_place_simple"}


def test_no_data_root_means_no_task_types(tmp_path):
    """Catches: task types invented when there is no data root to read them from (absolute game paths)."""
    game = _game(tmp_path, "abs/trial_0", {"task_type": "look_at_obj_in_light"})
    panel = tmp_path / "p.json"
    panel.write_text(json.dumps({"games": [str(tmp_path / game)]}))
    p = resolve_panel("alfworld", str(panel), data_root=None)
    assert p.tasks == [str(tmp_path / game)] and p.task_types == {} and p.name == "p"


def test_toy_panel_name_and_meta():
    """Catches: the toy panel's name or its ``first_n`` provenance dropped or renamed (results JSON ``panel`` and
    ``panel_meta``)."""
    p = resolve_panel("toy", "anything", num_tasks=3)
    assert (p.name, p.tasks, p.meta) == ("toy[:3]", ["0", "1", "2"], {"first_n": 3})
    assert resolve_panel("toy", "x").meta == {"first_n": 4} and resolve_panel("toy", "x").name == "toy[:4]"


def test_resolve_panel_uses_panel_dir_and_keeps_first_n(tmp_path):
    """Catches: ``panel_dir`` not passed on (a panel found only there is not found), ``--num-tasks 1`` rejected,
    or the ``first_n`` provenance of a cut ALFWorld panel lost or renamed."""
    games = [_game(tmp_path / "data", f"g/{i}/trial_0", {"task_type": "t"}) for i in range(3)]
    pdir = tmp_path / "panels_elsewhere"
    pdir.mkdir()
    (pdir / "mine.json").write_text(json.dumps({"name": "mine", "split": "valid_seen", "games": games}))
    root = str(tmp_path / "data")
    with pytest.raises(PanelError, match="unknown ALFWorld panel"):
        resolve_panel("alfworld", "mine", data_root=root)
    p = resolve_panel("alfworld", "mine", data_root=root, panel_dir=str(pdir), num_tasks=1)
    assert p.tasks == games[:1]
    assert p.meta["first_n"] == 1 and p.meta["source"] == os.path.abspath(pdir / "mine.json")
    assert p.meta["split"] == "valid_seen"
    full = resolve_panel("alfworld", "mine", data_root=root, panel_dir=str(pdir))
    assert full.tasks == games and "first_n" not in full.meta
