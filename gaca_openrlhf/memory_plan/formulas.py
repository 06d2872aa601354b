"""The memory plan's formulas: :class:`Plan` and :class:`Phase`, the bytes of each part of each phase,
:func:`estimate` and :func:`fits`.

Per-GPU memory plan of a GPU recipe (examples/gpu): will it fit before any GPU hour is spent?

    python -m gaca_openrlhf.memory_plan --model 1.5b|7b|<config.json or model folder> --env alfworld|webshop \
        [--gpus 8] [--tp 1] [--micro-batch 4] [--prompt-len N] [--response-len 512] [--vllm-mem F] \
        [--gpu-mem-gb 80] [--zero 3] [--token-budget 32768] [--logits-chunk 4096] [--mini-batch-steps N] \
        [--no-entropy] [--experience-entropy]
    python -m gaca_openrlhf.memory_plan --recipes [--gpu-mem-gb 80] [--token-budget B] [--logits-chunk C]
    python -m gaca_openrlhf.memory_plan --vllm-share --model M --env E [--gpus 8] [--tp 1] [--rollout-seqs 16] \
        [--prompt-len N] [--response-len 512] [--gpu-mem-gb 80]     # prints VLLM_MEM (the scripts' default)

``--recipes`` prints the four recipes of examples/gpu (Qwen2.5-1.5B / 7B x ALFWorld / WebShop) at their defaults in
one table (``--token-budget 0 --logits-chunk 0``: as run with ``PACKING=0``, padded fixed micro-batches and full
logits); the exit status is 1 when one of them does not fit (a single plan: when it does not fit), else 0. This is
an *estimate* from shapes, written from the code paths of OpenRLHF 0.11.2 (not a measurement): it is there to catch
the recipes that cannot fit, and to say which knob (token budget, micro batch, logits chunk) brings them under the
GPU's memory. For a plan that does not fit it suggests, with a token budget, the largest ``--token-budget`` that
fits, else the largest MICRO_BATCH below the plan's that fits (the training micro batch follows from it as in
_common.sh's ``train_micro``), and the largest power-of-two ``--logits-chunk`` that fits at the plan's micro batch.

Units: "GB" is GiB (2**30 bytes), as nvidia-smi and torch report GPU memory. N = GPUs (DeepSpeed ranks, each GPU holds
one actor rank, one reference rank and one vLLM worker under --train.colocate_all), P = parameter count, h = hidden
size, L = layers, I = MLP intermediate size, V = vocabulary, kv = KV heads x head dim, TP = vLLM tensor parallel size.
Tokens per micro batch, T (the longest possible sequence, prompt + response, is assumed for every sample):

- fixed micro batches (``--token-budget 0``; the scripts with ``PACKING=0``): ``mb`` sequences padded to
  T = mb x (prompt + response) tokens (packing alone, without a budget, has the same worst case);
- token-budget micro batches (``--token-budget B``: ``--ds.packing_samples --train.dynamic_batch_enable
  --train.max_tokens_per_gpu B --rollout.max_tokens_per_gpu B``, docs/packing.md): packed rows of at most B tokens,
  except a single sample longer than B, which gets a micro batch of its own: T = max(B, prompt + response), for the
  experience and the training passes alike. Packed rows run flash-attn's variable-length kernel on the GPU
  (attention memory linear in T, not modelled, as for padded rows).

What the recipes run (examples/gpu/_common.sh, _train_<env>.sh): ZeRO-3, bf16, gradient checkpointing,
``--train.colocate_all --vllm.enable_sleep --ds.enable_sleep``, VLLM_MEM from the plan (below), 8 GPUs, chunked log-probs of
``LOGPROB_CHUNK`` = :data:`RECIPE_LOGITS_CHUNK` (4096) tokens and token-budget micro batches of ``TOKEN_BUDGET`` =
:data:`RECIPE_TOKEN_BUDGET` (32768) tokens (``LOGPROB_CHUNK=0``: full logits and, unless TOKEN_BUDGET is given,
:data:`RECIPE_TOKEN_BUDGET_FULL_LOGITS`; ``PACKING=0``: MICRO_BATCH 4 for the log-prob passes,
``--rollout.micro_batch_size``, and ``train_micro``, MICRO_BATCH lowered until MINI_BATCH_STEPS is a multiple of
micro x N, for training), ``--actor.entropy_coef 0.001``, the k3 KL loss against a reference model; ALFWorld prompt
2048 + response 512 (MINI_BATCH_STEPS 256), WebShop 4096 + 512 (64); 7B with vLLM TP 1.

The token budget of each recipe (:func:`recommended_token_budget`): the largest multiple of 4096 tokens, at most
:data:`TOKEN_BUDGET_CEILING` (32768) and at most one GPU's share of a mini batch at full length (MINI_BATCH_STEPS / N
x (prompt + response): a larger budget cannot change the training micro batches), at which every phase fits. With
chunks of 4096 tokens the ceiling binds for all four recipes (32768: 1.5B needs at most 38 % of an 80 GB GPU, in the
experience pass, whose reference forward keeps full logits; 7B 49 %, in the training pass); with full logits the
training pass's [tokens, vocab] tensors bind it (20480 for 1.5B, 16384 for 7B). The ceiling: at 32k tokens a micro
batch is ~8 x 32k x P FLOPs of work (forward, recomputation, backward; ~400 TFLOPs for 1.5B), against ZeRO-3's
per-micro-batch gathers of the bf16 parameters (3 x 2P bytes), a few per cent; larger micro batches only add memory and
coarser load balance between the ranks.

Every phase's total is

    total = states + zero3 + acts + max(layer, logits) + vllm + ctx

and it fits when total <= 90 % of the GPU's memory (the 10 % margin is for the caching allocator's fragmentation,
NCCL buffers and what is not modelled). ``layer`` and ``logits`` are transients that never coexist (the decoder
layers have run, or have not yet been recomputed, while the [tokens, vocab] tensors exist), hence the max.

ctx (all phases): one CUDA context per process on the GPU, 0.5 GB each, for the actor rank, the reference rank and
the vLLM worker: 1.5 GB.

vllm_mem (VLLM_MEM, ``--vllm.gpu_memory_utilization``) comes from the plan, not a constant (:func:`vllm_share`):
vLLM's weights 2P/TP + :data:`VLLM_NON_KV_GB` (its profile run's activation peak, CUDA graphs, the sampler) + the
KV cache of every sequence one engine holds at once (tasks x rollouts / engines, each at prompt + response tokens,
x :data:`KV_SLACK` for block rounding), as a share of the GPU rounded up to 0.05, at least 0.1. The recipes' 16 x 8
episodes over 8 engines are 16 sequences per engine: 0.1 for 1.5B, 0.25-0.3 for 7B, where the constant 0.6 used to
reserve 48 GB (``--vllm-mem`` gives one).

vLLM asleep (experience and training phases): level-1 sleep frees what vLLM's sleep allocator holds (weights,
copied to host RAM, and the KV cache); NCCL buffers, CUDA graphs and the allocator's leftovers stay:
:data:`VLLM_ASLEEP_GB` per GPU, an estimate (to be replaced by the smoke's measured per-phase peaks).

1. rollout (vLLM generating; DeepSpeed asleep)
   vllm   = vllm_mem x GPU memory: vLLM claims this share for itself (its weights, 2P/TP bytes, and the KV cache live
            inside it; the KV cache gets what the weights leave: reported on a "vLLM" line with its token capacity,
            2 x L x kv x 2 bytes / TP per token and GPU). The phase does not fit if the weights alone exceed it.
   states = the bf16 parameter shards of actor and reference, 2P/N each: ``--ds.enable_sleep`` offloads the actor's
            optimizer states, fp32 master weights and gradients (openrlhf/utils/deepspeed/deepspeed_utils.py,
            ``offload_deepspeed_states``: ``lp_params`` is not in its list), and the reference model is never
            offloaded (``--ref.offload`` is off), so both bf16 shards stay on the GPU.
2. experience (actor and reference log-prob forwards, no grad, one after the other; vLLM asleep: ``vllm`` =
   :data:`VLLM_ASLEEP_GB`; the actor's optimizer states still offloaded: they are reloaded only around ``fit``)
   states = actor 2P/N + reference 2P/N (bf16 shards).
   zero3  = one gathered module, 2 x max(params of a decoder layer, V x h) bytes: ZeRO-3 all-gathers a module's full
            bf16 weights before running it; the largest is the embedding / lm_head matrix or a decoder layer.
   layer  = one decoder layer's forward working set without grad, T x (4h + 8I) bytes (residual stream and its norm,
            then gate, up, SiLU(gate) and their product in bf16).
   logits = max(policy c_exp x T' x V, reference 6 x T x V) bytes, T' = T or min(T, C) with ``--logits-chunk C``
            (``--run.logprob_chunk_size C`` chunks the policy's forward only: the reference model runs OpenRLHF's
            ``Actor.forward``, full logits, at the same micro batches). OpenRLHF's ``Actor.forward``
            (models/actor.py) computes the bf16 logits [T, V] (transformers' Qwen2 lm_head, not upcast) and replaces
            them by an fp32 copy (``.to(torch.float32)``): 2 + 4 = 6 bytes per entry while both exist; the log-probs
            (models/utils.py ``log_probs_from_logits``) go through flash-attn's fused cross-entropy kernel (or, without
            flash-attn, a logsumexp over 1024-row chunks), which makes no further [T, V] tensor: c_exp = 6.
            ``--experience-entropy`` (EMPG's per-step entropy, gaca_openrlhf/trainer/entropy.py, which passes
            ``return_entropy=True``): ``compute_entropy`` holds the fp32 logits, softmax probs and the probs x logits
            product at once: c_exp = 12. The reference forward has the same shapes and never the entropy (6).
3. training (actor forward + backward, one training micro batch mb_t of T_t tokens; vLLM asleep: ``vllm`` =
   :data:`VLLM_ASLEEP_GB`)
   states = actor bf16 params 2P/N + gradients 4P/N + Adam fp32 master, m, v 12P/N + reference 2P/N = 20P/N
            (gradients counted at fp32: DeepSpeed keeps bf16 partitions, 2P/N, and makes fp32 copies of them sub-group
            by sub-group at the optimizer step; 4P/N is the conservative round figure).
   zero3  = a gathered module's bf16 weights and its full bf16 gradients before the reduce-scatter: 2 x the
            experience figure.
   acts   = the gradient-checkpointed layer inputs, L x T_t x h x 2 bytes.
   layer  = one layer recomputed for its backward: what autograd saves in a Qwen2 decoder layer, 18h + 6kv + 8I bytes
            per token (two RMSNorms at 6h each: fp32 upcast input + bf16 output; q, k before and after RoPE, v,
            the attention output; gate, up, SiLU(gate), their product), plus a backward workspace of 4h + 4I bytes per
            token (gradients of the two [T, I] MLP inputs and of the hidden state): T_t x (22h + 6kv + 12I).
   logits = c_train x T_t' x V bytes (T_t' = T_t or min(T_t, C)). The recipes set ``--actor.entropy_coef 0.001``;
            OpenRLHF computes the entropy whenever entropy_coef is not None (trainer/ray/ppo_actor.py:
            ``return_entropy=self.args.actor.entropy_coef is not None``). Forward: bf16 logits + fp32 copy (6), then
            fp32 logits + softmax probs + their product (12); autograd keeps the fp32 logits and the probs (8).
            Backward: the fused cross-entropy's gradient wrt the logits (the accumulator, 4) exists when the entropy's
            ``probs * logits`` node makes its two gradients (wrt probs and wrt logits, 4 + 4): 8 + 4 + 8 = 20 bytes
            per entry, the peak: c_train = 20. Without the entropy (``--no-entropy``: entropy_coef None):
            max(6, fp32 logits 4 + their gradient 4) = 8.
   ``--logits-chunk C`` (C > 0) models the chunked log-prob / entropy (``--run.logprob_chunk_size C``,
   gaca_openrlhf/trainer/chunked_actor.py: the output head runs C tokens at a time under activation checkpointing,
   the backward recomputes one chunk at a time) that keeps at most C tokens of those [tokens, vocab] tensors live,
   so the logits term shrinks by T / C, the number of chunks; 0 = OpenRLHF's full-sequence tensors.

Not modelled: the weight sync (vLLM wakes its weights, 2P/TP, while DeepSpeed is asleep and gathers one parameter at
a time: less than the rollout), the experience batch tensors (tokens, masks, log-probs: [T] per sample, small),
NCCL's buffers and fragmentation (in the margin), ZeRO-3 prefetching more than one module ahead.

Model shapes: built in for the recipes' two models, from their Hugging Face config.json files (Qwen/Qwen2.5-1.5B-
Instruct, Qwen/Qwen2.5-7B-Instruct; model cards: 1.54B and 7.61B parameters); the parameter count is computed from
the shapes (embeddings, once when tied, + L x decoder layer with q/k/v biases + final norm): 1,543,714,304 and
7,615,616,512. A config.json path (or a model folder holding one) computes the same from its fields.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

from gaca_openrlhf.memory_plan.recipes import RECIPE_ROLLOUT_SEQS
from gaca_openrlhf.model_spec import ModelSpec

GIB = float(2 ** 30)
MARGIN = 0.10                  # fits: total <= (1 - MARGIN) x GPU memory
CTX_GB_PER_PROCESS = 0.5       # CUDA context of one process
VLLM_ASLEEP_GB = 1.0           # what a sleeping vLLM worker keeps on its GPU (NCCL buffers, CUDA graphs): estimate
VLLM_NON_KV_GB = 2.0           # vLLM's pool beyond weights and KV cache (profile-run activations, CUDA graphs)
KV_SLACK = 1.25                # KV cache blocks are allocated whole: room over the exact token count
VLLM_SHARE_STEP, VLLM_SHARE_MIN = 0.05, 0.1
PROCESSES_PER_GPU = 3          # actor rank, reference rank, vLLM worker (--train.colocate_all)


@dataclass(frozen=True)
class Plan:
    spec: ModelSpec
    gpus: int = 8
    tp: int = 1
    micro_batch: int = 4            # log-prob passes (--rollout.micro_batch_size)
    train_micro_batch: int = 4      # training (--train.micro_batch_size)
    prompt_len: int = 2048
    response_len: int = 512
    vllm_mem: Optional[float] = None  # None: from the plan (vllm_share)
    gpu_mem_gb: float = 80.0
    zero: int = 3
    logits_chunk: int = 0
    token_budget: int = 0           # > 0: packed token-budget micro batches of at most this many tokens
    entropy: bool = True            # --actor.entropy_coef set (training computes the entropy)
    experience_entropy: bool = False  # EMPG: the experience forward computes the entropy too
    label: str = ""
    rollout_seqs: int = RECIPE_ROLLOUT_SEQS  # sequences one vLLM engine holds at once (sizes vllm_mem)

    def __post_init__(self):
        for f in ("gpus", "tp", "micro_batch", "train_micro_batch", "prompt_len", "response_len"):
            v = getattr(self, f)
            if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
                raise ValueError(f"{f.replace('_', '-')} must be a positive integer, got {v!r}")
        if self.gpus % self.tp:
            raise ValueError(f"tp {self.tp} does not divide gpus {self.gpus}")
        if not self.gpu_mem_gb > 0:
            raise ValueError(f"gpu-mem-gb must be positive, got {self.gpu_mem_gb!r}")
        if not isinstance(self.rollout_seqs, int) or self.rollout_seqs < 1:
            raise ValueError(f"rollout-seqs must be a positive integer, got {self.rollout_seqs!r}")
        if self.vllm_mem is not None and not 0 < self.vllm_mem < 1:
            raise ValueError(f"vllm-mem must be in (0, 1), got {self.vllm_mem!r}")
        if not self.gpu_mem_gb > 0:
            raise ValueError(f"gpu-mem-gb must be positive, got {self.gpu_mem_gb!r}")
        if self.zero not in (0, 1, 2, 3):
            raise ValueError(f"zero must be 0, 1, 2 or 3, got {self.zero!r}")
        if not isinstance(self.logits_chunk, int) or self.logits_chunk < 0:
            raise ValueError(f"logits-chunk must be >= 0, got {self.logits_chunk!r}")
        if not isinstance(self.token_budget, int) or isinstance(self.token_budget, bool) or self.token_budget < 0:
            raise ValueError(f"token-budget must be >= 0, got {self.token_budget!r}")

    @property
    def seq(self) -> int:
        return self.prompt_len + self.response_len

    @property
    def vllm_share(self) -> float:
        """VLLM_MEM: ``vllm_mem`` when given, else the plan's (:func:`vllm_share`, re-planned for any change of
        model, GPU memory, TP, lengths or rollout size)."""
        if self.vllm_mem is not None:
            return self.vllm_mem
        return vllm_share(self.spec, self.gpu_mem_gb, self.tp, self.rollout_seqs, self.seq)[0]

    def _tokens(self, micro: int) -> int:
        """Tokens of one micro batch (module docstring): a token budget's packed rows, or ``micro`` padded rows."""
        return max(self.token_budget, self.seq) if self.token_budget else micro * self.seq

    @property
    def experience_tokens(self) -> int:
        return self._tokens(self.micro_batch)

    @property
    def train_tokens(self) -> int:
        return self._tokens(self.train_micro_batch)


@dataclass
class Phase:
    name: str
    components: Dict[str, float]   # GB: states, zero3, acts, layer, logits, vllm, ctx
    total: float
    gpu_mem_gb: float
    ok: bool = True                # False also when vLLM's weights do not fit its pool
    note: str = ""

    @property
    def fraction(self) -> float:
        return self.total / self.gpu_mem_gb

    @property
    def fits(self) -> bool:
        return self.ok and self.total <= (1 - MARGIN) * self.gpu_mem_gb


COMPONENTS = ("states", "zero3", "acts", "layer", "logits", "vllm", "ctx")


def _total(c: Dict[str, float]) -> float:
    return c["states"] + c["zero3"] + c["acts"] + max(c["layer"], c["logits"]) + c["vllm"] + c["ctx"]


# ---- the formulas (bytes) ---------------------------------------------------------------------------------------

def ctx_bytes() -> float:
    return PROCESSES_PER_GPU * CTX_GB_PER_PROCESS * GIB


def bf16_shard_bytes(spec: ModelSpec, gpus: int, zero: int) -> float:
    """One model's bf16 parameters on one GPU: sharded by ZeRO-3, whole otherwise."""
    return 2.0 * spec.params / (gpus if zero == 3 else 1)


def train_state_bytes(spec: ModelSpec, gpus: int, zero: int) -> float:
    """Actor: bf16 params (sharded at ZeRO-3) + fp32 grads (sharded at >= 2) + Adam master/m/v (sharded at >= 1)."""
    p = float(spec.params)
    return (2 * p / (gpus if zero >= 3 else 1) + 4 * p / (gpus if zero >= 2 else 1)
            + 12 * p / (gpus if zero >= 1 else 1))


def vllm_share(spec: ModelSpec, gpu_mem_gb: float, tp: int, seqs_per_engine: int, seq_len: int
               ) -> Tuple[float, str]:
    """(VLLM_MEM, how it was sized): the share of one GPU a vLLM worker needs for its weights (2P/TP), its
    non-KV memory (:data:`VLLM_NON_KV_GB`) and the KV cache of ``seqs_per_engine`` sequences of ``seq_len`` tokens
    (x :data:`KV_SLACK`), rounded up to :data:`VLLM_SHARE_STEP`, at least :data:`VLLM_SHARE_MIN`. Fewer KV blocks
    than that make vLLM preempt and recompute sequences (slower, not wrong)."""
    if gpu_mem_gb <= 0 or tp < 1 or seqs_per_engine < 1 or seq_len < 1:
        raise ValueError(f"gpu_mem_gb, tp, seqs_per_engine and seq_len must be positive, got {gpu_mem_gb}, {tp}, "
                         f"{seqs_per_engine}, {seq_len}")
    weights = vllm_weight_bytes(spec, tp)
    kv = KV_SLACK * seqs_per_engine * seq_len * kv_bytes_per_token(spec, tp)
    need = weights + VLLM_NON_KV_GB * GIB + kv
    share = max(VLLM_SHARE_MIN, math.ceil(need / (gpu_mem_gb * GIB) / VLLM_SHARE_STEP - 1e-9) * VLLM_SHARE_STEP)
    share = round(min(share, 0.95), 2)
    detail = (f"{spec.name}: weights {weights / GIB:.1f} + non-KV {VLLM_NON_KV_GB:g} + KV cache {kv / GIB:.1f} GiB "
              f"({seqs_per_engine} sequences x {seq_len} tokens x {KV_SLACK:g}) = {need / GIB:.1f} GiB of "
              f"{gpu_mem_gb:g}: {share:g}")
    return share, detail


#: host RAM per parameter that ``--ds.enable_sleep`` offloads from the actor while vLLM generates (ZeRO-3 shards of
#: the node's ranks): fp32 gradients 4 + fp32 master weights 4 + Adam m 4 + v 4 (the bf16 weights stay on the GPU)
HOST_OFFLOAD_BYTES_PER_PARAM = 16


def host_bytes_per_node(spec: ModelSpec, gpus_per_node: int, num_nodes: int = 1, tp: int = 1) -> Tuple[float, str]:
    """(bytes, what they are) of host RAM one node pins for the run, before Ray's object store and the processes'
    own memory: the actor's offloaded ZeRO-3 states of the node's ranks (:data:`HOST_OFFLOAD_BYTES_PER_PARAM` x P,
    sharded over all nodes) and vLLM's level-1 sleep, which copies each worker's bf16 weights (2P/TP) to pinned host
    memory (one worker per GPU). Qwen2.5-7B on one 8-GPU node: ~114 + ~114 GiB."""
    if gpus_per_node < 1 or num_nodes < 1 or tp < 1:
        raise ValueError(f"gpus_per_node, num_nodes and tp must be >= 1, got {gpus_per_node}, {num_nodes}, {tp}")
    states = HOST_OFFLOAD_BYTES_PER_PARAM * float(spec.params) / num_nodes
    backups = gpus_per_node * vllm_weight_bytes(spec, tp)
    detail = (f"{spec.name}: offloaded optimizer states {states / GIB:.1f} GiB ({HOST_OFFLOAD_BYTES_PER_PARAM} "
              f"B/param / {num_nodes} node(s)) + vLLM sleep weight backups {backups / GIB:.1f} GiB ({gpus_per_node} "
              f"workers x 2 B/param / TP {tp})")
    return states + backups, detail


def gathered_module_bytes(spec: ModelSpec, zero: int) -> float:
    """ZeRO-3: the largest module gathered whole in bf16 (a decoder layer or the V x h embedding / lm_head)."""
    return 2.0 * max(spec.layer_params, spec.vocab * spec.hidden) if zero == 3 else 0.0


def checkpoint_bytes(spec: ModelSpec, tokens: int) -> float:
    return float(spec.layers) * tokens * spec.hidden * 2


def layer_forward_bytes(spec: ModelSpec, tokens: int) -> float:
    """No-grad forward working set of one decoder layer."""
    return float(tokens) * (4 * spec.hidden + 8 * spec.intermediate)


def layer_recompute_bytes(spec: ModelSpec, tokens: int) -> float:
    """One layer recomputed under gradient checkpointing: saved activations + backward workspace."""
    h, kv, i = spec.hidden, spec.kv_dim, spec.intermediate
    return float(tokens) * ((18 * h + 6 * kv + 8 * i) + (4 * h + 4 * i))


def logits_coef(phase: str, entropy: bool) -> int:
    """Bytes per [token, vocab] entry at the peak (module docstring)."""
    if phase == "experience":
        return 12 if entropy else 6
    if phase == "training":
        return 20 if entropy else 8
    raise ValueError(f"no logits term in phase {phase!r}")


def logits_bytes(spec: ModelSpec, tokens: int, coef: int, chunk: int = 0) -> float:
    live = min(tokens, chunk) if chunk > 0 else tokens
    return float(coef) * live * spec.vocab


def vllm_weight_bytes(spec: ModelSpec, tp: int) -> float:
    return 2.0 * spec.params / tp


def kv_bytes_per_token(spec: ModelSpec, tp: int) -> float:
    """K and V of every layer in bf16, split over TP (KV heads are replicated when TP > KV heads)."""
    return 2.0 * spec.layers * spec.kv_dim * 2 / min(tp, spec.kv_heads)


# ---- phases -----------------------------------------------------------------------------------------------------

def _phase(name: str, plan: Plan, parts: Dict[str, float], ok: bool = True, note: str = "") -> Phase:
    c = {k: parts.get(k, 0.0) / GIB for k in COMPONENTS}
    return Phase(name, c, _total(c), plan.gpu_mem_gb, ok=ok, note=note)


def rollout_phase(plan: Plan) -> Phase:
    s = plan.spec
    pool = plan.vllm_share * plan.gpu_mem_gb * GIB
    weights = vllm_weight_bytes(s, plan.tp)
    kv = pool - weights
    tokens = int(kv / kv_bytes_per_token(s, plan.tp)) if kv > 0 else 0
    note = (f"vLLM: weights {weights / GIB:.1f} GB/GPU (TP {plan.tp}), KV cache <= {max(kv, 0) / GIB:.1f} GB/GPU "
            f"= {tokens:,} tokens per engine" + ("" if kv > 0 else ": the weights do not fit the vLLM pool"))
    return _phase("rollout", plan, dict(vllm=pool, states=2 * bf16_shard_bytes(s, plan.gpus, plan.zero),
                                        ctx=ctx_bytes()), ok=kv > 0, note=note)


def experience_phase(plan: Plan) -> Phase:
    s, t = plan.spec, plan.experience_tokens
    policy = logits_bytes(s, t, logits_coef("experience", plan.experience_entropy), plan.logits_chunk)
    reference = logits_bytes(s, t, logits_coef("experience", False))  # OpenRLHF's forward: never chunked
    return _phase("experience", plan, dict(
        states=2 * bf16_shard_bytes(s, plan.gpus, plan.zero), zero3=gathered_module_bytes(s, plan.zero),
        layer=layer_forward_bytes(s, t), logits=max(policy, reference), vllm=VLLM_ASLEEP_GB * GIB, ctx=ctx_bytes()))


def training_phase(plan: Plan) -> Phase:
    s, t = plan.spec, plan.train_tokens
    return _phase("training", plan, dict(
        states=train_state_bytes(s, plan.gpus, plan.zero) + bf16_shard_bytes(s, plan.gpus, plan.zero),
        zero3=2 * gathered_module_bytes(s, plan.zero), acts=checkpoint_bytes(s, t), layer=layer_recompute_bytes(s, t),
        logits=logits_bytes(s, t, logits_coef("training", plan.entropy), plan.logits_chunk),
        vllm=VLLM_ASLEEP_GB * GIB, ctx=ctx_bytes()))


def estimate(plan: Plan) -> List[Phase]:
    return [rollout_phase(plan), experience_phase(plan), training_phase(plan)]


def fits(plan: Plan) -> bool:
    return all(p.fits for p in estimate(plan))

