"""Quickstart presets, option parsing (``quickstart.cli``) and the SFT, evaluation and RL commands its phases launch
(``quickstart.phases``; the real train_ppo parser checks the RL command)."""
import json
from pathlib import Path

import pytest

from gaca_openrlhf.bench.quickstart import phases
from gaca_openrlhf.bench.quickstart.cli import build_parser, config_from_args
from gaca_openrlhf.bench.quickstart.config import METHODS, plain_config
from gaca_openrlhf.bench.quickstart.console import Console
from gaca_openrlhf.bench.quickstart.phases import eval_command, phase_given_warm_start, rl_command
from gaca_openrlhf.bench.quickstart.runner import PhaseError
from gaca_openrlhf.bench.quickstart.state import State


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
    # one budget for every method, and the plain command's: its run is the compare's GACA run of the same seed, so
    # the compare's GACA row is the plain command's distribution over training seeds (issue 24); overridable
    assert cmp.rl_iterations == full.rl_iterations
    assert cfg_of("--compare", "--rl-iterations", "5").rl_iterations == 5
    assert cfg_of("--compare", "--smoke").rl_iterations == smoke.rl_iterations
    # the full run trains on its own pool of fresh games (issue 35's recipe); the smoke run (CI) generates none
    assert full.rl_pool_games > 0 and smoke.rl_pool_games == 0
    assert cfg_of("--smoke", "--rl-pool-games", "5").rl_pool_games == 5  # a flag given wins over the preset
    with pytest.raises(SystemExit):
        cfg_of("--methods", "gaca,ppo_typo")
    # ALFWorld's test panels: 128 valid_seen (the paper's size) + 64 valid_unseen games, validation 64 valid_seen
    # games of another generator seed; WebShop's full run keeps the first 16 test goals unless asked
    assert (full.heldout_games, full.unseen_games, full.val_games) == (128, 64, 64)
    assert cfg_of("--env", "webshop").heldout_games == 16
    assert cfg_of("--env", "webshop", "--heldout-games", "8").heldout_games == 8
    assert cfg_of("--env", "webshop", "--smoke").heldout_games == smoke.heldout_games


def test_an_environment_s_own_flags_keep_their_names(monkeypatch):
    """The WebShop leg's settings are its spec's quickstart options (agents/webshop/quickstart.py), still the config
    fields and flags --webshop-products, --webshop-data and --webshop-generated (recorded in run.json's config)."""
    from dataclasses import asdict

    monkeypatch.delenv("WEBSHOP_DATA", raising=False)
    monkeypatch.delenv("WEBSHOP_GENERATED", raising=False)
    plain = cfg_of("--env", "webshop")
    assert (plain.webshop_products, plain.webshop_data, plain.webshop_generated) == (1000, "", False)
    cfg = cfg_of("--env", "webshop", "--webshop-generated", "--webshop-products", "50", "--webshop-data", "/d")
    assert (cfg.webshop_products, cfg.webshop_data, cfg.webshop_generated) == (50, "/d", True)
    assert {"webshop_products", "webshop_data", "webshop_generated"} <= set(asdict(cfg))
    assert "published numbers" in build_parser().format_help()  # the switch's help, from its option


def test_alfworld_s_settings_are_its_options_with_their_names():
    """Issue 26: the ALFWorld-only settings are its spec's quickstart options (agents/alfworld/quickstart.py), not
    common settings, and keep their config fields and flags (run.json's config, --resume)."""
    from dataclasses import asdict, fields

    from gaca_openrlhf.bench.quickstart.config import ENV_OPTIONS, CommonConfig

    own = {"task_types", "max_receptacles", "max_distractor_types", "expert", "rl_pool_games", "unseen_games",
           "retired_games", "rl_env_backend", "eval_env_backend", "sft_detours"}
    assert own.isdisjoint(f.name for f in fields(CommonConfig))
    assert {n for n, (env, _) in ENV_OPTIONS.items() if env == "alfworld"} == own
    flags = build_parser().format_help()
    assert all("--" + n.replace("_", "-") in flags for n in own)
    for argv in ((), ("--env", "webshop"), ("--smoke",)):  # every config has every environment's options
        assert own <= set(asdict(cfg_of(*argv)))
    # the smoke preset's smaller rooms and panels are ALFWorld's, made by its configure hook; flags still win
    full, smoke = cfg_of(), cfg_of("--smoke")
    assert (full.max_receptacles, full.max_distractor_types, full.unseen_games, full.retired_games) == (6, 0, 64, 64)
    assert (smoke.max_receptacles, smoke.max_distractor_types, smoke.unseen_games, smoke.retired_games) == (3, 2, 2, 2)
    mine = cfg_of("--smoke", "--max-receptacles", "5", "--retired-games", "0")
    assert (mine.max_receptacles, mine.max_distractor_types, mine.retired_games) == (5, 2, 0)
    assert cfg_of("--compare", "--smoke").max_distractor_types == 2


def test_a_flag_of_another_environment_s_option_is_refused(monkeypatch):
    monkeypatch.delenv("WEBSHOP_DATA", raising=False)
    with pytest.raises(SystemExit, match="--task-types is an option of --env alfworld"):
        cfg_of("--env", "webshop", "--task-types", "1,2")
    with pytest.raises(SystemExit, match="--webshop-products is an option of --env webshop"):
        cfg_of("--webshop-products", "50")


def test_an_option_name_may_be_taken_once(monkeypatch):
    """An environment's option may not reuse a common setting's name or another environment's option's: the config
    and its flags are one namespace."""
    from types import SimpleNamespace

    from agents.base import QuickstartOption
    from gaca_openrlhf.bench.quickstart import config

    def env(name, *options):
        return SimpleNamespace(name=name, quickstart=SimpleNamespace(options=tuple(QuickstartOption(o, int, 0)
                                                                                   for o in options)))

    monkeypatch.setattr(config, "specs", lambda with_quickstart: [env("a", "a_size"), env("b", "b_size")])
    assert {n: e for n, (e, _) in config._env_options().items()} == {"a_size": "a", "b_size": "b"}
    monkeypatch.setattr(config, "specs", lambda with_quickstart: [env("a", "train_games")])
    with pytest.raises(TypeError, match=r"'train_games' of 'a' is already a setting of the quickstart \(common\)"):
        config._env_options()
    monkeypatch.setattr(config, "specs", lambda with_quickstart: [env("a", "size"), env("b", "size")])
    with pytest.raises(TypeError, match=r"'size' of 'b' is already a setting of the quickstart \(a\)"):
        config._env_options()


def test_rl_command_is_accepted_by_the_project_parser(tmp_path):
    from gaca_openrlhf.cli.train_ppo import parse_args

    cfg = cfg_of("--smoke")
    st = state_in(tmp_path)
    cmd = rl_command(cfg, st, tmp_path / "run", "gigpo", 3)
    assert cmd[1:3] == ["-m", "gaca_openrlhf.cli.train_ppo"]
    args = parse_args(cmd[3:])
    assert args.algo.advantage.estimator == "gigpo" and args.train.seed == 3
    assert args.actor.model_name_or_path == st.warm and args.run.max_iterations == cfg.rl_iterations
    assert args.rollout.n_samples_per_prompt == cfg.rl_n >= 2
    # RL samples above the evaluation temperature by default (issue 35: groups with outcome contrast)
    assert args.rollout.temperature == cfg.rl_temperature > cfg.eval_temperature
    assert train_ppo_args(cfg_of("--smoke", "--rl-temperature", "1.0"), tmp_path).rollout.temperature == 1.0
    with pytest.raises(SystemExit):
        cfg_of("--rl-temperature", "0")
    assert json.loads(args.env.kwargs)["data_dir"] == st.data
    assert Path(args.ckpt.output_dir) == tmp_path / "run"


@pytest.mark.parametrize("env", ["alfworld", "webshop"])
def test_rl_command_uses_no_deprecated_option(tmp_path, env):
    """Catches: the quickstart's own RL command (with the environment's options) spelling an option by a deprecated
    name (--gaca.<trainer option>): a warning in every run's log."""
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        train_ppo_args(cfg_of("--smoke", "--env", env), tmp_path)
    assert not [str(w.message) for w in caught if "is deprecated: use" in str(w.message)]


def test_the_plain_run_is_the_compare_s_gaca_run_of_its_seed(tmp_path):
    plain, cmp = cfg_of(), cfg_of("--compare")
    # records judge the learning target against this configuration (bench.records.plain_command_differs)
    assert plain_config() == plain and plain_config("webshop") == cfg_of("--env", "webshop")
    assert plain_config() != cfg_of("--rl-iterations", "3")
    assert plain.methods == ("gaca",) and plain.rl_seeds == (0,) and 0 in cmp.rl_seeds
    st = state_in(tmp_path)
    assert (rl_command(plain, st, tmp_path / "run", "gaca", 0) == rl_command(cmp, st, tmp_path / "run", "gaca", 0))
    ev = [eval_command(c, st, str(tmp_path / "model"), tmp_path / "eval", c.eval_seeds) for c in (plain, cmp)]
    assert ev[0] == ev[1]


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


def test_search_expert_is_for_task_type_one_only():
    assert cfg_of().expert == "search" and cfg_of().max_receptacles > 0  # the full preset's documented subset
    with pytest.raises(SystemExit, match="task type 1"):
        cfg_of("--task-types", "1,2")
    assert cfg_of("--task-types", "1,2", "--expert", "walkthrough").task_types == "1,2"
    with pytest.raises(SystemExit, match="unknown --expert 'oracle'; expected search or walkthrough"):
        cfg_of("--expert", "oracle")


def test_given_warm_start_is_checked_and_used(tmp_path):
    st = State()
    with pytest.raises(PhaseError, match="config.json"):
        phase_given_warm_start(st, str(tmp_path))
    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "gaca_sft.json").write_text(json.dumps({"steps": 7}))
    phase_given_warm_start(st, str(tmp_path))
    assert st.warm == str(tmp_path.resolve()) and st.sft == {"steps": 7}
    assert build_parser().parse_args(["--warm-start", "m"]).warm_start == "m"


def sft_command(cfg, tmp_path, monkeypatch) -> list[str]:
    """The command phase_sft would run for ``cfg`` (recorded instead of training: what is checked is its flags)."""
    seen = []

    def fake_run(cmd, log, env=None, **kw):
        seen.append(cmd)
        raise PhaseError("stop")

    monkeypatch.setattr(phases, "run_logged", fake_run)
    with pytest.raises(PhaseError):
        phases.phase_sft(cfg, State(data=str(tmp_path)), tmp_path, Console(tmp_path, 1))
    return seen[0]


def test_sft_upsample_reaches_the_sft_command(tmp_path, monkeypatch):
    cmd = sft_command(cfg_of("--sft-upsample", "take=3,move=3"), tmp_path, monkeypatch)
    assert cmd[cmd.index("--upsample") + 1] == "take=3,move=3"


def test_sft_copy_gate_reaches_the_sft_command(tmp_path, monkeypatch):
    for argv, cycles, verbs in (([], "4", "take,move"), (["--sft-max-cycles", "3", "--sft-check-verbs", "click"],
                                                         "3", "click")):
        cmd = sft_command(cfg_of(*argv), tmp_path, monkeypatch)
        assert (cmd[cmd.index("--max-cycles") + 1], cmd[cmd.index("--check-verbs") + 1]) == (cycles, verbs)


def test_sft_seed_reaches_the_sft_command_and_names_its_own_warm_start(tmp_path, monkeypatch):
    monkeypatch.setenv("GACA_CACHE", str(tmp_path / "cache"))
    seed0, seed2 = (sft_command(cfg_of(*argv), tmp_path, monkeypatch) for argv in ([], ["--sft-seed", "2"]))
    assert seed0[seed0.index("--seed") + 1] == "0" and seed2[seed2.index("--seed") + 1] == "2"
    # seed 0 keeps the folder every record cites; another seed must not overwrite (or reuse) it
    assert seed0[seed0.index("--out") + 1] == str(tmp_path / "cache" / "quickstart" / "warm-alfworld-small")
    assert seed2[seed2.index("--out") + 1] == str(tmp_path / "cache" / "quickstart" / "warm-alfworld-small-sft2")


def test_rl_env_backend_micro_batch_and_validity_reach_train_ppo(tmp_path):
    ray_args = train_ppo_args(cfg_of("--smoke", "--rl-env-backend", "ray"), tmp_path)
    assert json.loads(ray_args.env.kwargs) == {"backend": "ray", "data_dir": state_in(tmp_path).data, "num_cpus": 0}
    local = json.loads(train_ppo_args(cfg_of("--smoke", "--rl-env-backend", "local"), tmp_path).env.kwargs)
    # bug caught: a Ray-only option (num_cpus) handed to the in-process env, whose constructor rejects it
    assert local == {"backend": "local", "data_dir": state_in(tmp_path).data}
    args = train_ppo_args(cfg_of("--rl-micro-batch", "8", "--rl-mini-batch-steps", "32"), tmp_path)
    assert args.train.micro_batch_size == 8 and args.run.mini_batch_steps == 32
    # ALFWorld's quickstart default penalises off-list actions; WebShop keeps verl-agent's format rule unless asked
    assert train_ppo_args(cfg_of("--smoke"), tmp_path).env.validity == "admissible"
    assert train_ppo_args(cfg_of("--rl-validity", "format"), tmp_path).env.validity == "format"
    assert cfg_of("--env", "webshop").rl_validity == "format"
    assert cfg_of("--env", "webshop", "--rl-validity", "admissible").rl_validity == "admissible"
    assert cfg_of().rl_env_backend == "local"
    for backend in ("local", "ray"):  # the held-out evaluations' engines
        cmd = eval_command(cfg_of("--eval-env-backend", backend), state_in(tmp_path), "m", tmp_path / "ev", (0,))
        assert cmd[cmd.index("--alfworld-backend") + 1] == backend
    for flag in ("--rl-env-backend", "--eval-env-backend"):
        with pytest.raises(SystemExit, match=f"unknown {flag} 'docker'; expected ray or local"):
            cfg_of(flag, "docker")
    for bad in (["--rl-validity", "listed"], ["--rl-micro-batch", "3", "--rl-mini-batch-steps", "32"],
                ["--rl-micro-batch", "0"]):
        with pytest.raises(SystemExit):
            cfg_of(*bad)


def test_eval_command_evaluates_the_validation_and_unseen_panels_with_the_test_panel(tmp_path):
    """One engine, every panel: the extra panels reach the evaluator, whose parser accepts them."""
    st = state_in(tmp_path)
    st.panel, st.extra_panels = "test.json", {"val": "/abs/val.json", "test_unseen": "/abs/unseen.json"}
    cmd = eval_command(cfg_of(), st, "m", tmp_path / "ev", (0,))
    assert "--extra-panel=val=/abs/val.json" in cmd and "--extra-panel=test_unseen=/abs/unseen.json" in cmd
    ws = state_in(tmp_path)
    ws.server_url, ws.extra_panels = "http://x", {"val": "eval"}  # WebShop: upstream's eval split validates
    cmd = eval_command(cfg_of("--env", "webshop"), ws, "m", tmp_path / "ev", (0,))
    assert "--extra-panel=val=eval" in cmd and cmd[cmd.index("--panel") + 1] == "test"


def test_lr_schedule_reaches_train_ppo_and_holds_the_lr(tmp_path):
    """--rl-lr-scheduler / --rl-min-lr-ratio become train_ppo's --actor.lr_scheduler / --actor.min_lr_ratio (as the
    real parser reads them); the quickstart's default (constant, issue 35's recipe) is passed, OpenRLHF's own
    default (cosine_with_min_lr at 0.1) leaves the command as it was before these options (so --resume reuses runs
    recorded with it), and bad values are refused up front. The schedule itself, built as OpenRLHF builds it
    (transformers' get_scheduler) and positioned per iteration as the policy actor does: "constant" holds the LR at
    iteration 7 of 8, cosine_with_min_lr has decayed it below 0.2x. Catches a flag not passed, passed under the wrong
    name, or a constant schedule that still decays."""
    import torch
    from transformers import get_scheduler

    from gaca_openrlhf.trainer.actors import set_lr_position

    const = train_ppo_args(cfg_of("--smoke"), tmp_path)
    assert const.actor.lr_scheduler == "constant"
    cosine = ["--rl-lr-scheduler", "cosine_with_min_lr"]
    default = train_ppo_args(cfg_of("--smoke", *cosine), tmp_path)
    assert (default.actor.lr_scheduler, default.actor.min_lr_ratio) == ("cosine_with_min_lr", 0.1)
    assert "--actor.lr_scheduler" not in rl_command(cfg_of("--smoke", *cosine), state_in(tmp_path), tmp_path / "run",
                                                    "gaca", 0)
    floor = train_ppo_args(cfg_of("--smoke", *cosine, "--rl-min-lr-ratio", "0.5"), tmp_path)
    assert (floor.actor.lr_scheduler, floor.actor.min_lr_ratio) == ("cosine_with_min_lr", 0.5)
    with pytest.raises(SystemExit, match="--rl-lr-scheduler"):
        cfg_of("--rl-lr-scheduler", "reduce_lr_on_plateau")
    with pytest.raises(SystemExit, match="--rl-min-lr-ratio"):
        cfg_of("--rl-min-lr-ratio", "1.5")

    def lr_at(args, iteration, total=8):
        opt = torch.optim.AdamW([torch.nn.Parameter(torch.zeros(1))], lr=1e-4)
        kwargs = {"min_lr_rate": args.actor.min_lr_ratio} if "min_lr" in args.actor.lr_scheduler else {}
        sched = get_scheduler(args.actor.lr_scheduler, opt, num_warmup_steps=0, num_training_steps=total,
                              scheduler_specific_kwargs=kwargs)
        set_lr_position(sched, iteration)
        return sched.get_last_lr()[0]

    assert lr_at(const, 7) == pytest.approx(1e-4)
    assert lr_at(default, 7) < 0.2e-4


def test_rl_center_reaches_train_ppo_s_advantage_config(tmp_path):
    """--rl-center becomes train_ppo's --gaca.center, read by the real parser into the AdvantageConfig the trainer
    builds; the default leaves the command as it was (--resume reuses older runs); a bad value is refused up front."""
    from gaca_openrlhf.trainer.ppo_trainer import advantage_config

    assert "--gaca.center" not in rl_command(cfg_of("--smoke"), state_in(tmp_path), tmp_path / "run", "gaca", 0)
    args = train_ppo_args(cfg_of("--smoke", "--rl-center", "group"), tmp_path)
    assert advantage_config(args).center == "group"
    assert advantage_config(train_ppo_args(cfg_of("--smoke"), tmp_path)).center == "none"
    with pytest.raises(SystemExit, match="--rl-center"):
        cfg_of("--rl-center", "trajectory")


def test_sft_detours_reach_the_sft_command_and_their_own_folder(tmp_path, monkeypatch):
    # off by default: the plain command's SFT is unchanged (no flag), in the folder every record cites
    cmd = sft_command(cfg_of(), tmp_path, monkeypatch)
    assert "--detours" not in cmd and cmd[cmd.index("--out") + 1].endswith("warm-alfworld-small")
    cmd = sft_command(cfg_of("--sft-detours", "1", "--sft-seed", "2"), tmp_path, monkeypatch)
    # bug caught: a warm start with recovery demonstrations cached over (and mistaken for) the plain one
    assert cmd[cmd.index("--detours") + 1] == "1"
    assert cmd[cmd.index("--out") + 1].endswith("warm-alfworld-small-sft2-det1")
    with pytest.raises(SystemExit, match="--expert search"):
        cfg_of("--sft-detours", "1", "--expert", "walkthrough", "--task-types", "1")
