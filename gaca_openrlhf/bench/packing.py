"""``python -m gaca_openrlhf.bench.packing``: padded vs packed vs packed + token-budget training micro-batches.

    python -m gaca_openrlhf.bench.packing [--env alfworld webshop] [--lengths FILE ...] [--synthetic] \
        [--synthetic-responses] [--samples 32 8] [--micro 4] [--budget 4096] [--json OUT]

Step-sample lengths: by default the (prompt, response) token lengths recorded from a real ALFWorld and a real
WebShop rollout (``gaca_openrlhf/bench/data/packing_lengths_<env>.json``, written by
``python -m gaca_openrlhf.bench.packing_record``; how each was made is recorded in the file: command, commit, date,
model); ``--lengths FILE`` reads other recorded files (each names its environment), ``--synthetic`` uses synthetic
distributions shaped like the environments instead (:func:`length_distribution`), ``--synthetic-responses`` the
recorded prompt lengths with synthetic (trained-model-like) response lengths. Prints, side by side:

- padding waste: tokens the model computes per real token (padded: micro-batch rows x longest row; packed: the
  real tokens only), over every recorded step sample cut into verl-agent's mini-batches (256 ALFWorld, 64 WebShop)
  after a shuffle, and the micro-batch counts of the fixed and token-budget plans;
- the training-phase time of one rank's share of one update (forward + backward of the PPO loss and entropy bonus
  over ``--samples`` step samples drawn from the recorded ones, OpenRLHF's ``Actor`` and ``PolicyLoss``), padded vs
  packed vs packed + token budget (+ chunked log-probs): wall seconds and, on CPU, the process's CPU seconds (what
  the speed-up uses: on a shared machine the wall clock mostly measures the load); and the memory peak above the
  step's start (resident memory on CPU, the allocator's peak on CUDA);
- the logits peak of one ``--peak-len``-token sequence with the full-vocabulary logits (OpenRLHF) and with the
  chunked computation (:mod:`gaca_openrlhf.models.chunked_logprobs`), measured as the largest tensor autograd saves
  and the memory peak above the start (resident memory on CPU, the allocator's peak on CUDA);
- the issue's targets (padding waste <= 5 %, training phase >= 1.3x faster than padded, logits peak down by at least
  the number of chunks), each met or not with its number (:func:`targets`). ``--json OUT`` writes every figure.

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
#: GPUs of the recipes (examples/gpu): a rank's share of a mini-batch is the mini-batch / RECIPE_GPUS
RECIPE_GPUS = 8
#: mini-batch (step samples) of the synthetic lengths of an environment without a GPU recipe
DEFAULT_MINI_BATCH = 64
#: (low, high) synthetic prompt lengths of an environment without a GPU recipe
SYNTHETIC_PROMPT_LEN = (300, 4000)


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
def recorded_lengths(env: str, files: Sequence[str] = ()):
    """(prompt lengths, response lengths, file meta) of ``env``: from the first of ``files`` whose ``env`` field is
    ``env``, else from the recorded file committed with the benchmark
    (:func:`gaca_openrlhf.bench.packing_record.default_lengths_file`)."""
    from gaca_openrlhf.bench.packing_record import default_lengths_file, load_lengths

    for path in files:
        prompts, responses, meta = load_lengths(path)
        if meta.get("env") == env:
            return prompts, responses, dict(meta, path=path)
    path = default_lengths_file(env)
    prompts, responses, meta = load_lengths(path)
    return prompts, responses, dict(meta, path=path)


def draw(prompts: Sequence[int], responses: Sequence[int], n: int, seed: int = 0):
    """``n`` (prompt, response) pairs drawn from the recorded ones without replacement (with replacement when there
    are fewer than ``n``)."""
    rng = random.Random(seed)
    idx = rng.sample(range(len(prompts)), n) if n <= len(prompts) else [rng.randrange(len(prompts)) for _ in range(n)]
    return [prompts[i] for i in idx], [responses[i] for i in idx]


def gpu_recipe(env: str):
    """The :class:`agents.base.GpuRecipe` of a registered environment; None for an environment without one or an
    unknown name."""
    from agents.registry import spec

    try:
        return spec(env).gpu_recipe
    except KeyError:
        return None


def recipe_envs() -> list:
    """The specs of the environments with a GPU recipe (the benchmark's default ``--env``), in registry order."""
    from agents.registry import specs

    return specs(with_gpu_recipe=True)


def mini_batch(env: str) -> Optional[int]:
    """verl-agent's PPO mini-batch in step samples of ``env`` (its recipe's ``MINI_BATCH_STEPS``; None without one)."""
    recipe = gpu_recipe(env)
    return recipe.mini_batch_steps if recipe is not None else None


def length_distribution(env: str, n: int, seed: int = 0):
    """Synthetic step-sample (prompt, response) token lengths shaped like the environment's rollouts.

    Prompts uniform in the env's ``GpuRecipe.synthetic_prompt_len`` (without a recipe :data:`SYNTHETIC_PROMPT_LEN`;
    alfworld: 500-1300 tokens, a history of 2 steps; webshop: 300-4000, search result pages), responses 30-512 with
    most short (log-uniform).
    """
    rng = random.Random(seed)
    recipe = gpu_recipe(env)
    lo, hi = recipe.synthetic_prompt_len if recipe is not None else SYNTHETIC_PROMPT_LEN
    prompts = [rng.randint(lo, hi) for _ in range(n)]
    responses = [int(math.exp(rng.uniform(math.log(30), math.log(512)))) for _ in range(n)]
    return prompts, responses


def padding_waste(prompts, responses, micro: int, budget: int, seed: int = 0,
                  mini_batch: Optional[int] = None) -> Dict[str, float]:
    """Tokens computed per real token (no model): the samples shuffled (OpenRLHF's DataLoader), cut into
    mini-batches of ``mini_batch`` samples (default: one mini-batch of all), each into fixed micro-batches of
    ``micro`` samples padded to their longest, vs packed (real tokens only); and the micro-batch counts of the fixed
    and the token-budget plans (summed over the mini-batches)."""
    from gaca_openrlhf.trainer.minibatch import min_token_budget_parts

    lengths = [p + r for p, r in zip(prompts, responses)]
    order = list(range(len(lengths)))
    random.Random(seed).shuffle(order)
    mini_batch = mini_batch or len(order)
    minis = [order[s:s + mini_batch] for s in range(0, len(order), mini_batch)]
    groups = [m[s:s + micro] for m in minis for s in range(0, len(m), micro)]
    padded = sum(len(g) * max(lengths[i] for i in g) for g in groups)
    real = sum(lengths)
    return dict(padded=padded / real, packed=1.0, fixed_micro_batches=len(groups), mini_batches=len(minis),
                budget_micro_batches=sum(min_token_budget_parts([lengths[i] for i in m], budget) for m in minis),
                real_tokens=real, samples=len(lengths))


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


#: the issue's targets (issue 27)
TARGET_WASTE = 0.05
TARGET_SPEEDUP = 1.3


def targets(waste: Dict[str, dict], timed: Dict[str, dict], peak: Dict[str, float], peak_len: int,
            chunk: int, key: str) -> List[str]:
    """One line per target of the issue, met or not, with the number."""
    lines = []
    for env, w in waste.items():
        packed = w["packed"] - 1
        lines.append(f"padding waste <= {TARGET_WASTE:.0%} ({env}): packed {packed:.1%} (padded {w['padded'] - 1:.1%})"
                     f" -> {'met' if packed <= TARGET_WASTE else 'NOT met'}")
    for env, rows in timed.items():
        base = rows["padded"][key]
        for mode in ("packed", "packed+budget", "packed+budget+chunked"):
            x = base / rows[mode][key]
            lines.append(f"training phase >= {TARGET_SPEEDUP}x faster than padded ({env}, {mode}, {key}): {x:.2f}x "
                         f"-> {'met' if x >= TARGET_SPEEDUP else 'NOT met'}")
    chunks = math.ceil(peak_len / chunk)
    for what in ("largest_saved_tensor_mb", next(k[5:] for k in peak if k.startswith("full_peak_"))):
        ratio = peak[f"full_{what}"] / max(peak[f"chunked_{what}"], 1e-9)
        lines.append(f"logits peak down >= {chunks}x (the number of chunks), {what}: {ratio:.1f}x "
                     f"-> {'met' if ratio >= chunks else 'NOT met'}")
    return lines


def main(argv=None) -> int:
    """Print the padding-waste table, the timed padded / packed / token-budget / chunked update per environment,
    the logits peak and the issue's targets (module docstring); returns 0."""
    import json
    import os
    import platform

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    envs = recipe_envs()
    ap.add_argument("--env", nargs="*", default=[s.name for s in envs])
    ap.add_argument("--lengths", nargs="*", default=[], metavar="FILE",
                    help="recorded step-sample lengths (python -m gaca_openrlhf.bench.packing_record; each file names "
                         "its environment); default: gaca_openrlhf/bench/data/packing_lengths_<env>.json")
    ap.add_argument("--synthetic", action="store_true",
                    help="synthetic lengths shaped like the environments instead of recorded ones")
    ap.add_argument("--synthetic-responses", action="store_true",
                    help="the recorded prompt lengths with synthetic response lengths (30-512 tokens, log-uniform: "
                         "a trained model's reasoning) instead of the recorded model's")
    ap.add_argument("--waste-micro", type=int, default=4,
                    help="fixed micro-batch size of the padding-waste table (the recipes' MICRO_BATCH)")
    ap.add_argument("--waste-budget", type=int, default=16384, help="token budget of the padding-waste table")
    ap.add_argument("--waste-samples", type=int, nargs=len(envs), default=None,
                    metavar=tuple(s.name.upper() for s in envs),
                    help="synthetic lengths only: step samples of the padding-waste table (default one mini-batch)")
    shares = ", ".join(f"{s.gpu_recipe.mini_batch_steps} / {RECIPE_GPUS} {s.title}" for s in envs)
    ap.add_argument("--samples", type=int, nargs="+",
                    default=[s.gpu_recipe.mini_batch_steps // RECIPE_GPUS for s in envs],
                    help="step samples of the timed update, per --env (default: one rank's share of verl-agent's "
                         f"mini-batch on {RECIPE_GPUS} GPUs: {shares}); one number: all")
    ap.add_argument("--micro", type=int, default=4, help="fixed micro-batch size of the timed padded/packed paths")
    ap.add_argument("--budget", type=int, default=4096, help="token budget of a timed micro-batch")
    ap.add_argument("--train-chunk", type=int, default=256, help="log-prob chunk of the timed chunked mode")
    ap.add_argument("--packed-attention", default="",
                    help="attn_implementation of the timed packed modes (default: flash_attention_2 where installed, "
                         "else the CPU stand-in gaca_varlen_sdpa, as training runs them; 'sdpa': transformers' "
                         "block-diagonal mask over the whole packed row, the stand-in before 2026-12-04)")
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--vocab", type=int, default=8192)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--peak-len", type=int, default=4096, help="tokens of the logits-peak micro-batch")
    ap.add_argument("--peak-vocab", type=int, default=32768, help="vocabulary of the logits-peak model")
    ap.add_argument("--chunk", type=int, default=512, help="log-prob chunk of the logits-peak measurement")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", default=None, metavar="OUT", help="also write every figure to this JSON file")
    a = ap.parse_args(argv)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    import openrlhf.models.actor as actor_module

    if device == "cpu":  # torch.compile'd on CPU it recompiles per shape inside the timing; the same math eagerly
        actor_module.compute_entropy = getattr(actor_module.compute_entropy, "_torchdynamo_orig_callable",
                                               actor_module.compute_entropy)
    mmap_fixed = device == "cpu" and fixed_mmap_threshold()
    lengths, sources = {}, {}
    for i, env in enumerate(a.env):
        if a.synthetic:
            n = a.waste_samples[i] if a.waste_samples else mini_batch(env) or DEFAULT_MINI_BATCH
            lengths[env] = length_distribution(env, n, a.seed)
            sources[env] = {"synthetic": True}
        else:
            prompts, responses, meta = recorded_lengths(env, a.lengths)
            sources[env] = {"path": os.path.relpath(meta["path"]), **meta.get("recorded", {})}
            sources[env].pop("command", None)
            if a.synthetic_responses:
                responses = length_distribution(env, len(prompts), a.seed)[1]
                sources[env]["synthetic_responses"] = True
            lengths[env] = (prompts, responses)
    report = {"machine": {"device": device, "torch": torch.__version__, "threads": torch.get_num_threads(),
                          "cpus": os.cpu_count(), "load_avg": list(os.getloadavg()), "host": platform.node(),
                          "cpu": platform.processor() or platform.machine(), "mmap_threshold_fixed": mmap_fixed},
              "lengths": sources, "waste": {}, "timed": {}, "args": vars(a)}
    print("step-sample lengths: " + "; ".join(
        f"{env}: {'synthetic' if s.get('synthetic') else s['path']}"
        f"{' + synthetic responses' if s.get('synthetic_responses') else ''} ({len(lengths[env][0])} samples, "
        f"prompts mean {sum(lengths[env][0]) / len(lengths[env][0]):.0f}, responses mean "
        f"{sum(lengths[env][1]) / len(lengths[env][1]):.0f} tokens)" for env, s in sources.items()))
    minis = "/".join(str(mini_batch(e) or DEFAULT_MINI_BATCH) for e in a.env)
    print(f"\npadding waste (tokens computed per real token; the samples shuffled, cut into mini-batches of "
          f"{minis}, fixed micro-batches of {a.waste_micro}; token budget {a.waste_budget}):")
    print(f"{'env':10s} {'samples':>7s} {'mini-b':>6s} {'real tokens':>11s} {'padded':>8s} {'packed':>8s} "
          f"{'fixed mb':>8s} {'budget mb':>9s}")
    for env in a.env:
        w = padding_waste(*lengths[env], a.waste_micro, a.waste_budget, a.seed, mini_batch=mini_batch(env))
        report["waste"][env] = w
        print(f"{env:10s} {w['samples']:7d} {w['mini_batches']:6d} {w['real_tokens']:11d} {w['padded']:8.3f} "
              f"{w['packed']:8.3f} {w['fixed_micro_batches']:8d} {w['budget_micro_batches']:9d}")
    from gaca_openrlhf.models import varlen_attention

    varlen_attention.register()
    packed_attention = a.packed_attention or packed_attention_default(device)
    report["packed_attention"] = packed_attention
    actor = bench_model(a.hidden, a.layers, a.vocab, device)
    samples = dict(zip(a.env, a.samples if len(a.samples) > 1 else a.samples * len(a.env)))
    print(f"\ntimed training phase: device={device} torch={torch.__version__} threads={torch.get_num_threads()} "
          f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}; model: Qwen2 hidden {a.hidden}, "
          f"{a.layers} layers, vocab {a.vocab}, fp32; attention: padded sdpa, packed {packed_attention}; "
          f"fixed micro-batches of {a.micro}, token budget "
          f"{a.budget}, chunk {a.train_chunk}")
    key = "cpu_seconds" if device == "cpu" else "seconds"
    for env in a.env:
        rows = run_env(env, actor, samples[env], a.micro, a.budget, a.repeats, a.seed, device,
                       lengths=None if a.synthetic else lengths[env], chunk=a.train_chunk,
                       packed_attention=packed_attention)
        report["timed"][env] = rows
        base = rows["padded"][key]
        print(f"\n{env}: {samples[env]} step samples, {rows['padded']['real_tokens']} real tokens")
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
    report["logits_peak"] = peak
    print(f"\nlogits peak, one {a.peak_len}-token sequence, vocab {a.peak_vocab}, chunk {a.chunk} "
          f"(log-probs + entropy + backward; 1-layer model):")
    for k, v in peak.items():
        print(f"  {k:24s} {v:10.1f}")
    report["targets"] = targets(report["waste"], report["timed"], peak, a.peak_len, a.chunk, key)
    print("\ntargets (issue 27):")
    for line in report["targets"]:
        print(f"  {line}")
    report["machine"]["load_avg_end"] = list(os.getloadavg())
    if a.json:
        with open(a.json, "w") as f:
            json.dump(report, f, indent=1, default=str)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
