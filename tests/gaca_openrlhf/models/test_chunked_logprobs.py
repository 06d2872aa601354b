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


class _CountBackward(torch.autograd.Function):
    """Identity that counts the backward passes through a head output (as DeepSpeed ZeRO-3's pre-backward hook on
    a module's outputs, which gathers the weight again for the backward)."""
    calls = 0

    @staticmethod
    def forward(ctx, x):
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        _CountBackward.calls += 1
        return grad


@pytest.mark.parametrize("n", [1, 5, 53])
def test_min_chunks_adds_empty_head_calls_forward_and_backward(n):
    """``min_chunks`` (the largest chunk count of the ZeRO-3 ranks): the head is called exactly ``min_chunks`` times
    in the forward pass, again in the backward recomputation, and each call's output is back-propagated through, also
    on the empty (0-token) chunks; values and gradients are bitwise those without the empty chunks."""
    chunk, min_chunks = 16, 6
    h, head, labels = _setup(n=n)
    forward_calls = []

    def counted_head(x):
        forward_calls.append(x.shape[0])
        return _CountBackward.apply(head(x))

    def run(fn):
        return _run(lambda hh, y, _head, t: fn(hh, y), h, head, labels, 0.7, True)

    base = run(lambda hh, y: chunked_logprobs_entropy(hh, y, head, temperature=0.7, chunk_size=chunk,
                                                      with_entropy=True))
    _CountBackward.calls = 0
    padded = run(lambda hh, y: chunked_logprobs_entropy(hh, y, counted_head, temperature=0.7, chunk_size=chunk,
                                                        with_entropy=True, min_chunks=min_chunks))
    sizes = [e - s for s, e in chunk_bounds(n, chunk)]
    sizes += [0] * (min_chunks - len(sizes))
    assert forward_calls[:min_chunks] == sizes  # the forward pass
    assert sorted(forward_calls[min_chunks:]) == sorted(sizes)  # the backward recomputation (last chunk first)
    assert _CountBackward.calls == min_chunks
    for a, b in zip(padded, base):
        assert (a is None and b is None) or torch.equal(a, b)
    forward_calls.clear()
    with torch.no_grad():  # the experience pass: no recomputation, still min_chunks calls
        lp, _ = chunked_logprobs_entropy(h, labels, counted_head, temperature=0.7, chunk_size=chunk,
                                         min_chunks=min_chunks)
    assert len(forward_calls) == min_chunks and torch.equal(lp, base[0])


def test_min_chunks_below_own_count_changes_nothing():
    h, head, labels = _setup(n=53)
    calls = []
    chunked_logprobs_entropy(h, labels, lambda x: calls.append(1) or head(x), chunk_size=16, min_chunks=2)
    assert len(calls) == 4  # its own 4 chunks
