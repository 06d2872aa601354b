"""Start-up checks of the examples/gpu launch scripts, run on the head node before any model loads.

    python -m gaca_openrlhf.preflight --num-nodes 1 --gpus 8 --env-workers 128 --env-worker-cpus 0.1 \\
        --disk SAVE_PATH --model MODEL --ckpt-max-num 2 [--url http://HEAD:3000]

Each check either passes (one ``preflight: ok`` line on stderr) or adds an error naming its numbers; all errors are
printed, then the exit status is 1 (0 when every check passed). ``examples/gpu/_common.sh`` (``run_preflight``) calls
it unless ``DRY_RUN=1`` (it prints the command instead), ``REHEARSAL=1`` or ``GPU_PREFLIGHT=0``.

* **Ray CPUs/GPUs** (``--gpus``, ``--env-workers``, ``--env-worker-cpus`` or ``--ray-cpus-needed``): the run takes
  one CPU per placement-group bundle (one bundle per GPU, ``--train.colocate_all``), one for the trainer and
  ``ENV_WORKER_CPUS`` per ALFWorld env worker (``TASKS_PER_ITER x ROLLOUTS`` of them, placed outside the placement
  group; examples/gpu/README.md "Env worker CPUs"). With the Ray cluster training's ``ray.init()`` attaches to
  (``RAY_ADDRESS``, or the last one started on this machine with ``ray start``) its *free* CPUs and its GPUs are
  compared with that; without one, training's ``ray.init()`` starts a local Ray with this machine's CPUs, which are
  compared instead -- and more than one node without a cluster is an error (a local Ray has this node's GPUs only:
  the placement group would wait forever).
* **Disk** (``--disk``, ``--disk-needed-gb`` or ``--model`` + ``--ckpt-max-num``): free space at the output folder
  (its nearest existing parent) against the checkpoints kept: per DeepSpeed ZeRO-3 checkpoint ~16 bytes/parameter
  (bf16 weights + fp32 master weights + Adam m and v, summed over all ranks' shards), per HF copy 2 bytes/parameter;
  ``--ckpt.max_num`` DeepSpeed checkpoints, ``max_num + 1`` HF copies at the peak (the oldest is removed after the
  new one is written, ``gaca_openrlhf/trainer/actors.py``) and the final HF model, plus ``--hf-kept`` HF copies kept
  apart from the rotation (``EVAL_CKPTS=1`` of the comparison and ablation scripts keeps every HF checkpoint in
  ``SAVE_PATH/hf/``). The parameter count comes from the model's config.json (a local folder or the Hugging Face
  cache), else from its name (``...-7B-...``).
* **Env server** (``--url``, ``--env``): ``URL/health`` answers from this node. Env workers on every node use the
  same URL. What the check names comes from the environment's spec (``EnvSpec.server_preflight``: WebShop's);
  without ``--env`` it is the one registered environment that has a server (the launch scripts pass ``--url`` alone).

* **Each node's own resources** (:mod:`gaca_openrlhf.node_check`), on every node of the Ray cluster training
  attaches to (one Ray task pinned to each alive node, asking for no GPU), else on this node:
  ``--gpus-per-node N --gpu-mem-share VLLM_MEM``: N free GPUs (no compute process, VLLM_MEM of the memory free),
  looked at again for up to ``--gpu-wait-s`` seconds, the processes that hold the others named;
  ``--path WHAT=PATH`` (repeatable): data, task files, a local model folder present on the node;
  ``--host-ram`` (with ``--model``): available RAM against the memory plan's host share
  (:func:`gaca_openrlhf.memory_plan.host_bytes_per_node`); ``--url`` with several nodes or ``--run-token``: the
  env server's ``/health`` answers from the node, echoing the run's token. A failing node is named with its address.

Every external query (Ray, disk, HTTP, config lookup, the per-node runner) is a parameter of :func:`run_checks`, for
the tests.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import urllib.request
from dataclasses import dataclass, field
from typing import Callable, List, Optional, Sequence, Tuple

from gaca_openrlhf.model_spec import BUILTIN, cached_config, load_spec, model_params  # noqa: F401 - re-exported

GIB = float(2 ** 30)
DS_CKPT_BYTES_PER_PARAM = 16   # ZeRO-3 checkpoint: bf16 weights 2 + fp32 master 4 + Adam m 4 + v 4 (+ slack)
HF_BYTES_PER_PARAM = 2         # bf16 safetensors copy (--ckpt.save_hf, and the final model)
TRAINER_CPUS = 1               # GacaPPOTrainerActor (gaca_openrlhf/trainer/launch.py)
BUNDLE_CPUS = 1                # one {"GPU": 1, "CPU": 1} bundle per GPU (--train.colocate_all)


@dataclass
class RayInfo:
    """What the preflight needs from a Ray cluster (``free_gpus``: not held by another job's actors or placement
    groups; None when unknown)."""
    free_cpus: float
    total_cpus: float
    total_gpus: float
    nodes: int
    address: str = ""
    free_gpus: Optional[float] = None


@dataclass
class Report:
    ok: List[str] = field(default_factory=list)
    warnings: List[str] = field(default_factory=list)
    errors: List[str] = field(default_factory=list)


# ---- external queries (replaced in the tests) ----

def training_ray_address() -> Optional[str]:
    """The cluster training's plain ``ray.init()`` attaches to: RAY_ADDRESS, else the last one ``ray start`` started on
    this machine; None when it would start a local Ray of its own (a Ray started by another program's ``ray.init()``
    is not attached to, so it is not looked at here either)."""
    try:
        from ray._private.services import canonicalize_bootstrap_address

        return canonicalize_bootstrap_address(None)
    except ImportError:  # a private helper: RAY_ADDRESS alone
        return os.environ.get("RAY_ADDRESS") or None


def query_ray() -> Optional[RayInfo]:
    """Resources of the Ray cluster training will attach to (:func:`training_ray_address`), None without one; an
    address that does not answer raises (training's ``ray.init()`` would fail there too)."""
    address = training_ray_address()
    if address is None:
        return None
    import ray

    ray.init(address=address, include_dashboard=False, logging_level="ERROR", log_to_driver=False)
    try:
        nodes = [n for n in ray.nodes() if n.get("Alive")]
        free, total = ray.available_resources(), ray.cluster_resources()
        return RayInfo(free_cpus=float(free.get("CPU", 0.0)), total_cpus=float(total.get("CPU", 0.0)),
                       total_gpus=float(total.get("GPU", 0.0)), nodes=len(nodes), address=address,
                       free_gpus=float(free.get("GPU", 0.0)))
    finally:
        ray.shutdown()


def local_cpus() -> int:
    """CPUs a Ray started by training's ``ray.init()`` on this machine would declare."""
    try:
        from ray._private.utils import get_num_cpus

        return int(get_num_cpus())
    except Exception:  # noqa: BLE001 - an internal helper; fall back to the affinity mask
        return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def disk_free(path: str) -> Tuple[str, int]:
    """(the nearest existing folder at or above ``path``, its free bytes)."""
    p = os.path.abspath(path)
    while not os.path.exists(p):
        parent = os.path.dirname(p)
        if parent == p:
            break
        p = parent
    return p, shutil.disk_usage(p).free


def fetch_health(url: str, timeout: float = 5.0) -> dict:
    with urllib.request.urlopen(url.rstrip("/") + "/health", timeout=timeout) as r:
        return json.load(r)


# ---- the checks ----

def checkpoint_bytes(params: int, max_num: int, save_hf: bool = True, hf_kept: int = 0) -> int:
    """Disk taken at the peak by ``max_num`` DeepSpeed checkpoints, ``max_num + 1`` HF copies, the final model and
    ``hf_kept`` HF copies kept apart from the rotation (counted in full: an upper bound, as the kept copies are hard
    links of the rotated ones while those exist)."""
    hf_copies = (max_num + 1 if save_hf else 0) + 1 + hf_kept
    return int(params * (max_num * DS_CKPT_BYTES_PER_PARAM + hf_copies * HF_BYTES_PER_PARAM))


def ray_cpus_needed(gpus: int, env_workers: int, env_worker_cpus: float) -> Tuple[float, str]:
    need = env_workers * env_worker_cpus + gpus * BUNDLE_CPUS + TRAINER_CPUS
    parts = []
    if env_workers:
        parts.append(f"{env_workers} env workers x {env_worker_cpus:g} CPU = {env_workers * env_worker_cpus:g}")
    parts.append(f"{gpus} placement-group bundles (one per GPU) x {BUNDLE_CPUS} CPU")
    parts.append(f"{TRAINER_CPUS} trainer")
    return need, " + ".join(parts)


def check_ray(report: Report, num_nodes: int, gpus: int, cpus_needed: float, detail: str,
              ray_info: Optional[RayInfo], this_machine_cpus: int) -> None:
    hint = ("lower ENV_WORKER_CPUS or TASKS_PER_ITER x ROLLOUTS, or give Ray more CPUs (ray start --num-cpus N); "
            "env workers Ray cannot place fail their episodes (examples/gpu/README.md \"Env worker CPUs\")")
    if ray_info is None:
        if num_nodes > 1:
            report.errors.append(
                f"Ray: NUM_NODES={num_nodes}, but no Ray cluster is reachable (RAY_ADDRESS unset and no cluster started "
                "on this machine): training's ray.init() would start a local Ray with this node's GPUs only and its "
                f"placement group of {gpus} GPU bundles would wait forever. Start Ray on every node first: "
                "`ray start --head --port=6379` here, `ray start --address=HEAD:6379` on the others "
                "(examples/gpu/README.md \"Many nodes\")")
            return
        if this_machine_cpus < cpus_needed:
            report.errors.append(
                f"Ray: no Ray cluster running, so training starts a local one with this machine's {this_machine_cpus} "
                f"CPUs; the run needs {cpus_needed:g} ({detail}): {hint}")
        else:
            report.ok.append(f"Ray: no cluster running; a local Ray gets {this_machine_cpus} CPUs >= {cpus_needed:g} "
                             f"needed ({detail})")
        return
    where = f"the Ray cluster at {ray_info.address}" if ray_info.address else "the Ray cluster"
    if ray_info.total_gpus < gpus:
        report.errors.append(
            f"Ray: {where} has {ray_info.total_gpus:g} GPUs on {ray_info.nodes} node(s), the run needs {gpus} "
            f"(NUM_NODES x GPUS_PER_NODE): the placement group would wait forever. Have all nodes joined "
            "(`ray status`)?")
    # free, not total: on a shared cluster another job's placement group holds GPUs, and ours would wait for them
    gpus_busy = ray_info.free_gpus is not None and ray_info.total_gpus >= gpus and ray_info.free_gpus < gpus
    if gpus_busy:
        report.errors.append(
            f"Ray: {where} has {ray_info.total_gpus:g} GPUs but only {ray_info.free_gpus:g} free, the run needs "
            f"{gpus}: another job's actors or placement groups hold the others (`ray status`, `ray list "
            "placement-groups`), and the run's placement group would wait for them. Stop that job (a stray one of "
            "an earlier run: `ray stop` on its nodes) or wait for it")
    if ray_info.free_cpus < cpus_needed:
        report.errors.append(
            f"Ray: {where} has {ray_info.free_cpus:g} free CPUs (of {ray_info.total_cpus:g}), the run needs "
            f"{cpus_needed:g} ({detail}): {hint}")
    if ray_info.total_gpus >= gpus and not gpus_busy and ray_info.free_cpus >= cpus_needed:
        free = "" if ray_info.free_gpus is None else f" ({ray_info.free_gpus:g} free)"
        report.ok.append(f"Ray: {where}: {ray_info.nodes} node(s), {ray_info.total_gpus:g} GPUs{free} >= {gpus}, "
                         f"{ray_info.free_cpus:g} free CPUs >= {cpus_needed:g} needed ({detail})")


def check_disk(report: Report, path: str, needed_bytes: Optional[int], detail: str,
               free_fn: Callable[[str], Tuple[str, int]] = disk_free) -> None:
    if needed_bytes is None:
        report.warnings.append(f"disk: not checked ({detail}); pass --disk-needed-gb (DISK_NEEDED_GB)")
        return
    where, free = free_fn(path)
    if free < needed_bytes:
        report.errors.append(
            f"disk: {free / GIB:.1f} GiB free at {where} (for {path}), the checkpoints kept need about "
            f"{needed_bytes / GIB:.1f} GiB ({detail}): free space, lower CKPT_MAX_NUM (--ckpt.max_num), or choose another SAVE_PATH")
    else:
        report.ok.append(f"disk: {free / GIB:.1f} GiB free at {where} >= {needed_bytes / GIB:.1f} GiB ({detail})")


def server_env(name: Optional[str]):
    """The :class:`~agents.base.EnvSpec` of the environment whose server ``--url`` is: ``--env``, else the one
    registered environment with a ``server_preflight`` (the launch scripts pass ``--url`` alone)."""
    from agents import registry

    if name:
        spec = registry.spec(name)
        if spec.server_preflight is None:
            raise SystemExit(f"error: preflight: --url: the environment {name!r} has no server to check")
        return spec
    with_server = [s for s in registry.specs() if s.server_preflight is not None]
    if len(with_server) != 1:
        raise SystemExit("error: preflight: --url needs --env NAME, the environment whose server it is (registered "
                         f"with a server: {[s.name for s in with_server]})")
    return with_server[0]


def check_url(report: Report, url: str, num_nodes: int, spec,
              fetch: Callable[[str], dict] = fetch_health) -> None:
    """``url/health`` of the server of ``spec`` (an :class:`~agents.base.EnvSpec` with a ``server_preflight``)
    answers from this node."""
    check = spec.server_preflight
    others = (f" Env workers on all {num_nodes} nodes must reach this same URL ({check.reach_hint})."
              if num_nodes > 1 else "")
    try:
        health = fetch(url)
    except Exception as e:  # noqa: BLE001 - any failure to answer is the finding
        report.errors.append(f"{spec.title}: {url}/health does not answer from this node: {e!r}.{others}")
        return
    report.ok.append(f"{spec.title}: {url}/health answers "
                     f"({check.describe(health if isinstance(health, dict) else {})}).{others}")


# ---- each node's own resources: GPUs, paths, host RAM (gaca_openrlhf/node_check.py) ----

def node_options(args, config_lookup: Callable[[str], Optional[str]] = cached_config) -> Optional[dict]:
    """The per-node checks asked for, as a plain dict a Ray task can take; None when none is asked for."""
    opts: dict = {}
    if args.gpus_per_node:
        opts.update(gpus=args.gpus_per_node, share=args.gpu_mem_share, wait_s=args.gpu_wait_s)
    if args.path:
        opts["paths"] = args.path
    if args.url and (args.num_nodes > 1 or args.run_token):
        opts.update(url=args.url, run_token=args.run_token)
    if args.host_ram:
        if not args.model:
            raise SystemExit("error: preflight: --host-ram needs --model (its parameter count)")
        from gaca_openrlhf.memory_plan import host_bytes_per_node

        path = args.model if os.path.exists(args.model) else config_lookup(args.model)
        spec = load_spec(path) if path else None
        if spec is None:  # a Hugging Face name not cached: the built-in spec of its size, if it is one
            params, _ = model_params(args.model, config_lookup)
            spec = next((b for b in BUILTIN.values() if params and abs(b.params - params) / params < 0.25), None)
        if spec is None:
            opts["host_ram_skip"] = f"model {args.model!r}: no config.json found and no built-in spec of its size"
        else:
            need, detail = host_bytes_per_node(spec, args.gpus_per_node or max(1, (args.gpus or 1) // args.num_nodes),
                                               args.num_nodes, args.tp)
            opts.update(host_ram_bytes=int(need), host_ram_detail=detail)
    return opts or None


def node_report(opts: dict, node: Optional[str] = None) -> "node_check.NodeReport":
    """The checks of :func:`node_options` on the node this runs on (locally, or inside a Ray task pinned there)."""
    from gaca_openrlhf import node_check

    rep = node_check.NodeReport(node or f"node {node_check.node_name()}")
    if opts.get("gpus"):
        node_check.check_gpus(rep, opts["gpus"], opts["share"], wait_s=opts["wait_s"],
                              cuda_visible=os.environ.get("CUDA_VISIBLE_DEVICES"))
    if opts.get("paths"):
        node_check.check_paths(rep, opts["paths"])
    if opts.get("url"):
        node_check.check_server(rep, opts["url"], opts.get("run_token"))
    if "host_ram_bytes" in opts:
        node_check.check_host_ram(rep, opts["host_ram_bytes"], opts["host_ram_detail"])
    elif "host_ram_skip" in opts:
        rep.warnings.append(f"{rep.node}: host RAM: not checked ({opts['host_ram_skip']})")
    return rep


def per_node_reports(opts: dict) -> list:
    """:func:`node_report` on every alive node of the Ray cluster training attaches to (one task pinned to each,
    asking for no GPU and no CPU, so a busy cluster still runs it), or on this node without a cluster."""
    address = training_ray_address()
    if address is None:
        return [node_report(opts)]
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    ray.init(address=address, include_dashboard=False, logging_level="ERROR", log_to_driver=False)
    try:
        task = ray.remote(num_cpus=0, num_gpus=0)(node_report)
        nodes = [n for n in ray.nodes() if n.get("Alive")]
        refs = [task.options(scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False)).remote(
            opts, f"node {n.get('NodeManagerAddress', '?')} ({n['NodeID'][:8]})") for n in nodes]
        return ray.get(refs, timeout=float(opts.get("wait_s", 0)) + 300)
    finally:
        ray.shutdown()


def run_checks(args, ray_query: Callable[[], Optional[RayInfo]] = query_ray,
               this_machine_cpus: Callable[[], int] = local_cpus,
               free_fn: Callable[[str], Tuple[str, int]] = disk_free,
               fetch: Callable[[str], dict] = fetch_health,
               config_lookup: Callable[[str], Optional[str]] = cached_config,
               node_runner: Callable[[dict], list] = per_node_reports) -> Report:
    report = Report()
    if args.gpus is not None:
        need, detail = ray_cpus_needed(args.gpus, args.env_workers, args.env_worker_cpus)
        if args.ray_cpus_needed is not None:
            need, detail = args.ray_cpus_needed, f"--ray-cpus-needed {args.ray_cpus_needed:g}"
        try:
            info = ray_query()
        except Exception as e:  # noqa: BLE001 - RAY_ADDRESS set but unreachable
            where = f"RAY_ADDRESS={os.environ['RAY_ADDRESS']}" if os.environ.get("RAY_ADDRESS") else \
                "the cluster last started with `ray start` on this machine"
            report.errors.append(f"Ray: cannot attach to {where} (training's ray.init() would not either): {e!r}")
        else:
            check_ray(report, args.num_nodes, args.gpus, need, detail, info, this_machine_cpus())
    if args.disk:
        if args.disk_needed_gb is not None:
            needed, detail = int(args.disk_needed_gb * GIB), f"--disk-needed-gb {args.disk_needed_gb:g}"
        elif args.model:
            params, source = model_params(args.model, config_lookup)
            if params is None:
                needed, detail = None, f"parameter count of {args.model} unknown: {source}"
            else:
                needed = checkpoint_bytes(params, args.ckpt_max_num, not args.no_save_hf, args.hf_kept)
                hf = args.ckpt_max_num + 1 if not args.no_save_hf else 0
                kept = f" + {args.hf_kept} kept HF checkpoint(s)" if args.hf_kept else ""
                detail = (f"{params / 1e9:.2f}B parameters from {source}: {args.ckpt_max_num} DeepSpeed ZeRO-3 "
                          f"checkpoint(s) x {DS_CKPT_BYTES_PER_PARAM} B/param + {hf} HF checkpoint(s){kept} + the "
                          f"final model x {HF_BYTES_PER_PARAM} B/param")
        else:
            needed, detail = None, "neither --disk-needed-gb nor --model given"
        check_disk(report, args.disk, needed, detail, free_fn)
    if args.url:
        check_url(report, args.url, args.num_nodes, server_env(args.env), fetch)
    opts = node_options(args, config_lookup)
    if opts:
        try:
            nodes = node_runner(opts)
        except Exception as e:  # noqa: BLE001 - a node that cannot run the checks is the finding
            report.errors.append(f"per-node checks could not run on every node: {e!r}")
        else:
            for rep in nodes:
                report.ok += rep.ok
                report.warnings += rep.warnings
                report.errors += rep.errors
    return report


def _nonneg_float(s: str) -> float:
    v = float(s)
    if v < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {s}")
    return v


def _fraction(s: str) -> float:
    v = float(s)
    if not 0 < v <= 1:
        raise argparse.ArgumentTypeError(f"must be in (0, 1], got {s}")
    return v


def _what_path(s: str) -> Tuple[str, str]:
    what, eq, path = s.partition("=")
    if not eq or not what or not path:
        raise argparse.ArgumentTypeError(f"expected WHAT=PATH (e.g. GAME_DATA=/data/games), got {s!r}")
    return what, path


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m gaca_openrlhf.preflight", description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--num-nodes", type=int, default=1, help="NUM_NODES")
    ap.add_argument("--gpus", type=int, default=None,
                    help="GPUs of the run (NUM_NODES x GPUS_PER_NODE; one 1-CPU bundle each); enables the Ray check")
    ap.add_argument("--env-workers", type=int, default=0,
                    help="env workers of one iteration (an env with Ray env workers: tasks x rollouts)")
    ap.add_argument("--env-worker-cpus", type=_nonneg_float, default=0.0, help="logical CPUs per env worker")
    ap.add_argument("--ray-cpus-needed", type=_nonneg_float, default=None, help="override the computed CPU need")
    ap.add_argument("--disk", metavar="PATH", default=None, help="the output folder (SAVE_PATH); enables the disk check")
    ap.add_argument("--disk-needed-gb", type=_nonneg_float, default=None, help="GiB needed (else from --model)")
    ap.add_argument("--model", default=None, help="model folder or Hugging Face name (parameter count)")
    ap.add_argument("--ckpt-max-num", type=int, default=2, help="--ckpt.max_num of the run")
    ap.add_argument("--no-save-hf", action="store_true", help="the run does not pass --ckpt.save_hf")
    ap.add_argument("--hf-kept", type=int, default=0,
                    help="HF checkpoints kept apart from the rotation (SAVE_PATH/hf/, EVAL_CKPTS=1)")
    ap.add_argument("--url", default=None, help="the env server's URL: /health must answer")
    ap.add_argument("--env", default=None,
                    help="the environment whose server --url is (default: the registered one that has a server)")
    ap.add_argument("--gpus-per-node", type=int, default=0,
                    help="GPUS_PER_NODE: each node needs this many free GPUs (0: no GPU check)")
    ap.add_argument("--gpu-mem-share", type=_fraction, default=0.6,
                    help="VLLM_MEM (--vllm.gpu_memory_utilization): the share of each GPU's memory that must be free")
    ap.add_argument("--gpu-wait-s", type=_nonneg_float, default=30.0,
                    help="look again for this long while GPUs are held (an earlier run's processes exiting)")
    ap.add_argument("--path", action="append", default=[], type=_what_path, metavar="WHAT=PATH",
                    help="a file or folder every node must have (data, tasks, a local model folder); repeatable")
    ap.add_argument("--host-ram", action="store_true",
                    help="check each node's available RAM against the memory plan's host share (needs --model)")
    ap.add_argument("--tp", type=int, default=1, help="VLLM_TP (the host RAM of vLLM's sleep backups)")
    ap.add_argument("--run-token", default=None,
                    help="with --url: the server's /health must echo this token (the launch scripts' <ENV>_RUN_TOKEN: this run's "
                         "server, not a leftover one on the port); checked from every node")
    return ap


def main(argv: Optional[Sequence[str]] = None, **queries) -> int:
    args = build_parser().parse_args(argv)
    report = run_checks(args, **queries)
    for line in report.ok:
        print(f"preflight: ok: {line}", file=sys.stderr)
    for line in report.warnings:
        print(f"preflight: warning: {line}", file=sys.stderr)
    for line in report.errors:
        print(f"error: preflight: {line}", file=sys.stderr)
    if report.errors:
        print("preflight failed (GPU_PREFLIGHT=0 skips every start-up check)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
