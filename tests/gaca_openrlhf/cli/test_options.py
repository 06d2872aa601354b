"""``cli/options.py`` and train_ppo's three generated namespaces: ``--gaca.*`` (estimator), ``--run.*`` (trainer),
``--env.*`` (rollout), each from one config dataclass with the same names end to end (``--env.name``,
``--env.kwargs``, ``--env.timeout_s``: RolloutConfig's ``name``, ``kwargs``, ``timeout_s``), and the trainer options'
old names (``--gaca.<trainer option>``, and ``args.gaca.<trainer option>`` on the parsed args) still working with a
deprecation warning. Each test names the one-line bug it catches."""
from __future__ import annotations

import argparse
import dataclasses
import json
import pickle
import typing
import warnings

import pytest

from gaca_openrlhf.advantages import AdvantageConfig
from gaca_openrlhf.cli.options import AliasedNamespace, add_dataclass_options, add_deprecated_flag, with_new_names
from gaca_openrlhf.cli.train_ppo import parse_args
from gaca_openrlhf.rollout.config import RolloutConfig
from gaca_openrlhf.trainer.run_options import RunOptions, deprecated_flags, run_option_names

BASE = ["--actor.model_name_or_path", "m", "--actor.num_gpus_per_node", "1", "--vllm.num_engines", "1",
        "--rollout.batch_size", "4", "--rollout.n_samples_per_prompt", "2", "--algo.kl.init_coef", "0",
        "--algo.advantage.estimator", "gaca", "--train.batch_size", "4"]


def _parse(*extra):
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)  # no deprecated option in these argument lists
        return parse_args(BASE + list(extra))


def _options(namespace: str) -> set:
    from gaca_openrlhf.cli.openrlhf_parser import build_parser
    from gaca_openrlhf.cli.train_ppo import add_project_args

    parser = build_parser()
    add_project_args(parser)
    return {a.dest.split(".", 1)[1] for a in parser._actions
            if a.dest.startswith(namespace + ".") and a.help != argparse.SUPPRESS}


# ---------------------------------------------------------------------------------------- the three namespaces


def test_each_namespace_is_its_config_fields():
    """Catches: a field without its option, an option without its field, or trainer options left in --gaca.*."""
    rollout = {f.name for f in dataclasses.fields(RolloutConfig) if "from" not in f.metadata}
    assert _options("env") == rollout
    assert _options("run") == set(run_option_names()) == {f.name for f in dataclasses.fields(RunOptions)}
    assert _options("gaca") == {f.name for f in dataclasses.fields(AdvantageConfig)} - {"estimator"}
    assert not _options("gaca") & _options("run")


def test_every_rollout_field_has_an_option_or_names_its_source():
    """Catches: a RolloutConfig field added without a --env.* option and without naming the option that sets it."""
    args = _parse()
    for f in dataclasses.fields(RolloutConfig):
        if "from" in f.metadata:
            assert f.metadata["from"] in ("--rollout.max_new_tokens", "--train.seed"), f.name
        else:
            assert hasattr(args.env, f.name) and f.metadata.get("help"), f.name


def test_env_options_parse_into_the_rollout_config_with_their_types():
    """Catches: an --env.* value not reaching its field (or reaching another), a type lost on the way (int/float
    parsed as text, the JSON kwargs not parsed, the stop list flattened), or the derived fields not derived."""
    args = _parse("--env.name", "toy", "--env.kwargs", '{"length": 6}', "--env.history_k", "5",
                  "--env.max_steps", "7", "--env.prompt_max_len", "300", "--env.stop", "</a>", "</b>",
                  "--env.timeout_s", "9.5", "--env.invalid_action", "noop", "--env.validity", "admissible",
                  "--env.kill_worker_at_step", "3", "--env.kill_worker_episodes", "2", "--env.max_failed_frac",
                  "0.25", "--env.max_failed_iters", "4", "--rollout.max_new_tokens", "40", "--train.seed", "11")
    cfg = RolloutConfig.from_args(args)
    assert cfg == RolloutConfig(name="toy", kwargs={"length": 6}, history_k=5, max_steps=7, prompt_max_len=300,
                                max_new_tokens=40, stop=["</a>", "</b>"], timeout_s=9.5, invalid_action="noop",
                                validity="admissible", kill_worker_at_step=3, kill_worker_episodes=2, seed=11,
                                max_failed_frac=0.25, max_failed_iters=4)
    hints = typing.get_type_hints(RolloutConfig)
    for f in dataclasses.fields(RolloutConfig):
        want = typing.get_origin(hints[f.name]) or hints[f.name]
        assert isinstance(getattr(cfg, f.name), want), f.name


def test_env_defaults_are_the_rollout_config_defaults():
    """Catches: a CLI default that disagrees with RolloutConfig's (the environment above all), or the prompt limit
    and response budget not derived when unset."""
    cfg = RolloutConfig.from_args(_parse("--data.max_len", "1000", "--train.seed", "0"))
    assert cfg == RolloutConfig(prompt_max_len=1000 - 256)  # every other field: the dataclass default
    assert _parse().env.name == RolloutConfig().name
    assert RolloutConfig.from_args(_parse("--data.max_len", "50", "--rollout.max_new_tokens", "60")).prompt_max_len == 1


def test_choices_are_checked_by_the_parser():
    """Catches: the choices of --env.invalid_action, --env.validity or --run.backend not passed to argparse."""
    for bad in (["--env.invalid_action", "skip"], ["--env.validity", "listed"], ["--run.backend", "tpu"]):
        with pytest.raises(SystemExit):
            _parse(*bad)


def test_run_options_reach_args_run():
    """Catches: a --run.* value or default not at args.run.<field>, or a type lost."""
    args = _parse("--run.mini_batch_steps", "8", "--run.max_iterations", "3", "--run.metrics_dir", "/m",
                  "--run.max_logprob_gap", "0.5", "--run.dump_dir", "/d", "--run.logprob_chunk_size", "16",
                  "--run.gap_probe_samples", "2", "--run.backend", "cpu", "--run.stall_timeout_s", "90",
                  "--run.progress_lines", "true")
    assert vars(args.run) == {"backend": "cpu", "mini_batch_steps": 8, "updates_per_iteration": 0,
                              "max_iterations": 3, "metrics_dir": "/m", "gap_probe_samples": 2,
                              "max_logprob_gap": 0.5, "stall_timeout_s": 90.0, "progress_lines": True,
                              "dump_dir": "/d", "logprob_chunk_size": 16}
    assert vars(_parse().run) == dataclasses.asdict(RunOptions())


def test_estimator_options_default_to_none():
    """Catches: --gaca.* defaults copied from AdvantageConfig (two places to keep equal) instead of None."""
    args = _parse("--gaca.alpha", "0.25")
    assert args.gaca.alpha == 0.25 and all(v is None for k, v in vars(args.gaca).items() if k != "alpha")


# ---------------------------------------------------------------------------------------------- deprecated names

OLD_RUN = {"backend": "cpu", "mini_batch_steps": "4", "updates_per_iteration": "0", "max_iterations": "3",
           "metrics_dir": "/m", "gap_probe_samples": "2", "max_logprob_gap": "0.5", "dump_dir": "/d",
           "logprob_chunk_size": "16"}


def test_the_deprecation_table_covers_every_moved_option_and_only_those():
    """Catches: a moved trainer option with no old name kept, an alias pointing at no option, or an old name that
    is a real option too."""
    assert deprecated_flags() == {f"--gaca.{name}": f"--run.{name}" for name in OLD_RUN}
    assert set(OLD_RUN) | {"stall_timeout_s", "progress_lines"} == set(run_option_names())  # added after the move
    assert {new.removeprefix("--run.") for new in deprecated_flags().values()} <= _options("run")
    assert not {old.removeprefix("--gaca.") for old in deprecated_flags()} & _options("gaca")


def test_env_name_kwargs_timeout_are_the_real_options():
    """Catches: the established --env.name/kwargs/timeout_s warning as deprecated (or missing), or the
    RolloutConfig-field spellings --env.env* accepted again."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        args = parse_args(BASE + ["--env.name", "toy", "--env.kwargs", '{"length": 6}', "--env.timeout_s", "9.5"])
        assert (args.env.name, args.env.kwargs, args.env.timeout_s) == ("toy", '{"length": 6}', 9.5)
    assert not [w for w in caught if "is deprecated: use" in str(w.message)]  # neither the options nor the attributes
    for gone in ("--env.env", "--env.env_kwargs", "--env.env_timeout_s"):
        with pytest.raises(SystemExit):
            parse_args(BASE + [gone, "toy"])


@pytest.mark.parametrize("old, value", sorted(OLD_RUN.items()))
def test_old_gaca_trainer_option_sets_the_run_option(old, value):
    """Catches: an old --gaca.<trainer option> dropped, setting something else, or silent."""
    with pytest.warns(FutureWarning, match=rf"^--gaca\.{old} is deprecated: use --run\.{old}$"):
        args = parse_args(BASE + [f"--gaca.{old}", value])
    assert args.run == _parse(f"--run.{old}", value).run
    assert old not in vars(args.gaca)  # the estimator namespace holds estimator fields only


def test_old_attribute_names_read_and_write_the_new_homes():
    """Catches: code still reading args.gaca.<trainer option> (users' code) getting nothing or a stale copy, a write
    through an old name lost, or no DeprecationWarning."""
    args = _parse("--run.max_iterations", "3")
    with pytest.warns(DeprecationWarning, match=r"^args\.gaca\.max_iterations is deprecated: use "
                                                 r"args\.run\.max_iterations \(--run\.max_iterations\)$"):
        assert args.gaca.max_iterations == 3
    with pytest.warns(DeprecationWarning):
        args.gaca.backend = "gpu"
    assert args.run.backend == "gpu"
    assert "backend" not in vars(args.gaca)
    with pytest.raises(AttributeError):
        args.gaca.no_such_option  # noqa: B018
    args.gaca.alpha = 0.5  # an option of its own is set as usual
    assert vars(args.gaca)["alpha"] == 0.5


def test_aliases_survive_pickling():
    """Catches: the aliases lost when Ray ships the args to its actors (SimpleNamespace pickles __dict__ only)."""
    args = pickle.loads(pickle.dumps(_parse("--run.dump_dir", "/d", "--env.name", "toy")))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        assert args.gaca.dump_dir == "/d" and args.env.name == "toy"
        args.gaca.dump_dir = "/e"
    assert args.run.dump_dir == "/e"  # still the same namespace as args.run after the round trip
    assert isinstance(args.gaca, AliasedNamespace) and args.run_shape.step_estimator


# ------------------------------------------------------------------------------------------------ the helpers


@dataclasses.dataclass
class _Cfg:
    count: int = 2
    ratio: float = 0.5
    name: str = "x"
    names: list = dataclasses.field(default_factory=lambda: ["a"])
    kwargs: dict = dataclasses.field(default_factory=dict, metadata={"cli_default": None})
    mode: str = dataclasses.field(default="p", metadata={"choices": ("p", "q"), "help": "a mode"})
    seed: int = dataclasses.field(default=0, metadata={"from": "--other.seed"})


def test_add_dataclass_options_types_defaults_and_skips():
    """Catches: int/float not parsed as numbers, a list not taking several values, the metadata's default override,
    choices or help ignored, a ``from`` field given an option, or ``skip`` ignored."""
    parser = argparse.ArgumentParser()
    added = add_dataclass_options(parser, _Cfg, "c", "test", skip=("ratio",))
    assert added == ["count", "name", "names", "kwargs", "mode"]
    got = parser.parse_args(["--c.count", "3", "--c.names", "u", "v", "--c.kwargs", json.dumps({"k": 1})])
    assert vars(got) == {"c.count": 3, "c.name": "x", "c.names": ["u", "v"], "c.kwargs": '{"k": 1}', "c.mode": "p"}
    assert vars(parser.parse_args([]))["c.kwargs"] is None
    with pytest.raises(SystemExit):
        parser.parse_args(["--c.mode", "r"])
    none = argparse.ArgumentParser()
    add_dataclass_options(none, _Cfg, "c", "test", with_defaults=False)
    assert all(v is None for v in vars(none.parse_args([])).values())


def test_add_deprecated_flag_copies_the_new_options_parsing():
    """Catches: the old flag not converting like the new one (type, several values, choices), overriding the
    default when absent, or showing in --help."""
    parser = argparse.ArgumentParser()
    add_dataclass_options(parser, _Cfg, "c", "test")
    add_deprecated_flag(parser, "--old.count", "--c.count")
    add_deprecated_flag(parser, "--old.names", "--c.names")
    add_deprecated_flag(parser, "--old.mode", "--c.mode")
    with pytest.warns(FutureWarning, match="--old.count is deprecated: use --c.count"):
        got = vars(parser.parse_args(["--old.count", "7", "--old.names", "p", "q"]))
    assert got["c.count"] == 7 and got["c.names"] == ["p", "q"]
    assert vars(parser.parse_args([]))["c.count"] == 2
    with pytest.raises(SystemExit):
        parser.parse_args(["--old.mode", "r"])
    assert "--old.count" not in parser.format_help()


def test_with_new_names_rewrites_deprecated_spellings_only():
    """Catches: an old name left (two spellings of one command differing), the ``--old=value`` form missed, a value
    or another option rewritten, or non-text arguments (paths, numbers) rejected."""
    table = {"--old.a": "--new.a", "--old.b": "--new.b"}
    argv = ["python", "--old.a", "1", "--old.b=x", "--old.ab", "2", "--keep", "--old.a", 3]
    assert with_new_names(argv, table) == ["python", "--new.a", "1", "--new.b=x", "--old.ab", "2", "--keep",
                                           "--new.a", "3"]
    assert with_new_names(["--gaca.backend", "cpu", "--gaca.alpha", "0.5"], deprecated_flags()) == \
        ["--run.backend", "cpu", "--gaca.alpha", "0.5"]
