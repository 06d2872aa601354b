"""``python -m gaca_openrlhf.memory_plan``: the command line (its arguments, ``--recipes``, ``--vllm-share``, one
plan); what it computes and prints: :mod:`gaca_openrlhf.memory_plan.formulas`' docstring."""
from __future__ import annotations

import argparse
import math
import sys
from typing import Optional, Sequence

from gaca_openrlhf.memory_plan.budget import default_recipe_plans, recipe_token_budget, recommended_token_budget
from gaca_openrlhf.memory_plan.formulas import Plan, vllm_share
from gaca_openrlhf.memory_plan.recipes import (DEFAULT_MICRO_BATCH, ENV_DEFAULTS, RECIPE_ENVS, RECIPE_LOGITS_CHUNK,
                                               RECIPE_ROLLOUT_SEQS, RECIPE_TOKEN_BUDGET, RECIPES,
                                               TOKEN_BUDGET_CEILING, TOKEN_BUDGET_STEP, train_micro)
from gaca_openrlhf.memory_plan.table import render
from gaca_openrlhf.model_spec import load_spec, resolve_spec


def _int_at_least(low: int, what: str):
    """An argparse type: an integer >= ``low``."""
    def parse(s: str) -> int:
        try:
            v = int(s)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not an integer: {s!r}")
        if v < low:
            raise argparse.ArgumentTypeError(f"must be {what}, got {v}")
        return v
    return parse


_pos_int = _int_at_least(1, "a positive integer")
_nonneg_int = _int_at_least(0, ">= 0")


def _pos_float(s: str) -> float:
    try:
        v = float(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {s!r}")
    if not v > 0 or math.isinf(v):
        raise argparse.ArgumentTypeError(f"must be a positive number, got {s}")
    return v


def _fraction(s: str) -> float:
    v = _pos_float(s)
    if v >= 1:
        raise argparse.ArgumentTypeError(f"must be in (0, 1), got {s}")
    return v


def _per_env(key: str) -> str:
    """A recipe default of each environment, for the help texts: ``256 ALFWorld, 64 WebShop``."""
    return ", ".join(f"{ENV_DEFAULTS[name][key]} {s.title}" for name, s in RECIPE_ENVS.items())


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="python -m gaca_openrlhf.memory_plan",
        description="Per-GPU memory estimate of each phase (rollout, experience, training) of a GPU recipe "
                    "against the GPU's memory. Formulas and assumptions: the module's docstring.")
    ap.add_argument("--recipes", action="store_true",
                    help="the four recipes of examples/gpu at their defaults (only --gpu-mem-gb, --token-budget and "
                         "--logits-chunk apply, to all four); exit 1 if one does not fit with a 10 %% margin")
    ap.add_argument("--model", help="1.5b | 7b | a config.json path | a model folder holding config.json")
    ap.add_argument("--env", choices=sorted(ENV_DEFAULTS), help="sets the prompt length and mini-batch defaults")
    ap.add_argument("--gpus", type=_pos_int, default=None, help="GPUs = DeepSpeed ranks (default 8)")
    ap.add_argument("--tp", type=_pos_int, default=None, help="vLLM tensor parallel size (default 1)")
    ap.add_argument("--micro-batch", type=_pos_int, default=None,
                    help=f"MICRO_BATCH per GPU (default {DEFAULT_MICRO_BATCH}): log-prob passes; training uses "
                         "train_micro of it")
    ap.add_argument("--mini-batch-steps", type=_pos_int, default=None,
                    help=f"MINI_BATCH_STEPS (default {_per_env('mini_batch_steps')}): caps the training micro batch")
    ap.add_argument("--prompt-len", type=_pos_int, default=None, help=f"default {_per_env('prompt_len')}")
    ap.add_argument("--response-len", type=_pos_int, default=None, help="default 512")
    ap.add_argument("--vllm-mem", type=_fraction, default=None,
                    help="VLLM_MEM, share of GPU memory (default: from the plan, vllm_share)")
    ap.add_argument("--rollout-seqs", type=_pos_int, default=None,
                    help=f"sequences one vLLM engine holds at once: tasks x rollouts / engines (default "
                         f"{RECIPE_ROLLOUT_SEQS}, the recipes'); sizes the default VLLM_MEM")
    ap.add_argument("--vllm-share", action="store_true",
                    help="print only the VLLM_MEM the plan gives --model/--env (a name: its cached config.json, else "
                         "the built-in model of its size) and exit; its sizing on stderr")
    ap.add_argument("--gpu-mem-gb", type=_pos_float, default=None, help="GPU memory in GB (GiB; default 80)")
    ap.add_argument("--zero", type=int, choices=(0, 1, 2, 3), default=None, help="DeepSpeed ZeRO stage (default 3)")
    ap.add_argument("--logits-chunk", type=_nonneg_int, default=None,
                    help=f"LOGPROB_CHUNK (--run.logprob_chunk_size): C > 0: at most C tokens of the policy's [tokens, "
                         f"vocab] tensors live; 0: full logits (default {RECIPE_LOGITS_CHUNK}, the scripts')")
    ap.add_argument("--token-budget", type=_nonneg_int, default=None,
                    help="TOKEN_BUDGET (--train/--rollout.max_tokens_per_gpu): B > 0: packed micro batches of at most "
                         "B tokens; 0: fixed micro batches of MICRO_BATCH padded sequences (PACKING=0). Default: the "
                         "recipe's as the scripts pick it (--recipes; a single plan of 1.5b/7b): "
                         f"{TOKEN_BUDGET_CEILING} with a logits chunk, the full-logits budget with --logits-chunk 0; "
                         "else the plan's recommended budget")
    ap.add_argument("--no-entropy", action="store_true", help="--actor.entropy_coef unset (no entropy in training)")
    ap.add_argument("--experience-entropy", action="store_true",
                    help="the experience forward computes the entropy too (EMPG)")
    return ap


def print_vllm_share(ap: argparse.ArgumentParser, a, gpu_mem: float) -> int:
    """``--vllm-share``: the VLLM_MEM the plan gives (stdout: the number only, for the scripts)."""
    if a.model is None or a.env is None:
        ap.error("--vllm-share needs --model and --env")
    try:
        spec = resolve_spec(a.model)
        d = ENV_DEFAULTS[a.env]
        share, detail = vllm_share(spec, gpu_mem, a.tp or 1, a.rollout_seqs or RECIPE_ROLLOUT_SEQS,
                                   (a.prompt_len or d["prompt_len"]) + (a.response_len or d["response_len"]))
    except ValueError as e:
        print(f"error: memory plan: {e}", file=sys.stderr)
        return 2
    print(f"memory plan: VLLM_MEM {detail}", file=sys.stderr)
    print(f"{share:g}")
    return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = build_parser()
    a = ap.parse_args(argv)
    gpu_mem = 80.0 if a.gpu_mem_gb is None else a.gpu_mem_gb
    chunk = RECIPE_LOGITS_CHUNK if a.logits_chunk is None else a.logits_chunk
    if a.recipes:
        extra = [f"--{k.replace('_', '-')}" for k in ("model", "env", "gpus", "tp", "micro_batch", "mini_batch_steps",
                                                       "prompt_len", "response_len", "vllm_mem", "zero",
                                                       "rollout_seqs")
                 if getattr(a, k) is not None]
        extra += [o for o, on in (("--no-entropy", a.no_entropy), ("--experience-entropy", a.experience_entropy))
                  if on]
        if extra:
            ap.error(f"--recipes uses the recipes' defaults; only --gpu-mem-gb, --token-budget and --logits-chunk "
                     f"apply, not {' '.join(extra)}")
        plans = default_recipe_plans(gpu_mem, a.logits_chunk, a.token_budget)
        text, ok = render(plans, [ENV_DEFAULTS[e]["mini_batch_steps"] for _, e, _, _ in RECIPES])
        print(text)
        return 0 if ok else 1
    if a.vllm_share:
        return print_vllm_share(ap, a, gpu_mem)
    if a.model is None or a.env is None:
        ap.error("give --model and --env (or --recipes)")
    try:
        spec = load_spec(a.model)
    except ValueError as e:
        ap.error(str(e))
    d = ENV_DEFAULTS[a.env]
    gpus = a.gpus or 8
    tp = a.tp or 1
    if gpus % tp:
        ap.error(f"--tp {tp} does not divide --gpus {gpus}")
    micro = a.micro_batch or DEFAULT_MICRO_BATCH
    mbs = a.mini_batch_steps or d["mini_batch_steps"]
    budget = a.token_budget
    if budget is None:
        key = (a.model.strip().lower(), a.env)
        budget = recipe_token_budget(*key, chunk) if key in RECIPE_TOKEN_BUDGET else -1
    try:
        if budget < 0:  # another model: the plan's recommended budget (fixed micro batches when none fits)
            probe = Plan(spec, gpus=gpus, tp=tp, prompt_len=a.prompt_len or d["prompt_len"],
                         response_len=a.response_len or d["response_len"], vllm_mem=a.vllm_mem,
                         rollout_seqs=a.rollout_seqs or RECIPE_ROLLOUT_SEQS, gpu_mem_gb=gpu_mem, zero=3 if a.zero is None else a.zero, logits_chunk=chunk,
                         token_budget=TOKEN_BUDGET_STEP, entropy=not a.no_entropy,
                         experience_entropy=a.experience_entropy)
            budget = recommended_token_budget(probe, mbs) or 0
        plan = Plan(spec, gpus=gpus, tp=tp, micro_batch=micro, train_micro_batch=train_micro(micro, mbs, gpus),
                    prompt_len=a.prompt_len or d["prompt_len"], response_len=a.response_len or d["response_len"],
                    vllm_mem=a.vllm_mem, rollout_seqs=a.rollout_seqs or RECIPE_ROLLOUT_SEQS, gpu_mem_gb=gpu_mem,
                    zero=3 if a.zero is None else a.zero, logits_chunk=chunk, token_budget=budget,
                    entropy=not a.no_entropy,
                    experience_entropy=a.experience_entropy, label=f"{a.model} {a.env}")
    except ValueError as e:
        ap.error(str(e))
    text, ok = render([plan], [mbs])
    print(text)
    return 0 if ok else 1
