"""The multi-node rehearsal: ``REHEARSAL=1 NUM_NODES=2 GPUS_PER_NODE=1 bash examples/gpu/train_gaca_<env>.sh``.

Fast: the scripts' wiring with a stand-in python (examples/gpu/_rehearsal_cluster.sh, called from _common.sh): the
local cluster starts before the start-up preflight (which runs, as on real nodes), training gets its RAY_ADDRESS,
the node-use check runs after training, and the cluster is stopped on exit -- also when training or the check fails.
DRY_RUN=1 prints the 2-node command and starts nothing.

Slow (``--slow``): CI's real two-node run of the ALFWorld GACA script -- a local Ray cluster of 2 raylets with 1
logical GPU each -- is the resumed run of tests/examples/test_rehearsal_resume.py (a run killed after its first
checkpoint and resumed with ``RESUME=1``, both on 2 nodes), which checks it with :func:`check_two_node_run` here:
the script's own check (``REHEARSAL 2 NODES PASS``), 0 failed episodes, finite KL (non-zero after an update) and
policy loss, no non-finite log-prob, and rehearsal.json with the policy ranks, reference ranks and engines on both
nodes, the env workers and the trainer on nodes of the cluster; the cluster stopped and its state dir removed. A
separate fresh two-node ALFWorld run checked nothing more (one run and one cluster start-up less: CI time). Here:
the WebShop script's two-node run, the same checks (no env workers: its episodes run in the engines) and those of the
one-node rehearsal that do not depend on the node count (sync gap, mini-batch count, checkpoints, sleep/wake calls;
the one-node run itself is opt-in, CI time).
"""
from __future__ import annotations

import glob
import json
import math
import os
import shlex
import shutil
import subprocess
import tempfile

import pytest
from script_fakes import write_fake_python  # same folder (rootdir import mode)
from test_rehearsal_gpu_scripts import check_sleep_calls, check_training_rows

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GPU = os.path.join(ROOT, "examples", "gpu")

#: variables the scripts read: taken from the caller's shell only when a test passes them
SCRIPT_VARS = ("MODEL", "DRY_RUN", "WEBSHOP_URL", "ALFWORLD_DATA", "MINI_BATCH_STEPS", "MICRO_BATCH", "ITERATIONS",
               "TASKS_PER_ITER", "ROLLOUTS", "GACA_BACKEND", "LR", "MAX_STEPS", "SAVE_STEPS", "MAX_LOGPROB_GAP",
               "TASKS", "SEED", "GACA_CALLER_PWD", "REQUIRE_ALL_ITERATIONS", "N_GPUS", "NUM_NODES", "GPUS_PER_NODE",
               "WEBSHOP_HOST", "WEBSHOP_ADVERTISE_HOST", "WEBSHOP_PORT", "MAX_FAILED_FRAC", "CKPT_MAX_NUM",
               "REHEARSAL_DTYPE", "RAY_ADDRESS", "GACA_REHEARSAL_CLUSTER", "PYTHON", "GPU_PREFLIGHT", "RESUME",
               "REHEARSAL", "SAVE_PATH", "REHEARSAL_NODE_CPUS", "ENV_WORKER_CPUS", "VAL_GAMES", "VAL_EVERY", "VAL_TASKS")


def script_env(env):
    full = dict(os.environ)
    for k in SCRIPT_VARS:
        full.pop(k, None)
    full.update(env)
    return full


def fake_run(tmp_path, **env):
    py = write_fake_python(tmp_path / "python")  # each call recorded with the RAY_ADDRESS it saw
    log = tmp_path / "calls.log"
    model = tmp_path / "model"
    model.mkdir(exist_ok=True)
    (model / "config.json").write_text("{}")
    full = script_env({"REHEARSAL": "1", "NUM_NODES": "2", "GPUS_PER_NODE": "1", "PYTHON": str(py),
                       "FAKE_LOG": str(log), "FAKE_LOG_RAY_ADDRESS": "1", "MODEL": str(model),
                       "SAVE_PATH": str(tmp_path / "run"), "GACA_CACHE": str(tmp_path / "cache"), **env})
    res = subprocess.run(["bash", os.path.join(GPU, "train_gaca_alfworld.sh")], cwd=ROOT, env=full,
                         capture_output=True, text=True, timeout=120)
    calls = log.read_text().splitlines() if log.exists() else []
    return res, calls


def index(calls, needle):
    found = [i for i, c in enumerate(calls) if needle in c]
    assert len(found) == 1, (needle, calls)
    return found[0]


def test_two_node_rehearsal_starts_checks_and_stops_its_cluster(tmp_path):
    res, calls = fake_run(tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    start = index(calls, "-m gaca_openrlhf.cpu.local_cluster start")
    pre = index(calls, "-m gaca_openrlhf.preflight")
    train = index(calls, "-m gaca_openrlhf.cli.train_ppo")
    check = index(calls, "-m gaca_openrlhf.cpu.rehearsal_check")
    stop = index(calls, "-m gaca_openrlhf.cpu.local_cluster stop")
    assert start < pre < train < check < stop, calls
    argv = shlex.split(calls[start])
    opt = lambda a, k: a[a.index(k) + 1]  # noqa: E731
    assert (opt(argv, "--num-nodes"), opt(argv, "--gpus-per-node"), opt(argv, "--cpus-per-node")) == ("2", "1", "5")
    state_dir = opt(argv, "--state-dir")
    assert state_dir.startswith("/tmp/gaca-rc.") and opt(argv, "--owner-pid").isdigit()
    assert opt(shlex.split(calls[stop]), "--state-dir") == state_dir and not os.path.exists(state_dir)
    # preflight and training see the cluster (RAY_ADDRESS), the preflight is the real nodes' one (2 nodes, 2 GPUs)
    for i in (pre, train):
        assert calls[i].startswith("RAY_ADDRESS=127.0.0.1:4242 "), calls[i]
    pre_argv = shlex.split(calls[pre])
    assert opt(pre_argv, "--num-nodes") == "2" and opt(pre_argv, "--gpus") == "2"
    train_argv = shlex.split(calls[train])
    for k, v in (("--actor.num_nodes", "2"), ("--actor.num_gpus_per_node", "1"), ("--ref.num_nodes", "2"),
                 ("--vllm.num_engines", "2"), ("--run.backend", "rehearsal")):
        assert opt(train_argv, k) == v, k
    check_argv = shlex.split(calls[check])
    assert check_argv[3] == str(tmp_path / "run") and opt(check_argv, "--num-nodes") == "2"
    assert opt(check_argv, "--iterations") == "2"
    assert calls[start].startswith("RAY_ADDRESS= ")  # started fresh, not attached to a caller's cluster


@pytest.mark.parametrize("failure", [{"FAKE_TRAIN_EXIT": "3"}, {"FAKE_CHECK_EXIT": "1"}])
def test_the_cluster_is_stopped_when_training_or_the_check_fails(tmp_path, failure):
    res, calls = fake_run(tmp_path, **failure)
    assert res.returncode != 0
    stop = index(calls, "-m gaca_openrlhf.cpu.local_cluster stop")
    assert stop == len(calls) - 1
    if "FAKE_TRAIN_EXIT" in failure:
        assert not any("rehearsal_check" in c for c in calls)
    else:
        assert "failed its checks" in res.stderr


def test_a_given_ray_address_is_used_and_one_node_starts_nothing(tmp_path):
    res, calls = fake_run(tmp_path, RAY_ADDRESS="10.0.0.9:7000")
    assert res.returncode == 0, res.stderr
    assert not any("local_cluster" in c for c in calls) and "using the Ray cluster at RAY_ADDRESS" in res.stderr
    assert calls[index(calls, "cli.train_ppo")].startswith("RAY_ADDRESS=10.0.0.9:7000 ")
    (tmp_path / "one").mkdir()
    res, calls = fake_run(tmp_path / "one", NUM_NODES="1", GPUS_PER_NODE="2")
    assert res.returncode == 0, res.stderr
    assert not any("local_cluster" in c or "rehearsal_check" in c or "gaca_openrlhf.preflight" in c for c in calls)


def test_dry_run_prints_the_two_node_command_and_starts_nothing(tmp_path):
    res, calls = fake_run(tmp_path, DRY_RUN="1")
    assert res.returncode == 0, res.stderr
    assert not any("local_cluster" in c for c in calls)
    (cmd,) = [shlex.split(line) for line in res.stdout.splitlines() if "gaca_openrlhf.cli.train_ppo" in line]
    assert cmd[cmd.index("--actor.num_nodes") + 1] == "2" and cmd[cmd.index("--actor.num_gpus_per_node") + 1] == "1"
    assert "[dry-run] preflight:" in res.stderr


# ---- the real run (slow) ----

def rehearse_two_nodes(script: str, save: str) -> subprocess.CompletedProcess:
    env = script_env({"REHEARSAL": "1", "NUM_NODES": "2", "GPUS_PER_NODE": "1", "SAVE_PATH": save})
    return subprocess.run(["bash", os.path.join(GPU, script)], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=1500)


def cluster_dirs() -> set[str]:
    """The local clusters' state dirs on this machine (``/tmp/gaca-rc.*``, _rehearsal_cluster.sh)."""
    return set(glob.glob("/tmp/gaca-rc.*"))


def check_two_node_run(save: str, out: str, env_name: str) -> None:
    """The checks of a finished ``REHEARSAL=1 NUM_NODES=2 GPUS_PER_NODE=1`` run of ``train_gaca_<env_name>.sh``
    (``out``: its stdout and stderr; ``save``: its SAVE_PATH). Shared with test_rehearsal_resume.py, whose resumed
    run is CI's two-node ALFWorld rehearsal: the script's own check passed, every iteration of metrics.jsonl (a
    resumed run's: also the records it kept) has 0 failed episodes, a finite KL (non-zero once the policy moved),
    a finite policy loss and no non-finite log-prob, and rehearsal.json shows 2 alive nodes of 1 logical GPU each,
    policy ranks, reference ranks and engines on both, the trainer, env workers (ALFWorld) and the placement
    group's bundles on nodes of the cluster, and one weight sync per iteration of the run reaching every engine;
    the script started its cluster and stopped it. The caller checks that the state dir is gone."""
    assert "REHEARSAL 2 NODES PASS" in out  # the script's own check (gaca_openrlhf/cpu/rehearsal_check.py)
    with open(os.path.join(save, "metrics.jsonl")) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    assert len(rows) >= 2 and [r["rollout/failed_episodes"] for r in rows] == [0] * len(rows)
    # the one-node rehearsal's checks (tests/examples/test_rehearsal_gpu_scripts.py), which CI runs on two nodes for
    # ALFWorld: the k3 KL against the reference model, finite and non-zero once the policy has been updated
    assert all(r.get("kl") is not None and math.isfinite(r["kl"]) for r in rows) and rows[1]["kl"] != 0
    assert all(r["policy_loss"] is not None and math.isfinite(r["policy_loss"]) for r in rows)
    assert [(r["check/actor_logprobs_nonfinite"], r["check/ref_logprobs_nonfinite"]) for r in rows] == \
        [(0, 0)] * len(rows)
    with open(os.path.join(save, "rehearsal.json")) as f:
        rep = json.load(f)
    nodes = {n["node_id"] for n in rep["nodes"] if n["alive"]}
    assert len(nodes) == 2 and rep["cluster_resources"]["GPU"] == 2
    assert [n["gpus"] for n in rep["nodes"]] == [1.0, 1.0]
    for role in ("policy", "reference", "engines"):
        assert sorted(rep["placement"][role]) == sorted(nodes), (role, rep["placement"])
    assert set(rep["placement"]["trainer"]) <= nodes
    if env_name == "alfworld":  # 2 tasks x 2 rollouts per iteration, >= 2 iterations, from inside the engines
        assert len(rep["placement"]["env_workers"]) >= 4 and set(rep["placement"]["env_workers"]) <= nodes
    assert set(rep["placement_group"]["bundles_to_node_id"].values()) == nodes
    for e in rep["engines"]:
        calls = [c["call"] for c in e["calls"]]
        assert e["generate_calls"] > 0 and calls.count("update_weights") >= 2
    assert "local Ray cluster of 2 nodes" in out and "[local_cluster] stopped" in out


# CI's two-node rehearsal of each GACA script: ALFWorld's is the resumed run of test_rehearsal_resume.py, WebShop's
# is here; both also carry the one-node rehearsal's checks that do not depend on the node count (that one-node run is
# opt-in: test_rehearsal_gpu_scripts.py)
@pytest.mark.slow
@pytest.mark.parametrize("env_name", ["webshop"])
def test_two_node_rehearsal_of_the_gaca_script(env_name):
    save = tempfile.mkdtemp(prefix=f"gaca-rehearsal-2n-{env_name}-")
    before = cluster_dirs()
    try:
        res = rehearse_two_nodes(f"train_gaca_{env_name}.sh", save)
        out = res.stdout + res.stderr
        assert res.returncode == 0, out[-8000:]
        with open(os.path.join(save, "metrics.jsonl")) as f:
            assert len([line for line in f if line.strip()]) == 2
        check_two_node_run(save, out, env_name)
        with open(os.path.join(save, "metrics.jsonl")) as f:
            check_training_rows(save, [json.loads(line) for line in f if line.strip()])
        with open(os.path.join(save, "rehearsal.json")) as f:
            check_sleep_calls(json.load(f))
        assert cluster_dirs() - before == set()  # the cluster was stopped and its state dir removed
    finally:
        if not os.environ.get("GACA_KEEP_REHEARSAL"):
            shutil.rmtree(save, ignore_errors=True)
