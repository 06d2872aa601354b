"""The benchmark's step-sample (prompt, response) token lengths: recorded (the files of
:mod:`gaca_openrlhf.bench.packing_record`), drawn from a recording, or synthetic and shaped like an environment; and
the padding waste of cutting them into micro-batches (arithmetic, no model)."""
from __future__ import annotations

import math
import random
from typing import Dict, Optional, Sequence

#: mini-batch (step samples) of the synthetic lengths of an environment without a GPU recipe
DEFAULT_MINI_BATCH = 64
#: (low, high) synthetic prompt lengths of an environment without a GPU recipe
SYNTHETIC_PROMPT_LEN = (300, 4000)


def recorded_lengths(env: str, files: Sequence[str] = ()):
    """(prompt lengths, response lengths, file meta) of ``env``: from the first of ``files`` whose ``env`` field is
    ``env``, else from the recorded file committed with the benchmark
    (:func:`gaca_openrlhf.bench.packing_record.default_lengths_file`)."""
    from gaca_openrlhf.bench.packing_record import default_lengths_file, load_lengths

    for path in files:
        prompts, responses, meta = load_lengths(path)
        if meta.get("env") == env:
            return prompts, responses, dict(meta, path=path)
    path = default_lengths_file(env)
    prompts, responses, meta = load_lengths(path)
    return prompts, responses, dict(meta, path=path)


def draw(prompts: Sequence[int], responses: Sequence[int], n: int, seed: int = 0):
    """``n`` (prompt, response) pairs drawn from the recorded ones without replacement (with replacement when there
    are fewer than ``n``)."""
    rng = random.Random(seed)
    idx = rng.sample(range(len(prompts)), n) if n <= len(prompts) else [rng.randrange(len(prompts)) for _ in range(n)]
    return [prompts[i] for i in idx], [responses[i] for i in idx]


def gpu_recipe(env: str):
    """The :class:`agents.base.GpuRecipe` of a registered environment; None for an environment without one or an
    unknown name."""
    from agents.registry import spec

    try:
        return spec(env).gpu_recipe
    except KeyError:
        return None


def recipe_envs() -> list:
    """The specs of the environments with a GPU recipe (the benchmark's default ``--env``), in registry order."""
    from agents.registry import specs

    return specs(with_gpu_recipe=True)


def mini_batch(env: str) -> Optional[int]:
    """verl-agent's PPO mini-batch in step samples of ``env`` (its recipe's ``MINI_BATCH_STEPS``; None without one)."""
    recipe = gpu_recipe(env)
    return recipe.mini_batch_steps if recipe is not None else None


def length_distribution(env: str, n: int, seed: int = 0):
    """Synthetic step-sample (prompt, response) token lengths shaped like the environment's rollouts.

    Prompts uniform in the env's ``GpuRecipe.synthetic_prompt_len`` (without a recipe :data:`SYNTHETIC_PROMPT_LEN`;
    alfworld: 500-1300 tokens, a history of 2 steps; webshop: 300-4000, search result pages), responses 30-512 with
    most short (log-uniform).
    """
    rng = random.Random(seed)
    recipe = gpu_recipe(env)
    lo, hi = recipe.synthetic_prompt_len if recipe is not None else SYNTHETIC_PROMPT_LEN
    prompts = [rng.randint(lo, hi) for _ in range(n)]
    responses = [int(math.exp(rng.uniform(math.log(30), math.log(512)))) for _ in range(n)]
    return prompts, responses


def padding_waste(prompts, responses, micro: int, budget: int, seed: int = 0,
                  mini_batch: Optional[int] = None) -> Dict[str, float]:
    """Tokens computed per real token (no model): the samples shuffled (OpenRLHF's DataLoader), cut into
    mini-batches of ``mini_batch`` samples (default: one mini-batch of all), each into fixed micro-batches of
    ``micro`` samples padded to their longest, vs packed (real tokens only); and the micro-batch counts of the fixed
    and the token-budget plans (summed over the mini-batches)."""
    from gaca_openrlhf.trainer.minibatch import min_token_budget_parts

    lengths = [p + r for p, r in zip(prompts, responses)]
    order = list(range(len(lengths)))
    random.Random(seed).shuffle(order)
    mini_batch = mini_batch or len(order)
    minis = [order[s:s + mini_batch] for s in range(0, len(order), mini_batch)]
    groups = [m[s:s + micro] for m in minis for s in range(0, len(m), micro)]
    padded = sum(len(g) * max(lengths[i] for i in g) for g in groups)
    real = sum(lengths)
    return dict(padded=padded / real, packed=1.0, fixed_micro_batches=len(groups), mini_batches=len(minis),
                budget_micro_batches=sum(min_token_budget_parts([lengths[i] for i in m], budget) for m in minis),
                real_tokens=real, samples=len(lengths))
