"""The benchmark's measurements on a model: the timed update of each mode (padded, packed, packed + token budget,
+ chunked log-probs: wall and CPU seconds, memory peak) and the logits peak of one sequence, full vs chunked; the
memory probes they use (resident memory on CPU, the allocator's peak on CUDA)."""
from __future__ import annotations

import resource
import time
from typing import Dict

import torch

from gaca_openrlhf.bench.packing.lengths import draw, length_distribution
from gaca_openrlhf.bench.packing.pipeline import (budget_plan, fixed_plan, make_step_samples, prepare_items,
                                                  train_micro_batches)


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 2**20


def fixed_mmap_threshold(nbytes: int = 1 << 20) -> bool:
    """glibc: allocations of ``nbytes`` and more are mmap'd and returned to the system on free (``mallopt
    M_MMAP_THRESHOLD``, which also stops glibc from raising the threshold to 32 MB after each large free: without
    it, tensors up to 32 MB come from the heap once a larger one was freed, and a later mode's peak reuses memory the
    resident size already counts). True when set; elsewhere a no-op."""
    import ctypes

    try:
        return bool(ctypes.CDLL("libc.so.6").mallopt(-3, int(nbytes)))  # M_MMAP_THRESHOLD
    except (OSError, AttributeError):
        return False


class PeakRSS:
    """Context manager sampling the process's resident memory every 2 ms: ``.mb`` = peak minus the RSS at entry
    (CPU; with :func:`fixed_mmap_threshold`, tensors of 1 MB and more are mmap'd and returned on free, so successive
    modes do not hide each other's peaks)."""

    def __enter__(self):
        import threading

        self.base = self.peak = _rss_mb()
        self._stop = threading.Event()

        def sample():
            while not self._stop.is_set():
                self.peak = max(self.peak, _rss_mb())
                self._stop.wait(0.002)

        self._thread = threading.Thread(target=sample, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, _rss_mb())
        self.mb = self.peak - self.base


def bench_model(hidden: int, layers: int, vocab: int, device: str):
    """A random Qwen2 of the given size (fp32), sdpa attention, wrapped in OpenRLHF's ``Actor``."""
    from openrlhf.models.actor import Actor
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    heads = max(1, hidden // 64)
    config = Qwen2Config(vocab_size=vocab, hidden_size=hidden, intermediate_size=hidden * 3,
                         num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=heads,
                         head_dim=hidden // heads, max_position_embeddings=8192, tie_word_embeddings=False,
                         attn_implementation="sdpa")
    model = Qwen2ForCausalLM(config).to(device)
    model.config.use_cache = False
    return Actor(model, temperature=1.0)


def logits_peak(actor, seq_len: int, chunk: int, device: str) -> Dict[str, float]:
    """MB of the peak for one sequence of ``seq_len`` tokens (log-probs + entropy + backward), full logits vs
    chunked: the largest tensor autograd keeps for backward, and the memory peak above the start (RSS on CPU, the
    allocator's on CUDA; the model's activations are included, so the difference is the logits' share)."""
    from gaca_openrlhf.trainer.chunked_actor import install_chunked_forward

    vocab = actor.model.config.vocab_size
    seq = torch.randint(3, vocab, (1, seq_len), device=device)
    att = torch.ones_like(seq)
    mask = torch.ones(1, seq_len - 1, dtype=torch.long, device=device)
    out = {}
    for name in ("full", "chunked"):
        actor.packing_samples = False
        if name == "chunked":
            install_chunked_forward(actor, chunk)
        elif "forward" in actor.__dict__:
            del actor.forward
        biggest = [0]

        def pack(t):
            biggest[0] = max(biggest[0], t.numel() * t.element_size())
            return t

        with PeakRSS() if device == "cpu" else _CudaPeak() as peak:
            with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
                lp, output = actor(seq, mask, attention_mask=att, return_output=True, return_entropy=True)
            (lp.sum() + output.entropy.sum()).backward()
            del lp, output
        out[f"{name}_largest_saved_tensor_mb"] = biggest[0] / 2**20
        out[f"{name}_peak_{'rss' if device == 'cpu' else 'cuda'}_mb"] = peak.mb
        actor.model.zero_grad(set_to_none=True)
    if "forward" in actor.__dict__:
        del actor.forward
    out["full_logits_fp32_mb"] = seq_len * vocab * 4 / 2**20
    out["chunk_logits_fp32_mb"] = min(chunk, seq_len) * vocab * 4 / 2**20
    return out


class _CudaPeak:
    """CUDA allocator peak above the allocation at entry (``.mb``)."""

    def __enter__(self):
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        self.base = torch.cuda.memory_allocated()
        return self

    def __exit__(self, *exc):
        torch.cuda.synchronize()
        self.mb = (torch.cuda.max_memory_allocated() - self.base) / 2**20


def run_env(env: str, actor, n: int, micro: int, budget: int, repeats: int, seed: int,
            device: str = "cpu", lengths=None, chunk: int = 1024, packed_attention: str = "sdpa") -> Dict[str, dict]:
    """Padded vs packed vs packed + token budget (+ chunked, ``chunk`` tokens) over one update of ``n`` step samples
    (``lengths``: (prompts, responses) to draw them from; default the synthetic distribution). The padded mode runs
    ``sdpa``, the packed ones ``packed_attention`` (:func:`packed_attention_default`)."""
    from gaca_openrlhf.trainer.chunked_actor import install_chunked_forward

    vocab = actor.model.config.vocab_size
    prompts, responses = draw(*lengths, n, seed) if lengths is not None else length_distribution(env, n, seed)
    samples = make_step_samples(prompts, responses, vocab, seed)
    actor.packing_samples = False
    items = prepare_items(actor, samples, micro=micro, seed=seed)
    names = ("padded", "packed", "packed+budget", "packed+budget+chunked")
    runs = {mode: dict(times=[], cpu_times=[], peaks=[]) for mode in names}
    # repeats round-robin over the modes, so that a slow spell of a shared machine does not fall on one mode only
    for _ in range(repeats):
        for mode in names:
            actor.packing_samples = mode != "padded"
            actor.model.config._attn_implementation = packed_attention if actor.packing_samples else "sdpa"
            if mode.endswith("chunked"):
                install_chunked_forward(actor, chunk)
            dyn = budget_plan(items.items, budget, 1, seed) if "budget" in mode else None
            groups = dyn.dynamic_indices if dyn is not None else fixed_plan(len(items.items), micro)
            if device == "cuda":
                torch.cuda.synchronize()
            t0, c0 = time.perf_counter(), time.process_time()
            with PeakRSS() if device == "cpu" else _CudaPeak() as peak:
                res = train_micro_batches(actor, items, groups, dynamic=dyn, keep_grads=False, per_sample=False)
            run = runs[mode]
            run["times"].append(time.perf_counter() - t0)
            run["cpu_times"].append(time.process_time() - c0)
            run["peaks"].append(peak.mb)
            run["res"] = res
            actor.__dict__.pop("forward", None)
    modes = {}
    for mode, run in runs.items():
        res = run["res"]
        modes[mode] = dict(waste=res.computed_tokens / res.real_tokens, seconds=min(run["times"]),
                           cpu_seconds=min(run["cpu_times"]), micro_batches=res.micro_batches,
                           peak_mb=max(run["peaks"]), loss=res.loss, real_tokens=res.real_tokens,
                           computed_tokens=res.computed_tokens)
    actor.model.config._attn_implementation = "sdpa"
    return modes


def packed_attention_default(device: str) -> str:
    """What a packed micro-batch runs on in training: flash-attn's varlen kernel where it is installed (GPU nodes),
    else the CPU backend's pure-PyTorch stand-in (:mod:`gaca_openrlhf.models.varlen_attention`)."""
    if device == "cuda":
        from transformers.utils import is_flash_attn_2_available

        if is_flash_attn_2_available():
            return "flash_attention_2"
    from gaca_openrlhf.models import varlen_attention

    return varlen_attention.ATTN_IMPLEMENTATION
