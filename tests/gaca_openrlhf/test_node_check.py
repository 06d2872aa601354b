"""gaca_openrlhf.node_check: one node's GPUs, paths and host RAM, before any model loads.

No GPU here: a stub ``nvidia-smi`` on PATH stands in for the driver's tool. It answers the two queries the check
makes (``--query-gpu`` and ``--query-compute-apps``) from CSV files a test writes, in nvidia-smi's
``--format=csv,noheader,nounits`` layout; ``gpus.<k>.csv`` / ``apps.<k>.csv`` are the answers at the k-th look
(k = 0, 1, ...; the last one given is repeated), so a process that exits while the check waits can be staged.
The check really runs it as a subprocess and parses its output; only the waiting (``sleep``) is recorded instead
of slept.
"""
from __future__ import annotations

import os
import stat

import pytest

from gaca_openrlhf import node_check as nc

STUB = r"""#!/usr/bin/env bash
# stands in for nvidia-smi (tests/gaca_openrlhf/test_node_check.py)
dir="$FAKE_SMI_DIR"
[[ -n "${FAKE_SMI_FAIL:-}" ]] && { echo "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver"; exit 9; }
k="$(cat "$dir/looks" 2>/dev/null || echo 0)"
pick() { local n="$k"; while (( n > 0 )) && [[ ! -f "$dir/$1.$n.csv" ]]; do n=$((n - 1)); done; cat "$dir/$1.$n.csv"; }
case "$1" in
  --query-gpu=*) pick gpus ;;
  --query-compute-apps=*) pick apps; echo $((k + 1)) > "$dir/looks" ;;
  *) echo "unexpected: $*" >&2; exit 2 ;;
esac
"""

TOTAL = 81559  # MiB of an 80 GB H100, as nvidia-smi reports it


def gpu_lines(used):
    return "".join(f"{i}, GPU-{i}, {u}, {TOTAL}\n" for i, u in enumerate(used))


@pytest.fixture
def smi(tmp_path, monkeypatch):
    """Install the stub; returns stage(k, used MiB per GPU, apps [(gpu, pid, name, MiB)])."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "nvidia-smi").write_text(STUB)
    (bin_dir / "nvidia-smi").chmod(0o755 | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_SMI_DIR", str(tmp_path))

    def stage(k, used, apps=()):
        (tmp_path / f"gpus.{k}.csv").write_text(gpu_lines(used))
        (tmp_path / f"apps.{k}.csv").write_text("".join(f"GPU-{g}, {pid}, {name}, {mib}\n" for g, pid, name, mib in apps))

    return stage


def check(n=8, share=0.6, wait_s=30.0, cuda_visible=None):
    rep, slept = nc.NodeReport("node 10.0.0.7"), []
    nc.check_gpus(rep, n, share, wait_s=wait_s, poll_s=5.0, cuda_visible=cuda_visible, sleep=slept.append)
    return rep, slept


def test_free_gpus_pass(smi):
    smi(0, [300] * 8)
    rep, slept = check()
    assert rep.errors == [] and slept == []
    assert rep.ok == ["node 10.0.0.7: GPUs: 8 free of 8 >= 8 needed, each with >= 0.6 of its memory free for vLLM"]


def test_a_stray_process_is_named_after_the_wait(smi):
    # Guards: a check that reports without waiting for an earlier run's processes to exit, or that does not say
    # which process holds the memory (the user is left with vLLM's own "free memory" error after model loads).
    smi(0, [300, 300, 300, 62000, 300, 300, 300, 300], apps=[(3, 4242, "ray::RayWorkerWrapper", 61700)])
    rep, slept = check()
    assert sum(slept) == 30.0 and slept == [5.0] * 6
    (err,) = rep.errors
    assert err.startswith("node 10.0.0.7: GPUs: 7 free of 8, the run needs 8 with 0.6 of their memory free "
                          "(VLLM_MEM) (after waiting 30 s for them to be released). ")
    assert f"GPU 3: {TOTAL - 62000} MiB free of {TOTAL}, vLLM needs 48936 (0.6 x {TOTAL}); held by pid 4242 " \
           "ray::RayWorkerWrapper (61700 MiB)" in err
    assert "ray stop" in err and "lower VLLM_MEM" in err


def test_memory_released_during_the_wait_passes(smi):
    # Guards: the state read once (a GPU freed a few seconds later still fails the run).
    smi(0, [300] * 7 + [70000], apps=[(7, 99, "python", 69000)])
    smi(2, [300] * 8)
    rep, slept = check()
    assert rep.errors == [] and slept == [5.0, 5.0]
    assert "8 free of 8" in rep.ok[0]


def test_a_small_job_of_another_user_makes_a_gpu_busy(smi):
    # Free memory enough for vLLM, but a compute process runs there: on a shared node that GPU is not free.
    # Guards: counting total GPUs (or memory only).
    smi(0, [300] * 7 + [2000], apps=[(7, 31337, "/usr/bin/python3", 1700)])
    rep, _ = check(wait_s=0)
    (err,) = rep.errors
    assert "7 free of 8" in err and "GPU 7:" in err and "pid 31337 /usr/bin/python3 (1700 MiB)" in err
    assert "after waiting" not in err  # --gpu-wait-s 0: no wait


def test_exactly_the_share_free_is_enough():
    # Guards: an off-by-one in the share (> for >=), which refuses a GPU vLLM accepts.
    g = nc.Gpu(0, "GPU-0", used_mib=TOTAL - 48936, total_mib=TOTAL)
    assert nc.needed_mib(g, 0.6) == 48936 and nc._is_free(g, 0.6)
    assert not nc._is_free(nc.Gpu(0, "GPU-0", used_mib=TOTAL - 48935, total_mib=TOTAL), 0.6)


def test_only_the_visible_gpus_count(smi):
    # CUDA_VISIBLE_DEVICES=0,1 on a node whose GPU 5 is someone else's. Guards: a busy GPU the run never uses
    # failing it, and a visible busy one (by UUID too) not failing it.
    smi(0, [300, 300, 300, 300, 300, 70000, 300, 300], apps=[(5, 7, "other", 69000)])
    rep, _ = check(n=2, cuda_visible="0,1", wait_s=0)
    assert rep.errors == [] and "2 free of 2" in rep.ok[0]
    rep, _ = check(n=2, cuda_visible="GPU-5,1", wait_s=0)
    assert "1 free of 2 (CUDA_VISIBLE_DEVICES=GPU-5,1)" in rep.errors[0]


def test_nvidia_smi_failing_is_reported(smi, monkeypatch):
    monkeypatch.setenv("FAKE_SMI_FAIL", "1")
    rep, _ = check()
    (err,) = rep.errors
    assert err.startswith("node 10.0.0.7: GPUs: `nvidia-smi --query-gpu=") and "exited with 9" in err
    assert "couldn't communicate with the NVIDIA driver" in err


def test_na_process_memory_is_read_as_zero(smi):
    # some containers report [N/A] for per-process memory: the process still makes its GPU busy
    smi(0, [300, 9000], apps=[(1, 55, "vllm", "[N/A]")])
    gpus = nc.read_gpus()
    assert [g.apps for g in gpus] == [[], [(55, "vllm", 0)]]


def test_paths(tmp_path):
    (tmp_path / "data").mkdir()
    rep = nc.NodeReport("node b")
    nc.check_paths(rep, [("ALFWORLD_DATA", str(tmp_path / "data")), ("TASKS", str(tmp_path / "tasks.jsonl"))])
    (err,) = rep.errors
    assert err.startswith(f"node b: missing on this node: TASKS={tmp_path / 'tasks.jsonl'} (every node")
    rep = nc.NodeReport("node b")
    nc.check_paths(rep, [("ALFWORLD_DATA", str(tmp_path / "data"))])
    assert rep.ok == ["node b: paths present: ALFWORLD_DATA"] and not rep.errors


def test_host_ram():
    rep = nc.NodeReport("node c")
    nc.check_host_ram(rep, 230 * nc.GIB, "7B states + backups", available=lambda: 200 * nc.GIB)
    (err,) = rep.errors
    assert "node c: host RAM: 200.0 GiB available, the run pins about 230.0 GiB on this node (7B states" in err
    rep = nc.NodeReport("node c")
    nc.check_host_ram(rep, 230 * nc.GIB, "x", available=lambda: 400 * nc.GIB)
    assert not rep.errors and "400.0 GiB available >= 230.0 GiB" in rep.ok[0]


def test_mem_available_reads_meminfo(tmp_path):
    (tmp_path / "meminfo").write_text("MemTotal:  1000 kB\nMemFree:  10 kB\nMemAvailable:  600 kB\n")
    assert nc.mem_available_bytes(str(tmp_path / "meminfo")) == 600 * 1024
    rep = nc.NodeReport("n")
    (tmp_path / "bad").write_text("MemTotal: 1 kB\n")
    nc.check_host_ram(rep, 1, "x", available=lambda: nc.mem_available_bytes(str(tmp_path / "bad")))
    assert rep.warnings == [f"n: host RAM: not checked (no MemAvailable in {tmp_path / 'bad'})"]


@pytest.mark.parametrize("health, token, expect", [
    ({"goals": 3, "run_token": "run-1"}, "run-1", "ok"),
    ({"goals": 3}, None, "ok"),                                      # no token asked: any answer will do
    ({"goals": 3, "run_token": "run-0"}, "run-1", "another server (run token 'run-0'"),
    ({"goals": 3}, "run-1", "another server (run token None"),       # an older server, started without a token
    (OSError("Connection refused"), "run-1", "does not answer from this node: OSError('Connection refused')"),
])
def test_server_health_with_the_run_token(health, token, expect):
    # Guards: a leftover server on the port (of an earlier run, perhaps another catalog) taken for this run's.
    def fetch(url):
        if isinstance(health, Exception):
            raise health
        return health
    rep = nc.NodeReport("node 10.0.0.6 (bbbbbbbb)")
    nc.check_server(rep, "http://10.0.0.5:3000", token, fetch=fetch)
    if expect == "ok":
        assert rep.errors == [] and rep.ok[0].startswith("node 10.0.0.6 (bbbbbbbb): http://10.0.0.5:3000/health answers")
    else:
        (err,) = rep.errors
        assert err.startswith("node 10.0.0.6 (bbbbbbbb): http://10.0.0.5:3000/health") and expect in err
