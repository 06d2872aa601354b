"""Per-step policy entropy of recorded responses, from a Hugging Face forward pass (EMPG's H_t, offline).

EMPG (arXiv 2509.09265) reads a step's uncertainty as the mean, over the step's response tokens, of the entropy of
the policy's full next-token distribution. In training the actor's experience forward computes it from the
temperature-scaled logits (:mod:`gaca_openrlhf.trainer.entropy`); the offline audit has only the vLLM samples
(sampled-token log-probs, no full distribution), so it runs the checkpoint once more over (prompt, response) and
takes the same quantity: ``H_t = mean_j H(softmax(logits_j / T))`` over the response positions j.

Rows are left-padded so every response ends at the last position; the model returns logits for the last
``max response + 1`` positions only (``logits_to_keep``), so memory is batch x longest response x vocabulary.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import torch


def token_entropy(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """Entropy (nats) of ``softmax(logits / temperature)`` over the last axis, in float32 or wider."""
    logp = torch.log_softmax(logits.float() / temperature, dim=-1)
    return -(logp.exp() * logp).sum(-1)


@torch.no_grad()
def response_entropy(model, rows: Sequence[tuple[Sequence[int], Sequence[int]]], *, temperature: float = 1.0,
                     batch_size: int = 16, pad_id: int = 0) -> np.ndarray:
    """(N,) mean token entropy of each row's response under ``model`` (a causal LM) at ``temperature``.

    ``rows``: (prompt ids, response ids) per step, as the rollout sent and received them. A row without response
    tokens gets 0 (as the trainer's ``row_mean_entropy``)."""
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0 (the entropy of a greedy policy is not defined), got {temperature}")
    out = np.zeros(len(rows), dtype=np.float64)
    device = next(model.parameters()).device
    for start in range(0, len(rows), batch_size):
        chunk = rows[start:start + batch_size]
        seqs = [list(p) + list(r) for p, r in chunk]
        resp = torch.tensor([len(r) for _, r in chunk])
        if int(resp.max()) == 0:
            continue
        width = max(len(s) for s in seqs)
        ids = torch.full((len(seqs), width), pad_id, dtype=torch.long)
        mask = torch.zeros((len(seqs), width), dtype=torch.long)
        for i, s in enumerate(seqs):  # left padding: row i's response ends at the last column
            ids[i, width - len(s):] = torch.tensor(s, dtype=torch.long)
            mask[i, width - len(s):] = 1
        position_ids = (mask.cumsum(-1) - 1).clamp(min=0)
        keep = int(resp.max()) + 1
        logits = model(input_ids=ids.to(device), attention_mask=mask.to(device), position_ids=position_ids.to(device),
                       logits_to_keep=keep).logits[:, -keep:-1]  # the logits at j predict token j + 1
        ent = token_entropy(logits, temperature).cpu()  # (B, keep - 1): column c predicts response token c - (keep-1-r)
        col = torch.arange(keep - 1)
        in_resp = col[None, :] >= (keep - 1 - resp)[:, None]
        out[start:start + len(chunk)] = ((ent * in_resp).sum(-1) / resp.clamp(min=1)).double().numpy()
    return out


def load_policy(model_path: str):
    """The checkpoint as a float32 causal LM on CPU, in eval mode (a tiny model or a GPU user's 1.5B both fit)."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_path, dtype=torch.float32)
    return model.eval()
