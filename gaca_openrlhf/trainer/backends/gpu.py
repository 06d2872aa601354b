"""The GPU backend: OpenRLHF's placement groups, vLLM engines and NCCL/CUDA-IPC weight sync, unchanged."""
from __future__ import annotations

import ray
from ray.exceptions import GetTimeoutError
from ray.util.placement_group import placement_group

from openrlhf.trainer.ray import create_vllm_engines
from openrlhf.trainer.ray.launcher import RayActorGroup

from ..actors import GacaPolicyModelActor
from ..startup import StartupError, startup_timeout_s
from .base import Backend


def _resources(res: dict) -> str:
    return ", ".join(f"{res.get(k, 0):g} {k}" for k in ("GPU", "CPU"))


class GPUBackend(Backend):
    """OpenRLHF's own placement: ``{"GPU": 1, "CPU": 1}`` bundles packed per placement group, 0.2 GPU per actor in
    a group (1 outside one), one vLLM engine per bundle when colocated."""

    name = "gpu"

    def placement_group(self, num_bundles: int):
        pg = placement_group([{"GPU": 1, "CPU": 1} for _ in range(num_bundles)], strategy="PACK")
        timeout = startup_timeout_s(self.startup_timeout_s)
        try:  # bounded: a group the cluster cannot hold waits forever
            ray.get(pg.ready(), timeout=timeout)
        except GetTimeoutError as e:
            raise StartupError(
                f"the placement group of {num_bundles} {{GPU: 1, CPU: 1}} bundles was not ready within {timeout:.0f} "
                f"s: the Ray cluster has {_resources(ray.cluster_resources())} in all, "
                f"{_resources(ray.available_resources())} free (GACA_STARTUP_TIMEOUT_S to wait longer)") from e
        return pg

    def create_engines(self):
        """The engine factory: OpenRLHF's ``create_vllm_engines``."""
        return create_vllm_engines

    def vllm_engines(self, pg=None) -> list:
        a = self.args
        return self.create_engines()(
            a.vllm.num_engines, a.vllm.tensor_parallel_size, a.actor.model_name_or_path, a.train.seed,
            a.train.full_determinism_enable, a.vllm.enable_prefix_caching, a.vllm.enforce_eager, a.data.max_len,
            pg, a.vllm.gpu_memory_utilization, a.vllm.enable_sleep,
            "processed_logprobs",  # always: the GACA criticality reads the rollout log-probs
            agent_func_path=a.train.agent_func_path)

    def policy_actor(self):
        return ray.remote(num_gpus=1)(GacaPolicyModelActor)

    def actor_group(self, num_nodes: int, per_node: int, cls, pg=None):
        return RayActorGroup(num_nodes, per_node, cls, pg=pg, num_gpus_per_actor=0.2 if pg else 1,
                             duplicate_actors=self.duplicate_actors)
