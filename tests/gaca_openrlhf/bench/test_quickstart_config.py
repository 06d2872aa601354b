"""Quickstart presets, option parsing and the RL command it launches (the real train_ppo parser checks it)."""
import json
from pathlib import Path

import pytest

from gaca_openrlhf.bench.quickstart import METHODS, State, _eval_cmd, build_parser, config_from_args, rl_command


def cfg_of(*argv):
    return config_from_args(build_parser().parse_args(list(argv)))


def state_in(tmp_path):
    return State(data=str(tmp_path / "games"), train_tasks=str(tmp_path / "tasks.jsonl"), warm=str(tmp_path / "warm"))


def train_ppo_args(cfg, tmp_path, method="gaca", seed=0):
    """The RL command of ``cfg`` as the real train_ppo parser reads it."""
    from gaca_openrlhf.cli.train_ppo import parse_args

    return parse_args(rl_command(cfg, state_in(tmp_path), tmp_path / "run", method, seed)[3:])


def test_presets_and_overrides():
    full, smoke = cfg_of(), cfg_of("--smoke")
    # one evaluation seed: intervals come from training seeds and test games (gaca_openrlhf.report.stats)
    assert full.methods == ("gaca",) and full.eval_seeds == (0,)
    assert smoke.rl_iterations < full.rl_iterations and smoke.train_games < full.train_games
    assert cfg_of("--rl-iterations", "7", "--eval-seeds", "4,5").rl_iterations == 7
    assert cfg_of("--eval-seeds", "4,5").eval_seeds == (4, 5)
    cmp = cfg_of("--compare")
    assert cmp.methods == METHODS and len(cmp.rl_seeds) == 5  # issue 24: >= 5 training seeds per method
    # the 2-hour compare budget: fewer iterations than a single run, one budget for every method; overridable
    assert cmp.rl_iterations < full.rl_iterations
    assert cfg_of("--compare", "--rl-iterations", "5").rl_iterations == 5
    assert cfg_of("--compare", "--smoke").rl_iterations == smoke.rl_iterations
    with pytest.raises(SystemExit):
        cfg_of("--methods", "gaca,ppo_typo")
    # ALFWorld's test panels: 128 valid_seen (the paper's size) + 64 valid_unseen games, validation 64 valid_seen
    # games of another generator seed; WebShop's full run keeps the first 16 test goals unless asked
    assert (full.heldout_games, full.unseen_games, full.val_games) == (128, 64, 64)
    assert cfg_of("--env", "webshop").heldout_games == 16
    assert cfg_of("--env", "webshop", "--heldout-games", "8").heldout_games == 8
    assert cfg_of("--env", "webshop", "--smoke").heldout_games == smoke.heldout_games


def test_rl_command_is_accepted_by_the_project_parser(tmp_path):
    from gaca_openrlhf.cli.train_ppo import parse_args

    cfg = cfg_of("--smoke")
    st = state_in(tmp_path)
    cmd = rl_command(cfg, st, tmp_path / "run", "gigpo", 3)
    assert cmd[1:3] == ["-m", "gaca_openrlhf.cli.train_ppo"]
    args = parse_args(cmd[3:])
    assert args.algo.advantage.estimator == "gigpo" and args.train.seed == 3
    assert args.actor.model_name_or_path == st.warm and args.gaca.max_iterations == cfg.rl_iterations
    assert args.rollout.n_samples_per_prompt == cfg.rl_n >= 2
    assert args.rollout.temperature == cfg.rl_temperature == 0.4  # the evaluation temperature by default
    assert train_ppo_args(cfg_of("--smoke", "--rl-temperature", "1.0"), tmp_path).rollout.temperature == 1.0
    with pytest.raises(SystemExit):
        cfg_of("--rl-temperature", "0")
    assert json.loads(args.env.kwargs)["data_dir"] == st.data
    assert Path(args.ckpt.output_dir) == tmp_path / "run"


def test_kl_to_the_warm_start_reaches_train_ppo_as_a_loss(tmp_path):
    off = train_ppo_args(cfg_of("--smoke"), tmp_path)
    assert off.algo.kl.init_coef == 0 and not off.algo.kl.use_loss
    on = train_ppo_args(cfg_of("--smoke", "--rl-kl-coef", "0.05"), tmp_path)
    # the step trainer refuses a KL penalty in the reward; the loss form with a KL estimator that has a gradient
    assert on.algo.kl.init_coef == 0.05 and on.algo.kl.use_loss and on.algo.kl.estimator == "k3"
    k2 = cfg_of("--rl-kl-coef", "0.01", "--rl-kl-estimator", "k2")
    assert train_ppo_args(k2, tmp_path).algo.kl.estimator == "k2"
    for bad in (["--rl-kl-coef", "-0.1"], ["--rl-kl-estimator", "k4"]):
        with pytest.raises(SystemExit):
            cfg_of(*bad)


def test_data_phase_panels_have_the_requested_sizes(tmp_path, monkeypatch):
    """Two sizes with the same seed must not share a folder: a panel lists every game of its split folder."""
    from dataclasses import replace

    from gaca_openrlhf.bench.quickstart import Console, phase_data_alfworld

    monkeypatch.setenv("GACA_CACHE", str(tmp_path / "cache"))
    base = cfg_of("--smoke")
    for n_train in (2, 1):
        out = tmp_path / f"out{n_train}"
        cfg = replace(base, train_games=n_train, heldout_games=1, rl_pool_games=0)
        st = State()
        phase_data_alfworld(cfg, st, out, Console(out, 1))
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
    from dataclasses import replace

    from gaca_openrlhf.bench.quickstart import Console, phase_data_alfworld

    monkeypatch.setenv("GACA_CACHE", str(tmp_path / "cache"))
    cfg = replace(cfg_of("--smoke"), train_games=2, heldout_games=2, rl_pool_games=3)
    st = State()
    detail = phase_data_alfworld(cfg, st, tmp_path / "out", Console(tmp_path / "out", 1))
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
    from dataclasses import replace

    from gaca_openrlhf.bench.quickstart import Console, phase_data_alfworld

    monkeypatch.setenv("GACA_CACHE", str(tmp_path / "cache"))
    cfg = replace(cfg_of("--smoke"), train_games=2, heldout_games=1, unseen_games=1, max_receptacles=3)
    st = State()
    detail = phase_data_alfworld(cfg, st, tmp_path / "out", Console(tmp_path / "out", 1))
    assert "-r3-" in Path(st.data).name and "<= 3 receptacles" in detail
    panels = [json.loads((tmp_path / "out" / "data" / f).read_text())["games"]
              for f in ("heldout_panel.json", "test_unseen_panel.json", "val_panel.json")]
    games = list(Path(st.data).glob("json_2.1.1/*/*/*/game.tw-pddl")) + [Path(g) / "game.tw-pddl" for p in panels
                                                                          for g in p]
    assert len(games) == 2 + 1 + 1 + cfg.val_games and all(g.is_file() for g in games)
    for g in games:  # bug caught: the option not passed on (full rooms have 5-30 receptacles)
        lines = json.loads(g.read_text())["pddl_problem"].splitlines()
        assert 1 <= sum(ln.endswith(" - receptacle") and not ln.lstrip().startswith("?") for ln in lines) <= 3


def test_search_expert_is_for_task_type_one_only():
    assert cfg_of().expert == "search" and cfg_of().max_receptacles > 0  # the full preset's documented subset
    with pytest.raises(SystemExit, match="task type 1"):
        cfg_of("--task-types", "1,2")
    assert cfg_of("--task-types", "1,2", "--expert", "walkthrough").task_types == "1,2"
    with pytest.raises(SystemExit):
        cfg_of("--expert", "oracle")


def test_given_warm_start_is_checked_and_used(tmp_path):
    from gaca_openrlhf.bench.quickstart import PhaseError, phase_given_warm_start

    st = State()
    with pytest.raises(PhaseError, match="config.json"):
        phase_given_warm_start(st, str(tmp_path))
    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "gaca_sft.json").write_text(json.dumps({"steps": 7}))
    phase_given_warm_start(st, str(tmp_path))
    assert st.warm == str(tmp_path.resolve()) and st.sft == {"steps": 7}
    assert build_parser().parse_args(["--warm-start", "m"]).warm_start == "m"


def test_sft_upsample_reaches_the_sft_command(tmp_path, monkeypatch):
    import gaca_openrlhf.bench.quickstart as qs

    seen = []

    def fake_run(cmd, log, env=None):  # records the SFT command instead of training (what is checked: its flags)
        seen.append(cmd)
        raise qs.PhaseError("stop")

    monkeypatch.setattr(qs, "run_logged", fake_run)
    cfg = cfg_of("--sft-upsample", "take=3,move=3")
    with pytest.raises(qs.PhaseError):
        qs.phase_sft(cfg, State(data=str(tmp_path)), tmp_path, qs.Console(tmp_path, 1))
    cmd = seen[0]
    assert cmd[cmd.index("--upsample") + 1] == "take=3,move=3"


def test_rl_env_backend_micro_batch_and_validity_reach_train_ppo(tmp_path):
    ray_args = train_ppo_args(cfg_of("--smoke", "--rl-env-backend", "ray"), tmp_path)
    assert json.loads(ray_args.env.kwargs) == {"backend": "ray", "data_dir": state_in(tmp_path).data, "num_cpus": 0}
    local = json.loads(train_ppo_args(cfg_of("--smoke", "--rl-env-backend", "local"), tmp_path).env.kwargs)
    # bug caught: a Ray-only option (num_cpus) handed to the in-process env, whose constructor rejects it
    assert local == {"backend": "local", "data_dir": state_in(tmp_path).data}
    args = train_ppo_args(cfg_of("--rl-micro-batch", "8", "--rl-mini-batch-steps", "32"), tmp_path)
    assert args.train.micro_batch_size == 8 and args.gaca.mini_batch_steps == 32
    # ALFWorld's quickstart default penalises off-list actions; WebShop keeps verl-agent's format rule unless asked
    assert train_ppo_args(cfg_of("--smoke"), tmp_path).env.validity == "admissible"
    assert train_ppo_args(cfg_of("--rl-validity", "format"), tmp_path).env.validity == "format"
    assert cfg_of("--env", "webshop").rl_validity == "format"
    assert cfg_of("--env", "webshop", "--rl-validity", "admissible").rl_validity == "admissible"
    assert cfg_of().rl_env_backend == "local"
    for backend in ("local", "ray"):  # the held-out evaluations' engines
        cmd = _eval_cmd(cfg_of("--eval-env-backend", backend), state_in(tmp_path), "m", tmp_path / "ev", (0,))
        assert cmd[cmd.index("--alfworld-backend") + 1] == backend
    for bad in (["--rl-env-backend", "docker"], ["--eval-env-backend", "docker"], ["--rl-validity", "listed"],
                ["--rl-micro-batch", "3", "--rl-mini-batch-steps", "32"], ["--rl-micro-batch", "0"]):
        with pytest.raises(SystemExit):
            cfg_of(*bad)


def test_eval_command_evaluates_the_validation_and_unseen_panels_with_the_test_panel(tmp_path):
    """One engine, every panel: the extra panels reach the evaluator, whose parser accepts them."""
    st = state_in(tmp_path)
    st.panel, st.extra_panels = "test.json", {"val": "/abs/val.json", "test_unseen": "/abs/unseen.json"}
    cmd = _eval_cmd(cfg_of(), st, "m", tmp_path / "ev", (0,))
    assert "--extra-panel=val=/abs/val.json" in cmd and "--extra-panel=test_unseen=/abs/unseen.json" in cmd
    ws = state_in(tmp_path)
    ws.webshop_url, ws.extra_panels = "http://x", {"val": "eval"}  # WebShop: upstream's eval split validates
    cmd = _eval_cmd(cfg_of("--env", "webshop"), ws, "m", tmp_path / "ev", (0,))
    assert "--extra-panel=val=eval" in cmd and cmd[cmd.index("--panel") + 1] == "test"


def test_resume_reuses_an_evaluation_only_when_every_panel_is_there(tmp_path):
    from gaca_openrlhf.bench.quickstart import reusable_eval

    cfg = cfg_of()
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    out = tmp_path / "ev"
    want = {"model": str(model), "env": "alfworld", "temperature": cfg.eval_temperature, "max_steps": cfg.max_steps,
            "max_tokens": cfg.max_new_tokens, "episodes_per_task": 1, "seed": 0}
    (out / "val").mkdir(parents=True)
    (out / "seed0.json").write_text(json.dumps({"config": {**want, "num_tasks": cfg.heldout_games}}))
    extra = {"val": "/abs/val.json"}
    assert reusable_eval(cfg, out, str(model), (0,)) and not reusable_eval(cfg, out, str(model), (0,), extra)
    (out / "val" / "seed0.json").write_text(json.dumps({"config": {**want, "panel_arg": "/abs/other.json"}}))
    assert not reusable_eval(cfg, out, str(model), (0,), extra)  # another validation panel
    (out / "val" / "seed0.json").write_text(json.dumps({"config": {**want, "panel_arg": "/abs/val.json"}}))
    assert reusable_eval(cfg, out, str(model), (0,), extra)


def test_panels_exclude_the_retired_tuning_panel_and_follow_their_exclusions(tmp_path, monkeypatch):
    """The test panels once shared generator seed 0 with the panel the defaults were tuned on, so 64 of the 128
    test games *were* that panel. Today the retired panel is regenerated exactly as the old quickstart drew it and
    every panel excludes it; a split whose exclusions changed is generated again (its marker holds them)."""
    import subprocess
    import sys
    from dataclasses import replace

    from agents.alfworld.disjoint import split_keys
    from gaca_openrlhf.bench.quickstart import Console, phase_data_alfworld

    monkeypatch.setenv("GACA_CACHE", str(tmp_path / "cache"))
    cfg = replace(cfg_of("--smoke"), train_games=2, heldout_games=3, unseen_games=1, val_games=1, retired_games=3)
    out = tmp_path / "out"
    phase_data_alfworld(cfg, State(), out, Console(out, 1))
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
    phase_data_alfworld(replace(cfg, retired_games=2), State(), out, Console(out, 1))
    assert "retired2" in marker.read_text() and "retired3" not in marker.read_text()  # generated again


def _keys_of(game_dir):
    from agents.alfworld.disjoint import game_keys

    return game_keys(game_dir)
