"""Per-token log-probs and entropy computed over the sequence in chunks (a bounded logits peak).

A causal LM's training forward normally materialises the full ``[tokens, vocab]`` logits, casts them to fp32 (a
second full copy) and keeps softmax intermediates of the same size alive for the backward pass: for a 4k-token
WebShop step prompt and a 152k vocabulary that is ~2.5 GB per copy. :func:`chunked_logprobs_entropy` starts from the
final hidden states instead and applies the output head one chunk of ``chunk_size`` tokens at a time; each chunk's
work runs under activation checkpointing (``torch.utils.checkpoint``, non-reentrant), so only the chunk's *inputs*
(its hidden states and labels) are saved and its logits are recomputed, one chunk at a time, in the backward pass.
At most one chunk's ``[chunk_size, vocab]`` fp32 logits (and their softmax) are live at any moment.

The arithmetic per token is the same as the unchunked computation (OpenRLHF's ``log_probs_from_logits`` /
``compute_entropy`` on fp32 logits divided by the temperature): ``log p(label) = z_label - logsumexp(z)`` and
``H = logsumexp(z) - sum softmax(z) * z`` with ``z = head(h).float() / temperature``. The values and gradients equal
the plain computation's to fp32 rounding (tests/gaca_openrlhf/models/test_chunked_logprobs.py).

Pure PyTorch; no Ray / DeepSpeed / vLLM.
"""
from __future__ import annotations

from typing import Callable, List, Optional, Tuple

import torch
from torch.utils.checkpoint import checkpoint

#: default tokens per chunk (1024 x a 152k vocabulary x 4 bytes = 0.6 GB per fp32 chunk)
DEFAULT_CHUNK_SIZE = 1024


def chunk_bounds(num_tokens: int, chunk_size: int) -> List[Tuple[int, int]]:
    """``[(start, end), ...]`` half-open ranges of at most ``chunk_size`` tokens covering ``0 .. num_tokens`` once."""
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be >= 1 (got {chunk_size})")
    return [(s, min(s + chunk_size, num_tokens)) for s in range(0, num_tokens, chunk_size)]


def _chunk(hidden: torch.Tensor, labels: torch.Tensor, head: Callable[[torch.Tensor], torch.Tensor],
           temperature: float, with_entropy: bool):
    logits = head(hidden).float()
    if temperature != 1.0:
        logits = logits / temperature
    lse = torch.logsumexp(logits, dim=-1)
    log_probs = logits.gather(-1, labels.unsqueeze(-1)).squeeze(-1) - lse
    if not with_entropy:
        return log_probs, None
    probs = torch.exp(logits - lse.unsqueeze(-1))
    entropy = lse - (probs * logits).sum(-1)
    return log_probs, entropy


def num_chunks(num_tokens: int, chunk_size: int) -> int:
    """How many chunks :func:`chunk_bounds` makes: ``ceil(num_tokens / chunk_size)``."""
    return len(chunk_bounds(num_tokens, chunk_size))


def chunked_logprobs_entropy(hidden: torch.Tensor, labels: torch.Tensor,
                             head: Callable[[torch.Tensor], torch.Tensor], *, temperature: float = 1.0,
                             chunk_size: int = DEFAULT_CHUNK_SIZE, with_entropy: bool = False,
                             min_chunks: int = 0) -> Tuple[torch.Tensor, Optional[torch.Tensor]]:
    """fp32 ``(log_probs, entropy)`` of shape ``labels.shape`` from final hidden states, ``chunk_size`` tokens at once.

    Args:
        hidden: ``(..., H)`` final hidden states (after the model's last norm), any float dtype.
        labels: ``(...)`` token ids whose log-prob is wanted at each position (the *next* tokens).
        head: the output head, ``(n, H) -> (n, V)`` logits (e.g. the model's ``lm_head`` module, so that DeepSpeed's
            ZeRO-3 hooks gather its weight); it is called once per chunk, and again per chunk in the backward pass
            when gradients are needed.
        temperature: logits are divided by it (the rollout's sampling temperature), as OpenRLHF's actor does.
        chunk_size: tokens per chunk.
        with_entropy: also return the full-distribution entropy of each position (else ``None``).
        min_chunks: call the head at least this many times: the chunks past the last token are empty (0 tokens;
            they change no value and no gradient). Data-parallel ranks whose head call gathers a partitioned weight
            (DeepSpeed ZeRO-3) must all call it equally often although their token counts differ: they pass the
            largest chunk count of the group here (:mod:`gaca_openrlhf.trainer.chunked_actor`).

    Gradients flow to ``hidden`` and to the head's parameters; equal to the unchunked computation's to fp32
    rounding. Without grad mode the chunks simply run one after another (no recomputation).
    """
    if hidden.shape[:-1] != labels.shape:
        raise ValueError(f"hidden {tuple(hidden.shape)} and labels {tuple(labels.shape)} disagree")
    shape = labels.shape
    flat_h = hidden.reshape(-1, hidden.shape[-1])
    flat_l = labels.reshape(-1)
    recompute = torch.is_grad_enabled()
    lps, ents = [], []
    bounds = chunk_bounds(flat_l.numel(), chunk_size)
    bounds += [(flat_l.numel(), flat_l.numel())] * (min_chunks - len(bounds))  # empty chunks (none if <= 0)
    for start, end in bounds:
        h, y = flat_h[start:end], flat_l[start:end]
        if recompute:
            lp, ent = checkpoint(_chunk, h, y, head, temperature, with_entropy, use_reentrant=False)
        else:
            lp, ent = _chunk(h, y, head, temperature, with_entropy)
        lps.append(lp)
        ents.append(ent)
    if not lps:  # no tokens and no chunks
        empty = flat_h.new_zeros(shape, dtype=torch.float32)
        return empty, (empty.clone() if with_entropy else None)
    log_probs = torch.cat(lps).reshape(shape)
    entropy = torch.cat(ents).reshape(shape) if with_entropy else None
    return log_probs, entropy


def plain_logprobs_entropy(logits: torch.Tensor, labels: torch.Tensor, *, temperature: float = 1.0,
                           with_entropy: bool = False) -> Tuple[torch.Tensor, Optional[torch.Tensor]]:
    """The unchunked reference on full logits (``(..., V)``): what :func:`chunked_logprobs_entropy` must equal."""
    z = logits.float()
    if temperature != 1.0:
        z = z / temperature
    log_probs = torch.log_softmax(z, dim=-1).gather(-1, labels.unsqueeze(-1)).squeeze(-1)
    entropy = None
    if with_entropy:
        entropy = torch.logsumexp(z, dim=-1) - (torch.softmax(z, dim=-1) * z).sum(-1)
    return log_probs, entropy
