"""One node's own resources, checked before any model loads: its GPUs (free memory against the vLLM engines'
share, the processes that hold it), the data and model paths, host RAM against the memory plan.

:mod:`gaca_openrlhf.preflight` runs these on the node it is started on. Each function reads one thing of the node
(``nvidia-smi``, a path, ``/proc/meminfo``) through a parameter the tests replace, and returns
``(ok, warnings, errors)`` lines that name the numbers and the node.

GPU memory: vLLM refuses to start unless ``gpu_memory_utilization`` x the GPU's memory is free when it starts
(``VLLM_MEM``, ``--vllm.gpu_memory_utilization``). A GPU counts as **free** when no compute process runs on it and
at least that share of its memory is free; stray processes of an earlier run (Ray workers, vLLM engines after a
crash or between the smoke's legs) often still hold memory for a few seconds after the run ended, so a GPU that is
not free is looked at again every ``poll_s`` seconds for up to ``wait_s`` seconds before it is reported, with the
processes on it (``nvidia-smi --query-compute-apps``: pid, name, MiB).
"""
from __future__ import annotations

import os
import socket
import subprocess
import time
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Sequence, Tuple

MIB = 2 ** 20
GIB = 2 ** 30

GPU_QUERY = ["nvidia-smi", "--query-gpu=index,uuid,memory.used,memory.total", "--format=csv,noheader,nounits"]
APPS_QUERY = ["nvidia-smi", "--query-compute-apps=gpu_uuid,pid,process_name,used_memory",
              "--format=csv,noheader,nounits"]


@dataclass
class Gpu:
    """One GPU as nvidia-smi reports it (MiB)."""
    index: int
    uuid: str
    used_mib: int
    total_mib: int
    apps: List[Tuple[int, str, int]] = field(default_factory=list)  # (pid, process name, MiB)

    @property
    def free_mib(self) -> int:
        return self.total_mib - self.used_mib


@dataclass
class NodeReport:
    """What one node's checks found; ``node`` names it in every line."""
    node: str
    ok: List[str] = field(default_factory=list)
    warnings: List[str] = field(default_factory=list)
    errors: List[str] = field(default_factory=list)


def run_nvidia_smi(cmd: Sequence[str]) -> str:
    """stdout of an nvidia-smi query; raises RuntimeError with its message when it fails."""
    try:
        res = subprocess.run(list(cmd), capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise RuntimeError(f"{cmd[0]} could not run: {e!r}") from e
    if res.returncode != 0:
        raise RuntimeError(f"`{' '.join(cmd)}` exited with {res.returncode}: {(res.stderr or res.stdout).strip()}")
    return res.stdout


def _rows(text: str) -> List[List[str]]:
    return [[x.strip() for x in line.split(",")] for line in text.splitlines() if line.strip()]


def read_gpus(smi: Callable[[Sequence[str]], str] = run_nvidia_smi) -> List[Gpu]:
    """This node's GPUs with the compute processes on each (lines nvidia-smi cannot fill, ``[N/A]``, are skipped)."""
    gpus: Dict[str, Gpu] = {}
    for row in _rows(smi(GPU_QUERY)):
        try:
            gpus[row[1]] = Gpu(int(row[0]), row[1], int(float(row[2])), int(float(row[3])))
        except (IndexError, ValueError):
            continue
    for row in _rows(smi(APPS_QUERY)):
        if len(row) < 4 or row[0] not in gpus:
            continue
        try:
            mib = int(float(row[3]))
        except ValueError:  # [N/A]: no per-process accounting (some containers)
            mib = 0
        gpus[row[0]].apps.append((int(row[1]) if row[1].isdigit() else -1, row[2], mib))
    return sorted(gpus.values(), key=lambda g: g.index)


def visible(gpus: List[Gpu], cuda_visible: Optional[str]) -> List[Gpu]:
    """The GPUs a process started with ``CUDA_VISIBLE_DEVICES=cuda_visible`` would use (indices or UUIDs)."""
    if not cuda_visible:
        return gpus
    picks = [p.strip() for p in cuda_visible.split(",") if p.strip()]
    by_index = {str(g.index): g for g in gpus}
    by_uuid = {g.uuid: g for g in gpus}
    return [g for p in picks for g in [by_index.get(p) or by_uuid.get(p)] if g is not None]


def needed_mib(gpu: Gpu, share: float) -> int:
    """MiB vLLM asks to be free on ``gpu`` at start-up: ``share`` of its memory."""
    return int(share * gpu.total_mib + 0.999)


def _is_free(gpu: Gpu, share: float) -> bool:
    return not gpu.apps and gpu.free_mib >= needed_mib(gpu, share)


def _describe(gpu: Gpu, share: float) -> str:
    apps = ", ".join(f"pid {pid} {name} ({mib} MiB)" for pid, name, mib in gpu.apps) or "no compute process listed"
    return (f"GPU {gpu.index}: {gpu.free_mib} MiB free of {gpu.total_mib}, vLLM needs {needed_mib(gpu, share)} "
            f"({share:g} x {gpu.total_mib}); held by {apps}")


def check_gpus(report: NodeReport, gpus_needed: int, share: float, wait_s: float = 30.0, poll_s: float = 5.0,
               smi: Callable[[Sequence[str]], str] = run_nvidia_smi, cuda_visible: Optional[str] = None,
               sleep: Callable[[float], None] = time.sleep) -> None:
    """At least ``gpus_needed`` free GPUs (no compute process, ``share`` of the memory free) on this node, looked at
    again for up to ``wait_s`` seconds while some are not; the GPUs that stay busy are named with their processes."""
    waited = 0.0
    while True:
        try:
            gpus = visible(read_gpus(smi), cuda_visible)
        except RuntimeError as e:
            report.errors.append(f"{report.node}: GPUs: {e}")
            return
        free = [g for g in gpus if _is_free(g, share)]
        if len(free) >= gpus_needed or waited >= wait_s:
            break
        step = min(poll_s, wait_s - waited)
        sleep(step)
        waited += step
    busy = [g for g in gpus if not _is_free(g, share)]
    after = f" (after waiting {waited:g} s for them to be released)" if waited else ""
    if len(free) >= gpus_needed:
        report.ok.append(f"{report.node}: GPUs: {len(free)} free of {len(gpus)} >= {gpus_needed} needed, each with "
                         f">= {share:g} of its memory free for vLLM")
        return
    where = f" (CUDA_VISIBLE_DEVICES={cuda_visible})" if cuda_visible else ""
    report.errors.append(
        f"{report.node}: GPUs: {len(free)} free of {len(gpus)}{where}, the run needs {gpus_needed} with "
        f"{share:g} of their memory free (VLLM_MEM){after}. " + "; ".join(_describe(g, share) for g in busy)
        + ". Stop those processes (a stray Ray or vLLM process of an earlier run: `ray stop`, or kill the pids), "
          "wait for another job to end, or lower VLLM_MEM")


def check_paths(report: NodeReport, paths: Sequence[Tuple[str, str]],
                exists: Callable[[str], bool] = os.path.exists) -> None:
    """Each (what, path) exists on this node (data, task files, a local model folder: shared storage or copies)."""
    missing = [f"{what}={path}" for what, path in paths if not exists(path)]
    if missing:
        report.errors.append(f"{report.node}: missing on this node: {', '.join(missing)} (every node reads them: "
                             "shared storage, or the same copy at the same path on each node)")
    elif paths:
        report.ok.append(f"{report.node}: paths present: {', '.join(w for w, _ in paths)}")


def fetch_health(url: str, timeout: float = 5.0) -> dict:
    """``url/health`` as JSON."""
    import json
    import urllib.request

    with urllib.request.urlopen(url.rstrip("/") + "/health", timeout=timeout) as r:  # noqa: S310 - the run's URL
        return json.load(r)


def check_server(report: NodeReport, url: str, run_token: Optional[str],
                 fetch: Callable[[str], dict] = fetch_health) -> None:
    """The env server answers ``url/health`` from this node and, with ``run_token``, is this run's server (its
    /health echoes the token the launch script started it with), not a leftover one on the same port."""
    try:
        health = fetch(url)
    except Exception as e:  # noqa: BLE001 - any failure to answer is the finding
        report.errors.append(f"{report.node}: {url}/health does not answer from this node: {e!r} (the server's "
                             "address as the other nodes reach it: the launch scripts' <ENV>_ADVERTISE_HOST, its "
                             "bind address: <ENV>_HOST, a firewall)")
        return
    got = health.get("run_token") if isinstance(health, dict) else None
    if run_token and got != run_token:
        report.errors.append(f"{report.node}: {url}/health is answered by another server (run token {got!r}, not "
                             f"this run's {run_token!r}): a leftover server on that port, or the URL names another "
                             "machine")
        return
    report.ok.append(f"{report.node}: {url}/health answers" + (" (this run's server)" if run_token else ""))


def mem_available_bytes(meminfo: str = "/proc/meminfo") -> int:
    """``MemAvailable`` of this node (what can be allocated without swapping)."""
    with open(meminfo) as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no MemAvailable in {meminfo}")


def check_host_ram(report: NodeReport, needed_bytes: int, detail: str,
                   available: Callable[[], int] = mem_available_bytes) -> None:
    """Host RAM available on this node against the memory plan's host share (``detail`` says what it counts)."""
    try:
        have = available()
    except (OSError, RuntimeError, ValueError) as e:
        report.warnings.append(f"{report.node}: host RAM: not checked ({e})")
        return
    if have < needed_bytes:
        report.errors.append(
            f"{report.node}: host RAM: {have / GIB:.1f} GiB available, the run pins about {needed_bytes / GIB:.1f} "
            f"GiB on this node ({detail}) before Ray's object store: the first offload would fail. Use more nodes "
            "(fewer GPUs per node share the states), a node with more RAM, or free it")
    else:
        report.ok.append(f"{report.node}: host RAM: {have / GIB:.1f} GiB available >= {needed_bytes / GIB:.1f} GiB "
                         f"({detail})")


def node_name() -> str:
    """How this node is named in the reports (its host name)."""
    return socket.gethostname()
