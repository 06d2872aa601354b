"""Per-GPU memory plan of a GPU recipe (examples/gpu): will it fit before any GPU hour is spent?
``python -m gaca_openrlhf.memory_plan --help`` (:mod:`.cli`).

- :mod:`.recipes`: what the recipes run: each environment's defaults, the four recipes, their logits chunk and token
  budgets, _common.sh's ``train_micro``;
- :mod:`.formulas`: :class:`Plan` and :class:`Phase`, the byte formulas of each phase, :func:`estimate` and
  :func:`fits`; its docstring documents every formula and assumption;
- :mod:`.budget`: the recipes' plans, the token-budget search and the suggestions for a plan that does not fit;
- :mod:`.table`: the plans as a table, with their notes and suggestions;
- :mod:`.cli`: the command line (``__main__`` runs it).
"""
from gaca_openrlhf.memory_plan.budget import (default_recipe_plans, largest_token_budget, recipe_plan,
                                              recipe_token_budget, recommended_token_budget, suggest)
from gaca_openrlhf.memory_plan.cli import build_parser, main, print_vllm_share
from gaca_openrlhf.memory_plan.formulas import (
    COMPONENTS, CTX_GB_PER_PROCESS, GIB, HOST_OFFLOAD_BYTES_PER_PARAM, KV_SLACK, MARGIN, PROCESSES_PER_GPU,
    VLLM_ASLEEP_GB, VLLM_NON_KV_GB, VLLM_SHARE_MIN, VLLM_SHARE_STEP, Phase, Plan, bf16_shard_bytes, checkpoint_bytes,
    ctx_bytes, estimate, experience_phase, fits, gathered_module_bytes, host_bytes_per_node, kv_bytes_per_token,
    layer_forward_bytes, layer_recompute_bytes, logits_bytes, logits_coef, rollout_phase, train_state_bytes,
    training_phase, vllm_share, vllm_weight_bytes)
from gaca_openrlhf.memory_plan.recipes import (
    DEFAULT_MICRO_BATCH, ENV_DEFAULTS, RECIPE_ENVS, RECIPE_LOGITS_CHUNK, RECIPE_ROLLOUT_SEQS, RECIPE_TOKEN_BUDGET,
    RECIPE_TOKEN_BUDGET_FULL_LOGITS, RECIPES, TOKEN_BUDGET_BY_MODEL, TOKEN_BUDGET_CEILING,
    TOKEN_BUDGET_FULL_LOGITS_BY_MODEL, TOKEN_BUDGET_STEP, train_micro)
from gaca_openrlhf.memory_plan.table import HEAD, LEGEND, describe, format_table, render, table_rows
from gaca_openrlhf.model_spec import (  # re-exported: the plan's callers name them here
    ATTN_BIAS_MODEL_TYPES, BUILTIN, ModelSpec, load_spec, resolve_spec, spec_from_config)

__all__ = [
    # recipes
    "DEFAULT_MICRO_BATCH", "ENV_DEFAULTS", "RECIPE_ENVS", "RECIPE_LOGITS_CHUNK", "RECIPE_ROLLOUT_SEQS",
    "RECIPE_TOKEN_BUDGET", "RECIPE_TOKEN_BUDGET_FULL_LOGITS", "RECIPES", "TOKEN_BUDGET_BY_MODEL",
    "TOKEN_BUDGET_CEILING", "TOKEN_BUDGET_FULL_LOGITS_BY_MODEL", "TOKEN_BUDGET_STEP", "train_micro",
    # formulas
    "COMPONENTS", "CTX_GB_PER_PROCESS", "GIB", "HOST_OFFLOAD_BYTES_PER_PARAM", "KV_SLACK", "MARGIN",
    "PROCESSES_PER_GPU", "VLLM_ASLEEP_GB", "VLLM_NON_KV_GB", "VLLM_SHARE_MIN", "VLLM_SHARE_STEP", "Phase", "Plan",
    "bf16_shard_bytes", "checkpoint_bytes", "ctx_bytes", "estimate", "experience_phase", "fits",
    "gathered_module_bytes", "host_bytes_per_node", "kv_bytes_per_token", "layer_forward_bytes",
    "layer_recompute_bytes", "logits_bytes", "logits_coef", "rollout_phase", "train_state_bytes", "training_phase",
    "vllm_share", "vllm_weight_bytes",
    # budget
    "default_recipe_plans", "largest_token_budget", "recipe_plan", "recipe_token_budget", "recommended_token_budget",
    "suggest",
    # table
    "HEAD", "LEGEND", "describe", "format_table", "render", "table_rows",
    # cli
    "build_parser", "main", "print_vllm_share",
    # model shapes (gaca_openrlhf.model_spec)
    "ATTN_BIAS_MODEL_TYPES", "BUILTIN", "ModelSpec", "load_spec", "resolve_spec", "spec_from_config",
]
