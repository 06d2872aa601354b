"""The packed rows' pure-PyTorch variable-length attention (gaca_openrlhf/models/varlen_attention.py).

References are independent of the code under test: transformers' ``eager`` attention over each sample alone (its
own matmul/softmax path, no SDPA), and hand-written segment tables.
"""
import pytest
import torch

from gaca_openrlhf.models import varlen_attention as va

va.register()

LENGTHS = [5, 1, 9, 3, 7]  # a one-token sample, the longest not first
TOL = 1e-5


def _model(heads=4, kv_heads=2):
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    config = Qwen2Config(vocab_size=97, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                         num_attention_heads=heads, num_key_value_heads=kv_heads, head_dim=16,
                         attn_implementation="eager")
    model = Qwen2ForCausalLM(config).eval()
    model.config.use_cache = False
    return model


def _use(model, impl):
    model.config._attn_implementation = impl


def _packed(lengths):
    ids = torch.randint(0, 97, (1, sum(lengths)), generator=torch.Generator().manual_seed(1))
    pos = torch.cat([torch.arange(n) for n in lengths]).unsqueeze(0)
    return ids, pos


def test_packed_segments_by_hand():
    pos = torch.tensor([[0, 1, 2, 0, 1, 0, 0, 1, 2, 3]])
    segment, offset, lengths = va.packed_segments(pos)
    assert segment.tolist() == [0, 0, 0, 1, 1, 2, 3, 3, 3, 3]
    assert offset.tolist() == [0, 1, 2, 0, 1, 0, 0, 1, 2, 3]
    assert lengths.tolist() == [3, 2, 1, 4]
    assert va.packed_segments(torch.arange(6).unsqueeze(0)) is None  # one sample: not a packed row
    assert va.packed_segments(torch.tensor([[0, 1, 0, 1], [0, 1, 2, 3]])) is None  # two rows: a padded batch
    assert va.packed_segments(None) is None


@pytest.mark.parametrize("kv_heads", [4, 2])  # plain and grouped-query attention
def test_packed_row_equals_each_sample_alone(kv_heads):
    model = _model(kv_heads=kv_heads)
    ids, pos = _packed(LENGTHS)
    _use(model, va.ATTN_IMPLEMENTATION)
    packed = model(ids, position_ids=pos).logits[0]
    _use(model, "eager")
    start = 0
    for n in LENGTHS:
        with torch.no_grad():
            alone = model(ids[:, start:start + n]).logits[0]
        assert float((packed[start:start + n] - alone).abs().max()) <= TOL, (start, n)
        start += n


def test_gradients_equal_the_samples_alone():
    model = _model()
    ids, pos = _packed(LENGTHS)
    weights = torch.randn(sum(LENGTHS), 97, generator=torch.Generator().manual_seed(2))

    def grads(loss):
        model.zero_grad(set_to_none=True)
        loss.backward()
        return {n: p.grad.clone() for n, p in model.named_parameters()}

    _use(model, va.ATTN_IMPLEMENTATION)
    got = grads((model(ids, position_ids=pos).logits[0] * weights).sum())
    _use(model, "eager")
    start, loss = 0, 0.0
    for n in LENGTHS:
        loss = loss + (model(ids[:, start:start + n]).logits[0] * weights[start:start + n]).sum()
        start += n
    ref = grads(loss)
    for name, g in ref.items():
        assert float((got[name] - g).abs().max()) <= TOL * max(1.0, float(g.abs().max())), name


def test_attention_never_spans_the_packed_row(monkeypatch):
    """The point of the stand-in: no SDPA call over the whole row, no mask tensor; one query row per sample, as long
    as the longest sample."""
    import torch.nn.functional as F

    calls = []
    real = F.scaled_dot_product_attention

    def spy(q, k, v, attn_mask=None, *args, **kwargs):
        calls.append((tuple(q.shape), attn_mask is None, kwargs.get("is_causal")))
        return real(q, k, v, attn_mask, *args, **kwargs)

    monkeypatch.setattr(F, "scaled_dot_product_attention", spy)
    model = _model()
    _use(model, va.ATTN_IMPLEMENTATION)
    ids, pos = _packed(LENGTHS)
    with torch.no_grad():
        model(ids, position_ids=pos)
    assert len(calls) == 2  # one per layer
    for shape, no_mask, causal in calls:
        assert shape[0] == len(LENGTHS) and shape[2] == max(LENGTHS) and no_mask and causal


def test_padded_batch_is_plain_attention():
    """A left-padded 2-row batch (the padded path) gives what eager attention gives: the padding mask is kept."""
    model = _model()
    ids = torch.randint(0, 97, (2, 8), generator=torch.Generator().manual_seed(3))
    mask = torch.ones(2, 8, dtype=torch.long)
    mask[1, :3] = 0
    pos = (mask.cumsum(-1) - 1).clamp(min=0)
    out = {}
    for impl in (va.ATTN_IMPLEMENTATION, "eager"):
        _use(model, impl)
        with torch.no_grad():
            out[impl] = model(ids, attention_mask=mask, position_ids=pos).logits
    diff = (out[va.ATTN_IMPLEMENTATION] - out["eager"])[mask.bool()]
    assert float(diff.abs().max()) <= TOL


def test_sliding_window_is_refused():
    """Packed or not: the mask builder gives unpadded rows no mask, so a window would silently be lost."""
    q = torch.zeros(1, 2, 6, 4)
    for pos in (torch.tensor([[0, 1, 2, 0, 1, 2]]), torch.arange(6).unsqueeze(0)):
        with pytest.raises(NotImplementedError, match="sliding-window"):
            va.varlen_sdpa_forward(torch.nn.Module(), q, q, q, None, position_ids=pos, sliding_window=4)


def test_loads_by_name(tmp_path):
    from transformers import AutoModelForCausalLM

    _model().save_pretrained(tmp_path)
    model = AutoModelForCausalLM.from_pretrained(tmp_path, attn_implementation=va.ATTN_IMPLEMENTATION)
    assert model.config._attn_implementation == va.ATTN_IMPLEMENTATION


def test_segments_found_once_per_forward(monkeypatch):
    """Every layer gets the same position ids: the segment table is computed once per forward, and again for a new
    (or modified) position-ids tensor."""
    calls = []
    real = va.packed_segments
    monkeypatch.setattr(va, "packed_segments", lambda pos: calls.append(1) or real(pos))
    model = _model()  # 2 layers
    _use(model, va.ATTN_IMPLEMENTATION)
    ids, pos = _packed(LENGTHS)
    with torch.no_grad():
        model(ids, position_ids=pos)
        assert len(calls) == 1
        model(ids, position_ids=pos.clone())
        assert len(calls) == 2
        pos2 = pos.clone()
        model(ids, position_ids=pos2)
        pos2[0, 1:LENGTHS[0]] -= 1  # in place: the first sample split into 1 + 4 tokens; the table must not be reused
        other = model(ids, position_ids=pos2).logits
        assert len(calls) == 4
        _use(model, "eager")
        first = model(ids[:, :1]).logits[0]
        rest = model(ids[:, 1:LENGTHS[0]]).logits[0]
    assert float((other[0, :1] - first).abs().max()) <= TOL
    assert float((other[0, 1:LENGTHS[0]] - rest).abs().max()) <= TOL
