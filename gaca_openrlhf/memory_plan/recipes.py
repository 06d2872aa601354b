"""What the GPU recipes (examples/gpu) run, as the memory plan models them: each environment's defaults, the four
recipes, their logits chunk and token budgets, and _common.sh's ``train_micro``."""
from __future__ import annotations

from typing import Dict, List, Tuple

from agents.registry import specs
from gaca_openrlhf.model_spec import BUILTIN

RECIPE_ROLLOUT_SEQS = 16       # sequences per engine at once in the recipes: 16 tasks x 8 rollouts / 8 engines


# examples/gpu: per-environment defaults (_train_<env>.sh: each environment's GpuRecipe, agents/<env>/spec.py) and
# the recipes (_common.sh; 7B: README "7B": one engine per GPU, TP 1, the configuration the rehearsal runs; 7B WebShop:
# MICRO_BATCH 2 by default, _train_webshop.sh)
#: MICRO_BATCH of the recipes (_common.sh), unless an environment's recipe lowers it for a model
DEFAULT_MICRO_BATCH = 4
#: env name -> its spec, for every environment with a GPU recipe (:class:`agents.base.GpuRecipe`), in registry order
RECIPE_ENVS = {s.name: s for s in specs(with_gpu_recipe=True)}
#: env name -> its recipe's prompt_len, response_len and mini_batch_steps
ENV_DEFAULTS = {name: dict(prompt_len=s.gpu_recipe.prompt_len, response_len=s.gpu_recipe.response_len,
                           mini_batch_steps=s.gpu_recipe.mini_batch_steps) for name, s in RECIPE_ENVS.items()}
#: (model, env, vLLM TP, MICRO_BATCH) of the four recipes at their defaults
RECIPES: List[Tuple[str, str, int, int]] = [
    (m, e, 1, s.gpu_recipe.micro_batch_of(m, DEFAULT_MICRO_BATCH)) for m in BUILTIN for e, s in RECIPE_ENVS.items()]
#: LOGPROB_CHUNK of the recipes (``--run.logprob_chunk_size``; _common.sh ``set_packing_args``): chunked log-probs by
#: default, 4096 tokens per chunk (under ZeRO-3 every rank makes the same number of chunks, trainer/chunked_actor.py
#: ``agreed_num_chunks``); ``LOGPROB_CHUNK=0`` turns them off
RECIPE_LOGITS_CHUNK = 4096
#: TOKEN_BUDGET per model size (``--train.max_tokens_per_gpu`` = ``--rollout.max_tokens_per_gpu``; _common.sh
#: ``set_packing_args``, which picks it by the model's name, the same for every environment) with
#: :data:`RECIPE_LOGITS_CHUNK`: chosen by :func:`recommended_token_budget`, the ceiling for all four recipes
#: (tests/gaca_openrlhf/memory_plan/test_memory_plan.py checks that it still is)
TOKEN_BUDGET_BY_MODEL: Dict[str, int] = {"1.5b": 32768, "7b": 32768}
#: the same with full logits (``LOGPROB_CHUNK=0``, no TOKEN_BUDGET given: the scripts fall back to it):
#: :func:`recommended_token_budget` with logits chunk 0, where the training pass's [tokens, vocab] tensors bind
TOKEN_BUDGET_FULL_LOGITS_BY_MODEL: Dict[str, int] = {"1.5b": 20480, "7b": 16384}
#: (model, env) -> TOKEN_BUDGET of each recipe, chunked and full logits
RECIPE_TOKEN_BUDGET: Dict[Tuple[str, str], int] = {(m, e): TOKEN_BUDGET_BY_MODEL[m] for m, e, _, _ in RECIPES}
RECIPE_TOKEN_BUDGET_FULL_LOGITS: Dict[Tuple[str, str], int] = {
    (m, e): TOKEN_BUDGET_FULL_LOGITS_BY_MODEL[m] for m, e, _, _ in RECIPES}
#: the largest token budget :func:`recommended_token_budget` picks (:mod:`.formulas`' docstring)
TOKEN_BUDGET_CEILING = 32768
TOKEN_BUDGET_STEP = 4096


def train_micro(micro: int, mini_batch_steps: int, gpus: int) -> int:
    """examples/gpu/_common.sh ``train_micro``: MICRO_BATCH lowered until mini_batch_steps % (m x gpus) == 0."""
    if mini_batch_steps % gpus:
        raise ValueError(f"mini-batch steps {mini_batch_steps} must be a multiple of gpus {gpus}")
    m = micro
    while m > 1 and mini_batch_steps % (m * gpus):
        m -= 1
    return m
