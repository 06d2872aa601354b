"""The chunked ``Actor.forward`` (``trainer/chunked_actor.py``) returns what OpenRLHF's does, padded and packed."""
import pytest
import torch

from gaca_openrlhf.trainer.chunked_actor import chunked_actor_forward, install_chunked_forward


@pytest.fixture(scope="module")
def actor():
    import openrlhf.models.actor as actor_module
    from openrlhf.models.actor import Actor
    from transformers import Qwen2Config, Qwen2ForCausalLM

    saved = actor_module.compute_entropy
    actor_module.compute_entropy = getattr(saved, "_torchdynamo_orig_callable", saved)  # eager, same math
    torch.manual_seed(0)
    config = Qwen2Config(vocab_size=211, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=1, head_dim=16, tie_word_embeddings=False,
                         attn_implementation="sdpa")
    a = Actor(Qwen2ForCausalLM(config), temperature=0.7)
    yield a
    actor_module.compute_entropy = saved


def _batch():
    g = torch.Generator().manual_seed(1)
    lengths = [5, 17, 2, 11]
    seq = torch.zeros(len(lengths), max(lengths), dtype=torch.long)
    att = torch.zeros_like(seq)
    for i, n in enumerate(lengths):
        seq[i, :n] = torch.randint(3, 211, (n,), generator=g)
        att[i, :n] = 1
    mask = att[:, 1:].clone()
    mask[:, :1] = 0  # the first response token after a 1-token "prompt"
    return seq, att, mask


@pytest.mark.parametrize("packing", [False, True])
def test_same_outputs_and_grads_as_openrlhf(actor, packing):
    seq, att, mask = _batch()
    actor.packing_samples = packing
    results = []
    for chunked in (False, True):
        actor.__dict__.pop("forward", None)
        if chunked:
            assert install_chunked_forward(actor, 3)
        actor.model.zero_grad(set_to_none=True)
        lp, out = actor(seq, mask, attention_mask=att, return_output=True, return_entropy=True)
        ent = out.entropy[:, -mask.shape[1]:] * mask
        ((lp * 1.3).sum() + ent.sum()).backward()
        all_lp = actor(seq, None, attention_mask=att, return_logprobs=True)
        grads = {n: p.grad.clone() for n, p in actor.model.named_parameters()}
        results.append((lp.detach(), ent.detach(), all_lp.detach(), grads))
    actor.__dict__.pop("forward", None)
    (lp0, e0, a0, g0), (lp1, e1, a1, g1) = results
    torch.testing.assert_close(lp1, lp0, rtol=0, atol=1e-5)
    torch.testing.assert_close(e1, e0, rtol=0, atol=1e-5)
    valid = att[:, 1:].bool()
    torch.testing.assert_close(a1[valid], a0[valid], rtol=0, atol=1e-5)
    for name, g in g0.items():
        assert float((g1[name] - g).abs().max()) <= 1e-5 * max(1.0, float(g.abs().max())), name


def test_logits_callers_fall_back(actor):
    """A caller that wants the logits (no action mask, no log-probs) gets OpenRLHF's full output."""
    seq, att, _ = _batch()
    actor.packing_samples = False
    install_chunked_forward(actor, 3)
    try:
        out = actor(seq, None, attention_mask=att, return_output=True)
        assert out["logits"].shape == (*seq.shape, 211)
    finally:
        actor.__dict__.pop("forward", None)
    assert not install_chunked_forward(actor, 0) and "forward" not in actor.__dict__
    assert chunked_actor_forward.__doc__


def test_agreed_num_chunks_takes_the_zero3_group_max(monkeypatch):
    """Under ZeRO-3 (the head's weight carries DeepSpeed's ``ds_id``) the chunk count is all-reduced (MAX) over the
    weight's process group, so every rank calls the head equally often (2-rank run: test_chunked_zero3.py); without
    ZeRO-3, without torch.distributed or on one rank, no collective runs and the count is the rank's own."""
    import torch.distributed as dist

    from gaca_openrlhf.trainer.chunked_actor import agreed_num_chunks

    head = torch.nn.Linear(4, 8, bias=False)
    assert agreed_num_chunks(9, 4, head, "cpu") == 3  # torch.distributed not initialised
    calls = []

    def all_reduce(t, op=None, group=None):
        calls.append((int(t.item()), op, group))
        t.fill_(7)

    world = {"size": 2}
    monkeypatch.setattr(dist, "is_initialized", lambda: True)
    monkeypatch.setattr(dist, "get_world_size", lambda group=None: world["size"])
    monkeypatch.setattr(dist, "all_reduce", all_reduce)
    assert agreed_num_chunks(9, 4, head, "cpu") == 3 and not calls  # not ZeRO-3: no collective
    head.weight.ds_id, head.weight.ds_process_group = 0, "dp-group"
    assert agreed_num_chunks(9, 4, head, "cpu") == 7
    assert calls == [(3, dist.ReduceOp.MAX, "dp-group")]
    world["size"] = 1
    assert agreed_num_chunks(9, 4, head, "cpu") == 3 and len(calls) == 1  # one rank: nothing to agree on
