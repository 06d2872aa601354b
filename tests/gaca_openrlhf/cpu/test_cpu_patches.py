"""The CPU shims (run in a subprocess: they patch torch.cuda process-wide)."""
import subprocess
import sys

import pytest

CODE = r"""
import torch
assert not torch.cuda.is_available()
from gaca_openrlhf.cpu.patches import apply
apply(); apply()  # idempotent
torch.cuda.set_device(0); torch.cuda.synchronize(); torch.cuda.empty_cache()
assert torch.cuda.current_device() == "cpu"
from openrlhf.trainer.ppo_utils.replay_buffer import NaiveReplayBuffer
assert NaiveReplayBuffer(2).target_device == torch.device("cpu")
import openrlhf.utils.deepspeed.deepspeed as ds
assert getattr(ds.init_device_mesh, "__gaca_cpu__", False)
assert getattr(ds.DeepspeedStrategy.get_ds_train_config, "__gaca_cpu__", False)
from openrlhf.utils.utils import convert_to_torch_dtype  # imported inside Actor.__init__ at call time
assert convert_to_torch_dtype("fp32") is torch.float32 and convert_to_torch_dtype("bf16") is torch.bfloat16
from openrlhf.models import Actor
import tempfile
from transformers import Qwen2Config, Qwen2ForCausalLM
d = tempfile.mkdtemp()
Qwen2ForCausalLM(Qwen2Config(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                             num_attention_heads=2, num_key_value_heads=1)).save_pretrained(d)
assert next(Actor(d, attn_implementation="sdpa", param_dtype="fp32").parameters()).dtype is torch.float32
# importing openrlhf.models registered the packed rows' attention (what train_ppo picks without flash-attn)
varlen = Actor(d, attn_implementation="gaca_varlen_sdpa", param_dtype="fp32")
assert varlen.model.config._attn_implementation == "gaca_varlen_sdpa"
from gaca_openrlhf.cpu import ray_runtime_env, use_cpu_backend
assert use_cpu_backend("auto") and not use_cpu_backend("gpu")
assert ray_runtime_env()["worker_process_setup_hook"] == "gaca_openrlhf.cpu.patches.apply"
print("ok")
"""


def test_cpu_shims_in_fresh_process():
    import openrlhf  # noqa: F401  (default install: a missing part fails)
    import torch
    if torch.cuda.is_available():
        pytest.skip("the shims are inactive where CUDA exists")
    out = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and out.stdout.strip().endswith("ok"), out.stderr[-3000:]


def test_weight_blob_roundtrip():
    import torch
    import vllm  # noqa: F401  (default install: a missing part fails)
    from gaca_openrlhf.cpu.weight_sync import pack_weights, unpack_weights

    pairs = [("a.weight", torch.randn(3, 2, dtype=torch.bfloat16)), ("b.bias", torch.arange(4.0))]
    back = unpack_weights(pack_weights(pairs))
    assert [n for n, _ in back] == ["a.weight", "b.bias"]
    assert all(torch.equal(x, y) for (_, x), (_, y) in zip(pairs, back))


def test_shm_op_build_clears_a_stale_torch_lock(tmp_path):
    """A torch build ``lock`` file left by a stopped build is removed before the build, so it cannot hang it."""
    from gaca_openrlhf.cpu.patches import _build_under_flock

    folder = tmp_path / "deepspeed_shm_comm"
    folder.mkdir()
    (folder / "lock").touch()
    seen = []

    def build():
        seen.append((folder / "lock").exists())
        return "op"

    with pytest.warns(UserWarning, match="stale torch extension build lock"):
        assert _build_under_flock(build, str(folder))() == "op"
    assert seen == [False]


def test_shm_op_build_waits_for_a_live_builder_and_not_for_a_dead_one(tmp_path):
    """A second build waits while another process holds the flock, and goes on once that process is killed (the
    kernel drops its lock: no stale state can survive a stopped build)."""
    import threading
    import time

    from gaca_openrlhf.cpu.patches import _build_under_flock

    folder = tmp_path / "deepspeed_shm_comm"
    holder = subprocess.Popen(
        [sys.executable, "-c", "import fcntl, sys, time\n"
         f"f = open({str(folder) + '.gaca.flock'!r}, 'a'); fcntl.flock(f, fcntl.LOCK_EX)\n"
         "print('held', flush=True); time.sleep(120)"], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        built = threading.Event()
        worker = threading.Thread(target=_build_under_flock(built.set, str(folder)), daemon=True)
        worker.start()
        time.sleep(1.0)
        assert not built.is_set()  # the live holder's build is not raced
    finally:
        holder.kill()
        holder.wait()
    worker.join(timeout=30)
    assert built.is_set()
