"""Packed and token-budget micro-batches train exactly what padded ones do (the tiny model, fp32 and bf16, CPU).

A batch of step samples of very different lengths (2 .. 600-token prompts, 1 .. 100-token responses) plus masked
padding copies goes through the real pipeline (``step_experience`` -> the step experience maker's split and GRPO
advantage hook -> OpenRLHF's replay-buffer items; :mod:`gaca_openrlhf.bench.packing`), then one optimizer update is
computed four ways with OpenRLHF's ``Actor`` and ``PolicyLoss`` (+ entropy bonus):

- padded: fixed micro-batches of 2 rows padded to their longest (today's path), OpenRLHF's window normalizer;
- packed: the same micro-batches, ``packing_samples`` (unpadded ``(1, tokens)`` rows, per-sequence position ids),
  on the CPU backend's variable-length attention (:mod:`gaca_openrlhf.models.varlen_attention`: each sample attends
  to itself, as with flash-attn's varlen kernel); ``packed_sdpa``: the same on transformers' SDPA, which turns the
  position ids into a block-diagonal causal mask over the whole row;
- packed + token budget: :func:`~gaca_openrlhf.trainer.actors.setup_step_dynamic_batch` micro-batches, OpenRLHF's
  dynamic-mode normalizer;
- the same with the chunked log-prob/entropy forward (:mod:`gaca_openrlhf.trainer.chunked_actor`).

Tolerances, per training dtype (both run on every CPU family: :data:`train_dtypes.TRAIN_DTYPES`):
- log-probs: every mode computes each token's logits by the same per-row dot products (a mode regroups rows and
  samples, never a row's reduction; measured: packed equals padded bitwise in both dtypes), then an fp32
  log-softmax over the vocabulary V whose sums a mode may regroup: |delta| <= 2 ceil(log2 V) u32 (max|z| + log V)
  (a tree sum is within ceil(log2 n) u sum|term|), ~2e-5 here; measured 2.9e-6 (fp32), 1.1e-5 (bf16, token budget);
- the loss: a mean of fp32 per-token terms, within 1e-6 relative in both dtypes (measured 1.1e-7);
- gradients are accumulated over the micro-batches in the training dtype: at most 6 micro-batches (padded) summed
  per path, each sum within gamma_6 sum|term| of the exact one, so |delta| <= 2 * 6 u max|g| (the terms of one
  parameter's gradient share its scale): 7e-7 max|g| in fp32, where the old fixed 1e-5 max(1, max|g|) is kept as it
  is looser, and 0.047 max|g| in bf16; measured 1.6e-6 (fp32, packed on sdpa) and 3.3 u (bf16, token budget).
``packed_sdpa`` runs in fp32 only: in bf16 transformers' SDPA over a whole packed row with its block-diagonal mask
is off by 0.05 nats in log-probs and 36 % of max|g| in gradients (measured on AVX2, 2026-12-04): that path is never
trained on the CPU backend (packed rows run on the variable-length stand-in) and is refused on GPUs without
flash-attn (docs/packing.md).
"""
import math

import pytest
import torch
from train_dtypes import TORCH_DTYPE, TRAIN_DTYPES, unit_roundoff

from gaca_openrlhf.bench import packing as P
from gaca_openrlhf.models import varlen_attention
from gaca_openrlhf.trainer.chunked_actor import install_chunked_forward

varlen_attention.register()
VARLEN = varlen_attention.ATTN_IMPLEMENTATION

LOSS_RTOL = 1e-6
MAX_MICRO_BATCHES = 6  # the padded plan's 12 rows in micro-batches of 2; the token budget makes 3-5
PROMPTS = [3, 300, 20, 600, 8, 150, 2, 60, 200]
RESPONSES = [1, 40, 5, 100, 20, 2, 10, 60, 6]
BUDGET = 700  # tokens: forces 3-5 token-budget micro-batches of mixed sizes


@pytest.fixture(scope="module", params=TRAIN_DTYPES)
def actor(request):
    import openrlhf.models.actor as actor_module
    from openrlhf.models.actor import Actor
    from transformers import AutoModelForCausalLM

    from gaca_openrlhf.models.tiny import ensure_tiny_model

    # OpenRLHF's compute_entropy is torch.compile'd (recompiling for every shape on CPU); the same function eagerly
    eager = getattr(actor_module.compute_entropy, "_torchdynamo_orig_callable", actor_module.compute_entropy)
    saved = actor_module.compute_entropy
    actor_module.compute_entropy = eager
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(str(ensure_tiny_model()), torch_dtype=TORCH_DTYPE[request.param],
                                                 attn_implementation="sdpa")
    model.config.use_cache = False
    a = Actor(model, temperature=1.0)
    a.train_dtype = request.param
    yield a
    actor_module.compute_entropy = saved


@pytest.fixture(scope="module")
def items(actor):
    actor.packing_samples = False
    samples = P.make_step_samples(PROMPTS, RESPONSES, actor.model.config.vocab_size, seed=1)
    out = P.prepare_items(actor, samples, micro=2, pad_multiple=4)  # 9 samples + 3 masked copies
    assert sum(out.is_copy.values()) == 3
    return out


@pytest.fixture(scope="module")
def tol(actor, items):
    """The bounds of the module docstring for this dtype; the log-prob one from the logits' size and scale."""
    actor.packing_samples = False
    with torch.no_grad():
        zmax = max(float(actor(item.sequences[None], item.action_mask[None], attention_mask=item.attention_mask[None],
                               return_output=True)[1]["logits"].abs().max()) for item in items.items)
    vocab = actor.model.config.vocab_size
    lp = 2 * math.ceil(math.log2(vocab)) * unit_roundoff("fp32") * (zmax + math.log(vocab))
    grad = 1e-5 if actor.train_dtype == "fp32" else 2 * MAX_MICRO_BATCHES * unit_roundoff(actor.train_dtype)
    return {"lp": lp, "grad": grad, "grad_floor": 1.0 if actor.train_dtype == "fp32" else 0.0}


def _run(actor, items, mode):
    actor.__dict__.pop("forward", None)
    actor.packing_samples = mode != "padded"
    # what train_ppo runs packed rows on without flash-attn (check_packing_args); padded rows: sdpa either way
    actor.model.config._attn_implementation = "sdpa" if mode in ("padded", "packed_sdpa") else VARLEN
    if mode == "chunked":
        install_chunked_forward(actor, 64)
    try:
        if mode in ("budget", "chunked"):
            dyn = P.budget_plan(items.items, BUDGET)
            return P.train_micro_batches(actor, items, dyn.dynamic_indices, dynamic=dyn)
        return P.train_micro_batches(actor, items, P.fixed_plan(len(items.items), 2))
    finally:
        actor.__dict__.pop("forward", None)
        actor.packing_samples = False
        actor.model.config._attn_implementation = "sdpa"


def modes(actor) -> tuple:
    return ("padded", "packed", "budget", "chunked") + (("packed_sdpa",) if actor.train_dtype == "fp32" else ())


@pytest.fixture(scope="module")
def results(actor, items):
    return {mode: _run(actor, items, mode) for mode in modes(actor)}


def test_plans_differ_and_packing_removes_padding(results, items):
    padded, budget = results["padded"], results["budget"]
    assert padded.micro_batches == 6 and budget.micro_batches != padded.micro_batches
    assert padded.computed_tokens > 1.5 * padded.real_tokens  # very different lengths: much padding
    for mode in set(results) - {"padded"}:
        assert results[mode].computed_tokens == results[mode].real_tokens == padded.real_tokens


@pytest.mark.parametrize("actor,mode", [(d, m) for d in TRAIN_DTYPES for m in ("packed", "packed_sdpa", "budget", "chunked")
                                        if (d, m) != ("bf16", "packed_sdpa")], indirect=["actor"])
def test_equal_to_padded(actor, results, tol, mode):
    ref, got = results["padded"], results[mode]
    assert set(got.log_probs) == set(ref.log_probs) == set(range(12))
    for row, lp in ref.log_probs.items():
        assert got.log_probs[row].shape == lp.shape
        if lp.numel():
            assert float((got.log_probs[row] - lp).abs().max()) <= tol["lp"], row
    assert abs(got.loss - ref.loss) <= LOSS_RTOL * abs(ref.loss)
    assert set(got.grads) == set(ref.grads) and ref.grads
    for name, g in ref.grads.items():
        scale = max(tol["grad_floor"], float(g.float().abs().max()))
        assert float((got.grads[name].float() - g.float()).abs().max()) <= tol["grad"] * scale, name


def _check_own_tokens(actor, items, result, lp_tol):
    """Each sample's log-probs equal a forward over that sample alone, and its loss term is the PPO loss of *its*
    advantage on *its* response tokens (copies: nothing). Raises AssertionError naming the first sample that
    received another sample's tokens, mask or advantage."""
    alone = P.standalone_log_probs(actor, items)
    tokens = sum(int(item.action_mask.sum()) for item in items.items)
    for k, item in enumerate(items.items):
        row = items.rows[k]
        assert result.log_probs[row].shape == alone[row].shape, f"sample {row}: mask length"
        if alone[row].numel():
            assert float((result.log_probs[row] - alone[row]).abs().max()) <= lp_tol, f"sample {row}: log-probs"
        m = item.action_mask.bool()
        old = item.action_log_probs[m]
        a = 0.0 if items.is_copy[row] else items.advantage[row]
        ratio = (alone[row] - old).clamp(-20, 20).exp()
        expect = float(-torch.min(ratio * a, ratio.clamp(1 - P.CLIP_EPS, 1 + P.CLIP_EPS) * a).sum()) / tokens
        assert abs(result.token_loss[row] - expect) <= 1e-6 * max(1.0, abs(expect)), f"sample {row}: advantage"


#: which sample gets which tokens, mask and advantage is dtype-independent logic, checked in fp32, where a sample's
#: log-probs in a batch equal those of a forward over it alone to fp32 rounding (in bf16 a GEMM over another batch
#: shape rounds the logits otherwise: 3e-4 nats measured, beyond what a crossing check can tell apart)
FP32_ONLY = pytest.mark.parametrize("actor", ["fp32"], indirect=True)


@FP32_ONLY
@pytest.mark.parametrize("mode", ["padded", "packed", "packed_sdpa", "budget", "chunked"])
def test_no_sample_gets_another_samples_advantage_or_mask(actor, items, results, tol, mode):
    actor.packing_samples = False
    _check_own_tokens(actor, items, results[mode], tol["lp"])


@FP32_ONLY
def test_crossing_is_detected(actor, items, tol):
    """The check above fails when two samples' advantages are swapped inside the token-budget path."""
    import copy

    swapped = copy.copy(items)
    swapped.items = list(items.items)
    i, j = 1, 3  # real samples with different advantages
    assert items.advantage[items.rows[i]] != items.advantage[items.rows[j]]
    a, b = copy.copy(items.items[i]), copy.copy(items.items[j])
    adv_a = a.advantages[a.action_mask.bool()][0]
    adv_b = b.advantages[b.action_mask.bool()][0]
    a.advantages = a.advantages / adv_a * adv_b
    b.advantages = b.advantages / adv_b * adv_a
    swapped.items[i], swapped.items[j] = a, b
    result = _run(actor, swapped, "budget")
    actor.packing_samples = False
    with pytest.raises(AssertionError, match="advantage"):
        _check_own_tokens(actor, items, result, tol["lp"])
