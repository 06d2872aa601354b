"""``--resume``: which finished RL runs and evaluations an interrupted quickstart/compare may reuse.

The files are laid out as the real phases write them (run folder: command.txt, the saved model, metrics.jsonl;
evaluation: seed<S>.json with the eval CLI's ``config``); each test breaks one condition a stale result would show.
"""
import json
import os
import shlex

from gaca_openrlhf.bench.quickstart.cli import build_parser, config_from_args, run_order
from gaca_openrlhf.bench.quickstart.phases import rl_command
from gaca_openrlhf.bench.quickstart.resume import panel_digests, reusable_eval, reusable_run
from gaca_openrlhf.bench.quickstart.state import WALL_TIME_FILE, State


def cfg_of(*argv):
    return config_from_args(build_parser().parse_args(list(argv)))


def _age(path, seconds):
    """Set ``path``'s mtime ``seconds`` into the past (the rules compare a result's time with its model's)."""
    t = os.stat(path).st_mtime - seconds
    os.utime(path, (t, t))


def finished_run(tmp_path, cfg, method="gaca", seed=0, iterations=None):
    warm = tmp_path / "warm"
    warm.mkdir(parents=True, exist_ok=True)
    (warm / "config.json").write_text("{}")
    _age(warm / "config.json", 100)
    st = State(data=str(tmp_path / "games"), train_tasks=str(tmp_path / "tasks.jsonl"), warm=str(warm))
    run_dir = tmp_path / "runs" / f"{method}_seed{seed}"
    run_dir.mkdir(parents=True)
    cmd = rl_command(cfg, st, run_dir, method, seed)
    (run_dir / "command.txt").write_text(shlex.join(cmd) + "\n")
    (run_dir / "model.safetensors").write_bytes(b"\0" * 8)
    n = cfg.rl_iterations if iterations is None else iterations
    (run_dir / "metrics.jsonl").write_text("".join(json.dumps({"iteration": i + 1}) + "\n" for i in range(n)))
    (run_dir / "config.json").write_text("{}")
    return st, run_dir, cmd


def test_a_finished_run_of_the_same_command_is_reused(tmp_path):
    cfg = cfg_of("--compare")
    st, run_dir, cmd = finished_run(tmp_path, cfg)
    assert reusable_run(cfg, run_dir, cmd, st.warm)
    # another seed, method or size is another command
    assert not reusable_run(cfg, run_dir, rl_command(cfg, st, run_dir, "gaca", 1), st.warm)
    assert not reusable_run(cfg, run_dir, rl_command(cfg, st, run_dir, "grpo", 0), st.warm)
    longer = cfg_of("--compare", "--rl-iterations", "9")
    assert not reusable_run(longer, run_dir, rl_command(longer, st, run_dir, "gaca", 0), st.warm)
    # the same command from another path to the interpreter (a clone linking this venv) is the same run
    assert reusable_run(cfg, run_dir, ["/elsewhere/.venv/bin/python", *cmd[1:]], st.warm)
    assert not reusable_run(cfg, run_dir, ["/elsewhere/.venv/bin/python", *cmd[1:-1]], st.warm)


def _old_spelling(cmd, values):
    """``cmd`` as recorded before the trainer options moved to ``--run.*``: ``--gaca.<option>``, with ``values``
    (option -> value) changed."""
    from gaca_openrlhf.trainer.run_options import deprecated_flags

    out = list(cmd)
    for i, arg in enumerate(cmd):
        if arg.startswith("--run.") and f"--gaca.{arg.removeprefix('--run.')}" in deprecated_flags():
            name = arg.removeprefix("--run.")
            out[i] = f"--gaca.{name}"
            out[i + 1] = values.get(name, out[i + 1])
    return out


def test_a_run_recorded_with_the_deprecated_option_names_is_reused(tmp_path):
    """Catches: --resume comparing the spelling, not the options: every run folder recorded with --gaca.<trainer
    option> (all compares before the move to --run.*) trained again; or a real difference hidden by the renaming."""
    cfg = cfg_of("--compare")
    st, run_dir, cmd = finished_run(tmp_path, cfg)
    cmd = cmd + ["--run.backend", "cpu"]
    # the compare's update size, as in a recorded command
    assert cmd[cmd.index("--run.mini_batch_steps") + 1] == str(cfg.rl_mini_batch_steps) != "64"
    old = _old_spelling(cmd, {})
    assert "--gaca.mini_batch_steps" in old and "--gaca.backend" in old and "--run.max_iterations" not in old
    (run_dir / "command.txt").write_text(shlex.join(old) + "\n")
    assert reusable_run(cfg, run_dir, cmd, st.warm)
    for changed in ({"mini_batch_steps": "64"}, {"backend": "gpu"}, {"max_iterations": "9"}):
        (run_dir / "command.txt").write_text(shlex.join(_old_spelling(cmd, changed)) + "\n")
        assert not reusable_run(cfg, run_dir, cmd, st.warm), changed
    # only the moved options have an old name: --gaca.<anything else> stays another option
    (run_dir / "command.txt").write_text(shlex.join(cmd[:-2] + ["--gaca.alpha", "cpu"]) + "\n")
    assert not reusable_run(cfg, run_dir, cmd[:-2] + ["--run.alpha", "cpu"], st.warm)


def test_a_run_recorded_without_the_progress_lines_flag_is_reused(tmp_path):
    """--run.progress_lines changes what train_ppo prints, not what it trains: a run recorded before the quickstart
    passed it is reused; any other difference still is not. Catches: every earlier run trained again, or the flag's
    value taken for an option of its own."""
    cfg = cfg_of("--compare")
    st, run_dir, cmd = finished_run(tmp_path, cfg)
    i = cmd.index("--run.progress_lines")
    assert cmd[i + 1] == "true"
    (run_dir / "command.txt").write_text(shlex.join(cmd[:i] + cmd[i + 2:]) + "\n")
    assert reusable_run(cfg, run_dir, cmd, st.warm)
    other = cmd[:i] + cmd[i + 2:]
    other[other.index("--run.max_iterations") + 1] = "9"
    (run_dir / "command.txt").write_text(shlex.join(other) + "\n")
    assert not reusable_run(cfg, run_dir, cmd, st.warm)


def test_an_unfinished_or_stale_run_is_not_reused(tmp_path):
    cfg = cfg_of("--compare")
    st, run_dir, cmd = finished_run(tmp_path, cfg, iterations=cfg.rl_iterations - 1)
    assert not reusable_run(cfg, run_dir, cmd, st.warm)  # stopped before its last iteration

    st, run_dir, cmd = finished_run(tmp_path / "b", cfg)
    (run_dir / "model.safetensors").unlink()
    assert not reusable_run(cfg, run_dir, cmd, st.warm)  # killed while saving

    st, run_dir, cmd = finished_run(tmp_path / "c", cfg)
    _age(run_dir / "config.json", 200)  # the warm start was trained again after this run
    assert not reusable_run(cfg, run_dir, cmd, st.warm)

    st, run_dir, cmd = finished_run(tmp_path / "d", cfg)
    (run_dir / "config.json").unlink()
    assert not reusable_run(cfg, run_dir, cmd, st.warm)


def write_eval(out_dir, cfg, model, seeds, **changed):
    out_dir.mkdir(parents=True, exist_ok=True)
    for seed in seeds:
        conf = {"model": model, "env": cfg.env, "seed": seed, "temperature": cfg.eval_temperature,
                "max_steps": cfg.max_steps, "max_tokens": cfg.max_new_tokens, "num_tasks": cfg.heldout_games,
                "episodes_per_task": 1, **changed}
        (out_dir / f"seed{seed}.json").write_text(json.dumps({"success_rate": 0.5, "config": conf}))


def test_an_evaluation_is_reused_only_for_the_same_model_seeds_and_settings(tmp_path):
    cfg = cfg_of()
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    _age(model / "config.json", 100)
    write_eval(tmp_path / "ok", cfg, str(model), (0, 1, 2))
    assert reusable_eval(cfg, tmp_path / "ok", str(model), (0, 1, 2))
    assert not reusable_eval(cfg, tmp_path / "ok", str(model), (0, 1, 2, 3))  # a seed not evaluated yet
    assert not reusable_eval(cfg, tmp_path / "ok", str(tmp_path / "other"), (0, 1, 2))
    assert not reusable_eval(cfg_of("--eval-temperature", "1.0"), tmp_path / "ok", str(model), (0, 1, 2))
    assert not reusable_eval(cfg_of("--heldout-games", "16"), tmp_path / "ok", str(model), (0, 1, 2))
    write_eval(tmp_path / "steps", cfg, str(model), (0, 1, 2), max_steps=cfg.max_steps + 1)
    assert not reusable_eval(cfg, tmp_path / "steps", str(model), (0, 1, 2))
    (tmp_path / "ok" / "seed1.json").write_text("{trunc")
    assert not reusable_eval(cfg, tmp_path / "ok", str(model), (0, 1, 2))  # a file cut off mid-write


def test_an_evaluation_older_than_its_model_is_not_reused(tmp_path):
    cfg = cfg_of()
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    write_eval(tmp_path / "ev", cfg, str(model), (0,))
    _age(tmp_path / "ev" / "seed0.json", 100)  # the model was trained again after this evaluation
    assert not reusable_eval(cfg, tmp_path / "ev", str(model), (0,))


def test_resume_is_opt_in():
    assert build_parser().parse_args(["--resume"]).resume and not build_parser().parse_args([]).resume


def test_compare_runs_go_seed_by_seed():
    cfg = cfg_of("--compare", "--rl-seeds", "0,1")
    assert run_order(cfg) == [("grpo", 0), ("gigpo", 0), ("gaca", 0), ("grpo", 1), ("gigpo", 1), ("gaca", 1)]
    assert run_order(cfg_of()) == [("gaca", 0)]


def test_a_reused_phase_keeps_the_time_it_took_when_it_ran(tmp_path):
    from gaca_openrlhf.bench.report import _provenance_md

    st = State(resume=True)
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / WALL_TIME_FILE).write_text("546.2\n")
    (tmp_path / "b").mkdir()  # a run from before the time was recorded
    st.note_reused("rl-grpo_seed0", tmp_path / "a")
    st.note_reused("eval-grpo_seed0", tmp_path / "b")
    assert st.reused == ["rl-grpo_seed0", "eval-grpo_seed0"] and st.reused_wall_s == {"rl-grpo_seed0": 546.2}
    md = _provenance_md({"reused": st.reused, "reused_wall_s": st.reused_wall_s}, {})
    assert "rl-grpo_seed0 (546 s), eval-grpo_seed0" in md


def test_an_evaluation_of_a_regenerated_panel_is_not_reused(tmp_path):
    """Bug caught: the test panel file was regenerated with other games under the same path, and --resume reused
    the evaluations of the old games."""
    cfg = cfg_of()
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    _age(model / "config.json", 100)
    write_eval(tmp_path / "ev", cfg, str(model), (0,), tasks_sha1="aaaa")
    assert reusable_eval(cfg, tmp_path / "ev", str(model), (0,))  # without digests: the path alone
    assert reusable_eval(cfg, tmp_path / "ev", str(model), (0,), digests={"": "aaaa"})
    assert not reusable_eval(cfg, tmp_path / "ev", str(model), (0,), digests={"": "bbbb"})


def test_panel_digests_follow_the_games_not_the_path(tmp_path):
    cfg, st = cfg_of(), State(data=str(tmp_path))
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
    panel = tmp_path / "panel.json"
    panel.write_text(json.dumps({"name": "p", "games": [str(tmp_path / "a")]}))
    first = panel_digests(cfg, st, {"": str(panel)})
    panel.write_text(json.dumps({"name": "p", "games": [str(tmp_path / "b")]}))
    assert panel_digests(cfg, st, {"": str(panel)}) != first
    ws = cfg_of("--env", "webshop")
    assert panel_digests(ws, st, {"": "test"}) != panel_digests(ws, st, {"": "eval"})


def test_resume_reuses_an_evaluation_only_when_every_panel_is_there(tmp_path):
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
