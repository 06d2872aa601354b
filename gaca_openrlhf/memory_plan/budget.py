"""The recipes' plans and the token-budget search: :func:`recipe_plan` and :func:`default_recipe_plans` (the four
recipes as the scripts run them), :func:`largest_token_budget` and :func:`recommended_token_budget` (the largest
budget at which every phase fits) and :func:`suggest` (the knobs that bring a plan that does not fit under the GPU's
memory)."""
from __future__ import annotations

import math
from dataclasses import replace
from typing import List, Optional

from gaca_openrlhf.memory_plan.formulas import Plan, estimate, fits, rollout_phase
from gaca_openrlhf.memory_plan.recipes import (ENV_DEFAULTS, RECIPE_LOGITS_CHUNK, RECIPE_TOKEN_BUDGET,
                                               RECIPE_TOKEN_BUDGET_FULL_LOGITS, RECIPES, TOKEN_BUDGET_CEILING,
                                               TOKEN_BUDGET_STEP, train_micro)
from gaca_openrlhf.model_spec import load_spec


def recipe_plan(model: str, env: str, tp: int, gpu_mem_gb: float = 80.0, logits_chunk: int = 0,
                micro_batch: int = 4, gpus: int = 8, token_budget: int = 0) -> Plan:
    """A recipe's plan; the defaults (no token budget, full logits) are the scripts' ``PACKING=0`` path:
    :func:`default_recipe_plans` has their defaults."""
    d = ENV_DEFAULTS[env]
    return Plan(load_spec(model), gpus=gpus, tp=tp, micro_batch=micro_batch,
                train_micro_batch=train_micro(micro_batch, d["mini_batch_steps"], gpus),
                prompt_len=d["prompt_len"], response_len=d["response_len"], gpu_mem_gb=gpu_mem_gb,
                logits_chunk=logits_chunk, token_budget=token_budget, label=f"{model} {env}")


def recipe_token_budget(model: str, env: str, logits_chunk: int) -> int:
    """The scripts' default TOKEN_BUDGET of a recipe: :data:`RECIPE_TOKEN_BUDGET` with chunked log-probs (any chunk
    > 0), :data:`RECIPE_TOKEN_BUDGET_FULL_LOGITS` with ``LOGPROB_CHUNK=0`` (_common.sh ``set_packing_args``)."""
    return (RECIPE_TOKEN_BUDGET if logits_chunk > 0 else RECIPE_TOKEN_BUDGET_FULL_LOGITS)[(model, env)]


def default_recipe_plans(gpu_mem_gb: float = 80.0, logits_chunk: Optional[int] = None,
                         token_budget: Optional[int] = None) -> List[Plan]:
    """The four recipes as the scripts run them by default (logits chunk :data:`RECIPE_LOGITS_CHUNK`, token budget
    :data:`RECIPE_TOKEN_BUDGET`); ``logits_chunk`` / ``token_budget`` override them for all four (0: off); with
    ``logits_chunk=0`` and no ``token_budget`` the budget is the scripts' full-logits one
    (:func:`recipe_token_budget`)."""
    chunk = RECIPE_LOGITS_CHUNK if logits_chunk is None else logits_chunk
    return [recipe_plan(m, e, tp, gpu_mem_gb=gpu_mem_gb, logits_chunk=chunk, micro_batch=mb,
                        token_budget=recipe_token_budget(m, e, chunk) if token_budget is None else token_budget)
            for m, e, tp, mb in RECIPES]


def largest_token_budget(plan: Plan, step: int = TOKEN_BUDGET_STEP, ceiling: Optional[int] = None) -> Optional[int]:
    """The largest multiple of ``step`` tokens, at most ``ceiling`` (default :data:`TOKEN_BUDGET_CEILING`), at which
    every phase of ``plan`` fits with that token budget; None when even ``step`` does not."""
    top = (ceiling if ceiling is not None else TOKEN_BUDGET_CEILING) // step * step
    for budget in range(top, 0, -step):
        if fits(replace(plan, token_budget=budget)):
            return budget
    return None


def recommended_token_budget(plan: Plan, mini_batch_steps: int) -> Optional[int]:
    """The token budget the recipes use (:mod:`.formulas`' docstring): :func:`largest_token_budget` up to
    min(:data:`TOKEN_BUDGET_CEILING`, one GPU's share of a mini batch at full length rounded up to the step)."""
    share = mini_batch_steps // plan.gpus * plan.seq
    share = -(-share // TOKEN_BUDGET_STEP) * TOKEN_BUDGET_STEP
    return largest_token_budget(plan, TOKEN_BUDGET_STEP, min(TOKEN_BUDGET_CEILING, share))


def suggest(plan: Plan, mini_batch_steps: Optional[int] = None) -> List[str]:
    """For a plan that does not fit: with a token budget, the largest budget (a multiple of 1024) that fits; else
    the largest MICRO_BATCH (training micro batch via train_micro) that fits; and the largest power-of-two logits
    chunk that fits at the plan's micro batches (below the plan's chunk, if any)."""
    if fits(plan):
        return []
    out = []
    # the rollout does not depend on micro batches or chunks
    roll = rollout_phase(plan)
    if not roll.fits:
        return [f"the rollout alone does not fit ({roll.total:.1f} GB): lower --vllm-mem (VLLM_MEM) or raise --tp"]
    failing = [ph.name for ph in estimate(plan) if not ph.fits]

    def totals(cand: Plan) -> str:  # the phases that did not fit, at the suggested setting
        return ", ".join(f"{ph.name} {ph.total:.1f} GB ({ph.fraction:.0%})" for ph in estimate(cand)
                         if ph.name in failing)

    if plan.token_budget:
        budget = largest_token_budget(plan, 1024, plan.token_budget - 1)
        out.append(f"--token-budget {budget} (TOKEN_BUDGET) fits: {totals(replace(plan, token_budget=budget))}"
                   if budget else "no token budget fits (even 1024)")
    best = None
    for m in range(plan.micro_batch - 1, 0, -1) if not plan.token_budget else ():
        tm = train_micro(m, mini_batch_steps, plan.gpus) if mini_batch_steps else min(m, plan.train_micro_batch)
        cand = replace(plan, micro_batch=m, train_micro_batch=tm)
        if fits(cand):
            best = cand
            break
    if best is not None:
        out.append(f"MICRO_BATCH={best.micro_batch} (training micro batch {best.train_micro_batch}) fits: "
                   f"{totals(best)}")
    elif not plan.token_budget:
        out.append("no micro batch fits (even 1)")
    longest = max(plan.experience_tokens, plan.train_tokens)
    at = f"token budget {plan.token_budget}" if plan.token_budget else f"MICRO_BATCH={plan.micro_batch}"
    chunk = 1 << int(math.log2(longest))
    if plan.logits_chunk:
        chunk = min(chunk, plan.logits_chunk // 2)
    while chunk >= 1:
        cand = replace(plan, logits_chunk=chunk)
        if chunk < longest and fits(cand):
            out.append(f"--logits-chunk {chunk} (LOGPROB_CHUNK, --run.logprob_chunk_size) at {at} fits: "
                       f"{totals(cand)}")
            break
        chunk //= 2
    else:
        out.append(f"no logits chunk fits at this {'token budget' if plan.token_budget else 'micro batch'}")
    return out
