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


def _root_with_games(tmp_path, n, split="valid_seen"):
    for i in range(n):
        _game(tmp_path, f"json_2.1.1/{split}/pick_and_place_simple-A{i}-None-B-{i}/trial_0",
              {"task_type": "pick_and_place_simple"})
    return str(tmp_path)


def test_panel_file_given_by_file_name_or_extensionless_path(tmp_path, monkeypatch):
    """Catches: a panel argument ending in .json (in the working folder, no path separator) or a path without the
    .json extension not treated as a file (``or`` -> ``and``, the extension test changed, the separator test
    inverted)."""
    root = _root_with_games(tmp_path / "data", 2)
    games = resolve_panel("alfworld", "eval_id", data_root=root).tasks
    work = tmp_path / "work"
    work.mkdir()
    (work / "mine.json").write_text(json.dumps({"name": "by-name", "games": games[:1]}))
    (work / "noext").write_text(json.dumps({"name": "no-ext", "games": games[1:]}))
    monkeypatch.chdir(work)
    p = resolve_panel("alfworld", "mine.json", data_root=root)
    assert (p.name, p.tasks) == ("by-name", games[:1])
    p = resolve_panel("alfworld", str(work / "noext"), data_root=root)
    assert (p.name, p.tasks) == ("no-ext", games[1:])


def test_panel_file_errors_say_what_is_wrong(tmp_path):
    """Catches: the message of an unreadable panel file or of an empty one dropped, or the 'looked for' list
    in the unknown-panel message broken."""
    root = _root_with_games(tmp_path / "data", 1)
    bad = tmp_path / "bad.json"
    bad.write_text("{nope")
    with pytest.raises(PanelError, match=r"cannot read ALFWorld panel .*bad\.json"):
        resolve_panel("alfworld", str(bad), data_root=root)
    empty = tmp_path / "empty.json"
    empty.write_text(json.dumps({"games": []}))
    with pytest.raises(PanelError, match=r"ALFWorld panel '.*empty\.json' has no games"):
        resolve_panel("alfworld", str(empty), data_root=root)
    with pytest.raises(PanelError) as e:
        resolve_panel("alfworld", "nope", data_root=None)
    assert str(e.value).endswith("(looked for no files)")
    with pytest.raises(PanelError) as e:
        resolve_panel("alfworld", "nope", data_root=root)
    assert str(e.value).endswith(f"(looked for {[os.path.join(root, 'panels', 'nope.json')]})")
    with pytest.raises(PanelError) as e:
        resolve_panel("alfworld", "eval_id", data_root=None)
    assert str(e.value) == ("ALFWorld panel 'eval_id' is built from a data root: pass --data DIR or set "
                            "$ALFWORLD_DATA (or pass a panel JSON file)")


def test_panel_meta_from_a_file_and_from_the_data_root(tmp_path):
    """Catches: the provenance in the results JSON (``panel_meta``: source, split, selection) dropped or renamed,
    for a panel file and for a panel built from the data root."""
    root = _root_with_games(tmp_path / "data", 3)
    built = resolve_panel("alfworld", "eval_id", data_root=root)
    assert built.meta == {"source": f"built from {os.path.abspath(root)}", "split": "valid_seen",
                          "selection": {"size": 128, "seed": 0, "task_types": [1, 2, 3, 4, 5, 6], "sorted": True}}
    f = tmp_path / "p.json"
    f.write_text(json.dumps({"games": built.tasks, "split": "valid_seen", "selection": {"size": 2, "seed": 9}}))
    p = resolve_panel("alfworld", str(f), data_root=root)
    assert p.meta == {"source": os.path.abspath(f), "split": "valid_seen", "selection": {"size": 2, "seed": 9}}


def test_built_panel_is_the_one_the_panels_command_writes(tmp_path):
    """The module's contract: a standard panel built from the data root is the panel that ``python -m
    agents.alfworld panels`` writes (agents.alfworld.panels.build_standard_panels, which draws the 128 games with
    the panel's name in the seed). Catches: the panel name not passed to the builder (another 128 games)."""
    from agents.alfworld.panels import build_standard_panels

    root = _root_with_games(tmp_path / "data", 140)
    written = build_standard_panels(root, str(tmp_path / "written"), seed=0)
    games = json.loads(open(written["eval_id"]).read())["games"]
    built = resolve_panel("alfworld", "eval_id", data_root=root).tasks
    assert len(built) == 128 and built == games
    from agents.alfworld.eval_panels import alfworld_panel

    assert alfworld_panel("eval_id", root).tasks == games  # its default panel seed is 0 too
