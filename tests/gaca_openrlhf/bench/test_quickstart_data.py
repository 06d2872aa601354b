"""The quickstart's data phase (``quickstart.data`` -> ``agents.alfworld.quickstart``) on ALFWorld: generated games, the test, validation and retired
panels, the RL pool -- sizes, the easier subset's caps, disjointness and the cache markers."""
import json
from dataclasses import replace
from pathlib import Path

from gaca_openrlhf.bench.quickstart.cli import build_parser, config_from_args
from gaca_openrlhf.bench.quickstart.console import Console
from gaca_openrlhf.bench.quickstart.data import phase_data
from gaca_openrlhf.bench.quickstart.phases import rl_command
from gaca_openrlhf.bench.quickstart.state import State


def cfg_of(*argv):
    return config_from_args(build_parser().parse_args(list(argv)))


def test_data_phase_panels_have_the_requested_sizes(tmp_path, monkeypatch):
    """Two sizes with the same seed must not share a folder: a panel lists every game of its split folder."""
    monkeypatch.setenv("GACA_CACHE", str(tmp_path / "cache"))
    base = cfg_of("--smoke")
    for n_train in (2, 1):
        out = tmp_path / f"out{n_train}"
        cfg = replace(base, train_games=n_train, heldout_games=1, rl_pool_games=0)
        st = State()
        phase_data(cfg, st, out, Console(out, 1))
        train = json.loads((out / "data" / "train_panel.json").read_text())
        held = json.loads((out / "data" / "heldout_panel.json").read_text())
        assert train["num_games"] == n_train and held["num_games"] == 1
        assert all(g.startswith("json_2.1.1/train/") for g in train["games"])
        assert held["split"] == "valid_seen" and set(held["task_types"]) == {"pick_and_place_simple"}
        tasks = [json.loads(x)["input"] for x in (out / "data" / "train_tasks.jsonl").read_text().splitlines()]
        assert tasks == train["games"]
        # the validation and unseen test panels, disjoint from training (agents.alfworld.disjoint)
        val = json.loads((out / "data" / "val_panel.json").read_text())
        unseen = json.loads((out / "data" / "test_unseen_panel.json").read_text())
        assert val["num_games"] == cfg.val_games and unseen["num_games"] == cfg.unseen_games
        assert unseen["split"] == "valid_unseen" and all(Path(g).is_absolute() for g in val["games"])
        assert set(st.extra_panels) == {"val", "test_unseen"}


def test_rl_trains_on_its_own_pool_never_on_sft_or_heldout_games(tmp_path, monkeypatch):
    monkeypatch.setenv("GACA_CACHE", str(tmp_path / "cache"))
    cfg = replace(cfg_of("--smoke"), train_games=2, heldout_games=2, rl_pool_games=3)
    st = State()
    detail = phase_data(cfg, st, tmp_path / "out", Console(tmp_path / "out", 1))
    assert "RL pool" in detail and st.rl_data != st.data  # bug caught: RL pointed at the SFT games' root
    train = json.loads((tmp_path / "out" / "data" / "train_panel.json").read_text())
    assert train["num_games"] == 2  # the SFT games are unchanged by the pool
    tasks = [json.loads(x)["input"] for x in (tmp_path / "out" / "data" / "train_tasks.jsonl").read_text().splitlines()]
    # bug caught: the pool generated with the SFT games' seed (its first games would be the SFT games, same ids)
    assert 1 <= len(tasks) <= 3 and not set(tasks) & set(train["games"])
    held = json.loads((tmp_path / "out" / "data" / "heldout_panel.json").read_text())
    assert not {Path(t).parent.name for t in tasks} & {Path(g).parent.name for g in held["games"]}
    for t in tasks:  # task ids resolve under the root the RL env is given, and are games of the train split
        assert t.startswith("json_2.1.1/train/") and (Path(st.rl_data) / t).is_dir()
    cmd = rl_command(cfg, st, tmp_path / "run", "gaca", 0)
    assert json.loads(cmd[cmd.index("--env.kwargs") + 1])["data_dir"] == st.rl_data


def test_data_phase_generates_the_documented_subset(tmp_path, monkeypatch):
    """--max-receptacles reaches the generator and names the cache folder (rooms of another size never mix)."""
    monkeypatch.setenv("GACA_CACHE", str(tmp_path / "cache"))
    cfg = replace(cfg_of("--smoke"), train_games=2, heldout_games=1, unseen_games=1, max_receptacles=3)
    st = State()
    detail = phase_data(cfg, st, tmp_path / "out", Console(tmp_path / "out", 1))
    assert "-r3-" in Path(st.data).name and "<= 3 receptacles" in detail
    panels = [json.loads((tmp_path / "out" / "data" / f).read_text())["games"]
              for f in ("heldout_panel.json", "test_unseen_panel.json", "val_panel.json")]
    games = list(Path(st.data).glob("json_2.1.1/*/*/*/game.tw-pddl")) + [Path(g) / "game.tw-pddl" for p in panels
                                                                          for g in p]
    assert len(games) == 2 + 1 + 1 + cfg.val_games and all(g.is_file() for g in games)
    for g in games:  # bug caught: the option not passed on (full rooms have 5-30 receptacles)
        lines = json.loads(g.read_text())["pddl_problem"].splitlines()
        assert 1 <= sum(ln.endswith(" - receptacle") and not ln.lstrip().startswith("?") for ln in lines) <= 3


def test_panels_exclude_the_retired_tuning_panel_and_follow_their_exclusions(tmp_path, monkeypatch):
    """The test panels once shared generator seed 0 with the panel the defaults were tuned on, so 64 of the 128
    test games *were* that panel. Today the retired panel is regenerated exactly as the old quickstart drew it and
    every panel excludes it; a split whose exclusions changed is generated again (its marker holds them)."""
    import subprocess
    import sys
    from agents.alfworld.disjoint import split_keys
    monkeypatch.setenv("GACA_CACHE", str(tmp_path / "cache"))
    cfg = replace(cfg_of("--smoke"), train_games=2, heldout_games=3, unseen_games=1, val_games=1, retired_games=3)
    out = tmp_path / "out"
    phase_data(cfg, State(), out, Console(out, 1))
    retired = next((tmp_path / "cache").rglob("*-retired3/json_2.1.1/valid_seen"))
    # the old quickstart's panel: valid_seen of generator seed --data-seed, nothing excluded
    subprocess.run([sys.executable, "-m", "agents.alfworld", "generate", "--out", str(tmp_path / "old"), "--split",
                    "valid_seen", "--num-games", "3", "--seed", str(cfg.data_seed), "--task-types", "1",
                    "--max-receptacles", "3", "--max-distractor-types", "2", "--no-progress"], check=True,
                   capture_output=True)
    old = {k.opening for k in split_keys(str(tmp_path / "old" / "json_2.1.1" / "valid_seen"))}
    assert {k.opening for k in split_keys(str(retired))} == old
    for name in ("heldout_panel.json", "test_unseen_panel.json", "val_panel.json"):
        games = json.loads((out / "data" / name).read_text())["games"]
        assert games and not {k.opening for k in map(_keys_of, games)} & old, name
    test_root = Path(json.loads((out / "data" / "heldout_panel.json").read_text())["games"][0]).parents[3]
    marker = test_root / ".complete-valid_seen"
    assert "retired3" in marker.read_text()
    phase_data(replace(cfg, retired_games=2), State(), out, Console(out, 1))
    assert "retired2" in marker.read_text() and "retired3" not in marker.read_text()  # generated again


def _keys_of(game_dir):
    from agents.alfworld.disjoint import game_keys

    return game_keys(game_dir)
