"""The real pipeline pieces the benchmark runs: ``step_experience`` -> ``StepExperienceMaker``'s split and advantage
hook -> OpenRLHF's replay-buffer items -> padded / packed / token-budget micro-batches -> the clipped policy loss with
OpenRLHF's normalizers, forward + backward of one update; also what the equality test
(tests/gaca_openrlhf/trainer/test_packing_equality.py) runs."""
from __future__ import annotations

import random
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Dict, List, Optional, Sequence

import torch

#: PPO loss settings of the harness (OpenRLHF's defaults) and the entropy bonus coefficient exercised
CLIP_EPS = 0.2
ENTROPY_COEF = 0.01


# --------------------------------------------------------------------------------------------------------------
# Step samples and the replay-buffer items
# --------------------------------------------------------------------------------------------------------------
def make_step_samples(prompt_lens: Sequence[int], response_lens: Sequence[int], vocab: int, seed: int = 0,
                      num_traj: int = 4):
    """Step samples (``trainer.samples.step_experience``) with the given token lengths and random token ids.

    Samples are spread over ``num_traj`` trajectories of one task group with different rewards and some invalid
    steps, so the GRPO advantages differ between samples.
    """
    from gaca_openrlhf.trainer.samples import step_experience

    rng = random.Random(seed)
    episode = dict(prompt="task", label="", failed=False, error="", won=False, score=0.0)
    samples = []
    for i, (p, r) in enumerate(zip(prompt_lens, response_lens)):
        traj, t = i % num_traj, i // num_traj
        step = dict(prompt_ids=[rng.randrange(3, vocab) for _ in range(p)],
                    response_ids=[rng.randrange(3, vocab) for _ in range(r)],
                    logprobs=[-rng.uniform(0.1, 3.0) for _ in range(r)], reward=float(traj * traj) if t == 0 else 0.0,
                    valid=(i % 3 != 1), anchor_id=1000 + i, step_index=t, truncated=False)
        samples.append(step_experience(step, 0, traj, episode))
    return samples


def _maker_args(dp: int, micro: int, dynamic: bool, budget: int):
    return SimpleNamespace(
        actor=SimpleNamespace(num_nodes=1, num_gpus_per_node=dp),
        ds=SimpleNamespace(ring_attn_size=1, tensor_parallel_size=1),
        rollout=SimpleNamespace(micro_batch_size=micro, max_tokens_per_gpu=budget),
        train=SimpleNamespace(dynamic_batch_enable=dynamic, max_tokens_per_gpu=budget),
        algo=SimpleNamespace(advantage=SimpleNamespace(estimator="grpo")))


@dataclass
class Items:
    """One rank's replay-buffer items (OpenRLHF's per-sample Experiences, padding removed) and their row ids."""

    items: list
    rows: List[int]  # rollout row of each item (copies included)
    advantage: Dict[int, float]  # rollout row -> its scalar advantage (0 for a copy)
    is_copy: Dict[int, bool]


def prepare_items(actor, samples, *, micro: int = 2, pad_multiple: int = 1, seed: int = 0,
                  old_logprob_shift: float = 0.2) -> Items:
    """Experience pass + advantage hook + replay-buffer split, as on one DP rank.

    ``samples`` are padded with copies (``pad_to_multiple``), split by the step experience maker into micro-batches
    of ``micro`` rows, the actor's log-probs (shifted by a deterministic per-token offset of at most
    ``old_logprob_shift`` so the PPO ratio is not 1 and clipping is exercised) become ``action_log_probs``, the
    advantage hook (GRPO) broadcasts advantages and masks the copies, and the micro-batches are split into padding-free
    items as OpenRLHF's replay buffer does.
    """
    from openrlhf.trainer.ppo_utils.experience import remove_padding_in_sequences, split_experience_batch

    from gaca_openrlhf.trainer.experience import StepExperienceMaker
    from gaca_openrlhf.trainer.samples import pad_to_multiple

    samples = pad_to_multiple(list(samples), pad_multiple, seed)
    strategy = SimpleNamespace(args=_maker_args(1, micro, False, 0))
    maker = StepExperienceMaker(None, None, None, None, None, strategy, SimpleNamespace(pad_token_id=0))
    micro_batches = maker.split_rollout_samples(samples)
    with torch.no_grad():
        for mb in micro_batches:
            lp = actor(mb.sequences, mb.action_mask, attention_mask=mb.attention_mask)
            k = torch.arange(lp.shape[1], dtype=torch.float32)
            mb.action_log_probs = (lp - old_logprob_shift * torch.sin(k + len(mb.index))) * mb.action_mask
    micro_batches = maker.compute_advantages_and_returns(micro_batches)
    rows = [i for mb in micro_batches for i in mb.index]
    advantage = {i: float(a) for mb in micro_batches for i, a in zip(mb.index, mb.info["advantage"])}
    is_copy = {i: not bool(mb.action_mask[j].any()) for mb in micro_batches for j, i in enumerate(mb.index)}
    items = []
    for mb in micro_batches:
        items.extend(remove_padding_in_sequences(split_experience_batch(mb)))
    return Items(items=items, rows=rows, advantage=advantage, is_copy=is_copy)


# --------------------------------------------------------------------------------------------------------------
# Micro-batch plans
# --------------------------------------------------------------------------------------------------------------
def fixed_plan(num_items: int, micro: int):
    """Consecutive micro-batches of ``micro`` item indices, one update (today's fixed-size path)."""
    return [list(range(s, min(s + micro, num_items))) for s in range(0, num_items, micro)]


def budget_plan(items: list, budget: int, updates: int = 1, seed: int = 0):
    """Token-budget micro-batches of one rank (the policy actor's :func:`~gaca_openrlhf.trainer.actors.
    setup_step_dynamic_batch`); returns the buffer with ``dynamic_*`` lists."""
    from gaca_openrlhf.trainer.actors import setup_step_dynamic_batch

    buffer = SimpleNamespace(items=items)
    setup_step_dynamic_batch(buffer, SimpleNamespace(ds_device_mesh=None), updates, budget, seed)
    return buffer


# --------------------------------------------------------------------------------------------------------------
# One training step
# --------------------------------------------------------------------------------------------------------------
@dataclass
class StepResult:
    loss: float  # the update's total loss (policy - entropy bonus), as DeepSpeed accumulates it
    log_probs: Dict[int, torch.Tensor]  # rollout row -> log-probs of its response tokens (action mask positions)
    token_loss: Dict[int, float]  # rollout row -> masked sum of its per-token PPO loss / normalizer
    grads: Dict[str, torch.Tensor]
    computed_tokens: int  # tokens the model ran over (padding included)
    real_tokens: int
    micro_batches: int


def train_micro_batches(actor, items: Items, groups: List[List[int]], *, dynamic: Optional[object] = None,
                        entropy_coef: float = ENTROPY_COEF, keep_grads: bool = True,
                        per_sample: bool = True) -> StepResult:
    """Forward + backward of one optimizer update over ``groups`` (lists of item indices), as OpenRLHF's
    ``ActorPPOTrainer.training_step`` computes it.

    Fixed micro-batches (``dynamic`` None) use ``iter_grad_accum_global_norm``'s normalizers (window tokens / gas)
    and DeepSpeed's ``1 / gas`` loss scaling; token-budget ones (``dynamic`` = the planned buffer) use its
    ``dynamic_batch_num_tokens`` with no accumulation scaling (OpenRLHF's dynamic mode). Gradients accumulate in
    the model's ``.grad`` (zeroed first).
    """
    from openrlhf.models.loss import PolicyLoss, aggregate_loss
    from openrlhf.trainer.ppo_utils.experience import make_experience_batch
    from openrlhf.utils.loss_utils import _optimizer_step_loss_norm

    model = actor.model
    model.zero_grad(set_to_none=True)
    policy_loss = PolicyLoss(clip_eps_low=CLIP_EPS, clip_eps_high=CLIP_EPS)
    batches = [make_experience_batch([items.items[i] for i in g]) for g in groups]
    gas = len(batches)
    if dynamic is None:
        norm = _optimizer_step_loss_norm([b.action_mask for b in batches], None, 1, gas)
    total, log_probs, token_loss = 0.0, {}, {}
    computed = real = 0
    for step, (g, exp) in enumerate(zip(groups, batches)):
        if dynamic is None:
            info, scale = norm, 1.0 / gas
        else:
            info = {"dp_size": 1, "batch_num_tokens": torch.tensor(dynamic.dynamic_batch_num_tokens[step]),
                    "global_batch_size": torch.tensor(dynamic.dynamic_global_batch_size[step])}
            scale = 1.0
        computed += int(exp.sequences.numel()) if not getattr(actor, "packing_samples", False) \
            else int(exp.attention_mask.sum())
        real += int(exp.attention_mask.sum())
        lp, output = actor(exp.sequences, exp.action_mask, attention_mask=exp.attention_mask, return_output=True,
                           return_entropy=entropy_coef is not None)
        loss, *_ = policy_loss(lp, exp.action_log_probs, exp.advantages, action_mask=exp.action_mask, **info)
        if entropy_coef is not None:
            ent = aggregate_loss(output.entropy[:, -exp.action_mask.shape[1]:], exp.action_mask, **info)
            loss = loss - entropy_coef * ent
        (loss * scale).backward()
        total += float(loss.detach()) * scale
        if per_sample:
            with torch.no_grad():
                ratio = (lp - exp.action_log_probs).clamp(-20, 20).exp()
                adv = exp.advantages
                tok = -torch.min(ratio * adv, ratio.clamp(1 - CLIP_EPS, 1 + CLIP_EPS) * adv) * exp.action_mask
                tok = tok.sum(-1) / info["batch_num_tokens"] * info["dp_size"] * scale
                for r, i in enumerate(g):
                    row = items.rows[i]
                    m = exp.action_mask[r].bool()
                    log_probs[row] = lp[r][m].detach().clone()
                    token_loss[row] = float(tok[r])
        del lp, output, loss
    grads = {n: p.grad.detach().clone() for n, p in model.named_parameters() if p.grad is not None} \
        if keep_grads else {}
    return StepResult(total, log_probs, token_loss, grads, computed, real, len(batches))


def standalone_log_probs(actor, items: Items) -> Dict[int, torch.Tensor]:
    """Each item's response log-probs from a forward over that sample alone (no padding, no packing)."""
    out = {}
    with torch.no_grad():
        for i, item in enumerate(items.items):
            mask = item.action_mask.unsqueeze(0)
            lp = actor(item.sequences.unsqueeze(0), mask, attention_mask=item.attention_mask.unsqueeze(0))
            out[items.rows[i]] = lp[0][item.action_mask.bool()]
    return out
