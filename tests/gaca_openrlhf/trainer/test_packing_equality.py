"""Packed and token-budget micro-batches train exactly what padded ones do (the tiny model, fp32, CPU).

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

Tolerance (fp32 rounding): per-sample log-probs within 1e-5 absolute (values are O(1..10); observed ~1e-6), the loss
within 1e-6 relative, every parameter gradient within 1e-5 x max(1, its largest entry) (observed ~4e-8).
"""
import pytest
import torch

from gaca_openrlhf.bench import packing as P
from gaca_openrlhf.models import varlen_attention
from gaca_openrlhf.trainer.chunked_actor import install_chunked_forward

varlen_attention.register()
VARLEN = varlen_attention.ATTN_IMPLEMENTATION

LP_TOL, LOSS_RTOL, GRAD_TOL = 1e-5, 1e-6, 1e-5
PROMPTS = [3, 300, 20, 600, 8, 150, 2, 60, 200]
RESPONSES = [1, 40, 5, 100, 20, 2, 10, 60, 6]
BUDGET = 700  # tokens: forces 3-5 token-budget micro-batches of mixed sizes


@pytest.fixture(scope="module")
def actor():
    import openrlhf.models.actor as actor_module
    from openrlhf.models.actor import Actor
    from transformers import AutoModelForCausalLM

    from gaca_openrlhf.models.tiny import ensure_tiny_model

    # OpenRLHF's compute_entropy is torch.compile'd (recompiling for every shape on CPU); the same function eagerly
    eager = getattr(actor_module.compute_entropy, "_torchdynamo_orig_callable", actor_module.compute_entropy)
    saved = actor_module.compute_entropy
    actor_module.compute_entropy = eager
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(str(ensure_tiny_model()), torch_dtype=torch.float32,
                                                 attn_implementation="sdpa")
    model.config.use_cache = False
    yield Actor(model, temperature=1.0)
    actor_module.compute_entropy = saved


@pytest.fixture(scope="module")
def items(actor):
    actor.packing_samples = False
    samples = P.make_step_samples(PROMPTS, RESPONSES, actor.model.config.vocab_size, seed=1)
    out = P.prepare_items(actor, samples, micro=2, pad_multiple=4)  # 9 samples + 3 masked copies
    assert sum(out.is_copy.values()) == 3
    return out


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


@pytest.fixture(scope="module")
def results(actor, items):
    return {mode: _run(actor, items, mode) for mode in ("padded", "packed", "packed_sdpa", "budget", "chunked")}


def test_plans_differ_and_packing_removes_padding(results, items):
    padded, budget = results["padded"], results["budget"]
    assert padded.micro_batches == 6 and budget.micro_batches != padded.micro_batches
    assert padded.computed_tokens > 1.5 * padded.real_tokens  # very different lengths: much padding
    for mode in ("packed", "packed_sdpa", "budget", "chunked"):
        assert results[mode].computed_tokens == results[mode].real_tokens == padded.real_tokens


@pytest.mark.parametrize("mode", ["packed", "packed_sdpa", "budget", "chunked"])
def test_equal_to_padded(results, mode):
    ref, got = results["padded"], results[mode]
    assert set(got.log_probs) == set(ref.log_probs) == set(range(12))
    for row, lp in ref.log_probs.items():
        assert got.log_probs[row].shape == lp.shape
        if lp.numel():
            assert float((got.log_probs[row] - lp).abs().max()) <= LP_TOL, row
    assert abs(got.loss - ref.loss) <= LOSS_RTOL * abs(ref.loss)
    assert set(got.grads) == set(ref.grads) and ref.grads
    for name, g in ref.grads.items():
        assert float((got.grads[name] - g).abs().max()) <= GRAD_TOL * max(1.0, float(g.abs().max())), name


def _check_own_tokens(actor, items, result):
    """Each sample's log-probs equal a forward over that sample alone, and its loss term is the PPO loss of *its*
    advantage on *its* response tokens (copies: nothing). Raises AssertionError naming the first sample that
    received another sample's tokens, mask or advantage."""
    alone = P.standalone_log_probs(actor, items)
    tokens = sum(int(item.action_mask.sum()) for item in items.items)
    for k, item in enumerate(items.items):
        row = items.rows[k]
        assert result.log_probs[row].shape == alone[row].shape, f"sample {row}: mask length"
        if alone[row].numel():
            assert float((result.log_probs[row] - alone[row]).abs().max()) <= LP_TOL, f"sample {row}: log-probs"
        m = item.action_mask.bool()
        old = item.action_log_probs[m]
        a = 0.0 if items.is_copy[row] else items.advantage[row]
        ratio = (alone[row] - old).clamp(-20, 20).exp()
        expect = float(-torch.min(ratio * a, ratio.clamp(1 - P.CLIP_EPS, 1 + P.CLIP_EPS) * a).sum()) / tokens
        assert abs(result.token_loss[row] - expect) <= 1e-6 * max(1.0, abs(expect)), f"sample {row}: advantage"


@pytest.mark.parametrize("mode", ["padded", "packed", "packed_sdpa", "budget", "chunked"])
def test_no_sample_gets_another_samples_advantage_or_mask(actor, items, results, mode):
    actor.packing_samples = False
    _check_own_tokens(actor, items, results[mode])


def test_crossing_is_detected(actor, items):
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
        _check_own_tokens(actor, items, result)
