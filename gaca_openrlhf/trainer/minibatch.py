"""How one iteration's step samples become optimizer updates (verl-agent's mini-batch semantics).

verl-agent counts its PPO mini-batch in *step samples* (global, across ranks): an iteration with N step samples makes
``ceil(N / mini_batch_steps)`` optimizer updates, the last one on a partial mini-batch. OpenRLHF's DeepSpeed actors
need every update to have the same number of samples, divisible by ``train.micro_batch_size x DP ranks``, and every
rank the same number of samples. :func:`plan_minibatches` reconciles the two:

- ``updates = ceil(N / mini_batch_steps)`` (or a fixed count with the deprecated ``--run.updates_per_iteration``);
- the N samples are padded with copies of random samples to ``padded``, the smallest multiple of
  ``updates x micro x DP`` that is >= N. The copies are *masked out* of the loss (zero action mask, see
  :mod:`.experience`): they add no gradient and are not counted in the loss normalization;
- each update takes ``padded / updates`` samples (after OpenRLHF's per-rank shuffle, the copies fall into random
  updates), i.e. about ``N / updates <= mini_batch_steps`` real samples, where verl-agent's are
  ``mini_batch_steps`` each but a smaller last one. With ``mini_batch_steps`` a multiple of ``micro x DP`` (checked
  by the CLI) there are fewer copies than samples per update, so no update is made of copies only.

The experience (log-prob) pass splits each rank's ``padded / DP`` samples into micro-batches of at most
``rollout.micro_batch_size`` (:meth:`.experience.StepExperienceMaker.split_rollout_samples`), so every rank gets the
same number of forward calls (ZeRO-3 needs that) and no rank gets none.
"""
from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class MiniBatchPlan:
    """One iteration's split: ``updates`` optimizer updates of ``per_update`` samples (``padded`` in all)."""

    num_samples: int  # real step samples
    updates: int
    padded: int  # real + masked copies
    per_update: int  # samples per optimizer update, global
    grad_accum: int  # micro-batches per rank per update

    @property
    def num_padding(self) -> int:
        return self.padded - self.num_samples


def num_updates(num_samples: int, mini_batch_steps: int = 0, updates_per_iteration: int = 0) -> int:
    """``ceil(num_samples / mini_batch_steps)``; else the fixed ``updates_per_iteration`` (deprecated); >= 1."""
    if mini_batch_steps > 0:
        return max(1, math.ceil(num_samples / mini_batch_steps))
    if updates_per_iteration > 0:
        return updates_per_iteration
    raise ValueError("need mini_batch_steps > 0 or updates_per_iteration > 0")


def plan_minibatches(num_samples: int, *, micro: int, dp: int, mini_batch_steps: int = 0,
                     updates_per_iteration: int = 0) -> MiniBatchPlan:
    """The padded size and update count of an iteration with ``num_samples`` step samples (module docstring)."""
    if micro < 1 or dp < 1:
        raise ValueError(f"micro batch ({micro}) and DP ranks ({dp}) must be >= 1")
    updates = num_updates(num_samples, mini_batch_steps, updates_per_iteration)
    multiple = updates * micro * dp
    padded = max(multiple, math.ceil(num_samples / multiple) * multiple)
    per_update = padded // updates
    return MiniBatchPlan(num_samples=num_samples, updates=updates, padded=padded, per_update=per_update,
                         grad_accum=per_update // (micro * dp))


def balanced_sizes(total: int, max_size: int) -> list:
    """Split ``total`` into ``ceil(total / max_size)`` parts of sizes differing by at most one."""
    if total <= 0:
        return []
    parts = math.ceil(total / max_size)
    base, extra = divmod(total, parts)
    return [base + 1] * extra + [base] * (parts - extra)


# --------------------------------------------------------------------------------------------------------------
# Token-budget micro-batches (--train.dynamic_batch_enable)
# --------------------------------------------------------------------------------------------------------------
def token_budget_partition(lengths, num_parts: int) -> list:
    """Split sample indices into ``num_parts`` non-empty micro-batches of balanced token counts.

    Longest-processing-time greedy: samples by decreasing length (ties by index), each to the micro-batch with the
    fewest tokens so far (ties: the lower part). Deterministic; each index appears exactly once; every part is
    non-empty when ``num_parts <= len(lengths)``. Indices inside a part are sorted.
    """
    n = len(lengths)
    if not 1 <= num_parts <= max(n, 1):
        raise ValueError(f"cannot split {n} samples into {num_parts} non-empty micro-batches")
    parts = [[] for _ in range(num_parts)]
    loads = [0] * num_parts
    for i in sorted(range(n), key=lambda k: (-int(lengths[k]), k)):
        p = min(range(num_parts), key=lambda q: (loads[q], q))
        parts[p].append(i)
        loads[p] += int(lengths[i])
    return [sorted(p) for p in parts]


def min_token_budget_parts(lengths, budget: int) -> int:
    """The fewest micro-batches :func:`token_budget_partition` needs so that none holds more than ``budget`` tokens.

    A sample longer than the budget gets a micro-batch of its own (the budget is then exceeded by that sample
    alone). 0 for no samples.
    """
    n = len(lengths)
    if budget < 1:
        raise ValueError(f"token budget must be >= 1 (got {budget})")
    if n == 0:
        return 0
    k = max(1, math.ceil(sum(int(x) for x in lengths) / budget))
    while k < n:
        parts = token_budget_partition(lengths, k)
        if all(sum(int(lengths[i]) for i in p) <= budget or len(p) == 1 for p in parts):
            return k
        k += 1
    return n


def token_budget_micro_batches(lengths_per_rank, budget: int) -> list:
    """Token-budget micro-batches for each DP rank, the same number on every rank (ZeRO needs equal call counts).

    ``lengths_per_rank[r]`` are the token lengths of rank r's samples; the count is the largest of the ranks' minima
    (:func:`min_token_budget_parts`), capped at the smallest rank's sample count. Returns ``[rank][micro] -> local
    indices``.
    """
    if not lengths_per_rank:
        return []
    k = max(min_token_budget_parts(lengths, budget) for lengths in lengths_per_rank)
    k = max(1, min(k, min(len(lengths) for lengths in lengths_per_rank)))
    return [token_budget_partition(lengths, k) for lengths in lengths_per_rank]
