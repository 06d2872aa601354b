"""Synthetic copy pre-training: its batches are copy problems, its loss is the masked next-token loss, it saves."""
import json
import math

import pytest
import torch

from gaca_openrlhf.models.agent import AgentModelSpec, build_agent_model
from gaca_openrlhf.sft.copy_pretrain import CopyPretrainConfig, copy_batch, copy_loss, copy_pretrain

POOL = [11, 17, 23, 42, 57, 64, 99, 123]


def test_every_supervised_token_continues_an_earlier_occurrence_of_its_predecessor():
    gen = torch.Generator().manual_seed(3)
    ids, mask = copy_batch(POOL, batch_size=6, source_len=20, copy_len=15, chunk=4, generator=gen)
    assert ids.shape == mask.shape == (6, 35)
    assert set(ids.unique().tolist()) <= set(POOL)
    assert not mask[:, :20].any()
    # chunk starts (copy offsets 0, 4, 8, 12) are not predictable: unsupervised; all other copied tokens are
    assert mask[:, 20:].sum(1).tolist() == [11] * 6
    assert not mask[:, [20, 24, 28, 32]].any()
    for b in range(6):
        for t in mask[b].nonzero().flatten().tolist():
            # brute force: the bigram (ids[t-1], ids[t]) occurs inside the source
            assert any(ids[b, p - 1] == ids[b, t - 1] and ids[b, p] == ids[b, t] for p in range(1, 20)), (b, t)


def test_chunks_are_copied_from_varying_offsets():
    gen = torch.Generator().manual_seed(0)
    ids, _ = copy_batch(list(range(1000, 1400)), batch_size=8, source_len=64, copy_len=32, chunk=8, generator=gen)
    offsets = set()
    for b in range(8):
        src = ids[b, :64].tolist()
        for c in range(4):
            chunk = ids[b, 64 + 8 * c: 72 + 8 * c].tolist()
            starts = [s for s in range(57) if src[s:s + 8] == chunk]
            assert starts, (b, c)
            offsets.add(64 + 8 * c - starts[0])
    assert len(offsets) > 10  # a fixed relative position would not solve it


def test_bad_sizes_are_refused():
    gen = torch.Generator().manual_seed(0)
    with pytest.raises(ValueError, match="chunk length"):
        copy_batch(POOL, 2, source_len=4, copy_len=8, chunk=5, generator=gen)
    with pytest.raises(ValueError, match="2 distinct"):
        copy_batch([5], 2, source_len=4, copy_len=8, chunk=2, generator=gen)


def test_copy_loss_is_the_mean_cross_entropy_of_the_masked_next_tokens():
    torch.manual_seed(0)
    logits = torch.randn(2, 5, 7)
    ids = torch.randint(7, (2, 5))
    mask = torch.tensor([[0, 0, 1, 0, 1], [0, 1, 0, 0, 0]], dtype=torch.bool)
    want = []
    for b, t in [(0, 2), (0, 4), (1, 1)]:  # token t is predicted by the logits at t - 1
        want.append(-torch.log_softmax(logits[b, t - 1], -1)[ids[b, t]])
    assert copy_loss(logits, ids, mask).item() == pytest.approx(torch.stack(want).mean().item(), rel=1e-6)


def test_copy_pretrain_learns_and_saves_a_loadable_model(tmp_path):
    from transformers import AutoModelForCausalLM

    spec = AgentModelSpec(vocab_size=300, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                          num_attention_heads=2, num_key_value_heads=1)
    base = build_agent_model(tmp_path / "base", ["take pen 1 from bed 2", "go to shelf 3 and look"] * 10, spec)
    # whole-source chunks: one fixed offset, learnable in a few dozen steps (random offsets need thousands)
    cfg = CopyPretrainConfig(steps=60, batch_size=16, source_len=12, copy_len=12, min_chunk=12, max_chunk=12,
                             lr=5e-3)
    stats = copy_pretrain(base, POOL, tmp_path / "copy", cfg, log=lambda s: None)
    # below guessing uniformly among the pool's tokens: it copies
    assert stats["loss_last10pct"] < 0.5 * math.log(len(POOL)) < stats["loss_first"]
    saved = json.loads((tmp_path / "copy" / "gaca_copy_pretrain.json").read_text())
    assert saved["steps"] == 60 and saved["token_pool"] == len(POOL)
    AutoModelForCausalLM.from_pretrained(tmp_path / "copy")
