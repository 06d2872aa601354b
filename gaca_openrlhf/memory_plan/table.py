"""The memory plan as text: a line describing each plan, one table of every phase of the plans, the legend, vLLM's
KV cache, the token budgets and, for a plan that does not fit, the suggestions (:func:`render`)."""
from __future__ import annotations

from typing import List, Optional, Sequence, Tuple

from gaca_openrlhf.memory_plan.budget import recommended_token_budget, suggest
from gaca_openrlhf.memory_plan.formulas import COMPONENTS, Plan, estimate, fits, rollout_phase
from gaca_openrlhf.memory_plan.recipes import TOKEN_BUDGET_CEILING, TOKEN_BUDGET_STEP

HEAD = ("recipe", "phase", "states", "zero3", "acts", "layer", "logits", "vllm", "ctx", "total", "of GPU", "fits")


def table_rows(plan: Plan) -> List[List[str]]:
    rows = []
    for p in estimate(plan):
        c = p.components
        rows.append([plan.label or plan.spec.name, p.name] + [f"{c[k]:.1f}" for k in COMPONENTS]
                    + [f"{p.total:.1f}", f"{p.fraction:.0%}", "yes" if p.fits else "NO"])
    return rows


def format_table(rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(str(r[i])) for r in [HEAD, *rows]) for i in range(len(HEAD))]
    line = lambda r: "| " + " | ".join(str(v).ljust(w) if i < 2 else str(v).rjust(w)  # noqa: E731
                                        for i, (v, w) in enumerate(zip(r, widths))) + " |"
    sep = "|" + "|".join("-" * (w + 2) if i < 2 else "-" * (w + 1) + ":" for i, w in enumerate(widths)) + "|"
    return "\n".join([line(HEAD), sep] + [line(r) for r in rows])


def describe(plan: Plan) -> str:
    s = plan.spec
    micro = (f"packed micro batches of <= {plan.token_budget} tokens (token budget)" if plan.token_budget else
             f"micro batch {plan.micro_batch} (log-prob) / {plan.train_micro_batch} (training)")
    return (f"{plan.label or s.name}: {s.name} ({s.params / 1e9:.2f}B params), {plan.gpus} GPUs x "
            f"{plan.gpu_mem_gb:g} GB, vLLM TP {plan.tp} mem {plan.vllm_share:g}, ZeRO-{plan.zero}, seq "
            f"{plan.prompt_len}+{plan.response_len}, {micro}, logits chunk {plan.logits_chunk or 'none'}")


LEGEND = ("GB = GiB per GPU; total = states + zero3 + acts + max(layer, logits) + vllm + ctx; fits = total <= 90 % "
          "of GPU memory (python -m gaca_openrlhf.memory_plan --help; formulas in the module docstring)")


def render(plans: Sequence[Plan], mini_batch_steps: Sequence[Optional[int]]) -> Tuple[str, bool]:
    lines = [describe(p) for p in plans]
    rows = [r for p in plans for r in table_rows(p)]
    lines += ["", format_table(rows), "", LEGEND]
    lines += [f"{p.label or p.spec.name}: {rollout_phase(p).note}" for p in plans]
    for p, mbs in zip(plans, mini_batch_steps):
        if p.token_budget and mbs:
            best = recommended_token_budget(p, mbs)
            lines.append(f"{p.label or p.spec.name}: token budget {p.token_budget}; the largest that fits (multiples "
                         f"of {TOKEN_BUDGET_STEP}, <= {TOKEN_BUDGET_CEILING} and one GPU's share of a mini batch, "
                         f"logits chunk {p.logits_chunk or 'none'}): {best or 'none'}")
    ok = True
    for p, mbs in zip(plans, mini_batch_steps):
        if not fits(p):
            ok = False
            bad = ", ".join(ph.name for ph in estimate(p) if not ph.fits)
            lines.append(f"DOES NOT FIT: {p.label or p.spec.name} ({bad}). Suggestion:")
            lines += [f"  - {s}" for s in suggest(p, mbs)]
    if ok:
        lines.append("all fit with a 10 % margin")
    return "\n".join(lines), ok
