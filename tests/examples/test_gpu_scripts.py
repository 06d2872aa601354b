"""The 8-GPU launch scripts, checked without launching: DRY_RUN=1 prints each command, and every printed
train_ppo / eval / report command is parsed by the real parsers (OpenRLHF's parser + validation + the project's
options for training). Values are checked against the paper / verl-agent defaults (FACTS.md)."""
from __future__ import annotations

import json
import os
import shlex
import subprocess

import pytest

from gaca_openrlhf.cli.train_ppo import parse_args

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GPU = os.path.join(ROOT, "examples", "gpu")
METHODS = ("grpo", "gigpo", "gaca")
ENVS = ("alfworld", "webshop")


def dry_run(script, **env):
    full = {**os.environ, "DRY_RUN": "1", "ALFWORLD_DATA": "/data/alfworld", **env}
    for k in ("WEBSHOP_URL", "MODEL", "SAVE_PATH", "VLLM_TP", "VLLM_ENGINES"):
        if k not in env:
            full.pop(k, None)
    res = subprocess.run(["bash", os.path.join(GPU, script)], cwd=ROOT, env=full, capture_output=True, text=True,
                         timeout=60)
    assert res.returncode == 0, res.stderr
    return [shlex.split(line) for line in res.stdout.splitlines() if line.strip()]


def module_args(cmd, module):
    assert cmd[1:3] == ["-m", module], cmd[:3]
    return cmd[3:]


@pytest.mark.parametrize("env_name", ENVS)
@pytest.mark.parametrize("method", METHODS)
def test_train_script_parses_with_paper_defaults(method, env_name):
    cmds = dry_run(f"train_{method}_{env_name}.sh", SAVE_PATH="/tmp/out_x")
    assert len(cmds) == 1
    args = parse_args(module_args(cmds[0], "gaca_openrlhf.cli.train_ppo"))
    assert args.algo.advantage.estimator == method
    assert args.actor.model_name_or_path == "Qwen/Qwen2.5-1.5B-Instruct"
    assert (args.rollout.batch_size, args.rollout.n_samples_per_prompt) == (16, 8)
    assert args.actor.adam.lr == 1e-6 and args.actor.eps_clip == 0.2 and args.actor.entropy_coef == 0.001
    assert args.algo.kl.use_loss and args.algo.kl.init_coef == 0.01 and args.algo.kl.estimator == "k3"
    assert args.gaca.gamma == 0.95 and args.gaca.invalid_penalty == 0.1 and args.env.history_k == 2
    assert args.rollout.temperature == 1.0 and args.gaca.max_iterations == 150
    assert args.rollout.max_new_tokens == 512
    assert args.actor.num_gpus_per_node == 8 and args.vllm.num_engines == 8
    assert args.ckpt.output_dir == "/tmp/out_x" and args.data.prompt_dataset == "/tmp/out_x/tasks.jsonl"
    assert args.env.name == env_name
    kwargs = json.loads(args.env.kwargs)
    if env_name == "alfworld":
        assert args.env.prompt_max_len == 2048 and args.gaca.mode == "mean_std_norm" and args.train.batch_size == 256
        assert kwargs == {"backend": "ray", "data_dir": "/data/alfworld", "num_cpus": 0.1} and args.env.max_steps == 50
    else:
        assert args.env.prompt_max_len == 4096 and args.gaca.mode == "mean_norm" and args.train.batch_size == 64
        assert kwargs == {"base_url": "http://127.0.0.1:3000"} and args.env.max_steps == 15
    assert args.data.max_len == args.env.prompt_max_len + args.rollout.max_new_tokens
    if method == "gaca":
        assert (args.gaca.lambda0, args.gaca.alpha, args.gaca.alpha_c) == (0.5, 0.5, 1.0)
    if method == "gigpo":
        assert args.gaca.omega == 1.0


def test_train_script_env_overrides_and_extra_args():
    cmds = dry_run("train_gaca_alfworld.sh", MODEL="Qwen/Qwen2.5-7B-Instruct", VLLM_TP="2",
                   WEBSHOP_URL="http://x:1")
    argv = module_args(cmds[0], "gaca_openrlhf.cli.train_ppo")
    args = parse_args(argv)
    assert args.actor.model_name_or_path == "Qwen/Qwen2.5-7B-Instruct"
    assert args.vllm.tensor_parallel_size == 2 and args.vllm.num_engines == 4
    cmds = dry_run("train_gaca_webshop.sh", WEBSHOP_URL="http://10.0.0.5:8000")
    args = parse_args(module_args(cmds[0], "gaca_openrlhf.cli.train_ppo"))
    assert json.loads(args.env.kwargs)["base_url"] == "http://10.0.0.5:8000"


def test_ablations_script():
    from gaca_openrlhf.eval.cli import build_parser as eval_parser
    from gaca_openrlhf.report.cli import build_parser as report_parser

    cmds = dry_run("ablations_alfworld.sh", ALPHA_C_VALUES="0.5 0.75", EVAL_SEEDS="0")
    trains = [parse_args(module_args(c, "gaca_openrlhf.cli.train_ppo")) for c in cmds if "gaca_openrlhf.cli.train_ppo" in c]
    got = [(a.algo.advantage.estimator, a.gaca.fixed_lambda, a.gaca.alpha, a.gaca.alpha_c) for a in trains]
    assert got == [
        ("fixed_mixture", 0.0, 0.5, 1.0), ("fixed_mixture", 0.5, 0.5, 1.0), ("fixed_mixture", 1.0, 0.5, 1.0),
        ("gaca", None, 0.25, 1.0), ("gaca", None, 0.5, 1.0), ("gaca", None, 1.0, 1.0),
        ("gaca_permuted", None, 0.5, 1.0), ("gaca", None, 0.5, 0.5), ("gaca", None, 0.5, 0.75),
    ]
    assert trains[6].gaca.permutation_seed == 0
    assert len({a.ckpt.output_dir for a in trains}) == len(trains)  # one folder per ablation
    evals = [eval_parser().parse_args(module_args(c, "gaca_openrlhf.eval")) for c in cmds if "gaca_openrlhf.eval" in c]
    assert len(evals) == len(trains) and all(e.temperature == 0.4 and e.env == "alfworld" for e in evals)
    assert [e.model for e in evals] == [a.ckpt.output_dir for a in trains]
    reports = [c for c in cmds if "gaca_openrlhf.report" in c]
    assert len(reports) == 1 and len(report_parser().parse_args(module_args(reports[0], "gaca_openrlhf.report")).run) == 9


@pytest.mark.parametrize("env_name", ENVS)
def test_run_comparison_script(env_name):
    from gaca_openrlhf.eval.cli import build_parser as eval_parser
    from gaca_openrlhf.report.cli import build_parser as report_parser

    cmds = dry_run("run_comparison.sh", ENV_NAME=env_name, OUT_ROOT="/tmp/cmp", EVAL_SEEDS="0 1")
    trains = [parse_args(module_args(c, "gaca_openrlhf.cli.train_ppo")) for c in cmds if "gaca_openrlhf.cli.train_ppo" in c]
    assert [a.algo.advantage.estimator for a in trains] == list(METHODS)
    assert [a.ckpt.output_dir for a in trains] == [f"/tmp/cmp/{m}" for m in METHODS]
    evals = [eval_parser().parse_args(module_args(c, "gaca_openrlhf.eval")) for c in cmds if "gaca_openrlhf.eval" in c]
    panels = 2 if env_name == "alfworld" else 1
    assert len(evals) == 3 * panels * 2
    assert {e.seed for e in evals} == {0, 1} and all(e.temperature == 0.4 and e.env == env_name for e in evals)
    assert all(os.path.basename(e.out).startswith("eval_") for e in evals)  # the report picks up eval*.json
    if env_name == "webshop":
        assert all(e.panel == "test" and e.num_tasks == 500 for e in evals)
    else:
        assert {os.path.basename(e.panel) for e in evals} == {"eval_id.json", "eval_ood.json"}
    report = report_parser().parse_args(module_args(
        next(c for c in cmds if "gaca_openrlhf.report" in c), "gaca_openrlhf.report"))
    assert report.run == [f"{m}=/tmp/cmp/{m}" for m in METHODS]


@pytest.mark.parametrize("micro", [4, 16])
def test_webshop_training_micro_batch_fits_the_mini_batch_on_8_gpus(micro):
    """MICRO_BATCH >= 16 on 8 ranks used to give DeepSpeed 64 / (16 x 8) = 0 accumulation steps (start-up error)."""
    args = parse_args(module_args(dry_run("train_gaca_webshop.sh", MICRO_BATCH=str(micro))[0],
                                  "gaca_openrlhf.cli.train_ppo"))
    assert args.gaca.mini_batch_steps == 64 and args.train.batch_size == 64
    assert 64 % (args.train.micro_batch_size * 8) == 0
    assert args.train.micro_batch_size == min(micro, 8)
    assert args.rollout.micro_batch_size == micro  # log-prob passes keep the requested micro batch


def test_rehearsal_dry_run_takes_the_gpu_launch_path_with_small_overridable_sizes():
    cmds = dry_run("train_gaca_alfworld.sh", REHEARSAL="1", N_GPUS="2", SAVE_PATH="/tmp/reh", ALFWORLD_DATA="")
    args = parse_args(module_args(cmds[0], "gaca_openrlhf.cli.train_ppo"))
    assert args.gaca.backend == "rehearsal"
    # the node's launch features stay on
    assert args.train.colocate_all and args.vllm.enable_sleep and args.ds.enable_sleep and args.ds.zero_stage == 3
    assert args.algo.kl.use_loss and args.algo.kl.init_coef == 0.01 and args.actor.entropy_coef == 0.001
    assert args.actor.num_gpus_per_node == 2 and args.ref.num_gpus_per_node == 2 and args.vllm.num_engines == 2
    assert args.actor.gradient_checkpointing_enable
    # sizes for 2 cores
    assert (args.rollout.batch_size, args.rollout.n_samples_per_prompt, args.gaca.max_iterations) == (2, 2, 2)
    assert args.env.max_steps == 3 and args.rollout.max_new_tokens == 32 and args.gaca.mini_batch_steps == 4
    assert args.vllm.gpu_memory_utilization == 0.1 and args.vllm.enforce_eager
    assert json.loads(args.env.kwargs)["data_dir"].endswith("alfworld_rehearsal_games")
    # each size stays overridable by the variables the scripts read
    cmds = dry_run("train_gaca_alfworld.sh", REHEARSAL="1", N_GPUS="2", TASKS_PER_ITER="3", MAX_STEPS="7",
                   ALFWORLD_DATA="/data/games")
    args = parse_args(module_args(cmds[0], "gaca_openrlhf.cli.train_ppo"))
    assert args.rollout.batch_size == 3 and args.env.max_steps == 7
    assert json.loads(args.env.kwargs)["data_dir"] == "/data/games"
    # WebShop: the generated catalog is opted into explicitly
    out = subprocess.run(["bash", "-c", f"source {GPU}/_common.sh; echo $GACA_BACKEND"], cwd=ROOT,
                         env={**os.environ, "REHEARSAL": "1", "DRY_RUN": "1"}, capture_output=True, text=True)
    assert out.stdout.strip() == "rehearsal"
    args = parse_args(module_args(dry_run("train_gaca_webshop.sh", REHEARSAL="1")[0], "gaca_openrlhf.cli.train_ppo"))
    assert args.gaca.backend == "rehearsal" and args.env.max_steps == 3


def test_without_rehearsal_nothing_changes():
    args = parse_args(module_args(dry_run("train_gaca_alfworld.sh")[0], "gaca_openrlhf.cli.train_ppo"))
    assert args.gaca.backend == "auto" and not args.vllm.enforce_eager and args.vllm.gpu_memory_utilization == 0.6


def test_smoke_script_dry_run():
    cmds = dry_run("smoke.sh", SAVE_PATH="/tmp/smoke_x")
    args = parse_args(module_args(cmds[0], "gaca_openrlhf.cli.train_ppo"))
    assert args.actor.model_name_or_path == "Qwen/Qwen2.5-0.5B-Instruct" and args.gaca.max_iterations == 2
    assert args.train.colocate_all and args.ds.zero_stage == 3 and args.algo.kl.use_loss
    assert args.rollout.batch_size == 8 and args.env.max_steps == 5 and args.ckpt.save_steps == 1
    assert args.gaca.mini_batch_steps == args.train.micro_batch_size * 8


def test_readme_marks_scripts_untested_on_gpu():
    text = open(os.path.join(GPU, "README.md")).read()
    assert "not been run on GPUs" in text
