"""Synthetic copy pre-training: teach a from-scratch model to copy from its context before SFT.

Why: a ~2M-parameter model trained from scratch on a few hundred ALFWorld step samples does not copy an object's
name from the prompt within its first ~1500 SFT steps (it writes its favourite object, ``take watch 1 from drawer 1``, even in the action
that repeats its own thought 15 tokens earlier). Copying is an *induction* pattern (find the earlier occurrence of
the current token, emit the token that followed it), which small transformers acquire abruptly after enough
steps on data where copying is the only way to lower the loss (Olsson et al. 2022, "In-context learning and
induction heads"). Short synthetic sequences make those steps cheap.

Each sequence: ``source_len`` tokens drawn uniformly from ``token_ids`` (the ids the demonstrations use), then
``copy_len`` tokens made of chunks of ``chunk`` tokens, each chunk copied from a random place in the source. The
loss is on the copied tokens after each chunk's first (the first is unpredictable), so only copying pays; the
chunk's random source offset stops the model from solving it by a fixed relative position.
"""
from __future__ import annotations

import math
import os
import time
from dataclasses import asdict, dataclass
from typing import Callable, Sequence

from gaca_openrlhf.sft.train import lr_factor, save_model


@dataclass
class CopyPretrainConfig:
    """Size of the copy pre-training phase."""

    steps: int = 600  # optimizer steps
    batch_size: int = 32  # sequences per step
    source_len: int = 160  # random tokens a chunk can be copied from
    copy_len: int = 96  # tokens made of copied chunks (the supervised part)
    min_chunk: int = 4  # chunk length is drawn per step in [min_chunk, max_chunk]
    max_chunk: int = 16
    lr: float = 2e-3
    warmup_frac: float = 0.05
    weight_decay: float = 0.01
    seed: int = 0


def copy_batch(token_ids, batch_size: int, source_len: int, copy_len: int, chunk: int, generator):
    """One batch of copy sequences: ``(ids [B, source_len + copy_len], label_mask [B, source_len + copy_len])``.

    ``label_mask[b, t]`` is True where token ``t`` is a copied token other than its chunk's first -- predictable
    from the context by copying. Vectorised: chunk ``c`` of row ``b`` is copied from ``start[b, c]``.
    """
    import torch

    token_ids = torch.as_tensor(token_ids, dtype=torch.long)
    if token_ids.numel() < 2:
        raise ValueError("copy pre-training needs at least 2 distinct token ids")
    if not 1 <= chunk <= source_len:
        raise ValueError(f"chunk length {chunk} must be in [1, source_len={source_len}]")
    src = token_ids[torch.randint(len(token_ids), (batch_size, source_len), generator=generator)]
    n_chunks = math.ceil(copy_len / chunk)
    start = torch.randint(source_len - chunk + 1, (batch_size, n_chunks), generator=generator)
    j = torch.arange(copy_len)
    index = start[:, j // chunk] + (j % chunk)  # [B, copy_len] positions in the source
    ids = torch.cat([src, src.gather(1, index)], dim=1)
    label_mask = torch.zeros_like(ids, dtype=torch.bool)
    label_mask[:, source_len:] = (j % chunk != 0)
    return ids, label_mask


def copy_loss(logits, ids, label_mask):
    """Next-token cross-entropy on the masked positions (position t's logits predict token t)."""
    import torch.nn.functional as F

    pred = logits[:, :-1]
    target = ids[:, 1:]
    mask = label_mask[:, 1:]
    return F.cross_entropy(pred[mask], target[mask])


def copy_pretrain(model_dir: str | os.PathLike, token_ids: Sequence[int], out_dir: str | os.PathLike,
                  cfg: CopyPretrainConfig = CopyPretrainConfig(), log: Callable[[str], None] = print,
                  progress: Callable[[int, int, float], None] | None = None) -> dict:
    """Train the model in ``model_dir`` on copy sequences over ``token_ids``; save it (and its tokenizer) to
    ``out_dir``; return the stats (loss and copy accuracy over the last 10 % of steps)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    ids_pool = sorted(set(int(t) for t in token_ids))
    torch.manual_seed(cfg.seed)
    gen = torch.Generator().manual_seed(cfg.seed)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    warmup = max(1, int(cfg.warmup_frac * cfg.steps))
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: lr_factor(s, cfg.steps, warmup))
    model.train()
    losses, accs, t0 = [], [], time.time()
    for step in range(1, cfg.steps + 1):
        chunk = int(torch.randint(cfg.min_chunk, cfg.max_chunk + 1, (1,), generator=gen))
        ids, mask = copy_batch(ids_pool, cfg.batch_size, cfg.source_len, cfg.copy_len, chunk, gen)
        logits = model(input_ids=ids).logits
        loss = copy_loss(logits, ids, mask)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        with torch.no_grad():
            accs.append((logits[:, :-1].argmax(-1) == ids[:, 1:])[mask[:, 1:]].float().mean().item())
        losses.append(loss.item())
        if progress:
            progress(step, cfg.steps, losses[-1])
    model.eval()
    tail = max(1, len(losses) // 10)
    stats = {"steps": cfg.steps, "seconds": round(time.time() - t0, 1), "token_pool": len(ids_pool),
             "loss_first": losses[0], "loss_last10pct": sum(losses[-tail:]) / tail,
             "copy_accuracy_last10pct": sum(accs[-tail:]) / tail, "config": asdict(cfg)}
    save_model(model, tokenizer, out_dir, "gaca_copy_pretrain.json", stats)
    log(f"copy pre-training: {cfg.steps} steps, loss {stats['loss_first']:.3f} -> {stats['loss_last10pct']:.3f}, "
        f"copy accuracy {stats['copy_accuracy_last10pct']:.3f} in {stats['seconds']} s")
    return stats
