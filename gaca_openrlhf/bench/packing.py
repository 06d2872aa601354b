"""``python -m gaca_openrlhf.bench.packing``: padded vs packed vs packed + token-budget training micro-batches.

Prints, for synthetic step-sample length distributions shaped like ALFWorld (prompts 0.5-1.3k tokens, responses up
to 512) and WebShop (prompts up to 4k), side by side:

- padding waste: tokens the model computes per real token (padded: micro-batch rows x longest row; packed: the
  real tokens only);
- the training-step time (forward + backward of the PPO loss and entropy bonus over one mini-batch, OpenRLHF's
  ``Actor`` and ``PolicyLoss``): wall seconds and, on CPU, the process's CPU seconds (what the speed-up uses: on a
  shared machine the wall clock mostly measures the load); and the memory peak above the step's start (resident
  memory on CPU, the allocator's peak on CUDA);
- the logits peak of one WebShop-length micro-batch with the full-vocabulary logits (OpenRLHF) and with the chunked
  computation (:mod:`gaca_openrlhf.models.chunked_logprobs`), measured as the largest tensor autograd saves plus the
  logits themselves, and as the allocator's peak on CUDA when a GPU is present.

A script that prints figures, not a timed test. The helpers (:func:`make_step_samples`, :func:`prepare_items`,
:func:`train_micro_batches`) are the real pipeline pieces -- ``step_experience`` -> ``StepExperienceMaker``'s
split and advantage hook -> OpenRLHF's replay-buffer items -> padded / packed / token-budget micro-batches -> the
clipped policy loss with OpenRLHF's normalizers -- and are also what the equality test
(tests/gaca_openrlhf/trainer/test_packing_equality.py) runs.
"""
from __future__ import annotations

import argparse
import math
import random
import resource
import time
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Dict, List, Optional, Sequence

import torch

#: PPO loss settings of the harness (OpenRLHF's defaults) and the entropy bonus coefficient exercised
CLIP_EPS = 0.2
ENTROPY_COEF = 0.01


# --------------------------------------------------------------------------------------------------------------
# Step samples and the replay-buffer items
# --------------------------------------------------------------------------------------------------------------
def make_step_samples(prompt_lens: Sequence[int], response_lens: Sequence[int], vocab: int, seed: int = 0,
                      num_traj: int = 4):
    """Step samples (``trainer.samples.step_experience``) with the given token lengths and random token ids.

    Samples are spread over ``num_traj`` trajectories of one task group with different rewards and some invalid
    steps, so the GRPO advantages differ between samples.
    """
    from gaca_openrlhf.trainer.samples import step_experience

    rng = random.Random(seed)
    episode = dict(prompt="task", label="", failed=False, error="", won=False, score=0.0)
    samples = []
    for i, (p, r) in enumerate(zip(prompt_lens, response_lens)):
        traj, t = i % num_traj, i // num_traj
        step = dict(prompt_ids=[rng.randrange(3, vocab) for _ in range(p)],
                    response_ids=[rng.randrange(3, vocab) for _ in range(r)],
                    logprobs=[-rng.uniform(0.1, 3.0) for _ in range(r)], reward=float(traj * traj) if t == 0 else 0.0,
                    valid=(i % 3 != 1), anchor_id=1000 + i, step_index=t, truncated=False)
        samples.append(step_experience(step, 0, traj, episode))
    return samples


def _maker_args(dp: int, micro: int, dynamic: bool, budget: int):
    return SimpleNamespace(
        actor=SimpleNamespace(num_nodes=1, num_gpus_per_node=dp),
        ds=SimpleNamespace(ring_attn_size=1, tensor_parallel_size=1),
        rollout=SimpleNamespace(micro_batch_size=micro, max_tokens_per_gpu=budget),
        train=SimpleNamespace(dynamic_batch_enable=dynamic, max_tokens_per_gpu=budget),
        algo=SimpleNamespace(advantage=SimpleNamespace(estimator="grpo")))


@dataclass
class Items:
    """One rank's replay-buffer items (OpenRLHF's per-sample Experiences, padding removed) and their row ids."""

    items: list
    rows: List[int]  # rollout row of each item (copies included)
    advantage: Dict[int, float]  # rollout row -> its scalar advantage (0 for a copy)
    is_copy: Dict[int, bool]


def prepare_items(actor, samples, *, micro: int = 2, pad_multiple: int = 1, seed: int = 0,
                  old_logprob_shift: float = 0.2) -> Items:
    """Experience pass + advantage hook + replay-buffer split, as on one DP rank.

    ``samples`` are padded with copies (``pad_to_multiple``), split by the step experience maker into micro-batches
    of ``micro`` rows, the actor's log-probs (shifted by a deterministic per-token offset of at most
    ``old_logprob_shift`` so the PPO ratio is not 1 and clipping is exercised) become ``action_log_probs``, the
    advantage hook (GRPO) broadcasts advantages and masks the copies, and the micro-batches are split into padding-free
    items as OpenRLHF's replay buffer does.
    """
    from openrlhf.trainer.ppo_utils.experience import remove_padding_in_sequences, split_experience_batch

    from gaca_openrlhf.trainer.experience import StepExperienceMaker
    from gaca_openrlhf.trainer.samples import pad_to_multiple

    samples = pad_to_multiple(list(samples), pad_multiple, seed)
    strategy = SimpleNamespace(args=_maker_args(1, micro, False, 0))
    maker = StepExperienceMaker(None, None, None, None, None, strategy, SimpleNamespace(pad_token_id=0))
    micro_batches = maker.split_rollout_samples(samples)
    with torch.no_grad():
        for mb in micro_batches:
            lp = actor(mb.sequences, mb.action_mask, attention_mask=mb.attention_mask)
            k = torch.arange(lp.shape[1], dtype=torch.float32)
            mb.action_log_probs = (lp - old_logprob_shift * torch.sin(k + len(mb.index))) * mb.action_mask
    micro_batches = maker.compute_advantages_and_returns(micro_batches)
    rows = [i for mb in micro_batches for i in mb.index]
    advantage = {i: float(a) for mb in micro_batches for i, a in zip(mb.index, mb.info["advantage"])}
    is_copy = {i: not bool(mb.action_mask[j].any()) for mb in micro_batches for j, i in enumerate(mb.index)}
    items = []
    for mb in micro_batches:
        items.extend(remove_padding_in_sequences(split_experience_batch(mb)))
    return Items(items=items, rows=rows, advantage=advantage, is_copy=is_copy)


# --------------------------------------------------------------------------------------------------------------
# Micro-batch plans
# --------------------------------------------------------------------------------------------------------------
def fixed_plan(num_items: int, micro: int):
    """Consecutive micro-batches of ``micro`` item indices, one update (today's fixed-size path)."""
    return [list(range(s, min(s + micro, num_items))) for s in range(0, num_items, micro)]


def budget_plan(items: list, budget: int, updates: int = 1, seed: int = 0):
    """Token-budget micro-batches of one rank (the policy actor's :func:`~gaca_openrlhf.trainer.actors.
    setup_step_dynamic_batch`); returns the buffer with ``dynamic_*`` lists."""
    from gaca_openrlhf.trainer.actors import setup_step_dynamic_batch

    buffer = SimpleNamespace(items=items)
    setup_step_dynamic_batch(buffer, SimpleNamespace(ds_device_mesh=None), updates, budget, seed)
    return buffer


# --------------------------------------------------------------------------------------------------------------
# One training step
# --------------------------------------------------------------------------------------------------------------
@dataclass
class StepResult:
    loss: float  # the update's total loss (policy - entropy bonus), as DeepSpeed accumulates it
    log_probs: Dict[int, torch.Tensor]  # rollout row -> log-probs of its response tokens (action mask positions)
    token_loss: Dict[int, float]  # rollout row -> masked sum of its per-token PPO loss / normalizer
    grads: Dict[str, torch.Tensor]
    computed_tokens: int  # tokens the model ran over (padding included)
    real_tokens: int
    micro_batches: int


def train_micro_batches(actor, items: Items, groups: List[List[int]], *, dynamic: Optional[object] = None,
                        entropy_coef: float = ENTROPY_COEF, keep_grads: bool = True,
                        per_sample: bool = True) -> StepResult:
    """Forward + backward of one optimizer update over ``groups`` (lists of item indices), as OpenRLHF's
    ``ActorPPOTrainer.training_step`` computes it.

    Fixed micro-batches (``dynamic`` None) use ``iter_grad_accum_global_norm``'s normalizers (window tokens / gas)
    and DeepSpeed's ``1 / gas`` loss scaling; token-budget ones (``dynamic`` = the planned buffer) use its
    ``dynamic_batch_num_tokens`` with no accumulation scaling (OpenRLHF's dynamic mode). Gradients accumulate in
    the model's ``.grad`` (zeroed first).
    """
    from openrlhf.models.loss import PolicyLoss, aggregate_loss
    from openrlhf.trainer.ppo_utils.experience import make_experience_batch
    from openrlhf.utils.loss_utils import _optimizer_step_loss_norm

    model = actor.model
    model.zero_grad(set_to_none=True)
    policy_loss = PolicyLoss(clip_eps_low=CLIP_EPS, clip_eps_high=CLIP_EPS)
    batches = [make_experience_batch([items.items[i] for i in g]) for g in groups]
    gas = len(batches)
    if dynamic is None:
        norm = _optimizer_step_loss_norm([b.action_mask for b in batches], None, 1, gas)
    total, log_probs, token_loss = 0.0, {}, {}
    computed = real = 0
    for step, (g, exp) in enumerate(zip(groups, batches)):
        if dynamic is None:
            info, scale = norm, 1.0 / gas
        else:
            info = {"dp_size": 1, "batch_num_tokens": torch.tensor(dynamic.dynamic_batch_num_tokens[step]),
                    "global_batch_size": torch.tensor(dynamic.dynamic_global_batch_size[step])}
            scale = 1.0
        computed += int(exp.sequences.numel()) if not getattr(actor, "packing_samples", False) \
            else int(exp.attention_mask.sum())
        real += int(exp.attention_mask.sum())
        lp, output = actor(exp.sequences, exp.action_mask, attention_mask=exp.attention_mask, return_output=True,
                           return_entropy=entropy_coef is not None)
        loss, *_ = policy_loss(lp, exp.action_log_probs, exp.advantages, action_mask=exp.action_mask, **info)
        if entropy_coef is not None:
            ent = aggregate_loss(output.entropy[:, -exp.action_mask.shape[1]:], exp.action_mask, **info)
            loss = loss - entropy_coef * ent
        (loss * scale).backward()
        total += float(loss.detach()) * scale
        if per_sample:
            with torch.no_grad():
                ratio = (lp - exp.action_log_probs).clamp(-20, 20).exp()
                adv = exp.advantages
                tok = -torch.min(ratio * adv, ratio.clamp(1 - CLIP_EPS, 1 + CLIP_EPS) * adv) * exp.action_mask
                tok = tok.sum(-1) / info["batch_num_tokens"] * info["dp_size"] * scale
                for r, i in enumerate(g):
                    row = items.rows[i]
                    m = exp.action_mask[r].bool()
                    log_probs[row] = lp[r][m].detach().clone()
                    token_loss[row] = float(tok[r])
        del lp, output, loss
    grads = {n: p.grad.detach().clone() for n, p in model.named_parameters() if p.grad is not None} \
        if keep_grads else {}
    return StepResult(total, log_probs, token_loss, grads, computed, real, len(batches))


def standalone_log_probs(actor, items: Items) -> Dict[int, torch.Tensor]:
    """Each item's response log-probs from a forward over that sample alone (no padding, no packing)."""
    out = {}
    with torch.no_grad():
        for i, item in enumerate(items.items):
            mask = item.action_mask.unsqueeze(0)
            lp = actor(item.sequences.unsqueeze(0), mask, attention_mask=item.attention_mask.unsqueeze(0))
            out[items.rows[i]] = lp[0][item.action_mask.bool()]
    return out


# --------------------------------------------------------------------------------------------------------------
# Benchmark
# --------------------------------------------------------------------------------------------------------------
def length_distribution(env: str, n: int, seed: int = 0):
    """Synthetic step-sample (prompt, response) token lengths shaped like the environment's rollouts.

    alfworld: prompts uniform in 500-1300 tokens (history of 2 steps), responses 30-512 with most short
    (log-uniform); webshop: prompts 300-4000 (search result pages), responses 30-512 (log-uniform).
    """
    rng = random.Random(seed)
    lo, hi = (500, 1300) if env == "alfworld" else (300, 4000)
    prompts = [rng.randint(lo, hi) for _ in range(n)]
    responses = [int(math.exp(rng.uniform(math.log(30), math.log(512)))) for _ in range(n)]
    return prompts, responses


def padding_waste(prompts, responses, micro: int, budget: int, seed: int = 0) -> Dict[str, float]:
    """Tokens computed per real token over one mini-batch (no model): fixed micro-batches of ``micro`` samples
    after a shuffle (OpenRLHF's DataLoader), each padded to its longest, vs packed (real tokens only), and the
    micro-batch counts of the fixed and token-budget plans."""
    from gaca_openrlhf.trainer.minibatch import min_token_budget_parts

    lengths = [p + r for p, r in zip(prompts, responses)]
    order = list(range(len(lengths)))
    random.Random(seed).shuffle(order)
    groups = [order[s:s + micro] for s in range(0, len(order), micro)]
    padded = sum(len(g) * max(lengths[i] for i in g) for g in groups)
    real = sum(lengths)
    return dict(padded=padded / real, packed=1.0, fixed_micro_batches=len(groups),
                budget_micro_batches=min_token_budget_parts(lengths, budget), real_tokens=real)


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 2**20


class PeakRSS:
    """Context manager sampling the process's resident memory every 2 ms: ``.mb`` = peak minus the RSS at entry
    (CPU; large tensors are mmap'd by the allocator and returned on free, so successive modes do not hide each
    other's peaks)."""

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
            device: str = "cpu") -> Dict[str, dict]:
    """Padded vs packed vs packed + token budget (+ chunked) over one mini-batch of ``n`` step samples."""
    from gaca_openrlhf.trainer.chunked_actor import install_chunked_forward

    vocab = actor.model.config.vocab_size
    prompts, responses = length_distribution(env, n, seed)
    samples = make_step_samples(prompts, responses, vocab, seed)
    actor.packing_samples = False
    items = prepare_items(actor, samples, micro=micro, seed=seed)
    modes = {}
    for mode in ("padded", "packed", "packed+budget", "packed+budget+chunked"):
        actor.packing_samples = mode != "padded"
        if mode.endswith("chunked"):
            install_chunked_forward(actor, 1024)
        dyn = budget_plan(items.items, budget, 1, seed) if "budget" in mode else None
        groups = dyn.dynamic_indices if dyn is not None else fixed_plan(len(items.items), micro)
        times, cpu_times, peaks = [], [], []
        for _ in range(repeats):
            if device == "cuda":
                torch.cuda.synchronize()
            t0, c0 = time.perf_counter(), time.process_time()
            with PeakRSS() if device == "cpu" else _CudaPeak() as peak:
                res = train_micro_batches(actor, items, groups, dynamic=dyn, keep_grads=False, per_sample=False)
            times.append(time.perf_counter() - t0)
            cpu_times.append(time.process_time() - c0)
            peaks.append(peak.mb)
        modes[mode] = dict(waste=res.computed_tokens / res.real_tokens, seconds=min(times), cpu_seconds=min(cpu_times),
                           micro_batches=res.micro_batches, peak_mb=max(peaks), loss=res.loss)
        if "forward" in actor.__dict__:
            del actor.forward
    return modes


def main(argv=None) -> int:
    """Print the padding-waste table, the timed padded / packed / token-budget / chunked update per environment,
    and the logits peak (module docstring); returns 0."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--waste-samples", type=int, nargs=2, default=[256, 64],
                    help="mini-batch sizes (ALFWorld, WebShop) of the padding-waste table (verl-agent's)")
    ap.add_argument("--waste-micro", type=int, default=8, help="fixed micro-batch size of the padding-waste table")
    ap.add_argument("--waste-budget", type=int, default=16384, help="token budget of the padding-waste table")
    ap.add_argument("--samples", type=int, default=8, help="step samples in the timed mini-batch")
    ap.add_argument("--micro", type=int, default=4, help="fixed micro-batch size of the timed padded/packed paths")
    ap.add_argument("--budget", type=int, default=8192, help="token budget of a timed micro-batch")
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--vocab", type=int, default=8192)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--peak-len", type=int, default=4096, help="tokens of the logits-peak micro-batch (WebShop)")
    ap.add_argument("--peak-vocab", type=int, default=32768, help="vocabulary of the logits-peak model")
    ap.add_argument("--chunk", type=int, default=512)
    ap.add_argument("--env", nargs="*", default=["alfworld", "webshop"])
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    import openrlhf.models.actor as actor_module

    if device == "cpu":  # torch.compile'd on CPU it recompiles per shape inside the timing; the same math eagerly
        actor_module.compute_entropy = getattr(actor_module.compute_entropy, "_torchdynamo_orig_callable",
                                               actor_module.compute_entropy)
    print(f"padding waste over one mini-batch (fixed micro-batches of {a.waste_micro} after a shuffle; token budget "
          f"{a.waste_budget}):")
    print(f"{'env':10s} {'samples':>7s} {'real tokens':>11s} {'padded':>8s} {'packed':>8s} {'fixed mb':>8s} "
          f"{'budget mb':>9s}")
    for env, n in zip(["alfworld", "webshop"], a.waste_samples):
        w = padding_waste(*length_distribution(env, n, a.seed), a.waste_micro, a.waste_budget, a.seed)
        print(f"{env:10s} {n:7d} {w['real_tokens']:11d} {w['padded']:8.3f} {w['packed']:8.3f} "
              f"{w['fixed_micro_batches']:8d} {w['budget_micro_batches']:9d}")
    actor = bench_model(a.hidden, a.layers, a.vocab, device)
    print(f"\ntimed training step: device={device} torch={torch.__version__} threads={torch.get_num_threads()} "
          f"model: Qwen2 hidden "
          f"{a.hidden}, {a.layers} layers, vocab {a.vocab}, fp32, sdpa; {a.samples} step samples, micro {a.micro}, "
          f"budget {a.budget} tokens")
    for env in a.env:
        rows = run_env(env, actor, a.samples, a.micro, a.budget, a.repeats, a.seed, device)
        key = "cpu_seconds" if device == "cpu" else "seconds"
        base = rows["padded"][key]
        print(f"\n{env}")
        print(f"{'mode':24s} {'tokens/real':>11s} {'micro-b':>7s} {'wall s':>8s} {'cpu s':>8s} {'speed-up':>8s} "
              f"{'peak +MB':>9s} {'loss':>12s}")
        for mode, r in rows.items():
            print(f"{mode:24s} {r['waste']:11.3f} {r['micro_batches']:7d} {r['seconds']:8.2f} {r['cpu_seconds']:8.2f} "
                  f"{base / r[key]:7.2f}x {r['peak_mb']:9.0f} {r['loss']:12.6f}")
        if device == "cpu":
            print("(speed-up from process CPU seconds: the wall clock of a shared machine mostly measures the load)")
    del actor
    actor = bench_model(a.hidden, 1, a.peak_vocab, device)
    peak = logits_peak(actor, a.peak_len, a.chunk, device)
    print(f"\nlogits peak, one {a.peak_len}-token sequence (WebShop length), vocab {a.peak_vocab}, chunk {a.chunk} "
          f"(log-probs + entropy + backward; 1-layer model):")
    for k, v in peak.items():
        print(f"  {k:24s} {v:10.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
