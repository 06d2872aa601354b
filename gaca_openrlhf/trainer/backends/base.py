"""The few operations :func:`gaca_openrlhf.trainer.launch.train` asks of a backend (:class:`Backend`) and the actors
it builds (:class:`Actors`)."""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, Optional

import ray

#: --ds.param_dtype -> vLLM's dtype name
VLLM_DTYPE = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}


@dataclass
class Actors:
    """The Ray actors of one training run, as ``train`` builds them (``None``: a model the run does not have).

    colocated_pg: the placement group the policy (and, colocated, the reference model and engines) share, or None.
    """

    actor: Any
    ref: Any
    critic: Any
    reward: Any
    vllm_engines: list
    colocated_pg: Any = None
    trainer: Any = None


class Backend(ABC):
    """Where a run's Ray actors go. ``train`` calls, in this order: :meth:`prepare`, :meth:`init_ray` (unless Ray is
    up), :meth:`placement_group` (when models are colocated), :meth:`vllm_engines`, :meth:`policy_actor` and
    :meth:`actor_group` per model, then :meth:`finish` after the trainer's ``fit``.

    The placement rules themselves (what shares a group: OpenRLHF's ``--train.colocate_*``) stay in ``train``; a
    backend without placement groups answers :meth:`placement_group` with None and they have no effect.
    """

    #: ``backend_mode``'s name of the backend
    name = ""
    #: logical CPUs of the trainer actor
    trainer_cpus = 1
    #: seconds the start-up (trainer, models, engines) may take before the run stops with an error naming what is
    #: still pending (``GACA_STARTUP_TIMEOUT_S`` overrides it; :mod:`gaca_openrlhf.trainer.startup`)
    startup_timeout_s = 1800.0
    #: what --vllm.gpu_memory_utilization is a fraction of for this backend's engines
    engine_memory = "the GPU's memory"

    def __init__(self, args) -> None:
        self.args = args
        #: ranks that share a batch (ring attention x DeepSpeed tensor parallel) are duplicated actors
        self.duplicate_actors = args.ds.ring_attn_size * args.ds.tensor_parallel_size

    def prepare(self) -> None:
        """Before Ray starts: patches of this process and checks of the arguments (default: nothing)."""

    def runtime_env(self, env_vars: dict) -> dict:
        """Ray's runtime env of the job: ``env_vars`` in every worker."""
        return {"env_vars": env_vars}

    def init_ray(self, env_vars: dict) -> None:
        """Start Ray (``train`` calls it only when Ray is not up yet) with ``env_vars`` in every worker."""
        ray.init(runtime_env=self.runtime_env(env_vars), include_dashboard=False)

    def placement_group(self, num_bundles: int) -> Optional[Any]:
        """A ready placement group of ``num_bundles`` one-GPU bundles for colocated models; None where the backend
        places actors without groups (default)."""
        return None

    @abstractmethod
    def vllm_engines(self, pg=None) -> list:
        """The rollout engines (``pg``: the placement group they share with the policy, or None)."""

    @abstractmethod
    def policy_actor(self):
        """The Ray actor class of the GACA policy."""

    @abstractmethod
    def actor_group(self, num_nodes: int, per_node: int, cls, pg=None):
        """``num_nodes x per_node`` ranks of the actor class ``cls`` (``pg``: their placement group, or None)."""

    def engine_failure_hint(self) -> str:
        """What to do when a vLLM engine fails to start, appended to the start-up error: vLLM refuses to start
        when less memory is free than --vllm.gpu_memory_utilization asks for."""
        util = self.args.vllm.gpu_memory_utilization
        return (f"When the engine's log above reports too little free memory (vLLM needs "
                f"--vllm.gpu_memory_utilization = {util} of {self.engine_memory} free at start-up), lower "
                f"--vllm.gpu_memory_utilization or free memory (stop other processes) and run again.")

    def finish(self, actors: Actors) -> None:
        """After the trainer's ``fit``, also when it failed (default: nothing)."""
