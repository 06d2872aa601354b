"""Offline per-step entropy (EMPG's H_t) against a direct computation: each row alone, no padding, full logits."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from gaca_openrlhf.diagnostics.step_entropy import response_entropy


@pytest.fixture(scope="module")
def model():
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    cfg = Qwen2Config(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                      num_key_value_heads=1, max_position_embeddings=128, tie_word_embeddings=False)
    m = Qwen2ForCausalLM(cfg).eval()
    with torch.no_grad():  # sharper logits than the init's near-uniform ones, so entropies differ between positions
        m.lm_head.weight.mul_(40.0)
    return m


def direct(model, prompt, response, temperature):
    """One row, unpadded: entropy of softmax(logits / T) at the positions that predict each response token."""
    ids = torch.tensor([list(prompt) + list(response)])
    with torch.no_grad():
        logits = model(input_ids=ids).logits[0].double() / temperature
    p = torch.softmax(logits, -1)
    h = -(p * torch.log(p)).sum(-1)
    return float(h[len(prompt) - 1: len(prompt) + len(response) - 1].mean()) if response else 0.0


def test_batched_left_padded_entropy_equals_each_row_alone(model):
    rng = np.random.default_rng(0)
    rows = [(rng.integers(3, 64, size=n).tolist(), rng.integers(3, 64, size=r).tolist())
            for n, r in [(5, 3), (17, 1), (9, 7), (2, 4), (11, 0), (30, 6)]]
    for temperature in (1.0, 0.4):
        got = response_entropy(model, rows, temperature=temperature, batch_size=4)
        want = [direct(model, p, r, temperature) for p, r in rows]
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    assert got[4] == 0.0  # no response tokens
    # the quantity moves with what it should: temperature and which tokens are the response
    assert not np.allclose(response_entropy(model, rows, temperature=1.0), got)
    p, r = rows[2]
    shifted = response_entropy(model, [(p[:-1], [p[-1]] + r)], temperature=0.4)[0]
    assert not math.isclose(shifted, got[2], rel_tol=1e-3)


def test_entropy_is_bounded_by_the_uniform_distribution(model):
    rows = [([5, 6, 7], [8, 9]), ([10], [11, 12, 13])]
    h = response_entropy(model, rows, temperature=50.0)  # a very hot policy is nearly uniform
    assert np.all(h <= math.log(64) + 1e-6) and np.all(h > 0.95 * math.log(64))


def test_rejects_a_greedy_temperature(model):
    with pytest.raises(ValueError, match="temperature"):
        response_entropy(model, [([1], [2])], temperature=0.0)
