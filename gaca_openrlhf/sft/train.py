"""A small supervised fine-tuning loop for step-level agent samples (the quickstart's warm start).

Why the project's own loop and not OpenRLHF's ``SFTTrainer``: on the CPU backend OpenRLHF's trainer needs a
DeepSpeed launch (a distributed process group over gloo, its dataset/packing conventions and a JIT-built CPU Adam
or our torch-AdamW patch) to train a ~5M-parameter model for a few hundred steps; that start-up alone costs about
a minute on 2 cores. This loop trains the same objective -- next-token loss on the response tokens only, the prompt
masked -- in-process with ``torch.optim.AdamW``, and encodes prompts with the *rollout's* encoder
(:func:`agents.prompts.encode_step_prompt`: the chat template over the rendered step prompt, then ``fit_prompt``
left-truncation), so the warm start sees byte-identical token ids to what RL and evaluation feed it.

Samples are sorted into length buckets (less padding), shuffled by a seeded generator; a cosine schedule with
linear warm-up; the model is saved as a Hugging Face folder (float32, untied).
"""
from __future__ import annotations

import json
import math
import os
import random
import re
import shutil
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Sequence

from agents.prompts import fit_prompt


@dataclass(frozen=True)
class SFTConfig:
    """Recipe of the warm start."""

    epochs: float = 4.0
    batch_size: int = 8
    lr: float = 2e-3
    warmup_frac: float = 0.05
    weight_decay: float = 0.01
    prompt_max_len: int = 2048  # as the rollout's --env.prompt_max_len (longer prompts are left-truncated)
    seed: int = 0
    threads: int = 0  # torch intra-op threads (0: torch's default)
    #: weight of the next-token loss on the prompt tokens (0: response-only, the classic SFT objective); the loss
    #: is ``mean CE(response tokens) + w * mean CE(prompt tokens)`` -- see :func:`sft_loss`
    prompt_loss_weight: float = 0.0
    #: probability that a sample is replaced by its ``augment(...)`` version each time it is drawn (0: never)
    augment_prob: float = 0.0
    #: ``"take=3,move=3"``: samples whose action starts with that verb count that many times (rare decisions --
    #: one ``take`` and one ``move`` per ALFWorld episode against several ``go to`` -- get more of the steps)
    upsample: str = ""
    #: cosine cycles with restarts over the run (each with its own warmup), cycle c peaking at lr * cycle_decay**c;
    #: the quickstart's measured recipe is 2 cycles (2e-3 then 1e-3)
    cycles: int = 1
    cycle_decay: float = 0.5
    #: the copy gate (issue 35: whether a from-scratch model learns to copy an object's name from its prompt within
    #: the planned cycles is a draw of its seed): after the planned ``cycles``, while :func:`copy_check` scores below
    #: ``check_min``, add a cycle of the same length peaking at ``cycle_decay`` x the previous one, up to
    #: ``max_cycles`` cycles in all. ``max_cycles <= cycles`` or no ``check_verbs``: no gate, exactly ``cycles``
    #: cycles. A run that passes at its planned cycles is bitwise the run without the gate (the check draws no
    #: random number the training uses).
    max_cycles: int = 0
    #: the check's samples: training samples whose action starts with one of these comma-separated verbs
    #: (``"take,move"``: the ALFWorld actions that copy an object's name), entities renamed by ``augment`` where
    #: given, so that a memorised name cannot pass
    check_verbs: str = ""
    check_samples: int = 64  # how many (drawn with a fixed seed, independent of ``seed``)
    check_min: float = 0.9  # the share of exact greedy actions that passes


def save_model(model, tokenizer, out_dir: str | os.PathLike, stats_file: str, stats: dict) -> Path:
    """Write model, tokenizer and ``stats_file`` (JSON) to a temporary sibling folder, then rename it to
    ``out_dir``: a reader never sees a half-written model."""
    out = Path(out_dir)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}-", dir=out.parent))
    model.save_pretrained(tmp, safe_serialization=True)
    tokenizer.save_pretrained(tmp)
    (tmp / stats_file).write_text(json.dumps(stats, indent=1))
    if out.exists():
        shutil.rmtree(out)
    tmp.rename(out)
    return out


def lr_factor(step: int, cycle: int, warmup: int, cycle_decay: float = 0.5) -> float:
    """Learning-rate multiplier at ``step``: linear warmup then cosine to 0 within each cycle of ``cycle`` steps;
    cycle ``c`` (0-based) peaks at ``cycle_decay ** c`` (one cycle = the classic warmup + cosine schedule)."""
    c, s = divmod(step, cycle)
    peak = cycle_decay ** c
    if s < warmup:
        return peak * (s + 1) / warmup
    return peak * 0.5 * (1 + math.cos(math.pi * (s - warmup) / max(1, cycle - warmup)))


def extended_lr_factor(step: int, planned: int, cycle: int, warmup: int, cycles: int,
                       cycle_decay: float = 0.5) -> float:
    """:func:`lr_factor` over the ``planned`` steps; after them, the copy gate's extra cycles (``cycle`` steps each,
    counted from ``planned``), extra cycle ``k`` peaking at ``cycle_decay ** (cycles + k)``."""
    if step < planned:
        return lr_factor(step, cycle, warmup, cycle_decay)
    k, s = divmod(step - planned, cycle)
    return cycle_decay ** (cycles + k) * lr_factor(s, cycle, warmup, 1.0)


_VERB = re.compile(r"\s*([A-Za-z]+)")


def action_verb(action: str) -> str:
    """An action's verb, the word the SFT's ``upsample`` and ``check_verbs`` name: its leading letters
    (``"take pen 1 from bed 1"`` -> ``take``, ALFWorld; ``"click[b0kqo1hsg6]"`` -> ``click``, WebShop, whose
    actions have no space after the verb); ``""`` for none."""
    m = _VERB.match(action)
    return m.group(1) if m else ""


def copy_check(generate: Callable[[str], str], pairs: Sequence[tuple[str, str]], verbs: str, n: int,
               augment: Callable[[str, str, random.Random], tuple[str, str]] | None = None, seed: int = 1234) -> dict:
    """Score ``generate`` (prompt text -> response text, greedy) on ``n`` of ``pairs`` whose action starts with one
    of ``verbs`` (comma-separated), each renamed by ``augment`` where given: ``{"exact": share of responses whose
    action, projected as the rollout projects it (:func:`agents.parsing.parse_action`), equals the expected one, "n": samples scored, "by_verb": {verb: [exact, n]}}`` (``exact`` 1.0 when no
    sample has such a verb: nothing to check)."""
    from agents.parsing import parse_action

    wanted = {v.strip() for v in verbs.split(",") if v.strip()}
    idx = [i for i, (_, r) in enumerate(pairs) if action_verb(parse_action(r).action) in wanted]
    rng = random.Random(seed)
    idx = sorted(rng.sample(idx, min(n, len(idx))))
    by_verb: dict[str, list[int]] = {}
    for i in idx:
        prompt, response = augment(*pairs[i], rng) if augment is not None else pairs[i]
        want = parse_action(response).action
        c = by_verb.setdefault(action_verb(want), [0, 0])
        c[0] += parse_action(generate(prompt)).action == want
        c[1] += 1
    hits = sum(c[0] for c in by_verb.values())
    return {"exact": hits / len(idx) if idx else 1.0, "n": len(idx), "by_verb": by_verb}


def greedy_responder(model, tokenizer, prompt_max_len: int, max_new_tokens: int) -> Callable[[str], str]:
    """prompt text -> the model's greedy response text (the rollout's prompt encoding)."""
    import torch

    def generate(prompt: str) -> str:
        ids = torch.tensor([fit_prompt(encode_prompt(tokenizer, prompt), prompt_max_len)])
        with torch.no_grad():
            out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=max_new_tokens,
                                 do_sample=False, eos_token_id=tokenizer.eos_token_id,
                                 pad_token_id=tokenizer.pad_token_id)
        return tokenizer.decode(out[0, ids.shape[1]:], skip_special_tokens=True)

    return generate


def parse_upsample(spec: str) -> dict[str, int]:
    """``"take=3,move=2"`` -> ``{"take": 3, "move": 2}`` (clear error on a malformed entry)."""
    out = {}
    for item in filter(None, (x.strip() for x in spec.split(","))):
        verb, sep, times = item.partition("=")
        if not sep or not verb.strip() or not times.strip().isdigit() or int(times) < 1:
            raise ValueError(f"bad upsample entry {item!r}: expected VERB=TIMES with TIMES >= 1, e.g. take=3")
        out[verb.strip()] = int(times)
    return out


def upsample_pairs(pairs: Sequence[tuple[str, str]], spec: str) -> list[tuple[str, str]]:
    """Repeat each (prompt, response) whose ``<action>`` starts with an upsampled verb (see ``SFTConfig.upsample``)."""
    times = parse_upsample(spec)
    out = []
    for prompt, response in pairs:
        out.extend([(prompt, response)] * times.get(action_verb(response.rpartition("<action>")[2]), 1))
    return out


def encode_prompt(tokenizer, text: str) -> list[int]:
    """The rollout's prompt encoding (:func:`agents.prompts.encode_step_prompt`, shared with evaluation)."""
    from agents.prompts import encode_step_prompt

    return encode_step_prompt(tokenizer, text)


def encode_samples(tokenizer, pairs: Sequence[tuple[str, str]], prompt_max_len: int) -> list[tuple[list[int], list[int]]]:
    """(prompt text, response text) -> (prompt ids, response ids + eos)."""
    eos = tokenizer.eos_token_id
    out = []
    for prompt, response in pairs:
        p = fit_prompt(encode_prompt(tokenizer, prompt), prompt_max_len)
        r = tokenizer(response, add_special_tokens=False)["input_ids"] + [eos]
        out.append((p, r))
    return out


def sft_loss(logits, input_ids, prompt_mask, response_mask, prompt_loss_weight: float = 0.0):
    """``mean CE over response tokens + prompt_loss_weight * mean CE over prompt tokens`` (next-token, shifted).

    ``prompt_mask`` / ``response_mask`` mark the *target* tokens (same shape as ``input_ids``); the first token of
    a sequence is never a target. With weight 0 this is exactly the usual masked-prompt SFT loss."""
    import torch.nn.functional as F

    ce = F.cross_entropy(logits[:, :-1].flatten(0, 1).float(), input_ids[:, 1:].flatten(), reduction="none")
    ce = ce.view(input_ids.shape[0], -1)
    r = response_mask[:, 1:].to(ce.dtype)
    loss = (ce * r).sum() / r.sum().clamp(min=1)
    if prompt_loss_weight:
        pm = prompt_mask[:, 1:].to(ce.dtype)
        loss = loss + prompt_loss_weight * (ce * pm).sum() / pm.sum().clamp(min=1)
    return loss


def _batches(samples, batch_size: int, rng: random.Random):
    order = sorted(range(len(samples)), key=lambda i: len(samples[i][0]) + len(samples[i][1]))
    chunks = [order[i:i + batch_size] for i in range(0, len(order), batch_size)]
    rng.shuffle(chunks)
    return chunks


def train_sft(model_dir: str | os.PathLike, pairs: Sequence[tuple[str, str]], out_dir: str | os.PathLike,
              cfg: SFTConfig = SFTConfig(), log: Callable[[str], None] = print,
              progress: Callable[[int, int, float], None] | None = None,
              augment: Callable[[str, str, random.Random], tuple[str, str]] | None = None) -> dict:
    """Fine-tune the model in ``model_dir`` on ``pairs`` and save it to ``out_dir``; return the training stats.

    ``augment`` (with ``cfg.augment_prob`` > 0): a sample drawn for a batch is replaced, with that probability, by
    ``augment(prompt, response, rng)`` encoded afresh (e.g. :class:`gaca_openrlhf.sft.augment.Renamer`).

    With the copy gate on (``cfg.max_cycles > cfg.cycles`` and ``cfg.check_verbs``), the stats carry every check
    (``copy_checks``) and the cycles run (``cycles_run``); ``steps`` counts the extra cycles' steps too."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if not pairs:
        raise ValueError("no SFT samples: the demonstrations are empty")
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    torch.manual_seed(cfg.seed)
    rng = random.Random(cfg.seed)
    distinct = list(pairs)  # the copy check draws from these (upsampling repeats some)
    if cfg.upsample:
        pairs = upsample_pairs(pairs, cfg.upsample)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    samples = encode_samples(tokenizer, pairs, cfg.prompt_max_len)
    steps_per_epoch = math.ceil(len(samples) / cfg.batch_size)
    total = max(1, int(round(cfg.epochs * steps_per_epoch)))
    cycle = max(1, math.ceil(total / max(1, cfg.cycles)))
    warmup = max(1, int(cfg.warmup_frac * cycle))
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    planned = total
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: extended_lr_factor(s, planned, cycle, warmup, cfg.cycles, cfg.cycle_decay))
    gate = cfg.max_cycles > cfg.cycles and bool(cfg.check_verbs.strip())
    cycles_run, checks = cfg.cycles, []
    pad = tokenizer.pad_token_id
    losses, t0, step = [], time.time(), 0
    queue: list[list[int]] = []

    def train_until(last: int) -> None:
        nonlocal step, queue
        model.train()
        while step < last:
            if not queue:
                queue = _batches(samples, cfg.batch_size, rng)
            idx = queue.pop()
            batch = [samples[i] for i in idx]
            if augment is not None and cfg.augment_prob > 0:
                batch = [encode_samples(tokenizer, [augment(*pairs[i], rng)], cfg.prompt_max_len)[0]
                         if rng.random() < cfg.augment_prob else samples[i] for i in idx]
            seqs = [p + r for p, r in batch]
            width = max(map(len, seqs))
            ids = torch.tensor([s + [pad] * (width - len(s)) for s in seqs])
            mask = torch.tensor([[1] * len(s) + [0] * (width - len(s)) for s in seqs])
            pmask = torch.tensor([[1] * len(p) + [0] * (width - len(p)) for p, _ in batch])
            rmask = mask - pmask
            loss = sft_loss(model(input_ids=ids, attention_mask=mask).logits, ids, pmask, rmask,
                            cfg.prompt_loss_weight)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            step += 1
            losses.append(loss.item())
            if progress:
                progress(step, last, losses[-1])
        model.eval()

    train_until(total)
    while gate:  # the copy gate: one more cycle while the check fails (SFTConfig.max_cycles)
        respond = greedy_responder(model, tokenizer, cfg.prompt_max_len, max(len(r) for _, r in samples) + 8)
        check = copy_check(respond, distinct, cfg.check_verbs, cfg.check_samples, augment)
        checks.append({"step": step, "cycles": cycles_run, **check})
        log(f"SFT copy check after {cycles_run} cycles ({step} steps): {check['exact']:.2f} exact greedy actions on "
            f"{check['n']} {'renamed ' if augment else ''}{cfg.check_verbs} samples (passes at {cfg.check_min})"
            if check["n"] else f"SFT copy check: no training sample's action starts with {cfg.check_verbs}")
        if check["exact"] >= cfg.check_min or cycles_run >= cfg.max_cycles:
            break
        cycles_run += 1
        total += cycle
        train_until(total)
    tail = losses[-max(1, len(losses) // 10):]
    stats = {"samples": len(samples), "steps": total, "epochs": cfg.epochs, "seconds": round(time.time() - t0, 1),
             "loss_first": losses[0], "loss_last10pct": sum(tail) / len(tail),
             "prompt_tokens_mean": sum(len(p) for p, _ in samples) / len(samples),
             "prompt_tokens_max": max(len(p) for p, _ in samples),
             "response_tokens_mean": sum(len(r) for _, r in samples) / len(samples), "config": asdict(cfg)}
    if gate:
        stats.update(cycles_run=cycles_run, copy_checks=checks)
    save_model(model, tokenizer, out_dir, "gaca_sft.json", stats)
    log(f"SFT: {stats['samples']} samples, {total} steps, loss {stats['loss_first']:.3f} -> "
        f"{stats['loss_last10pct']:.3f} in {stats['seconds']} s")
    return stats
