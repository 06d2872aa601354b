"""The 8-GPU launch scripts, checked without launching: DRY_RUN=1 prints each command, and every printed
train_ppo / eval / report command is parsed by the real parsers (OpenRLHF's parser + validation + the project's
options for training). Values are checked against the paper / verl-agent defaults (FACTS.md)."""
from __future__ import annotations

import json
import os
import re
import shlex
import subprocess

import pytest

from gaca_openrlhf.cli.train_ppo import parse_args
from script_fakes import write_fake_python  # same folder (rootdir import mode)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GPU = os.path.join(ROOT, "examples", "gpu")
METHODS = ("grpo", "gigpo", "gaca")
ENVS = ("alfworld", "webshop")


#: variables the scripts read: taken from the caller's shell only when a test passes them
SCRIPT_VARS = ("WEBSHOP_URL", "MODEL", "SAVE_PATH", "VLLM_TP", "VLLM_ENGINES", "N_GPUS", "ITERATIONS", "TASKS_PER_ITER",
               "ROLLOUTS", "MICRO_BATCH", "MINI_BATCH_STEPS", "MAX_LOGPROB_GAP", "SEED", "SEEDS", "TASKS", "OUT_ROOT",
               "REHEARSAL", "GACA_BACKEND", "GACA_CALLER_PWD", "SMOKE_GAMES", "REQUIRE_ALL_ITERATIONS",
               "GPU_PREFLIGHT", "PYTHON", "LR", "MAX_STEPS", "SAVE_STEPS", "RESUME", "NUM_NODES", "GPUS_PER_NODE",
               "WEBSHOP_HOST", "WEBSHOP_ADVERTISE_HOST", "WEBSHOP_PORT", "RAY_ADDRESS", "MAX_FAILED_FRAC",
               "CKPT_MAX_NUM", "DISK_NEEDED_GB", "ENV_WORKER_CPUS", "WEBSHOP_DATA", "WEBSHOP_GENERATED",
               "SMOKE_RESUME", "SMOKE_WEBSHOP", "EVAL_CKPTS", "KEEP_DS_CKPT", "KEEP_HF_CKPTS", "EVAL_GPUS", "EVAL_TP",
               "CUDA_VISIBLE_DEVICES", "EVAL_SEEDS", "METHODS", "ABLATIONS", "HF_KEEP_POLL_S",
               "PACKING", "TOKEN_BUDGET", "LOGPROB_CHUNK", "ZERO_STAGE", "VAL_GAMES", "VAL_EVERY", "VAL_TASKS")


def script_env(env):
    full = {**os.environ, "DRY_RUN": "1", "ALFWORLD_DATA": "/data/alfworld", **env}
    for k in SCRIPT_VARS:
        if k not in env:
            full.pop(k, None)
    return full


def run_script(script, cwd=ROOT, **env):
    return subprocess.run(["bash", os.path.join(GPU, script)], cwd=cwd, env=script_env(env), capture_output=True,
                          text=True, timeout=120)


def split_env(cmd):
    """(leading VAR=value assignments as a dict, the command after them)."""
    env = {}
    while cmd and "=" in cmd[0] and cmd[0].split("=", 1)[0].isidentifier():
        k, v = cmd[0].split("=", 1)
        env[k], cmd = v, cmd[1:]
    return env, cmd


def dry_run_env(script, cwd=ROOT, **env):
    """The printed commands of a DRY_RUN, each as (its VAR=value prefix, the command)."""
    res = run_script(script, cwd=cwd, **env)
    assert res.returncode == 0, res.stderr
    return [split_env(shlex.split(line)) for line in res.stdout.splitlines() if line.strip()]


def dry_run(script, cwd=ROOT, **env):
    return [cmd for _, cmd in dry_run_env(script, cwd=cwd, **env)]


def train_cmds(cmds):
    return [parse_args(module_args(c, "gaca_openrlhf.cli.train_ppo")) for c in cmds
            if c[1:3] == ["-m", "gaca_openrlhf.cli.train_ppo"]]


def option(cmd, name):
    return cmd[cmd.index(name) + 1]


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
    assert args.rollout.temperature == 1.0 and args.run.max_iterations == 150
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
    # one training run per method and training seed (SEEDS, default 0 1 2), each in its own folder with its seed
    runs = [f"{m}_seed{s}" for m in METHODS for s in (0, 1, 2)]
    assert [(a.algo.advantage.estimator, a.train.seed) for a in trains] == [(m, s) for m in METHODS for s in (0, 1, 2)]
    assert [a.ckpt.output_dir for a in trains] == [f"/tmp/cmp/{r}" for r in runs]
    assert [a.data.prompt_dataset for a in trains] == [f"/tmp/cmp/{r}/tasks.jsonl" for r in runs]
    evals = [eval_parser().parse_args(module_args(c, "gaca_openrlhf.eval")) for c in cmds if "gaca_openrlhf.eval" in c]
    panels = 2 if env_name == "alfworld" else 1
    assert len(evals) == 3 * 3 * panels * 2
    assert sorted({e.model for e in evals}) == sorted(f"/tmp/cmp/{r}" for r in runs)
    assert all(os.path.dirname(e.out) == e.model for e in evals)  # each run's evals in its own folder
    assert {e.seed for e in evals} == {0, 1} and all(e.temperature == 0.4 and e.env == env_name for e in evals)
    assert all(os.path.basename(e.out).startswith("eval_") for e in evals)  # the report picks up eval*.json
    if env_name == "webshop":
        assert all(e.panel == "test" and e.num_tasks == 500 for e in evals)
    else:
        assert {os.path.basename(e.panel) for e in evals} == {"eval_id.json", "eval_ood.json"}
    report = report_parser().parse_args(module_args(
        next(c for c in cmds if "gaca_openrlhf.report" in c), "gaca_openrlhf.report"))
    assert report.run == [f"{r}=/tmp/cmp/{r}" for r in runs]


def test_run_comparison_training_seeds_are_configurable():
    cmds = dry_run("run_comparison.sh", OUT_ROOT="/tmp/cmp", SEEDS="7 8", METHODS="gaca", EVAL_SEEDS="0", SEED="42")
    trains = train_cmds(cmds)
    assert [(a.train.seed, a.ckpt.output_dir) for a in trains] == [(7, "/tmp/cmp/gaca_seed7"),
                                                                    (8, "/tmp/cmp/gaca_seed8")]


@pytest.mark.parametrize("micro", [4, 16])
def test_webshop_training_micro_batch_fits_the_mini_batch_on_8_gpus(micro):
    """MICRO_BATCH >= 16 on 8 ranks used to give DeepSpeed 64 / (16 x 8) = 0 accumulation steps (start-up error)."""
    args = parse_args(module_args(dry_run("train_gaca_webshop.sh", MICRO_BATCH=str(micro))[0],
                                  "gaca_openrlhf.cli.train_ppo"))
    assert args.run.mini_batch_steps == 64 and args.train.batch_size == 64
    assert 64 % (args.train.micro_batch_size * 8) == 0
    assert args.train.micro_batch_size == min(micro, 8)
    assert args.rollout.micro_batch_size == micro  # log-prob passes keep the requested micro batch


def test_rehearsal_dry_run_takes_the_gpu_launch_path_with_small_overridable_sizes():
    cmds = dry_run("train_gaca_alfworld.sh", REHEARSAL="1", N_GPUS="2", SAVE_PATH="/tmp/reh", ALFWORLD_DATA="")
    args = parse_args(module_args(cmds[0], "gaca_openrlhf.cli.train_ppo"))
    assert args.run.backend == "rehearsal"
    # the node's launch features stay on
    assert args.train.colocate_all and args.vllm.enable_sleep and args.ds.enable_sleep and args.ds.zero_stage == 3
    assert args.algo.kl.use_loss and args.algo.kl.init_coef == 0.01 and args.actor.entropy_coef == 0.001
    assert args.actor.num_gpus_per_node == 2 and args.ref.num_gpus_per_node == 2 and args.vllm.num_engines == 2
    assert args.actor.gradient_checkpointing_enable
    # sizes for 2 cores
    assert (args.rollout.batch_size, args.rollout.n_samples_per_prompt, args.run.max_iterations) == (2, 2, 2)
    assert args.env.max_steps == 3 and args.rollout.max_new_tokens == 32 and args.run.mini_batch_steps == 4
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
    assert args.run.backend == "rehearsal" and args.env.max_steps == 3


def test_without_rehearsal_nothing_changes():
    args = parse_args(module_args(dry_run("train_gaca_alfworld.sh")[0], "gaca_openrlhf.cli.train_ppo"))
    # VLLM_MEM from the memory plan (issue 37): 1.5B's weights + KV cache of 16 sequences: 0.1 of an 80 GB GPU
    assert args.run.backend == "gpu" and not args.vllm.enforce_eager and args.vllm.gpu_memory_utilization == 0.1


def test_smoke_script_dry_run(tmp_path):
    cmds = dry_run("smoke.sh", SAVE_PATH=str(tmp_path / "smoke_x"))
    assert len(cmds) == 3  # ALFWORLD_DATA given: no games generated; the alfworld, resume and webshop legs
    args = parse_args(module_args(cmds[0], "gaca_openrlhf.cli.train_ppo"))
    assert args.actor.model_name_or_path == "Qwen/Qwen2.5-0.5B-Instruct" and args.run.max_iterations == 2
    assert args.train.colocate_all and args.ds.zero_stage == 3 and args.algo.kl.use_loss
    assert args.rollout.batch_size == 8 and args.env.max_steps == 5 and args.ckpt.save_steps == 1
    assert args.run.mini_batch_steps == args.train.micro_batch_size * 8


def test_readme_marks_scripts_untested_on_gpu():
    text = open(os.path.join(GPU, "README.md")).read()
    assert "not been run on GPUs" in text


# ---- GPU-path review findings ----

def test_smoke_generates_enough_games_for_2_iterations_on_every_gpu_count(tmp_path):
    """Finding 1: TASKS_PER_ITER = N_GPUS with 8 generated games and --train.num_episodes 1 ran 1 iteration on 8 GPUs
    (iteration 2 found the task file used up). Iterations the run can make = episodes x full batches of the task file,
    capped by --run.max_iterations; every generated game is one task."""
    for n in range(1, 9):
        cache = tmp_path / f"cache{n}"
        cmds = dry_run("smoke.sh", N_GPUS=str(n), ALFWORLD_DATA="", GACA_CACHE=str(cache),
                       SAVE_PATH=str(tmp_path / f"smoke{n}"))
        gen = [c for c in cmds if c[1:4] == ["-m", "agents.alfworld", "generate"]]
        assert len(gen) == 1, cmds
        games, games_dir = int(option(gen[0], "--num-games")), option(gen[0], "--out")
        args = train_cmds(cmds)[0]  # the alfworld leg
        assert json.loads(args.env.kwargs)["data_dir"] == games_dir  # trains on the games it generated
        assert games_dir == str(cache / f"alfworld_smoke_games_{games}")  # never an older, smaller cached set
        tasks_per_iter = args.rollout.batch_size
        assert tasks_per_iter == n
        assert args.eval.dataset and args.eval.steps > 0  # the smoke validates on 1 game held out of those generated
        held_out = 1
        iterations = min(args.run.max_iterations, args.train.num_episodes * ((games - held_out) // tasks_per_iter))
        assert iterations == 2, (n, games, tasks_per_iter, args.train.num_episodes)


def source_common(script, tmp_path=None, **env):
    """Run bash snippet ``script`` after sourcing _common.sh (no training starts: it only sets variables)."""
    full = script_env(env)
    return subprocess.run(["bash", "-c", f"source {GPU}/_common.sh; {script}"], cwd=ROOT, env=full,
                          capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("lines,strict,ok", [(16, "1", True), (15, "1", False), (15, "0", True)])
def test_too_few_tasks_for_the_iterations(tmp_path, lines, strict, ok):
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(f'{{"input": "{i}"}}\n' for i in range(lines)))
    res = source_common(f"check_tasks {tasks}; echo checked", ITERATIONS="2", TASKS_PER_ITER="8",
                        REQUIRE_ALL_ITERATIONS=strict)
    assert (res.returncode == 0 and "checked" in res.stdout) == ok, res.stderr
    if lines < 16:
        assert "15 tasks" in res.stderr and "after 2 iteration(s)" in res.stderr


def populate_run(save):
    os.makedirs(os.path.join(save, "ckpt", "_actor", "global_step2"))
    os.makedirs(os.path.join(save, "ckpt", "global_step2_hf"))
    open(os.path.join(save, "ckpt", "global_step2_hf", "config.json"), "w").close()
    open(os.path.join(save, "config.json"), "w").close()
    with open(os.path.join(save, "metrics.jsonl"), "w") as f:
        f.write('{"kl": 0.1}\n{"kl": 0.2}\n')
    with open(os.path.join(save, "tasks.jsonl"), "w") as f:
        f.write('{"input": "stale/game"}\n')


def test_smoke_dry_run_moves_an_earlier_run_aside(tmp_path):
    """Finding 2: an earlier run's checkpoints/metrics/tasks.jsonl must not be reused or satisfy the checks."""
    save = str(tmp_path / "smoke")
    populate_run(save)
    cmds = dry_run("smoke.sh", SAVE_PATH=save, TASKS=str(tmp_path / "other_tasks.jsonl"))
    assert cmds[0][:2] == ["mv", "--"] and cmds[0][2] == save
    assert cmds[0][3].startswith(save + ".old-")
    args = train_cmds(cmds)[0]
    assert args.ckpt.output_dir == save and args.data.prompt_dataset == save + "/tasks.jsonl"  # regenerated there
    assert os.path.exists(os.path.join(save, "metrics.jsonl"))  # DRY_RUN changes nothing
    # an empty or missing folder: nothing to move
    assert dry_run("smoke.sh", SAVE_PATH=str(tmp_path / "new"))[0][:1] != ["mv"]


def test_smoke_refuses_a_folder_that_is_not_a_run(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    res = run_script("smoke.sh", SAVE_PATH=str(tmp_path))
    assert res.returncode == 2 and "not an earlier run's output folder" in res.stderr
    assert (tmp_path / "notes.txt").exists()


def fake_tools(tmp_path, gpus=8, torch_ok=True):
    """A bin folder with a fake nvidia-smi listing ``gpus`` GPUs and the fake python (script_fakes.py)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    smi = bin_dir / "nvidia-smi"
    lines = "".join(f'echo "GPU {i}: NVIDIA H100 80GB HBM3 (UUID: GPU-{i})"\n' for i in range(gpus))
    smi.write_text("#!/usr/bin/env bash\n" + (lines or 'echo "No devices were found"\n'))
    py = write_fake_python(bin_dir / "python", extra_cases="" if torch_ok else (
        '  "-c import torch"*) echo "AssertionError: torch.cuda.is_available() is False" >&2; exit 1 ;;'))
    smi.chmod(0o755)
    return {"PATH": f"{bin_dir}:{os.environ['PATH']}", "PYTHON": str(py), "FAKE_LOG": str(tmp_path / "calls.log")}


def test_smoke_run_starts_from_an_empty_folder_and_regenerates_tasks(tmp_path):
    """Finding 2, the real (non-dry) path with stand-ins for python and nvidia-smi: the earlier run is moved aside,
    tasks.jsonl is regenerated from the generated games, the check gets the training's hard gap limit (0.5: issue 37
    judges each sync against its rollout-time baseline in smoke_check.py, not against a constant 0.1)."""
    save = str(tmp_path / "smoke")
    populate_run(save)
    env = fake_tools(tmp_path)
    res = run_script("smoke.sh", DRY_RUN="0", SAVE_PATH=save, ALFWORLD_DATA="", GACA_CACHE=str(tmp_path / "cache"),
                     TASKS=str(tmp_path / "stale_tasks.jsonl"), SMOKE_WEBSHOP="0", **env)
    assert res.returncode == 0, res.stdout + res.stderr
    old = [p for p in os.listdir(tmp_path) if p.startswith("smoke.old-")]
    assert len(old) == 1 and os.path.exists(tmp_path / old[0] / "ckpt" / "_actor" / "global_step2")
    left = set(os.listdir(save)) - {"command.sh", "tasks.jsonl", "val_tasks.jsonl", "train.log", "smoke_summary.txt"}
    assert all(p.startswith("gpu_memory") for p in left), left  # nothing of the earlier run
    tasks = open(os.path.join(save, "tasks.jsonl")).read().splitlines()
    assert len(tasks) == 24 and "stale" not in "".join(tasks)  # (2 + 1 resumed) iterations x 8 tasks, this run's
    val = open(os.path.join(save, "val_tasks.jsonl")).read().splitlines()
    assert len(val) == 1 and val[0] not in tasks  # + 1 held-out game: the smoke's validation panel
    calls = open(env["FAKE_LOG"]).read().splitlines()
    assert any("--num-games 25" in c for c in calls)
    # the start-up preflight runs before training (many-nodes review, finding 4); the resume leg trains again
    pre = [i for i, c in enumerate(calls) if c.startswith("-m gaca_openrlhf.preflight")]
    train = [i for i, c in enumerate(calls) if c.startswith("-m gaca_openrlhf.cli.train_ppo")]
    assert len(pre) == 2 and len(train) == 2 and pre[0] < train[0] < pre[1] < train[1], calls
    check = [shlex.split(c) for c in calls if "smoke_check.py" in c and "--memory" not in c]
    assert len(check) == 2 and [c[1] for c in check] == [save, save]
    assert [(option(c, "--label"), option(c, "--iterations"), option(c, "--max-logprob-gap")) for c in check] == [
        ("alfworld", "2", "0.5"), ("resume", "3", "0.5")]
    argv = shlex.split(open(os.path.join(save, "command.sh")).read())
    assert option(argv, "--run.max_logprob_gap") == "0.5" and option(argv, "--run.backend") == "gpu"


@pytest.mark.parametrize("script", [f"train_{m}_{e}.sh" for m in METHODS for e in ENVS])
def test_long_runs_tolerate_a_noisy_sync_probe(script):
    """Finding 3: the long recipes stop only on a grossly broken weight sync (0.5); the rehearsal keeps 0.1."""
    (args,) = train_cmds(dry_run(script, SAVE_PATH="/tmp/out_x"))
    assert args.run.max_logprob_gap == 0.5
    (args,) = train_cmds(dry_run(script, SAVE_PATH="/tmp/out_x", MAX_LOGPROB_GAP="0.3"))
    assert args.run.max_logprob_gap == 0.3


def test_sync_gap_limits_of_the_other_scripts(tmp_path):
    assert {a.run.max_logprob_gap for a in train_cmds(dry_run("run_comparison.sh", OUT_ROOT="/tmp/cmp"))} == {0.5}
    assert {a.run.max_logprob_gap for a in train_cmds(dry_run("ablations_alfworld.sh", EVAL_SEEDS="0"))} == {0.5}
    # the GPU smoke trains with the hard limit; smoke_check.py judges each sync against its baseline (issue 37)
    assert {a.run.max_logprob_gap for a in train_cmds(dry_run("smoke.sh", SAVE_PATH=str(tmp_path / "s")))} == {0.5}
    assert {a.run.max_logprob_gap for a in train_cmds(dry_run("smoke.sh", SAVE_PATH=str(tmp_path / "s"),
                                                                REHEARSAL="1"))} == {0.1}
    (args,) = train_cmds(dry_run("train_gaca_alfworld.sh", REHEARSAL="1", SAVE_PATH="/tmp/reh"))
    assert args.run.max_logprob_gap == 0.1
    text = open(os.path.join(GPU, "README.md")).read()
    assert "Weight-sync check" in text and "0.5 for the long recipes" in text


def test_gpu_backend_forced_outside_the_rehearsal():
    """Finding 4: GACA_BACKEND=gpu (and --run.backend gpu), whatever the caller's shell says; rehearsal unchanged."""
    for given in (None, "cpu", "auto"):
        env = {} if given is None else {"GACA_BACKEND": given}
        res = source_common("echo $GACA_BACKEND; env | grep ^GACA_BACKEND=", **env)
        assert res.returncode == 0 and res.stdout.split() == ["gpu", "GACA_BACKEND=gpu"], res.stderr
    res = source_common("echo $GACA_BACKEND", REHEARSAL="1")
    assert res.stdout.strip() == "rehearsal"
    for script in ("train_gaca_alfworld.sh", "train_grpo_webshop.sh", "smoke.sh"):
        assert {a.run.backend for a in train_cmds(dry_run(script, SAVE_PATH="/tmp/out_backend"))} == {"gpu"}


@pytest.mark.parametrize("gpus,torch_ok,n_gpus,error", [
    (0, True, "8", "lists no GPU"),
    (4, True, "8", "lists 4 GPU(s) on this node, GPUS_PER_NODE=8"),
    (8, False, "8", "torch sees no CUDA device"),
    (8, True, "8", None),
    (4, True, "4", None),
])
def test_gpu_preflight(tmp_path, gpus, torch_ok, n_gpus, error):
    env = fake_tools(tmp_path, gpus=gpus, torch_ok=torch_ok)
    res = source_common("echo preflight-ok", DRY_RUN="0", N_GPUS=n_gpus, **env)
    if error is None:
        assert res.returncode == 0 and "preflight-ok" in res.stdout, res.stderr
    else:
        assert res.returncode == 1 and "preflight-ok" not in res.stdout
        assert "GPU preflight" in res.stderr and error in res.stderr, res.stderr
    # skipped by DRY_RUN, REHEARSAL and GPU_PREFLIGHT=0
    for skip in ({"DRY_RUN": "1"}, {"DRY_RUN": "0", "REHEARSAL": "1", "MODEL": "/m"}, {"DRY_RUN": "0", "GPU_PREFLIGHT": "0"}):
        res = source_common("echo preflight-ok", N_GPUS=n_gpus, **{**env, **skip})
        assert res.returncode == 0 and "preflight-ok" in res.stdout, (skip, res.stderr)


def test_gpu_preflight_without_nvidia_smi(tmp_path):
    env = fake_tools(tmp_path)
    (tmp_path / "bin" / "nvidia-smi").write_text(
        "#!/usr/bin/env bash\necho \"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver\"\n"
        "exit 9\n")
    res = source_common("echo preflight-ok", DRY_RUN="0", **env)
    assert res.returncode == 1 and "'nvidia-smi -L' failed" in res.stderr and "NVIDIA driver" in res.stderr


def test_relative_paths_become_absolute(tmp_path):
    """Finding 6: Ray workers do not run in the driver's working directory: every path in the command is absolute,
    relative ones taken from the directory the script was started from."""
    (tmp_path / "models" / "mine").mkdir(parents=True)
    (args,) = train_cmds(dry_run("train_gaca_alfworld.sh", cwd=str(tmp_path), SAVE_PATH="runs/a",
                                 ALFWORLD_DATA="./data/alf", TASKS="t/tasks.jsonl", MODEL="models/mine"))
    assert args.ckpt.output_dir == f"{tmp_path}/runs/a" and args.ckpt.path == f"{tmp_path}/runs/a/ckpt"
    assert args.data.prompt_dataset == f"{tmp_path}/t/tasks.jsonl"
    assert json.loads(args.env.kwargs)["data_dir"] == f"{tmp_path}/data/alf"
    assert args.actor.model_name_or_path == f"{tmp_path}/models/mine"
    # a Hugging Face name stays; the default output folder is the repository's outputs/, absolute
    (args,) = train_cmds(dry_run("train_gaca_webshop.sh", cwd=str(tmp_path), MODEL="Qwen/Qwen2.5-1.5B-Instruct"))
    assert args.actor.model_name_or_path == "Qwen/Qwen2.5-1.5B-Instruct"
    assert args.ckpt.output_dir == f"{ROOT}/outputs/gaca_webshop"
    # the scripts that call the training scripts pass the same base on
    cmds = dry_run("run_comparison.sh", cwd=str(tmp_path), OUT_ROOT="cmp", ALFWORLD_DATA="data/alf", METHODS="gaca",
                   SEEDS="0", EVAL_SEEDS="0")
    (args,) = train_cmds(cmds)
    assert args.ckpt.output_dir == f"{tmp_path}/cmp/gaca_seed0"
    assert json.loads(args.env.kwargs)["data_dir"] == f"{tmp_path}/data/alf"
    for c in cmds:
        for opt in ("--out", "--data", "--model", "--panel"):
            if opt in c:
                assert option(c, opt).startswith("/"), c
    args = train_cmds(dry_run("smoke.sh", cwd=str(tmp_path), SAVE_PATH="smk"))[0]
    assert args.ckpt.output_dir == f"{tmp_path}/smk"


@pytest.mark.parametrize("script", ["train_gaca_alfworld.sh", "train_grpo_webshop.sh"])
def test_resume_flag_continues_from_the_last_checkpoint(script):
    """RESUME=1 loads the last checkpoint under SAVE_PATH/ckpt; without it nothing is loaded."""
    (plain,) = train_cmds(dry_run(script, SAVE_PATH="/tmp/out_r", WEBSHOP_URL="http://127.0.0.1:3000"))
    (resumed,) = train_cmds(dry_run(script, SAVE_PATH="/tmp/out_r", RESUME="1", WEBSHOP_URL="http://127.0.0.1:3000"))
    assert not plain.ckpt.load_enable and resumed.ckpt.load_enable
    assert resumed.ckpt.path == "/tmp/out_r/ckpt" == plain.ckpt.path


def test_7b_webshop_defaults_to_micro_batch_2_and_one_engine_per_gpu():
    """The memory plan's 7B WebShop recipe (python -m gaca_openrlhf.memory_plan --recipes) is what the script runs."""
    env = dict(SAVE_PATH="/tmp/out_7b", WEBSHOP_URL="http://127.0.0.1:3000", MODEL="Qwen/Qwen2.5-7B-Instruct")
    (args,) = train_cmds(dry_run("train_gaca_webshop.sh", **env))
    assert args.rollout.micro_batch_size == 2 and args.train.micro_batch_size == 2
    assert args.vllm.tensor_parallel_size == 1 and args.vllm.num_engines == 8
    (args,) = train_cmds(dry_run("train_gaca_webshop.sh", **env, MICRO_BATCH="4"))  # an explicit choice wins
    assert args.rollout.micro_batch_size == 4
    (args,) = train_cmds(dry_run("train_gaca_webshop.sh", SAVE_PATH="/tmp/out_15", WEBSHOP_URL="http://127.0.0.1:3000"))
    assert args.rollout.micro_batch_size == 4  # 1.5B keeps 4


# ---- packed token-budget micro-batches and chunked log-probs by default (issue 27, docs/packing.md) ----

def run_option(args, name):
    """A step-trainer option (``--run.<name>``, read as ``args.run.<name>``)."""
    return getattr(args.run, name)


MODELS = {"1.5b": "Qwen/Qwen2.5-1.5B-Instruct", "7b": "Qwen/Qwen2.5-7B-Instruct"}


@pytest.mark.parametrize("env_name", ENVS)
@pytest.mark.parametrize("model", ["1.5b", "7b"])
def test_packed_token_budget_micro_batches_by_default(env_name, model):
    """The scripts run packed token-budget micro-batches with chunked log-probs by default: the memory plan's chunk
    (RECIPE_LOGITS_CHUNK, 4096) and the budget it allows each recipe (RECIPE_TOKEN_BUDGET, 32768), passed under
    their --run.* names."""
    from gaca_openrlhf import memory_plan as mp

    for method in METHODS:
        (cmd,) = dry_run(f"train_{method}_{env_name}.sh", SAVE_PATH="/tmp/out_p", MODEL=MODELS[model],
                         WEBSHOP_URL="http://127.0.0.1:3000")
        args = parse_args(module_args(cmd, "gaca_openrlhf.cli.train_ppo"))
        assert args.ds.packing_samples and args.train.dynamic_batch_enable
        budget = mp.RECIPE_TOKEN_BUDGET[(model, env_name)]
        assert args.train.max_tokens_per_gpu == args.rollout.max_tokens_per_gpu == budget == 32768
        assert run_option(args, "logprob_chunk_size") == mp.RECIPE_LOGITS_CHUNK == 4096 < budget
        assert option(cmd, "--run.logprob_chunk_size") == "4096" and args.ds.zero_stage == 3
        assert run_option(args, "mini_batch_steps") == mp.ENV_DEFAULTS[env_name]["mini_batch_steps"]
        assert args.ds.attn_implementation == "sdpa"  # this machine has no flash-attn (on the node: flash_attention_2)


def test_scripts_pass_no_deprecated_option_names():
    """The trainer's options moved from --gaca.* to --run.* (gaca_openrlhf/trainer/run_options.py): the scripts
    pass the new names only (the old ones still work, with a FutureWarning), in every command and every comment."""
    from gaca_openrlhf.trainer.run_options import deprecated_flags

    old = deprecated_flags()
    env = dict(SAVE_PATH="/tmp/out_names", WEBSHOP_URL="http://127.0.0.1:3000")
    for script in [f"train_{m}_{e}.sh" for m in METHODS for e in ENVS]:
        for rehearsal in ("0", "1"):
            (cmd,) = dry_run(script, REHEARSAL=rehearsal, **env)
            assert not [a for a in cmd if a.split("=", 1)[0] in old], (script, rehearsal)
    for name in sorted(os.listdir(GPU)):  # smoke_check.py reads both names of the mini-batch option, by design
        if name.endswith((".sh", ".md")):
            with open(os.path.join(GPU, name)) as f:
                text = f.read()
            assert not [o for o in old if o in text], name


def test_packing_budget_and_chunking_switches():
    from gaca_openrlhf import memory_plan as mp

    env = dict(SAVE_PATH="/tmp/out_p", WEBSHOP_URL="http://127.0.0.1:3000")
    for script, env_name in (("train_gaca_alfworld.sh", "alfworld"), ("train_grpo_webshop.sh", "webshop")):
        (off,) = train_cmds(dry_run(script, PACKING="0", **env))  # padded fixed micro-batches, chunked log-probs
        assert not off.ds.packing_samples and not off.train.dynamic_batch_enable
        assert run_option(off, "logprob_chunk_size") == 4096
        (plain,) = train_cmds(dry_run(script, PACKING="0", LOGPROB_CHUNK="0", **env))  # as before issue 27
        assert not plain.ds.packing_samples and run_option(plain, "logprob_chunk_size") == 0
        (packed,) = train_cmds(dry_run(script, TOKEN_BUDGET="0", **env))  # packed micro-batches of MICRO_BATCH
        assert packed.ds.packing_samples and not packed.train.dynamic_batch_enable
        (own,) = train_cmds(dry_run(script, TOKEN_BUDGET="12288", MODEL=MODELS["7b"], **env))
        assert own.train.max_tokens_per_gpu == own.rollout.max_tokens_per_gpu == 12288  # an explicit choice wins
        # LOGPROB_CHUNK=0: full logits, and the budget the plan gives full logits (32768 would not fit them)
        for model in ("1.5b", "7b"):
            (cmd,) = dry_run(script, LOGPROB_CHUNK="0", MODEL=MODELS[model], **env)
            (full,) = train_cmds([cmd])
            assert "--run.logprob_chunk_size" not in cmd and run_option(full, "logprob_chunk_size") == 0
            assert full.train.max_tokens_per_gpu == full.rollout.max_tokens_per_gpu == \
                mp.RECIPE_TOKEN_BUDGET_FULL_LOGITS[(model, env_name)]
        (full_own,) = train_cmds(dry_run(script, LOGPROB_CHUNK="0", TOKEN_BUDGET="8192", **env))
        assert full_own.train.max_tokens_per_gpu == 8192
        # another chunk size, with ZeRO-3 on several GPUs (no longer refused: every rank makes the same number of
        # chunks, trainer/chunked_actor.py agreed_num_chunks), on two nodes, with ZeRO-2, on one GPU
        for extra in ({}, {"NUM_NODES": "2"}, {"ZERO_STAGE": "2"}, {"GPUS_PER_NODE": "1"}):
            res = run_script(script, LOGPROB_CHUNK="1024", **extra, **env)
            assert res.returncode == 0, (extra, res.stderr)
            (args,) = train_cmds(dry_run(script, LOGPROB_CHUNK="1024", **extra, **env))
            assert run_option(args, "logprob_chunk_size") == 1024
            assert args.ds.zero_stage == int(extra.get("ZERO_STAGE", 3)) and args.train.max_tokens_per_gpu == 32768


def test_rehearsal_packs_with_a_budget_for_its_sizes():
    """REHEARSAL=1 rehearses the node's path: packed micro-batches, a token budget scaled to its <= 1056-token
    samples, and chunked log-probs in chunks (256) smaller than the budget, so that several chunks are made."""
    for script, budget in (("train_gaca_alfworld.sh", 1024), ("train_gaca_webshop.sh", 2048)):
        (cmd,) = dry_run(script, REHEARSAL="1", SAVE_PATH="/tmp/reh_p")
        (args,) = train_cmds([cmd])
        assert args.ds.packing_samples and args.train.dynamic_batch_enable and args.ds.zero_stage == 3
        assert args.train.max_tokens_per_gpu == args.rollout.max_tokens_per_gpu == budget
        assert run_option(args, "logprob_chunk_size") == 256 < budget
        assert option(cmd, "--run.logprob_chunk_size") == "256"  # what the run's command.sh shows
        # packed rows on the CPU stand-in of flash-attn's varlen kernel, padded rows on sdpa
        assert option(cmd, "--ds.attn_implementation") == args.ds.attn_implementation == "gaca_varlen_sdpa"
        (args,) = train_cmds(dry_run(script, REHEARSAL="1", SAVE_PATH="/tmp/reh_p", PACKING="0"))
        assert not args.ds.packing_samples and not args.train.dynamic_batch_enable
        assert args.ds.attn_implementation == "sdpa"
        (args,) = train_cmds(dry_run(script, REHEARSAL="1", SAVE_PATH="/tmp/reh_p", LOGPROB_CHUNK="0"))
        assert run_option(args, "logprob_chunk_size") == 0 and args.train.max_tokens_per_gpu == budget


# ---- many-nodes review (NUM_NODES / GPUS_PER_NODE, WebShop address, failed-episode limit, start-up preflight) ----

def preflight_cmds(stderr):
    """The preflight commands a DRY_RUN printed on stderr, parsed by the real parser."""
    from gaca_openrlhf.preflight import build_parser

    prefix = "[dry-run] preflight: "
    found = [shlex.split(line[len(prefix):]) for line in stderr.splitlines() if line.startswith(prefix)]
    return [build_parser().parse_args(module_args(c, "gaca_openrlhf.preflight")) for c in found]


def webshop_dry_run(tmp_path=None, **env):
    """DRY_RUN of train_gaca_webshop.sh: (parsed training args, the printed server command or None, URL line, stderr).
    With tmp_path, `hostname` is a stand-in listing 172.17.0.1 (first) and 10.0.0.5 as this machine's addresses."""
    if tmp_path is not None:
        bin_dir = tmp_path / "hostbin"
        bin_dir.mkdir(exist_ok=True)
        host = bin_dir / "hostname"
        host.write_text('#!/usr/bin/env bash\ncase "$1" in -I) echo "172.17.0.1 10.0.0.5 " ;; *) echo node0 ;; esac\n')
        host.chmod(0o755)
        env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", **env}
    res = run_script("train_gaca_webshop.sh", SAVE_PATH="/tmp/out_ws", **env)
    assert res.returncode == 0, res.stderr
    (args,) = train_cmds([shlex.split(line) for line in res.stdout.splitlines() if line.strip()])
    server = [shlex.split(line.split(": ", 1)[1]) for line in res.stderr.splitlines()
              if line.startswith("[dry-run] webshop server: ")]
    urls = [line.split("=", 1)[1] for line in res.stderr.splitlines() if line.startswith("[dry-run] WEBSHOP_URL=")]
    assert len(server) <= 1 and len(urls) == 1, res.stderr
    return args, (server[0] if server else None), urls[0], res.stderr


@pytest.mark.parametrize("script", ["train_gaca_alfworld.sh", "train_grpo_webshop.sh", "train_gigpo_alfworld.sh"])
def test_two_nodes(script):
    """Finding 1: --actor/--ref.num_nodes were hard-coded to 1 and N_GPUS meant per node and in total."""
    (args,) = train_cmds(dry_run(script, SAVE_PATH="/tmp/out_2n", NUM_NODES="2", GPUS_PER_NODE="8",
                                 WEBSHOP_ADVERTISE_HOST="10.0.0.5"))
    assert (args.actor.num_nodes, args.actor.num_gpus_per_node) == (2, 8)
    assert (args.ref.num_nodes, args.ref.num_gpus_per_node) == (2, 8)
    assert args.vllm.num_engines == 16 and args.vllm.tensor_parallel_size == 1
    # data-parallel sizes over all 16 ranks: the mini-batch splits into equal micro batches on every rank
    assert args.run.mini_batch_steps % (args.train.micro_batch_size * 16) == 0
    (args,) = train_cmds(dry_run(script, SAVE_PATH="/tmp/out_2n", NUM_NODES="2", GPUS_PER_NODE="8", VLLM_TP="2",
                                 WEBSHOP_ADVERTISE_HOST="10.0.0.5"))
    assert args.vllm.num_engines == 8 and args.vllm.tensor_parallel_size == 2


def test_two_nodes_size_the_training_micro_batch_over_all_ranks():
    # WebShop's 64 step samples over 2 x 8 ranks: at most 4 per rank (8 per rank on one node)
    (args,) = train_cmds(dry_run("train_gaca_webshop.sh", MICRO_BATCH="8", NUM_NODES="2", GPUS_PER_NODE="8",
                                 WEBSHOP_ADVERTISE_HOST="h"))
    assert args.train.micro_batch_size == 4 and args.rollout.micro_batch_size == 8
    res = run_script("train_gaca_webshop.sh", NUM_NODES="2", GPUS_PER_NODE="6", WEBSHOP_ADVERTISE_HOST="h")
    assert res.returncode == 2 and "multiple of the 12 ranks (NUM_NODES=2 x GPUS_PER_NODE=6" in res.stderr


def test_n_gpus_is_a_deprecated_alias_of_gpus_per_node():
    res = run_script("train_gaca_alfworld.sh", N_GPUS="4")
    assert res.returncode == 0, res.stderr
    assert res.stderr.count("N_GPUS is deprecated: use GPUS_PER_NODE") == 1
    (args,) = train_cmds([shlex.split(line) for line in res.stdout.splitlines() if line.strip()])
    assert (args.actor.num_nodes, args.actor.num_gpus_per_node, args.vllm.num_engines) == (1, 4, 4)
    # ambiguous with more nodes, contradictory with GPUS_PER_NODE, non-numeric: refused
    res = run_script("train_gaca_alfworld.sh", N_GPUS="16", NUM_NODES="2")
    assert res.returncode == 2 and "N_GPUS=16 is ambiguous with NUM_NODES=2" in res.stderr
    res = run_script("train_gaca_alfworld.sh", N_GPUS="4", GPUS_PER_NODE="8")
    assert res.returncode == 2 and "disagree" in res.stderr
    res = run_script("train_gaca_alfworld.sh", GPUS_PER_NODE="eight")
    assert res.returncode == 2 and "GPUS_PER_NODE=eight must be a positive integer" in res.stderr
    # the scripts that call other scripts pass the sizes on without a second notice
    res = run_script("run_comparison.sh", N_GPUS="4", OUT_ROOT="/tmp/cmp", METHODS="gaca", SEEDS="0", EVAL_SEEDS="0")
    assert res.returncode == 0 and res.stderr.count("N_GPUS is deprecated") == 1, res.stderr


def test_smoke_on_two_nodes_scales_with_all_gpus(tmp_path):
    cmds = dry_run("smoke.sh", NUM_NODES="2", GPUS_PER_NODE="4", ALFWORLD_DATA="", GACA_CACHE=str(tmp_path / "c"),
                   SAVE_PATH=str(tmp_path / "s"))
    (gen,) = [c for c in cmds if c[1:4] == ["-m", "agents.alfworld", "generate"]]
    args = train_cmds(cmds)[0]
    assert (args.actor.num_nodes, args.actor.num_gpus_per_node, args.vllm.num_engines) == (2, 4, 8)
    assert args.rollout.batch_size == 8 and int(option(gen, "--num-games")) == 25  # (2 + 1 resumed) x 8 + 1 held out
    assert args.run.mini_batch_steps == args.train.micro_batch_size * 8


@pytest.mark.parametrize("gpus,error", [(8, None), (16, None), (4, "lists 4 GPU(s) on this node, GPUS_PER_NODE=8")])
def test_gpu_preflight_counts_the_gpus_of_this_node(tmp_path, gpus, error):
    """The head node's nvidia-smi lists its own GPUs: GPUS_PER_NODE, not NUM_NODES x GPUS_PER_NODE."""
    env = fake_tools(tmp_path, gpus=gpus)
    res = source_common("echo preflight-ok", DRY_RUN="0", NUM_NODES="2", GPUS_PER_NODE="8", **env)
    if error is None:
        assert res.returncode == 0 and "preflight-ok" in res.stdout, res.stderr
    else:
        assert res.returncode == 1 and error in res.stderr


def test_rehearsal_of_two_nodes_builds_the_two_node_command():
    """REHEARSAL=1 NUM_NODES=2 is no longer refused: a local cluster of 2 raylets (tests/examples/
    test_rehearsal_multinode.py); the dry run prints the 2-node command and the preflight that checks the cluster."""
    res = run_script("train_gaca_alfworld.sh", REHEARSAL="1", NUM_NODES="2", GPUS_PER_NODE="1")
    assert res.returncode == 0, res.stderr
    (args,) = train_cmds([shlex.split(line) for line in res.stdout.splitlines() if line.strip()])
    assert (args.actor.num_nodes, args.actor.num_gpus_per_node, args.vllm.num_engines) == (2, 1, 2)
    assert args.run.backend == "rehearsal" and "[dry-run] preflight:" in res.stderr


def test_webshop_server_on_one_node_listens_on_localhost(tmp_path):
    args, server, url, _ = webshop_dry_run(tmp_path)
    assert url == "http://127.0.0.1:3000" == json.loads(args.env.kwargs)["base_url"]
    assert server[1:3] == ["-m", "webshop_server.supervise"] and option(server, "--host") == "127.0.0.1"
    assert option(server, "--port") == "3000"


def test_webshop_server_on_many_nodes_is_reachable_from_every_node(tmp_path):
    """Finding 2: bound to 127.0.0.1 and passed as http://127.0.0.1:PORT, the server was unreachable from the env
    workers in the other nodes' vLLM engines (half the episodes failed with 2 nodes)."""
    args, server, url, _ = webshop_dry_run(tmp_path, NUM_NODES="2", GPUS_PER_NODE="8")
    assert option(server, "--host") == "0.0.0.0"
    assert url == "http://172.17.0.1:3000" == json.loads(args.env.kwargs)["base_url"]  # `hostname -I`'s first
    # RAY_ADDRESS naming one of this machine's addresses: that one (the Ray nodes already reach it there)
    args, server, url, _ = webshop_dry_run(tmp_path, NUM_NODES="2", GPUS_PER_NODE="8", RAY_ADDRESS="10.0.0.5:6379")
    assert url == "http://10.0.0.5:3000" == json.loads(args.env.kwargs)["base_url"]
    # RAY_ADDRESS of another machine: the server runs here, so this machine's address, with a warning
    args, server, url, err = webshop_dry_run(tmp_path, NUM_NODES="2", GPUS_PER_NODE="8",
                                             RAY_ADDRESS="ray://10.9.9.9:10001")
    assert url == "http://172.17.0.1:3000" and "RAY_ADDRESS host 10.9.9.9 is not this machine" in err
    # both addresses overridable; the port too
    args, server, url, _ = webshop_dry_run(tmp_path, NUM_NODES="2", GPUS_PER_NODE="8", WEBSHOP_HOST="10.0.0.5",
                                           WEBSHOP_ADVERTISE_HOST="head.cluster", WEBSHOP_PORT="3100")
    assert option(server, "--host") == "10.0.0.5" and option(server, "--port") == "3100"
    assert url == "http://head.cluster:3100" == json.loads(args.env.kwargs)["base_url"]
    # a server of one's own: nothing started, its URL used as given
    args, server, url, _ = webshop_dry_run(tmp_path, NUM_NODES="2", GPUS_PER_NODE="8", WEBSHOP_URL="http://ws:8000")
    assert server is None and url == "http://ws:8000" == json.loads(args.env.kwargs)["base_url"]


@pytest.mark.parametrize("script", [f"train_{m}_{e}.sh" for m in METHODS for e in ENVS] + ["smoke.sh"])
def test_a_broken_environment_stops_training_in_iteration_1(script, tmp_path):
    """Finding 3: train_ppo's --env.max_failed_frac 0.5 let a half-reachable cluster (50 % failed episodes) run on."""
    assert {a.env.max_failed_frac for a in train_cmds(dry_run(script, SAVE_PATH=str(tmp_path / "o")))} == {0.1}
    assert {a.env.max_failed_frac for a in train_cmds(dry_run(script, SAVE_PATH=str(tmp_path / "o"),
                                                               MAX_FAILED_FRAC="0.25"))} == {0.25}


def test_dry_run_prints_the_preflight_it_would_run():
    """Finding 4: Ray CPUs for the env workers, disk for the checkpoints kept, the WebShop URL -- before models load."""
    res = run_script("train_gaca_alfworld.sh", SAVE_PATH="/tmp/out_pf", NUM_NODES="2", GPUS_PER_NODE="8",
                     ENV_WORKER_CPUS="0.2")
    assert res.returncode == 0, res.stderr
    (pre,) = preflight_cmds(res.stderr)
    (args,) = train_cmds([shlex.split(line) for line in res.stdout.splitlines() if line.strip()])
    assert (pre.num_nodes, pre.gpus) == (2, 16)
    assert pre.env_workers == args.rollout.batch_size * args.rollout.n_samples_per_prompt == 128
    assert pre.env_worker_cpus == json.loads(args.env.kwargs)["num_cpus"] == 0.2
    assert pre.disk == args.ckpt.output_dir == "/tmp/out_pf" and pre.model == args.actor.model_name_or_path
    assert pre.ckpt_max_num == args.ckpt.max_num == 2 and pre.disk_needed_gb is None and pre.url is None
    # issue 37: each node's free GPUs against the engines' share, ALFWorld's data, host RAM (every node)
    assert (pre.gpus_per_node, pre.gpu_mem_share) == (8, args.vllm.gpu_memory_utilization) == (8, 0.1)
    assert pre.path == [("ALFWORLD_DATA", json.loads(args.env.kwargs)["data_dir"])] and pre.host_ram
    assert pre.tp == args.vllm.tensor_parallel_size == 1
    res = run_script("train_gaca_webshop.sh", SAVE_PATH="/tmp/out_pf", CKPT_MAX_NUM="3", DISK_NEEDED_GB="50")
    (pre,) = preflight_cmds(res.stderr)
    (args,) = train_cmds([shlex.split(line) for line in res.stdout.splitlines() if line.strip()])
    assert pre.url == json.loads(args.env.kwargs)["base_url"] and pre.env_workers == 0
    assert pre.ckpt_max_num == args.ckpt.max_num == 3 and pre.disk_needed_gb == 50
    # skipped with REHEARSAL=1 and GPU_PREFLIGHT=0
    for skip in ({"REHEARSAL": "1"}, {"GPU_PREFLIGHT": "0"}):
        res = run_script("train_gaca_alfworld.sh", SAVE_PATH="/tmp/out_pf", **skip)
        assert res.returncode == 0 and preflight_cmds(res.stderr) == [], res.stderr


def test_failed_preflight_stops_before_training(tmp_path):
    env = fake_tools(tmp_path)
    res = run_script("smoke.sh", DRY_RUN="0", SAVE_PATH=str(tmp_path / "s"), ALFWORLD_DATA="",
                     GACA_CACHE=str(tmp_path / "cache"), FAKE_PREFLIGHT_EXIT="1", **env)
    assert res.returncode != 0 and "start-up preflight failed" in res.stderr
    calls = open(env["FAKE_LOG"]).read()
    assert "-m gaca_openrlhf.preflight" in calls and "gaca_openrlhf.cli.train_ppo" not in calls


def test_readme_documents_many_nodes():
    text = open(os.path.join(GPU, "README.md")).read()
    section = text.split("## Many nodes", 1)[1].split("\n## ", 1)[0]
    for needle in ("ray start --head --port=6379", "ray start --address=", "NUM_NODES", "GPUS_PER_NODE",
                   "ray job submit", "shared storage", "SAVE_PATH", "ALFWORLD_DATA", "WEBSHOP_ADVERTISE_HOST",
                   "WEBSHOP_HOST", "MAX_FAILED_FRAC", "preflight", "REHEARSAL=1 NUM_NODES=2 GPUS_PER_NODE=1"):
        assert needle in section, needle


def test_rehearsal_takes_the_cpu_dtype_rule_and_the_node_keeps_bf16():
    def dtype(**env):  # the last --ds.param_dtype of the printed command wins (argparse)
        (cmd,) = [c for c in dry_run("train_gaca_alfworld.sh", SAVE_PATH="/tmp/out_d", **env)
                  if c[1:3] == ["-m", "gaca_openrlhf.cli.train_ppo"]]
        return [cmd[i + 1] for i, a in enumerate(cmd) if a == "--ds.param_dtype"][-1]

    assert dtype() == "bf16"
    assert dtype(REHEARSAL="1", MODEL="/m") == "auto"
    assert dtype(REHEARSAL="1", MODEL="/m", REHEARSAL_DTYPE="bf16") == "bf16"


# ---- smoke legs: resume and WebShop (issue 25) ----

def test_smoke_resume_and_webshop_legs_dry_run(tmp_path):
    save = str(tmp_path / "s")
    alf, resume, ws = train_cmds(dry_run("smoke.sh", SAVE_PATH=save))
    # resume: the same run folder, its checkpoint loaded, one more iteration, the same task file (data position)
    assert not alf.ckpt.load_enable and resume.ckpt.load_enable
    assert (alf.run.max_iterations, resume.run.max_iterations) == (2, 3)
    assert resume.ckpt.path == alf.ckpt.path == save + "/ckpt" and resume.data.prompt_dataset == alf.data.prompt_dataset
    # webshop: the GACA script at the smoke's sizes, 1 iteration, in its own folder
    assert ws.env.name == "webshop" and ws.algo.advantage.estimator == "gaca" and ws.run.max_iterations == 1
    assert ws.ckpt.output_dir == save + "/webshop" and ws.data.prompt_dataset == save + "/webshop/tasks.jsonl"
    assert (ws.rollout.batch_size, ws.rollout.n_samples_per_prompt, ws.env.max_steps) == (8, 4, 5)
    assert ws.actor.model_name_or_path == alf.actor.model_name_or_path == "Qwen/Qwen2.5-0.5B-Instruct"
    res = run_script("smoke.sh", SAVE_PATH=save)
    server = [ln for ln in res.stderr.splitlines() if ln.startswith("[dry-run] webshop server: ")]
    assert len(server) == 1 and "--num-products 1000" in server[0]  # a small generated catalog, fast start
    # each leg can be left out
    assert len(train_cmds(dry_run("smoke.sh", SAVE_PATH=save, SMOKE_RESUME="0", SMOKE_WEBSHOP="0"))) == 1
    cmds = dry_run("smoke.sh", SAVE_PATH=save, SMOKE_WEBSHOP="0", ALFWORLD_DATA="", GACA_CACHE=str(tmp_path / "c"))
    assert [a.env.name for a in train_cmds(cmds)] == ["alfworld", "alfworld"]
    res = run_script("smoke.sh", SAVE_PATH=save, SMOKE_RESUME="yes")
    assert res.returncode == 2 and "SMOKE_RESUME=yes must be 0 or 1" in res.stderr


FAKE_SMI_SAMPLER = r"""#!/usr/bin/env bash
# a fake nvidia-smi: -L lists 8 GPUs; --query-gpu ... -l 1 samples until killed (its pid in $FAKE_SMI_PIDS)
if [[ "$1" == -L ]]; then for i in 0 1 2 3 4 5 6 7; do echo "GPU $i: NVIDIA H100 80GB HBM3 (UUID: GPU-$i)"; done; exit 0; fi
if [[ "$1" == --query-gpu=memory.total ]]; then for i in 0 1 2 3 4 5 6 7; do echo 81559; done; exit 0; fi  # plan_vllm_mem
echo $$ >> "$FAKE_SMI_PIDS"
k=0
while :; do k=$((k + 1)); t="$(date '+%Y/%m/%d %H:%M:%S.%3N')"
  for i in 0 1 2 3 4 5 6 7; do echo "$t, $i, $((1000 * k + i)), 81559"; done; sleep 0.1; done
"""


def smoke_with_fakes(tmp_path, **env):
    """smoke.sh for real with stand-ins for python (script_fakes.py) and a sampling nvidia-smi; (result, calls)."""
    tools = fake_tools(tmp_path)
    smi = tmp_path / "bin" / "nvidia-smi"
    smi.write_text(FAKE_SMI_SAMPLER)
    res = run_script("smoke.sh", DRY_RUN="0", SAVE_PATH=str(tmp_path / "smoke"), ALFWORLD_DATA="",
                     GACA_CACHE=str(tmp_path / "cache"), SMOKE_WEBSHOP="0", FAKE_SMI_PIDS=str(tmp_path / "smi.pids"),
                     **tools, **env)
    return res, open(tools["FAKE_LOG"]).read().splitlines()


def test_smoke_samples_gpu_memory_per_leg_and_stops_the_sampler(tmp_path):
    res, calls = smoke_with_fakes(tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    save = tmp_path / "smoke"
    for leg in ("alfworld", "resume"):
        rows = (save / f"gpu_memory_{leg}.csv").read_text().splitlines()
        assert rows and {r.split(", ")[1] for r in rows} == {str(i) for i in range(8)}  # timestamp, index, ...
    pids = [int(p) for p in (tmp_path / "smi.pids").read_text().split()]
    assert len(pids) == 2  # one sampler per leg, each stopped when its leg ended
    assert not any(running(pid) for pid in pids)
    (mem,) = [shlex.split(c) for c in calls if "--memory" in c]
    assert [m for i, m in enumerate(mem) if mem[i - 1] == "--memory"] == [
        f"alfworld={save}/gpu_memory_alfworld.csv", f"resume={save}/gpu_memory_resume.csv"]
    if (save / "metrics.jsonl").exists():  # the runs' phase windows for the per-phase table
        assert [m for i, m in enumerate(mem) if mem[i - 1] == "--phases"] == [str(save)]
    # the summary: one line per check of every leg, then the verdict
    assert "[PASS] alfworld: training finished" in res.stdout and "[PASS] resume: training finished" in res.stdout
    assert res.stdout.rstrip().endswith("SMOKE PASS: 2/2 checks")
    # each leg names what it checks and how long it took (issue 37); a header is no check
    headers = [ln for ln in res.stdout.splitlines() if ln.startswith("== leg ")]
    assert [ln.split()[2] for ln in headers] == ["alfworld", "resume"], res.stdout
    assert re.match(r"== leg alfworld \(\d+s\): 2 GACA iterations on ALFWorld with every launch feature \(colocated "
                    r"policy/reference/vLLM engines, .*checkpoints\)$", headers[0]), headers[0]
    assert re.match(r"== leg resume \(\d+s\): RESUME=1: training continues from the checkpoint of iteration 2 .* "
                    r"trains iteration 3$", headers[1]), headers[1]
    assert re.search(r"^legs: alfworld \d+s resume \d+s \(whole smoke: \d+s\)$", res.stdout, re.M), res.stdout


def test_smoke_without_nvidia_smi_says_memory_sampling_is_not_available(tmp_path):
    tools = fake_tools(tmp_path)
    os.remove(tmp_path / "bin" / "nvidia-smi")
    bin_dir = tmp_path / "bin"
    path = ":".join([str(bin_dir)] + [p for p in os.environ["PATH"].split(":") if not os.path.exists(f"{p}/nvidia-smi")])
    res = run_script("smoke.sh", DRY_RUN="0", SAVE_PATH=str(tmp_path / "smoke"), ALFWORLD_DATA="",
                     GACA_CACHE=str(tmp_path / "cache"), SMOKE_WEBSHOP="0", GPU_PREFLIGHT="0",
                     **{**tools, "PATH": path})
    assert res.returncode == 0, res.stdout + res.stderr
    assert "memory sampling: n/a (no nvidia-smi)" in res.stdout
    assert not any(p.startswith("gpu_memory") for p in os.listdir(tmp_path / "smoke"))


def test_smoke_fails_when_a_check_or_a_leg_fails(tmp_path):
    """Each failed check is a FAIL line and the exit status is 1; a failed first leg leaves nothing to resume."""
    tools = fake_tools(tmp_path)
    write_fake_python(tmp_path / "bin" / "python", extra_cases=(
        '  *smoke_check.py*--label\\ resume*) echo "[FAIL] resume: metrics.jsonl iterations [1, 2, 1, 2, 3]"; exit 1 ;;\n'
        '  *smoke_check.py*--label\\ alfworld*) echo "[PASS] alfworld: fine"; exit 0 ;;'))
    res = run_script("smoke.sh", DRY_RUN="0", SAVE_PATH=str(tmp_path / "smoke"), ALFWORLD_DATA="",
                     GACA_CACHE=str(tmp_path / "cache"), SMOKE_WEBSHOP="0", **tools)
    assert res.returncode == 1, res.stdout + res.stderr
    assert "[PASS] alfworld: fine" in res.stdout and "[FAIL] resume: metrics.jsonl" in res.stdout
    assert res.stdout.rstrip().endswith("SMOKE FAIL: 1 of 4 checks failed")
    # training of the first leg fails: its FAIL line, the resume leg is not run (no checkpoint) and fails too
    tools["FAKE_LOG"] = str(tmp_path / "calls2.log")
    res = run_script("smoke.sh", DRY_RUN="0", SAVE_PATH=str(tmp_path / "smoke2"), ALFWORLD_DATA="",
                     GACA_CACHE=str(tmp_path / "cache"), SMOKE_WEBSHOP="0", FAKE_TRAIN_EXIT="3", **tools)
    assert res.returncode == 1
    assert "[FAIL] alfworld: training exited with status 3" in res.stdout
    assert "[FAIL] resume: not run (the alfworld leg failed" in res.stdout
    calls = open(tools["FAKE_LOG"]).read()
    assert calls.count("--ckpt.load_enable") == 0


# ---- evaluation over the node's GPUs (run_eval_queue) ----

def eval_lines(script, **env):
    """The evaluation commands of a DRY_RUN: (CUDA_VISIBLE_DEVICES, parsed eval args)."""
    from gaca_openrlhf.eval.cli import build_parser as eval_parser

    return [(e.get("CUDA_VISIBLE_DEVICES"), eval_parser().parse_args(module_args(c, "gaca_openrlhf.eval")))
            for e, c in dry_run_env(script, **env) if "gaca_openrlhf.eval" in c]


@pytest.mark.parametrize("script", ["run_comparison.sh", "ablations_alfworld.sh"])
def test_evaluations_are_spread_over_the_gpus(script):
    evals = eval_lines(script, OUT_ROOT="/tmp/q", EVAL_SEEDS="0 1", METHODS="gaca", SEEDS="0 1", ABLATIONS="lambda0 alpha1",
                       EVAL_CKPTS="1", ITERATIONS="30", SAVE_STEPS="10")
    devices = [d for d, _ in evals]
    assert all(d is not None for d in devices)
    # one process per GPU: the first 8 evaluations start on the 8 GPUs, then the queue goes round again
    assert devices[:8] == [str(i) for i in range(8)] and set(devices) == {str(i) for i in range(8)}
    jobs = [(e.model, e.panel, e.seed) for _, e in evals]
    assert len(jobs) == len(set(jobs))  # every evaluation once
    models = {e.model for _, e in evals}
    runs = {m.split("/hf/")[0] for m in models}  # <run> (its final model) or <run>/hf/global_step<N>_hf
    assert len(runs) == (2 if script == "run_comparison.sh" else 4)  # 2 training seeds (x 2 ablations)
    for run in runs:  # the final model and every HF checkpoint (iterations 10, 20, 30), each kept in <run>/hf/
        assert {m for m in models if m.split("/hf/")[0] == run} == {
            run, f"{run}/hf/global_step10_hf", f"{run}/hf/global_step20_hf", f"{run}/hf/global_step30_hf"}
    outs = [e.out for _, e in evals]
    assert len(outs) == len(set(outs)) and all(os.path.basename(o).startswith("eval_") for o in outs)


def test_evaluation_slots_follow_eval_gpus_and_eval_tp():
    evals = eval_lines("run_comparison.sh", OUT_ROOT="/tmp/q", METHODS="gaca grpo", SEEDS="0", EVAL_SEEDS="0",
                       EVAL_GPUS="2 3 5 6", EVAL_TP="2")
    assert [d for d, _ in evals] == ["2,3", "5,6", "2,3", "5,6"] and all(e.tensor_parallel_size == 2 for _, e in evals)
    evals = eval_lines("run_comparison.sh", OUT_ROOT="/tmp/q", METHODS="gaca", SEEDS="0", EVAL_SEEDS="0 1 2",
                       CUDA_VISIBLE_DEVICES="4,7")
    assert [d for d, _ in evals][:3] == ["4", "7", "4"]
    res = run_script("run_comparison.sh", OUT_ROOT="/tmp/q", METHODS="gaca", SEEDS="0", EVAL_GPUS="0", EVAL_TP="2")
    assert res.returncode == 2 and "EVAL_TP=2 GPUs per evaluation, but 1 GPU(s)" in res.stderr


QUEUE_PYTHON = r"""#!/usr/bin/env bash
# stands in for `python -m gaca_openrlhf.eval`: records device, start and end; fails for an --out containing FAIL
out=""; while (( $# )); do [[ "$1" == --out ]] && out="$2"; shift; done
echo "start $CUDA_VISIBLE_DEVICES $(date +%s.%N) $out" >> "$QUEUE_LOG"
sleep 0.3
echo "end $CUDA_VISIBLE_DEVICES $(date +%s.%N) $out" >> "$QUEUE_LOG"
echo "evaluated $out"
[[ "$out" != *FAIL* ]]
"""


def run_queue(tmp_path, outs, **env):
    py = tmp_path / "python"
    py.write_text(QUEUE_PYTHON)
    py.chmod(0o755)
    queue = "; ".join(f"queue_eval /m/{o} alfworld panel.json 0 {tmp_path}/{o}.json" for o in outs)
    res = common(f"{queue}; run_eval_queue; echo queue-ok", PYTHON=str(py), QUEUE_LOG=str(tmp_path / "q.log"), **env)
    log = [ln.split() for ln in (tmp_path / "q.log").read_text().splitlines()] if (tmp_path / "q.log").exists() else []
    return res, log


def test_eval_queue_runs_every_evaluation_once_one_per_gpu_at_a_time(tmp_path):
    outs = [f"e{i}" for i in range(7)]
    res, log = run_queue(tmp_path, outs, GPUS_PER_NODE="3")
    assert res.returncode == 0 and "queue-ok" in res.stdout, res.stderr
    starts = {ln[3]: (ln[1], float(ln[2])) for ln in log if ln[0] == "start"}
    ends = {ln[3]: float(ln[2]) for ln in log if ln[0] == "end"}
    assert sorted(starts) == sorted(f"{tmp_path}/{o}.json" for o in outs) and len(log) == 2 * len(outs)
    assert {d for d, _ in starts.values()} == {"0", "1", "2"}
    for a, (da, sa) in starts.items():  # no two evaluations overlap on one GPU
        for b, (db, sb) in starts.items():
            if a != b and da == db:
                assert ends[a] <= sb or ends[b] <= sa, (a, b)
    # the GPUs work in parallel: evaluations on different GPUs overlap in time
    assert any(sb < ends[a] and sa < ends[b] for a, (da, sa) in starts.items() for b, (db, sb) in starts.items()
               if da != db)
    assert (tmp_path / "e0.log").read_text().strip() == f"evaluated {tmp_path}/e0.json"  # each its own log


def test_eval_queue_fails_naming_each_failed_evaluation_after_all_ran(tmp_path):
    res, log = run_queue(tmp_path, ["a", "FAIL1", "b", "FAIL2", "c"], GPUS_PER_NODE="2")
    assert res.returncode == 1 and "queue-ok" not in res.stdout
    assert len([ln for ln in log if ln[0] == "end"]) == 5  # the others still ran
    assert "2 of 5 evaluation(s) failed" in res.stderr
    assert f"{tmp_path}/FAIL1.log (exit 1)" in res.stderr and f"{tmp_path}/FAIL2.log (exit 1)" in res.stderr


# ---- checkpoints of the comparison and ablation scripts: HF kept apart from the rotation, DeepSpeed pruned ----

def common(script, **env):
    """Run bash snippet ``script`` after sourcing _common.sh for real (not DRY_RUN), without the GPU preflight."""
    return source_common(script, DRY_RUN="0", GPU_PREFLIGHT="0", **env)


def fake_finished_run(run, steps=(10, 20), hf_steps=(10, 20), final=True):
    for s in steps:
        d = run / "ckpt" / "_actor" / f"global_step{s}"
        d.mkdir(parents=True)
        (d / "mp_rank_00_model_states.pt").write_text("ds")
    for s in hf_steps:
        d = run / "ckpt" / f"global_step{s}_hf"
        d.mkdir(parents=True)
        (d / "config.json").write_text("{}")
        (d / "model.safetensors").write_text(f"weights {s}")
    if final:
        (run / "config.json").write_text("{}")
        (run / "model.safetensors").write_text("final")
    return run


def test_prune_deletes_deepspeed_checkpoints_of_a_finished_run_only(tmp_path):
    run = fake_finished_run(tmp_path / "done")
    res = common(f"prune_ds_checkpoints {run}")
    assert res.returncode == 0, res.stderr
    assert not (run / "ckpt" / "_actor").exists() and "pruned" in res.stderr
    assert (run / "ckpt" / "global_step20_hf" / "model.safetensors").exists() and (run / "model.safetensors").exists()
    # KEEP_DS_CKPT=1 keeps them; a run without its final model (interrupted: RESUME=1 continues it) keeps them
    kept = fake_finished_run(tmp_path / "kept")
    res = common(f"prune_ds_checkpoints {kept}", KEEP_DS_CKPT="1")
    assert res.returncode == 0 and (kept / "ckpt" / "_actor" / "global_step20").exists()
    unfinished = fake_finished_run(tmp_path / "unfinished", final=False)
    (unfinished / "config.json").write_text("{}")  # config written, weights not (save_pretrained died)
    res = common(f"prune_ds_checkpoints {unfinished}")
    assert res.returncode == 0 and (unfinished / "ckpt" / "_actor" / "global_step10").exists()
    assert "holds no final model" in res.stderr


def test_hf_checkpoints_are_kept_apart_from_the_rotation(tmp_path):
    run = fake_finished_run(tmp_path / "r", hf_steps=(9, 10))
    # while training: the newest may still be written, the older one is complete
    res = common(f"keep_hf_checkpoints {run}")
    assert res.returncode == 0, res.stderr
    assert sorted(os.listdir(run / "hf")) == ["global_step9_hf"]
    # the rotation deletes step 9 after step 11 is written; the kept copy (hard links) stays whole
    fake_finished_run(tmp_path / "r", steps=(), hf_steps=(11,), final=False)
    subprocess.run(["rm", "-rf", str(run / "ckpt" / "global_step9_hf")], check=True)
    res = common(f"keep_hf_checkpoints {run}; keep_hf_checkpoints {run} all")
    assert res.returncode == 0, res.stderr
    assert sorted(os.listdir(run / "hf")) == ["global_step10_hf", "global_step11_hf", "global_step9_hf"]
    assert (run / "hf" / "global_step9_hf" / "model.safetensors").read_text() == "weights 9"
    # listed by step (9 < 10 < 11), for the evaluation queue
    res = common(f"hf_checkpoints {run}")
    assert res.stdout.split() == [f"{run}/hf/global_step{s}_hf" for s in (9, 10, 11)]
    # the preflight counts the kept copies on disk
    from gaca_openrlhf import preflight as pf
    assert pf.checkpoint_bytes(10 ** 9, 2, hf_kept=15) == pf.checkpoint_bytes(10 ** 9, 2) + 15 * 2 * 10 ** 9


def test_comparison_keeps_hf_checkpoints_and_prunes_deepspeed_per_run():
    res = run_script("run_comparison.sh", OUT_ROOT="/tmp/cmp", METHODS="gaca", SEEDS="0 1", EVAL_SEEDS="0",
                     EVAL_CKPTS="1")
    assert res.returncode == 0, res.stderr
    for s in (0, 1):
        run = f"/tmp/cmp/gaca_seed{s}"
        assert f"[dry-run] keep HF checkpoints: {run}/ckpt/global_step*_hf -> {run}/hf/" in res.stderr
        assert f"[dry-run] prune DeepSpeed checkpoints: rm -rf {run}/ckpt/_actor" in res.stderr
    pre = preflight_cmds(res.stderr)
    assert [p.hf_kept for p in pre] == [15, 15]  # 150 iterations / SAVE_STEPS 10, on the disk check
    # without EVAL_CKPTS nothing is kept (only final models are evaluated); KEEP_DS_CKPT=1 keeps DeepSpeed's
    res = run_script("run_comparison.sh", OUT_ROOT="/tmp/cmp", METHODS="gaca", SEEDS="0", KEEP_DS_CKPT="1")
    assert "keep HF checkpoints" not in res.stderr and "prune DeepSpeed" not in res.stderr
    assert [p.hf_kept for p in preflight_cmds(res.stderr)] == [0]
    # keeping needs CKPT_MAX_NUM >= 2: with 1, a checkpoint is rotated away as soon as the next one is written
    res = run_script("run_comparison.sh", OUT_ROOT="/tmp/cmp", EVAL_CKPTS="1", CKPT_MAX_NUM="1")
    assert res.returncode == 2 and "CKPT_MAX_NUM >= 2" in res.stderr


def test_ablations_train_each_repeat_with_its_own_seed():
    trains = train_cmds(dry_run("ablations_alfworld.sh", ABLATIONS="lambda0 permuted", SEEDS="0 1", EVAL_SEEDS="0",
                                OUT_ROOT="/tmp/abl"))
    assert [(a.algo.advantage.estimator, a.train.seed, a.ckpt.output_dir) for a in trains] == [
        ("fixed_mixture", 0, "/tmp/abl/lambda0_seed0"), ("fixed_mixture", 1, "/tmp/abl/lambda0_seed1"),
        ("gaca_permuted", 0, "/tmp/abl/permuted_seed0"), ("gaca_permuted", 1, "/tmp/abl/permuted_seed1")]
    # default: one run per ablation with the training seed SEED (42)
    assert {a.train.seed for a in train_cmds(dry_run("ablations_alfworld.sh", ABLATIONS="lambda0", EVAL_SEEDS="0"))} \
        == {42}


def running(pid):
    """The process runs (a zombie, exited but not yet reaped by its new parent, does not)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_hf_keeper_takes_each_checkpoint_before_the_rotation_deletes_it(tmp_path):
    """The background poll while training: step N is kept once step N+1 appears, before N is rotated away."""
    run = tmp_path / "r"
    ck = run / "ckpt"
    save = "mkdir -p {d}/global_step{s}_hf && echo w{s} > {d}/global_step{s}_hf/model.safetensors"
    steps = "; ".join([
        "hf_keeper_start " + str(run), "echo keeper=$HF_KEEPER_PID",
        # 2 s between saves: 20 polls, so a loaded CI machine still sees each step (was 0.5 s: flaky under load)
        save.format(d=ck, s=1), "sleep 2", save.format(d=ck, s=2), "sleep 2",
        f"rm -rf {ck}/global_step1_hf", save.format(d=ck, s=3), "sleep 2", f"rm -rf {ck}/global_step2_hf",
        f"hf_keeper_stop {run}", "echo stopped=${HF_KEEPER_PID:-none}",
    ])
    res = common(steps, HF_KEEP_POLL_S="0.1")
    assert res.returncode == 0 and "stopped=none" in res.stdout, res.stderr
    assert sorted(os.listdir(run / "hf")) == [f"global_step{s}_hf" for s in (1, 2, 3)]
    assert (run / "hf" / "global_step1_hf" / "model.safetensors").read_text().strip() == "w1"
    assert not running(int(res.stdout.split("keeper=")[1].split()[0]))
    # a script that dies while training leaves no keeper behind
    res = common(f"hf_keeper_start {run}; echo keeper=$HF_KEEPER_PID; exit 1", HF_KEEP_POLL_S="0.1")
    import time
    pid, deadline = int(res.stdout.split("keeper=")[1].split()[0]), time.time() + 15
    while running(pid) and time.time() < deadline:  # the keeper notices its parent is gone within a poll or two
        time.sleep(0.2)
    assert not running(pid)


# ---- VLLM_MEM from the memory plan (issue 37) ----

def test_vllm_mem_comes_from_the_memory_plan(tmp_path):
    """Guards: the constant 0.6 (48 GB per GPU for a KV cache of a few GB) coming back, a VLLM_MEM given being
    overridden, or a model the plan cannot size failing the launch instead of keeping the old default, said."""
    def share(script, **env):
        res = run_script(script, SAVE_PATH=str(tmp_path / "o"), **env)
        assert res.returncode == 0, res.stderr
        (args,) = train_cmds([shlex.split(line) for line in res.stdout.splitlines() if line.strip()])
        (pre,) = preflight_cmds(res.stderr)
        assert pre.gpu_mem_share == args.vllm.gpu_memory_utilization  # the preflight checks the same share
        return args.vllm.gpu_memory_utilization, res.stderr

    assert share("train_gaca_alfworld.sh")[0] == 0.1
    assert share("train_gaca_webshop.sh", MODEL="Qwen/Qwen2.5-7B-Instruct", WEBSHOP_GENERATED="1")[0] == 0.3
    assert share("train_gaca_alfworld.sh", MODEL="Qwen/Qwen2.5-7B-Instruct")[0] == 0.25
    # 4x the rollouts per task: 64 sequences per engine, 14.2 + 2 + 11.7 GiB of KV cache = 27.9 GiB of 80
    assert share("train_gaca_alfworld.sh", MODEL="Qwen/Qwen2.5-7B-Instruct", ROLLOUTS="32")[0] == 0.35
    assert share("train_gaca_alfworld.sh", VLLM_MEM="0.45")[0] == 0.45
    got, err = share("train_gaca_alfworld.sh", MODEL="/nonexistent/my-model")
    assert got == 0.6 and "warning: the memory plan cannot size VLLM_MEM for MODEL=/nonexistent/my-model" in err


@pytest.mark.parametrize("script", [f"train_gaca_{e}.sh" for e in ENVS])
def test_recipes_validate_on_a_held_out_panel(script):
    """Issue 37: the recipes validate every VAL_EVERY (5) iterations on VAL_TASKS beside the task file, at the
    evaluation temperature; VAL_GAMES=0 turns it off."""
    (args,) = train_cmds(dry_run(script, SAVE_PATH="/tmp/out_v"))
    assert args.eval.dataset == "/tmp/out_v/val_tasks.jsonl" and args.eval.steps == 5
    assert args.eval.temperature == 0.4 and args.eval.n_samples_per_prompt == 1
    (args,) = train_cmds(dry_run(script, SAVE_PATH="/tmp/out_v", VAL_EVERY="2", EVAL_TEMPERATURE="0.6"))
    assert args.eval.steps == 2 and args.eval.temperature == 0.6
    (args,) = train_cmds(dry_run(script, SAVE_PATH="/tmp/out_v", VAL_GAMES="0"))
    assert args.eval.dataset is None
