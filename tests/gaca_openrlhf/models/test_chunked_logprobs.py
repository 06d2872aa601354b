"""Chunked log-probs / entropy equal the plain full-logits computation (values and gradients, fp32 rounding)."""
import pytest
import torch

from gaca_openrlhf.models import chunked_logprobs as cl
from gaca_openrlhf.models.chunked_logprobs import chunk_bounds, chunked_logprobs_entropy, plain_logprobs_entropy

# fp32 rounding: max |a - b| <= TOL * max(1, max |b|) per tensor (fp32 eps is 1.2e-7; the weight gradient sums 53
# per-token terms in a different order when chunked). An off-by-one chunk boundary gives errors of order 1.
TOL = 1e-5
RTOL, ATOL = 1e-5, 1e-5


def _setup(n=53, hidden=16, vocab=97, seed=0, batch=None):
    g = torch.Generator().manual_seed(seed)
    shape = (batch, n) if batch else (n,)
    h = torch.randn(*shape, hidden, generator=g, requires_grad=True)
    head = torch.nn.Linear(hidden, vocab, bias=True)
    with torch.no_grad():
        head.weight.copy_(torch.randn(vocab, hidden, generator=g) * 0.5)
        head.bias.copy_(torch.randn(vocab, generator=g))
    labels = torch.randint(0, vocab, shape, generator=g)
    return h, head, labels


def _run(fn, h, head, labels, temperature, with_entropy):
    """(log_probs, entropy, grad wrt hidden, grad wrt head weight, grad wrt head bias) of a fixed random loss."""
    h = h.detach().clone().requires_grad_(True)
    head.zero_grad()
    lp, ent = fn(h, labels, head, temperature)
    g = torch.Generator().manual_seed(7)
    w_lp = torch.randn(lp.shape, generator=g)
    loss = (lp * w_lp).sum()
    if ent is not None:
        loss = loss + (ent * torch.randn(ent.shape, generator=g)).sum()
    loss.backward()
    return lp.detach(), None if ent is None else ent.detach(), h.grad, head.weight.grad.clone(), head.bias.grad.clone()


def _chunked(chunk, with_entropy):
    return lambda h, y, head, t: chunked_logprobs_entropy(h, y, head, temperature=t, chunk_size=chunk,
                                                          with_entropy=with_entropy)


def _plain(with_entropy):
    return lambda h, y, head, t: plain_logprobs_entropy(head(h), y, temperature=t, with_entropy=with_entropy)


def _equal(a, b) -> bool:
    for x, y in zip(a, b):
        if (x is None) != (y is None):
            return False
        if x is not None and (x.shape != y.shape
                              or float((x - y).abs().max()) > TOL * max(1.0, float(y.abs().max()))):
            return False
    return True


@pytest.mark.parametrize("chunk", [1, 7, 16, 53, 1000])
@pytest.mark.parametrize("with_entropy", [False, True])
@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_chunked_equals_plain_values_and_grads(chunk, with_entropy, temperature):
    h, head, labels = _setup()
    a = _run(_chunked(chunk, with_entropy), h, head, labels, temperature, with_entropy)
    b = _run(_plain(with_entropy), h, head, labels, temperature, with_entropy)
    assert _equal(a, b)


def test_batched_shape_and_no_grad_path():
    h, head, labels = _setup(n=11, batch=3)
    with torch.no_grad():
        lp, ent = chunked_logprobs_entropy(h, labels, head, chunk_size=4, with_entropy=True)
        ref_lp, ref_ent = plain_logprobs_entropy(head(h), labels, with_entropy=True)
    assert lp.shape == labels.shape and lp.dtype == torch.float32
    torch.testing.assert_close(lp, ref_lp, rtol=RTOL, atol=ATOL)
    torch.testing.assert_close(ent, ref_ent, rtol=RTOL, atol=ATOL)


def test_bf16_head_is_upcast_like_openrlhf():
    """A bf16 model: logits come out of the head in bf16 and are cast to fp32 before the softmax (as the actor does)."""
    h, head, labels = _setup(n=20)
    head = head.to(torch.bfloat16)
    hb = h.detach().to(torch.bfloat16)
    lp, _ = chunked_logprobs_entropy(hb, labels, head, chunk_size=6)
    ref, _ = plain_logprobs_entropy(head(hb), labels)
    torch.testing.assert_close(lp, ref, rtol=RTOL, atol=ATOL)


def test_empty_sequence():
    h, head, labels = _setup(n=0)
    lp, ent = chunked_logprobs_entropy(h, labels, head, chunk_size=4, with_entropy=True)
    assert lp.shape == (0,) and ent.shape == (0,)


def test_chunk_bounds_cover_each_token_once():
    for n in range(0, 40):
        for c in (1, 3, 8, 39, 40, 41):
            covered = [i for s, e in chunk_bounds(n, c) for i in range(s, e)]
            assert covered == list(range(n))
            assert all(e - s <= c for s, e in chunk_bounds(n, c))
    with pytest.raises(ValueError):
        chunk_bounds(5, 0)


@pytest.mark.parametrize("mutant", ["end_short", "start_late", "overlap"])
def test_off_by_one_chunk_boundary_is_caught(monkeypatch, mutant):
    """The equality check above is sharp: an off-by-one chunk boundary makes it fail."""
    real = cl.chunk_bounds

    def mutated(n, c):
        b = real(n, c)
        if mutant == "end_short":  # drops the last token of every chunk
            return [(s, e - 1) for s, e in b]
        if mutant == "start_late":  # drops the first token of every chunk but the first
            return [(s + (1 if i else 0), e) for i, (s, e) in enumerate(b)]
        return [(max(0, s - 1), e) for s, e in b]  # repeats a token at every boundary

    monkeypatch.setattr(cl, "chunk_bounds", mutated)
    h, head, labels = _setup()
    b = _run(_plain(True), h, head, labels, 1.0, True)
    try:
        a = _run(_chunked(16, True), h, head, labels, 1.0, True)
    except RuntimeError:  # the mutant's output has the wrong number of tokens
        return
    assert not _equal(a, b)


def test_no_full_logits_saved_for_backward():
    """Only chunk-sized tensors are saved by autograd: the [tokens, vocab] fp32 logits are never kept for backward."""
    n, vocab, chunk = 200, 97, 16
    h, head, labels = _setup(n=n, vocab=vocab)
    saved = []

    def pack(t):
        saved.append(t.numel())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        lp, ent = chunked_logprobs_entropy(h, labels, head, chunk_size=chunk, with_entropy=True)
    (lp.sum() + ent.sum()).backward()
    assert max(saved, default=0) < n * vocab // 4  # the plain path saves >= n x vocab elements
    saved.clear()
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        plain_logprobs_entropy(head(h), labels, with_entropy=True)
    assert max(saved) >= n * vocab
