"""A node that fails its own start-up check stops the run, named, before any model loads (issue 37).

Slow (``--slow``): ``REHEARSAL=1 NUM_NODES=2 GPUS_PER_NODE=1 REHEARSAL_GPU_CHECK=1 bash
examples/gpu/train_grpo_alfworld.sh`` on a real local Ray cluster of 2 raylets (gaca_openrlhf/cpu/local_cluster.py),
the start-up preflight running its per-node checks as one Ray task pinned to each node. What cannot run here is a
GPU: each node gets a stand-in ``nvidia-smi`` on its PATH (``REHEARSAL_NODE_ENV``, set in that raylet's environment,
so only the tasks on that node see it). Node 0's reports one idle 80 GB GPU; node 1's reports its GPU held by a
stray vLLM engine of an earlier run (the case of a crashed run on a real cluster: issue 37, finding 3). The run must
stop at the preflight with exit 1, its error naming node 1 (the Ray node id whose task saw the busy GPU, different
from the node reported healthy) and the process holding the memory, and start nothing after it: no ``train_ppo``,
no metrics, no checkpoint; its cluster stopped and its state dir removed.

Fast: ``local_cluster``'s ``--node-env`` parsing, and the scripts' wiring of REHEARSAL_NODE_ENV /
REHEARSAL_GPU_CHECK / GPU_WAIT_S with the fake python of script_fakes.py.
"""
from __future__ import annotations

import os
import re
import shlex
import subprocess
import tempfile
import time

import pytest
from script_fakes import write_fake_python  # same folder (rootdir import mode)
from test_rehearsal_resume import script_env  # the scripts' variables cleared from the caller's shell (same folder)

from gaca_openrlhf.cpu import local_cluster as lc

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GPU = os.path.join(ROOT, "examples", "gpu")

#: the stand-in for a GPU held by a crashed run's engine (process names hold no comma: nvidia-smi's CSV)
STRAY = "VLLM::EngineCore-stray-of-node-1"


def write_nvidia_smi(folder, used_mib: int, app: str | None) -> str:
    """A stand-in ``nvidia-smi`` answering the two queries node_check makes (and ``-L``): one 80 GB GPU with
    ``used_mib`` in use and, if ``app``, one compute process (pid 4242) holding it."""
    os.makedirs(folder, exist_ok=True)
    uuid = f"GPU-{os.path.basename(folder)}"
    apps = f'echo "{uuid}, 4242, {app}, {used_mib - 500}"' if app else "true"
    path = os.path.join(folder, "nvidia-smi")
    with open(path, "w") as f:
        f.write(f"""#!/bin/sh
case "$*" in
  *--query-gpu=*) echo "0, {uuid}, {used_mib}, 81559" ;;
  *--query-compute-apps=*) {apps} ;;
  *) echo "GPU 0: stand-in ({uuid})" ;;
esac
""")
    os.chmod(path, 0o755)
    return folder


# ---- fast ----

def test_node_env_items_are_parsed_and_checked():
    # Guards: an item applied to the wrong node, a value cut at its first ':' or '=', a node outside the cluster
    # taken silently (the rehearsal would then test nothing).
    got = lc.parse_node_env(["1:PATH=/a:/b", "0:X=y=z", "1:EMPTY="], 2)
    assert got == {1: {"PATH": "/a:/b", "EMPTY": ""}, 0: {"X": "y=z"}}
    for bad in ("2:PATH=/a", "PATH=/a", "x:PATH=/a", "1:=v", "1:9X=v"):
        with pytest.raises(ValueError, match="--node-env"):
            lc.parse_node_env([bad], 2)
    with pytest.raises(ValueError, match="node_env"):
        lc.start(2, 1, 1, state_dir=tempfile.mkdtemp(prefix="gaca-rc.", dir="/tmp"), node_env={3: {"A": "b"}})


def fake_run(tmp_path, **env):
    py = write_fake_python(tmp_path / "python")
    log = tmp_path / "calls.log"
    model = tmp_path / "model"
    model.mkdir(exist_ok=True)
    (model / "config.json").write_text("{}")
    full = script_env({"REHEARSAL": "1", "NUM_NODES": "2", "GPUS_PER_NODE": "1", "PYTHON": str(py),
                       "FAKE_LOG": str(log), "MODEL": str(model), "SAVE_PATH": str(tmp_path / "run"),
                       "GACA_CACHE": str(tmp_path / "cache"), **env})
    res = subprocess.run(["bash", os.path.join(GPU, "train_grpo_alfworld.sh")], cwd=ROOT, env=full,
                         capture_output=True, text=True, timeout=120)
    calls = [shlex.split(c) for c in (log.read_text().splitlines() if log.exists() else [])]
    return res, calls


def one_call(calls, *prefix):
    found = [c for c in calls if c[:len(prefix) + 1] == ["-m", *prefix]]
    assert len(found) == 1, (prefix, calls)
    return found[0]


def test_the_rehearsal_passes_each_node_its_environment_and_checks_gpus_only_when_asked(tmp_path):
    # Guards: REHEARSAL_NODE_ENV dropped on the way to the cluster (every node alike again), REHEARSAL_GPU_CHECK
    # ignored (no GPU check: the failing node is never looked at), GPU_WAIT_S not passed on, or the rehearsal's
    # default changed to check GPUs that do not exist.
    res, calls = fake_run(tmp_path)
    assert res.returncode == 0, res.stderr
    start = one_call(calls, "gaca_openrlhf.cpu.local_cluster", "start")
    assert "--node-env" not in start
    assert "--gpus-per-node" not in one_call(calls, "gaca_openrlhf.preflight")
    (tmp_path / "asked").mkdir()
    res, calls = fake_run(tmp_path / "asked", REHEARSAL_NODE_ENV="0:PATH=/s0:/usr/bin  1:PATH=/s1:/usr/bin",
                          REHEARSAL_GPU_CHECK="1", GPU_WAIT_S="7")
    assert res.returncode == 0, res.stderr
    start = one_call(calls, "gaca_openrlhf.cpu.local_cluster", "start")
    items = [start[i + 1] for i, a in enumerate(start) if a == "--node-env"]
    assert items == ["0:PATH=/s0:/usr/bin", "1:PATH=/s1:/usr/bin"]
    pre = one_call(calls, "gaca_openrlhf.preflight")
    opt = {pre[i]: pre[i + 1] for i in range(len(pre) - 1) if pre[i].startswith("--gpu")}
    assert opt["--gpus-per-node"] == "1" and opt["--gpu-wait-s"] == "7" and float(opt["--gpu-mem-share"]) > 0


# ---- slow: a real 2-node cluster, one node's GPU held by a stray process ----

@pytest.mark.slow
def test_a_node_failing_its_gpu_check_stops_the_rehearsal_named(tmp_path):
    cache = os.environ.get("GACA_CACHE") or os.environ.get("GACA_CACHE_DIR") or os.path.expanduser(
        "~/.cache/gaca_openrlhf")
    games = 6  # the resume rehearsal's games (cached under GACA_CACHE: generated once for both)
    free = write_nvidia_smi(str(tmp_path / "smi-free"), 1000, None)
    busy = write_nvidia_smi(str(tmp_path / "smi-busy"), 70000, STRAY)
    path = os.environ["PATH"]
    save = str(tmp_path / "run")
    env = script_env({"REHEARSAL": "1", "NUM_NODES": "2", "GPUS_PER_NODE": "1", "SAVE_PATH": save,
                      "ITERATIONS": "1", "TASKS_PER_ITER": "2", "VAL_GAMES": "0", "ALFWORLD_GAMES": str(games),
                      "ALFWORLD_DATA": os.path.join(cache, f"alfworld_rehearsal_games_{games}"),
                      "REHEARSAL_GPU_CHECK": "1", "GPU_WAIT_S": "2",
                      "REHEARSAL_NODE_ENV": f"0:PATH={free}:{path} 1:PATH={busy}:{path}"})
    t0 = time.time()
    res = subprocess.run(["bash", os.path.join(GPU, "train_grpo_alfworld.sh")], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=900)
    wall = time.time() - t0
    err = res.stderr
    assert res.returncode == 1, err[-6000:]
    failed = re.findall(r"error: preflight: node \S+ \((\w{8})\): GPUs: 0 free of 1, the run needs 1 .*", err)
    healthy = re.findall(r"preflight: ok: node \S+ \((\w{8})\): GPUs: 1 free of 1", err)
    assert len(failed) == 1 and len(healthy) == 1, err[-6000:]
    assert failed[0] != healthy[0]  # two different Ray nodes, the failing one named by its own id
    line = next(ln for ln in err.splitlines() if ln.startswith(f"error: preflight: node") and failed[0] in ln)
    assert STRAY in line and "4242" in line and "after waiting 2 s" in line, line
    assert "start-up preflight failed" in err
    # nothing started after the preflight: no training process, no record, no checkpoint
    assert "train_ppo" not in res.stdout and not os.path.exists(os.path.join(save, "metrics.jsonl"))
    assert not os.path.exists(os.path.join(save, "ckpt")), os.listdir(save)
    states = re.findall(r"\[rehearsal\] starting a local Ray cluster: .*\(state (/tmp/gaca-rc\.[^)\s]+)\)", err)
    assert len(states) == 1
    deadline = time.time() + 30
    while os.path.exists(states[0]) and time.time() < deadline:
        time.sleep(0.5)
    assert not os.path.exists(states[0]), "the failed run's cluster was not stopped"
    print(f"failing-node rehearsal: stopped at the preflight in {wall:.0f} s: {line}")
