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


#: variables the scripts read: taken from the caller's shell only when a test passes them
SCRIPT_VARS = ("WEBSHOP_URL", "MODEL", "SAVE_PATH", "VLLM_TP", "VLLM_ENGINES", "N_GPUS", "ITERATIONS", "TASKS_PER_ITER",
               "ROLLOUTS", "MICRO_BATCH", "MINI_BATCH_STEPS", "MAX_LOGPROB_GAP", "SEED", "SEEDS", "TASKS", "OUT_ROOT",
               "REHEARSAL", "GACA_BACKEND", "GACA_CALLER_PWD", "SMOKE_GAMES", "REQUIRE_ALL_ITERATIONS",
               "GPU_PREFLIGHT", "PYTHON", "LR", "MAX_STEPS", "SAVE_STEPS", "RESUME", "NUM_NODES", "GPUS_PER_NODE",
               "WEBSHOP_HOST", "WEBSHOP_ADVERTISE_HOST", "WEBSHOP_PORT", "RAY_ADDRESS", "MAX_FAILED_FRAC",
               "CKPT_MAX_NUM", "DISK_NEEDED_GB", "ENV_WORKER_CPUS", "WEBSHOP_DATA", "WEBSHOP_GENERATED")


def script_env(env):
    full = {**os.environ, "DRY_RUN": "1", "ALFWORLD_DATA": "/data/alfworld", **env}
    for k in SCRIPT_VARS:
        if k not in env:
            full.pop(k, None)
    return full


def run_script(script, cwd=ROOT, **env):
    return subprocess.run(["bash", os.path.join(GPU, script)], cwd=cwd, env=script_env(env), capture_output=True,
                          text=True, timeout=120)


def dry_run(script, cwd=ROOT, **env):
    res = run_script(script, cwd=cwd, **env)
    assert res.returncode == 0, res.stderr
    return [shlex.split(line) for line in res.stdout.splitlines() if line.strip()]


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
    assert args.gaca.backend == "gpu" and not args.vllm.enforce_eager and args.vllm.gpu_memory_utilization == 0.6


def test_smoke_script_dry_run(tmp_path):
    cmds = dry_run("smoke.sh", SAVE_PATH=str(tmp_path / "smoke_x"))
    assert len(cmds) == 1  # ALFWORLD_DATA given: no games generated
    args = parse_args(module_args(cmds[0], "gaca_openrlhf.cli.train_ppo"))
    assert args.actor.model_name_or_path == "Qwen/Qwen2.5-0.5B-Instruct" and args.gaca.max_iterations == 2
    assert args.train.colocate_all and args.ds.zero_stage == 3 and args.algo.kl.use_loss
    assert args.rollout.batch_size == 8 and args.env.max_steps == 5 and args.ckpt.save_steps == 1
    assert args.gaca.mini_batch_steps == args.train.micro_batch_size * 8


def test_readme_marks_scripts_untested_on_gpu():
    text = open(os.path.join(GPU, "README.md")).read()
    assert "not been run on GPUs" in text


# ---- GPU-path review findings ----

def test_smoke_generates_enough_games_for_2_iterations_on_every_gpu_count(tmp_path):
    """Finding 1: TASKS_PER_ITER = N_GPUS with 8 generated games and --train.num_episodes 1 ran 1 iteration on 8 GPUs
    (iteration 2 found the task file used up). Iterations the run can make = episodes x full batches of the task file,
    capped by --gaca.max_iterations; every generated game is one task."""
    for n in range(1, 9):
        cache = tmp_path / f"cache{n}"
        cmds = dry_run("smoke.sh", N_GPUS=str(n), ALFWORLD_DATA="", GACA_CACHE=str(cache),
                       SAVE_PATH=str(tmp_path / f"smoke{n}"))
        gen = [c for c in cmds if c[1:4] == ["-m", "agents.alfworld", "generate"]]
        assert len(gen) == 1, cmds
        games, games_dir = int(option(gen[0], "--num-games")), option(gen[0], "--out")
        (args,) = train_cmds(cmds)
        assert json.loads(args.env.kwargs)["data_dir"] == games_dir  # trains on the games it generated
        assert games_dir == str(cache / f"alfworld_smoke_games_{games}")  # never an older, smaller cached set
        tasks_per_iter = args.rollout.batch_size
        assert tasks_per_iter == n
        iterations = min(args.gaca.max_iterations, args.train.num_episodes * (games // tasks_per_iter))
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
    (args,) = train_cmds(cmds)
    assert args.ckpt.output_dir == save and args.data.prompt_dataset == save + "/tasks.jsonl"  # regenerated there
    assert os.path.exists(os.path.join(save, "metrics.jsonl"))  # DRY_RUN changes nothing
    # an empty or missing folder: nothing to move
    assert dry_run("smoke.sh", SAVE_PATH=str(tmp_path / "new"))[0][:1] != ["mv"]


def test_smoke_refuses_a_folder_that_is_not_a_run(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    res = run_script("smoke.sh", SAVE_PATH=str(tmp_path))
    assert res.returncode == 2 and "not an earlier run's output folder" in res.stderr
    assert (tmp_path / "notes.txt").exists()


FAKE_PYTHON = r"""#!/usr/bin/env bash
# stands in for the project's python: records each call; generate / tasks write what the scripts check for
echo "$*" >> "$FAKE_LOG"
arg() { local want="$1"; shift; while (( $# )); do [[ "$1" == "$want" ]] && { echo "$2"; return; }; shift; done; }
case "$*" in
  "-m gaca_openrlhf.preflight"*) exit "${FAKE_PREFLIGHT_EXIT:-0}" ;;
  "-m agents.alfworld generate"*) out="$(arg --out "$@")"; mkdir -p "$out/json_2.1.1/train"
                                 arg --num-games "$@" > "$out/num_games" ;;
  "-m gaca_openrlhf.rollout.tasks alfworld"*)
    data="$(arg --data "$@")"; out="$(arg --out "$@")"; mkdir -p "$(dirname "$out")"
    for i in $(seq 1 "$(cat "$data/num_games")"); do echo "{\"input\": \"game$i\"}"; done > "$out" ;;
esac
exit "${FAKE_EXIT:-0}"
"""


def fake_tools(tmp_path, gpus=8, torch_ok=True):
    """A bin folder with a fake nvidia-smi listing ``gpus`` GPUs and a fake python (FAKE_PYTHON)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    smi = bin_dir / "nvidia-smi"
    lines = "".join(f'echo "GPU {i}: NVIDIA H100 80GB HBM3 (UUID: GPU-{i})"\n' for i in range(gpus))
    smi.write_text("#!/usr/bin/env bash\n" + (lines or 'echo "No devices were found"\n'))
    py = bin_dir / "python"
    text = FAKE_PYTHON
    if not torch_ok:
        text = text.replace('case "$*" in', 'case "$*" in\n  "-c import torch"*) echo "AssertionError: torch.cuda'
                            '.is_available() is False" >&2; exit 1 ;;')
    py.write_text(text)
    for f in (smi, py):
        f.chmod(0o755)
    return {"PATH": f"{bin_dir}:{os.environ['PATH']}", "PYTHON": str(py), "FAKE_LOG": str(tmp_path / "calls.log")}


def test_smoke_run_starts_from_an_empty_folder_and_regenerates_tasks(tmp_path):
    """Finding 2, the real (non-dry) path with stand-ins for python and nvidia-smi: the earlier run is moved aside,
    tasks.jsonl is regenerated from the generated games, the check gets the strict gap limit."""
    save = str(tmp_path / "smoke")
    populate_run(save)
    env = fake_tools(tmp_path)
    res = run_script("smoke.sh", DRY_RUN="0", SAVE_PATH=save, ALFWORLD_DATA="", GACA_CACHE=str(tmp_path / "cache"),
                     TASKS=str(tmp_path / "stale_tasks.jsonl"), **env)
    assert res.returncode == 0, res.stdout + res.stderr
    old = [p for p in os.listdir(tmp_path) if p.startswith("smoke.old-")]
    assert len(old) == 1 and os.path.exists(tmp_path / old[0] / "ckpt" / "_actor" / "global_step2")
    assert sorted(os.listdir(save)) == ["command.sh", "tasks.jsonl", "train.log"]  # nothing of the earlier run
    tasks = open(os.path.join(save, "tasks.jsonl")).read().splitlines()
    assert len(tasks) == 16 and "stale" not in "".join(tasks)  # 2 iterations x 8 tasks, from this run's games
    calls = open(env["FAKE_LOG"]).read().splitlines()
    assert any("--num-games 16" in c for c in calls)
    # the start-up preflight runs before training (many-nodes review, finding 4)
    pre = [i for i, c in enumerate(calls) if c.startswith("-m gaca_openrlhf.preflight")]
    train = [i for i, c in enumerate(calls) if c.startswith("-m gaca_openrlhf.cli.train_ppo")]
    assert len(pre) == 1 and len(train) == 1 and pre[0] < train[0], calls
    check = [c for c in calls if "smoke_check.py" in c]
    assert len(check) == 1 and check[0].endswith(f"{save} --iterations 2 --max-logprob-gap 0.1")
    argv = shlex.split(open(os.path.join(save, "command.sh")).read())
    assert option(argv, "--gaca.max_logprob_gap") == "0.1" and option(argv, "--gaca.backend") == "gpu"


@pytest.mark.parametrize("script", [f"train_{m}_{e}.sh" for m in METHODS for e in ENVS])
def test_long_runs_tolerate_a_noisy_sync_probe(script):
    """Finding 3: the long recipes stop only on a grossly broken weight sync (0.5); smoke and rehearsal keep 0.1."""
    (args,) = train_cmds(dry_run(script, SAVE_PATH="/tmp/out_x"))
    assert args.gaca.max_logprob_gap == 0.5
    (args,) = train_cmds(dry_run(script, SAVE_PATH="/tmp/out_x", MAX_LOGPROB_GAP="0.3"))
    assert args.gaca.max_logprob_gap == 0.3


def test_sync_gap_limits_of_the_other_scripts(tmp_path):
    assert {a.gaca.max_logprob_gap for a in train_cmds(dry_run("run_comparison.sh", OUT_ROOT="/tmp/cmp"))} == {0.5}
    assert {a.gaca.max_logprob_gap for a in train_cmds(dry_run("ablations_alfworld.sh", EVAL_SEEDS="0"))} == {0.5}
    (args,) = train_cmds(dry_run("smoke.sh", SAVE_PATH=str(tmp_path / "s")))
    assert args.gaca.max_logprob_gap == 0.1
    (args,) = train_cmds(dry_run("smoke.sh", SAVE_PATH=str(tmp_path / "s"), REHEARSAL="1"))
    assert args.gaca.max_logprob_gap == 0.1
    (args,) = train_cmds(dry_run("train_gaca_alfworld.sh", REHEARSAL="1", SAVE_PATH="/tmp/reh"))
    assert args.gaca.max_logprob_gap == 0.1
    text = open(os.path.join(GPU, "README.md")).read()
    assert "Weight-sync check" in text and "0.5 for the long recipes" in text


def test_gpu_backend_forced_outside_the_rehearsal():
    """Finding 4: GACA_BACKEND=gpu (and --gaca.backend gpu), whatever the caller's shell says; rehearsal unchanged."""
    for given in (None, "cpu", "auto"):
        env = {} if given is None else {"GACA_BACKEND": given}
        res = source_common("echo $GACA_BACKEND; env | grep ^GACA_BACKEND=", **env)
        assert res.returncode == 0 and res.stdout.split() == ["gpu", "GACA_BACKEND=gpu"], res.stderr
    res = source_common("echo $GACA_BACKEND", REHEARSAL="1")
    assert res.stdout.strip() == "rehearsal"
    for script in ("train_gaca_alfworld.sh", "train_grpo_webshop.sh", "smoke.sh"):
        (args,) = train_cmds(dry_run(script, SAVE_PATH="/tmp/out_backend"))
        assert args.gaca.backend == "gpu"


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
    (args,) = train_cmds(dry_run("smoke.sh", cwd=str(tmp_path), SAVE_PATH="smk"))
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
    assert args.gaca.mini_batch_steps % (args.train.micro_batch_size * 16) == 0
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
    (args,) = train_cmds(cmds)
    assert (args.actor.num_nodes, args.actor.num_gpus_per_node, args.vllm.num_engines) == (2, 4, 8)
    assert args.rollout.batch_size == 8 and int(option(gen, "--num-games")) == 16  # 2 iterations of 8 tasks
    assert args.gaca.mini_batch_steps == args.train.micro_batch_size * 8


@pytest.mark.parametrize("gpus,error", [(8, None), (16, None), (4, "lists 4 GPU(s) on this node, GPUS_PER_NODE=8")])
def test_gpu_preflight_counts_the_gpus_of_this_node(tmp_path, gpus, error):
    """The head node's nvidia-smi lists its own GPUs: GPUS_PER_NODE, not NUM_NODES x GPUS_PER_NODE."""
    env = fake_tools(tmp_path, gpus=gpus)
    res = source_common("echo preflight-ok", DRY_RUN="0", NUM_NODES="2", GPUS_PER_NODE="8", **env)
    if error is None:
        assert res.returncode == 0 and "preflight-ok" in res.stdout, res.stderr
    else:
        assert res.returncode == 1 and error in res.stderr


def test_rehearsal_of_two_nodes_is_refused():
    res = run_script("train_gaca_alfworld.sh", REHEARSAL="1", NUM_NODES="2", GPUS_PER_NODE="1")
    assert res.returncode == 2 and "one node only" in res.stderr and "not implemented" in res.stderr


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
    (args,) = train_cmds(dry_run(script, SAVE_PATH=str(tmp_path / "o")))
    assert args.env.max_failed_frac == 0.1
    (args,) = train_cmds(dry_run(script, SAVE_PATH=str(tmp_path / "o"), MAX_FAILED_FRAC="0.25"))
    assert args.env.max_failed_frac == 0.25


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
                   "WEBSHOP_HOST", "MAX_FAILED_FRAC", "preflight", "not implemented"):
        assert needle in section, needle


def test_rehearsal_takes_the_cpu_dtype_rule_and_the_node_keeps_bf16():
    def dtype(**env):  # the last --ds.param_dtype of the printed command wins (argparse)
        (cmd,) = [c for c in dry_run("train_gaca_alfworld.sh", SAVE_PATH="/tmp/out_d", **env)
                  if c[1:3] == ["-m", "gaca_openrlhf.cli.train_ppo"]]
        return [cmd[i + 1] for i, a in enumerate(cmd) if a == "--ds.param_dtype"][-1]

    assert dtype() == "bf16"
    assert dtype(REHEARSAL="1", MODEL="/m") == "auto"
    assert dtype(REHEARSAL="1", MODEL="/m", REHEARSAL_DTYPE="bf16") == "bf16"
