"""CUDA-call shims that let OpenRLHF's unchanged Ray actors run on a machine without a GPU.

Applied in every Ray worker through ``runtime_env["worker_process_setup_hook"]`` (see
:func:`gaca_openrlhf.cpu.ray_runtime_env`) and in the driver. Only active when CUDA is absent, so importing this
module on a GPU machine changes nothing. Every patch is listed here; nothing in OpenRLHF's files is edited.

torch-level (applied at once, cheap):
- ``torch.cuda.set_device`` -> no-op         (``utils/deepspeed/deepspeed.py: setup_distributed``)
- ``torch.cuda.current_device`` -> ``"cpu"``  (actor/ref ``forward``, ``ppo_train``, ``all_reduce``/``all_gather``)
- ``torch.cuda.synchronize`` / ``empty_cache`` -> no-op (``utils/distributed_util.py``, actor ``fit``)
- ``init_device_mesh("cuda", ...)`` -> ``"cpu"`` (``DeepspeedStrategy.setup_distributed``)

OpenRLHF-level (applied when the module is first imported, via a post-import hook):
- ``utils.utils.convert_to_torch_dtype`` also maps ``"fp32"`` -> ``torch.float32`` (``--ds.param_dtype fp32``, the
  CPU default where bf16 matmuls have no native kernel: :func:`gaca_openrlhf.cpu.resolve_param_dtype`); DeepSpeed
  then trains in fp32 (its config enables neither bf16 nor fp16).
- ``NaiveReplayBuffer.__init__`` builds ``torch.device(f"cuda:{current_device()}")``: target device set to CPU.
- ``DeepspeedStrategy.get_ds_train_config``: AdamW runs as ``torch.optim.AdamW`` (DeepSpeed's ``torch_adam``)
  instead of FusedAdam, whose CPU build is a 2-4 minute C++ JIT compile on first use (optimizer offload keeps
  DeepSpeedCPUAdam).

DeepSpeed-level (post-import hook on ``deepspeed.comm.torch``), a correctness fix (issue 9):
- every asynchronous collective of DeepSpeed's ``TorchBackend`` (all-gather, broadcast, all-reduce, reduce-scatter,
  ...) is waited for before it returns. ZeRO-3's blocking gather ``Init._allgather_params_coalesced`` (used by
  ``GatheredParameters``, hence by transformers' ZeRO-3 weight loading, and to fetch persistent parameters) launches
  one async all-gather per parameter and waits only for the *last* one, relying on CUDA stream order. gloo runs
  async work on a pool of threads, so earlier gathers may still be running when it returns: the parameter then holds
  its ``torch.empty`` buffer. Seen in the rehearsal as random garbage (often NaN) in a whole weight, e.g.
  ``layers.0.self_attn.v_proj.weight`` of the reference model on both ranks (rank 0's broadcast after loading), so
  ``kl`` was NaN, or the policy's experience forward was. Waiting at once costs nothing on CPU (no overlap to lose).
- ``build_shm_op`` (the shared-memory comm op DeepSpeed JIT-compiles on CPU, 40-60 s) runs under an ``flock`` and
  clears a stale build lock first. torch guards the build with a plain lock *file*: a build stopped mid-way (a test
  timeout, Ctrl-C, the OOM killer) leaves it behind and every later DeepSpeed start-up on the machine waits on it
  forever (seen: a whole CI run timed out this way). The kernel releases an ``flock`` when its holder dies, so
  while we hold it no patched process is building, and a leftover lock file is stale.
"""
from __future__ import annotations

import fcntl
import importlib.abc
import importlib.util
import os
import sys
import warnings

_APPLIED = False


def cuda_absent() -> bool:
    import torch

    return not torch.cuda.is_available()


def _cpu_device_mesh(init_device_mesh):
    def init_device_mesh_cpu(device_type, *args, **kwargs):
        return init_device_mesh("cpu" if device_type == "cuda" else device_type, *args, **kwargs)

    init_device_mesh_cpu.__gaca_cpu__ = True
    return init_device_mesh_cpu


def _patch_replay_buffer(module) -> None:
    cls = module.NaiveReplayBuffer
    if getattr(cls.__init__, "__gaca_cpu__", False):
        return
    orig = cls.__init__

    def __init__(self, *args, **kwargs):
        import torch

        current = torch.cuda.current_device
        torch.cuda.current_device = lambda: 0  # only for the f-string in the original __init__
        try:
            orig(self, *args, **kwargs)
        finally:
            torch.cuda.current_device = current
        self.target_device = torch.device("cpu")

    __init__.__gaca_cpu__ = True
    cls.__init__ = __init__


def _patch_deepspeed_strategy(module) -> None:
    if not getattr(module.init_device_mesh, "__gaca_cpu__", False):
        module.init_device_mesh = _cpu_device_mesh(module.init_device_mesh)
    cls = module.DeepspeedStrategy
    if getattr(cls.get_ds_train_config, "__gaca_cpu__", False):
        return
    orig = cls.get_ds_train_config

    def get_ds_train_config(self, *args, **kwargs):
        config = orig(self, *args, **kwargs)
        optim = config.get("optimizer") or {}
        if optim.get("type") in ("Adam", "AdamW") and not self.adam_offload:
            # torch.optim.AdamW instead of DeepSpeed's FusedAdam: same update, no C++ JIT build on CPU
            optim.setdefault("params", {})["torch_adam"] = True
        return config

    get_ds_train_config.__gaca_cpu__ = True
    cls.get_ds_train_config = get_ds_train_config


#: DeepSpeed TorchBackend collectives with an ``async_op`` argument (point-to-point ops are left asynchronous)
SYNC_COLLECTIVES = ("all_reduce", "all_reduce_coalesced", "reduce", "reduce_scatter", "broadcast", "all_gather",
                    "all_gather_into_tensor", "all_gather_base", "all_gather_coalesced", "reduce_scatter_tensor",
                    "all_to_all_single", "all_to_all", "gather", "scatter")


def _completed(collective):
    def run_to_completion(*args, **kwargs):
        work = collective(*args, **kwargs)
        if work is not None and hasattr(work, "wait"):
            work.wait()  # the caller's own wait() later returns at once
        return work

    run_to_completion.__gaca_cpu__ = True
    run_to_completion.__wrapped__ = collective
    return run_to_completion


def _patch_deepspeed_comm(module) -> None:
    cls = module.TorchBackend
    for name in SYNC_COLLECTIVES:
        fn = cls.__dict__.get(name)
        if fn is not None and not getattr(fn, "__gaca_cpu__", False):
            setattr(cls, name, _completed(fn))
    build = getattr(module, "build_shm_op", None)
    if build is not None and not getattr(build, "__gaca_cpu__", False):
        module.build_shm_op = _build_under_flock(build)  # TorchBackend.__init__ looks the name up at call time


def shm_op_build_dir() -> str:
    """The folder torch builds DeepSpeed's shm comm op in (``$TORCH_EXTENSIONS_DIR/deepspeed_shm_comm`` or torch's
    default under ``~/.cache/torch_extensions``)."""
    from torch.utils.cpp_extension import _get_build_directory

    return _get_build_directory("deepspeed_shm_comm", verbose=False)


def _build_under_flock(build_op, build_dir=None):
    """``build_op`` wrapped: it runs holding ``<build_dir>.gaca.flock``, after removing a stale torch ``lock``."""
    def build_shm_op_locked():
        folder = build_dir or shm_op_build_dir()
        os.makedirs(folder, exist_ok=True)
        with open(folder.rstrip("/") + ".gaca.flock", "a") as guard:
            fcntl.flock(guard, fcntl.LOCK_EX)  # blocks while another process builds; released if it dies
            try:
                stale = os.path.join(folder, "lock")
                if os.path.exists(stale):
                    warnings.warn(f"removing a stale torch extension build lock {stale} (left by a build that "
                                  "was stopped); DeepSpeed would otherwise wait on it forever", stacklevel=2)
                    os.remove(stale)
                return build_op()
            finally:
                fcntl.flock(guard, fcntl.LOCK_UN)

    build_shm_op_locked.__gaca_cpu__ = True
    build_shm_op_locked.__wrapped__ = build_op
    return build_shm_op_locked


def _patch_dtype_names(module) -> None:
    orig = module.convert_to_torch_dtype
    if getattr(orig, "__gaca_cpu__", False):
        return

    def convert_to_torch_dtype(param_dtype: str):
        import torch

        return torch.float32 if param_dtype == "fp32" else orig(param_dtype)

    convert_to_torch_dtype.__gaca_cpu__ = True
    module.convert_to_torch_dtype = convert_to_torch_dtype


def _register_varlen_attention(module) -> None:
    """Packed rows' pure-PyTorch variable-length attention (:mod:`gaca_openrlhf.models.varlen_attention`), known to
    transformers wherever OpenRLHF builds a model (policy, reference), so that they load with
    ``--ds.attn_implementation gaca_varlen_sdpa`` (:func:`gaca_openrlhf.cli.train_ppo.check_packing_args` picks it
    for packed micro-batches where flash-attn is not installed)."""
    from gaca_openrlhf.models import varlen_attention

    varlen_attention.register()


# module name -> patch applied right after the module is executed
_POST_IMPORT = {
    "openrlhf.models.actor": _register_varlen_attention,
    "openrlhf.utils.utils": _patch_dtype_names,
    "openrlhf.trainer.ppo_utils.replay_buffer": _patch_replay_buffer,
    "openrlhf.utils.deepspeed.deepspeed": _patch_deepspeed_strategy,
    "deepspeed.comm.torch": _patch_deepspeed_comm,
}


class _PostImportFinder(importlib.abc.MetaPathFinder):
    """Wraps the loader of the modules in ``_POST_IMPORT`` so their patch runs after they execute."""

    def find_spec(self, fullname, path, target=None):
        if fullname not in _POST_IMPORT:
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(fullname)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return spec
        loader, patch = spec.loader, _POST_IMPORT[fullname]

        class _Loader(importlib.abc.Loader):
            def create_module(self, spec):
                return loader.create_module(spec)

            def exec_module(self, module):
                loader.exec_module(module)
                patch(module)

        spec.loader = _Loader()
        return spec


def apply() -> None:
    """Install the CPU shims (idempotent; a no-op where CUDA is available)."""
    global _APPLIED
    if _APPLIED or not cuda_absent():
        return
    import torch
    import torch.distributed.device_mesh as dm

    os.environ.setdefault("DS_ACCELERATOR", "cpu")
    torch.cuda.set_device = lambda *a, **k: None
    torch.cuda.current_device = lambda: "cpu"
    torch.cuda.synchronize = lambda *a, **k: None
    torch.cuda.empty_cache = lambda: None
    if not getattr(dm.init_device_mesh, "__gaca_cpu__", False):
        dm.init_device_mesh = _cpu_device_mesh(dm.init_device_mesh)
    for name, patch in _POST_IMPORT.items():
        if name in sys.modules:
            patch(sys.modules[name])
    if not any(isinstance(f, _PostImportFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _PostImportFinder())
    _APPLIED = True
