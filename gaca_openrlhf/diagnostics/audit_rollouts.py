"""The credit audit of a frozen policy on a panel: play it, rebuild the step batch, audit every estimator.

:func:`run_audit` plays ``episodes_per_task`` episodes of every panel task with the evaluation loop
(:func:`gaca_openrlhf.eval.runner.run_episodes`: the training rollout's prompts, parsing and environment adapters,
fixed seeds), with the environment's oracle switched on (``oracle=True`` in its config) and per-step records kept;
then turns the episodes into the trainer's step samples (:func:`rollout_batch`: group = task, trajectory =
episode, anchor = the hashed anchor text, reward and validity as recorded, NLL from the sampled tokens' log-probs)
and runs :func:`.credit_audit.credit_audit` on them. :func:`markdown` and :func:`plot` render the result.

Oracle progress of a step (:func:`agents.base.oracle_progress`) from the ``oracle_*`` info before and after it: ``oracle_distance``
(actions still needed; ALFWorld, toy) gives before - after, ``oracle_value`` (best reward still reachable;
WebShop) gives after - before; a step without both sides has no progress (NaN).
"""
from __future__ import annotations

import dataclasses
import math
import time
from typing import Optional, Sequence

import numpy as np

from agents.base import oracle_progress
from gaca_openrlhf.advantages import AdvantageConfig, StepBatch, hash_anchor
from gaca_openrlhf.eval.runner import RunConfig, derive_seed, run_episodes

from .credit_audit import credit_audit
from .disagreement import RecordingGenerator


def rollout_batch(episodes: Sequence[dict], nll_of=None, entropy_of=None
                  ) -> tuple[StepBatch, np.ndarray, np.ndarray, list]:
    """(StepBatch, progress, won, anchor texts) of episodes recorded with ``RunConfig.record_steps``; failed
    episodes are left out (as the trainer drops them). ``nll_of(episode, t)`` gives a step's mean response NLL
    (default 0: then GACA's criticality is 1 everywhere); ``entropy_of(episode, t)`` its mean policy entropy
    (EMPG's input; without it the batch has none and EMPG is skipped)."""
    cols = {k: [] for k in ("group", "traj", "t", "anchor", "reward", "valid", "nll", "entropy")}
    progress, won, texts = [], [], []
    for i, ep in enumerate(episodes):
        if ep.get("failed") or "step_records" not in ep:
            continue
        before = ep.get("first_oracle") or {}
        for rec in ep["step_records"]:
            cols["group"].append(int(ep["task_index"]))
            cols["traj"].append(i)
            cols["t"].append(int(rec["t"]))
            cols["anchor"].append(hash_anchor(rec["anchor"]))
            cols["reward"].append(float(rec["reward"]))
            cols["valid"].append(bool(rec["valid"]))
            cols["nll"].append(float(nll_of(ep, rec["t"])) if nll_of else 0.0)
            cols["entropy"].append(float(entropy_of(ep, rec["t"])) if entropy_of else 0.0)
            progress.append(oracle_progress(before, rec["oracle"]))
            won.append(bool(ep["won"]))
            texts.append(rec["anchor"])
            before = rec["oracle"]
    batch = StepBatch.from_lists(cols["group"], cols["traj"], cols["t"], cols["anchor"], cols["reward"],
                                 cols["valid"], nll=cols["nll"], entropy=cols["entropy"] if entropy_of else None)
    return batch, np.asarray(progress, dtype=np.float64), np.asarray(won, dtype=bool), texts


def run_audit(tasks: Sequence[str], cfg: RunConfig, generator, encode, *, adv_cfg: Optional[AdvantageConfig] = None,
              estimators: Optional[Sequence[str]] = None, n_boot: int = 2000, task_types: Optional[dict] = None,
              progress: bool = False, policy=None, temperature: float = 1.0, entropy_batch: int = 16) -> dict:
    """Play the panel with ``generator`` (results with an ``nll`` field: rollout log-probs) and audit every
    registered step estimator on the episodes. Returns the audit (see :func:`.credit_audit.credit_audit`) plus
    ``episodes`` (outcomes), ``steps_with_progress`` and ``timing``. ``policy``: the same checkpoint as a
    Hugging Face causal LM; with it every step's full-distribution entropy at ``temperature`` (the generator's) is computed
    (:mod:`.step_entropy`, one extra forward pass) and EMPG is audited too; without it EMPG is skipped (vLLM returns
    only the sampled tokens' log-probs)."""
    cfg = dataclasses.replace(cfg, record_steps=True, env_kwargs={**cfg.env_kwargs, "oracle": True})
    rec = RecordingGenerator(generator)
    episodes, timing = run_episodes(tasks, cfg, rec, encode, task_types=task_types, progress=progress, desc="audit")

    def nll_of(ep: dict, t: int) -> float:
        hit = rec.by_seed.get(derive_seed(ep["seed"], t))  # the loop seeds step t of an episode like this
        return float(getattr(hit[1], "nll", 0.0)) if hit else 0.0

    entropy_by_seed = None
    if policy is not None:
        from .step_entropy import response_entropy

        t0 = time.time()
        ent = response_entropy(policy, [(req.prompt_ids, out.token_ids) for req, out in rec.by_seed.values()],
                               temperature=temperature, batch_size=entropy_batch)
        entropy_by_seed = dict(zip(rec.by_seed, ent.tolist()))
        timing = {**timing, "entropy_s": time.time() - t0}

    def entropy_of(ep: dict, t: int) -> float:
        return entropy_by_seed.get(derive_seed(ep["seed"], t), 0.0)

    batch, prog, won, texts = rollout_batch(episodes, nll_of, entropy_of if entropy_by_seed is not None else None)
    if not np.isfinite(prog).any():
        raise ValueError("no step has oracle progress: does the environment provide an oracle for these tasks?")
    adv_cfg = adv_cfg or AdvantageConfig()
    result = credit_audit(batch, prog, won, adv_cfg, estimators=estimators,
                          anchor_text=texts if adv_cfg.similarity_grouping else None, n_boot=n_boot, seed=cfg.seed)
    result["episodes"] = [{k: e[k] for k in ("task", "task_type", "episode", "won", "steps", "failed")}
                          for e in episodes]
    result["steps_with_progress"] = int(np.isfinite(prog).sum())
    result["progress_counts"] = {"positive": int((prog > 0).sum()), "zero": int((prog == 0).sum()),
                                 "negative": int((prog < 0).sum())}
    result["timing"] = timing
    return result


def _f(x: Optional[float], digits: int = 3) -> str:
    return "n/a" if x is None or (isinstance(x, float) and not math.isfinite(x)) else f"{x:.{digits}f}"


def _iv(d: Optional[dict]) -> str:
    return "n/a" if not d else f"{_f(d['value'])} [{_f(d['lo'])}, {_f(d['hi'])}]"


def markdown(result: dict, title: str = "Credit audit") -> str:
    """A report section: per estimator sign agreement (95 % interval over task groups) and Spearman, on all steps
    with progress and on the hard subsets; the paired differences; GACA's gate weight."""
    head = f"{result['groups']} task groups, {result['steps']} steps"
    if "episodes" in result:
        eps = result["episodes"]
        head = f"{len(eps)} episodes ({sum(e['won'] for e in eps)} won) in " + head
    if "progress_counts" in result:
        pc = result["progress_counts"]
        head += f"; oracle progress positive {pc['positive']}, zero {pc['zero']}, negative {pc['negative']}"
    lines = [f"## {title}", "",
             f"{head}. Sign agreement: share of steps with non-zero progress whose advantage has its sign (95 % "
             f"bootstrap interval over task groups, {result['bootstrap']} resamples).", "",
             "| estimator | sign agree (n) | Spearman | good in failed | bad in won | repeated states |",
             "|---|---|---|---|---|---|"]
    for name, r in result["estimators"].items():
        cells = [f"{_iv(r['all']['sign_agree'])} ({r['all']['n']})", _f(r["all"]["spearman"])]
        for sub in ("good_in_failed", "bad_in_won", "repeated"):
            cells.append(f"{_iv(r[sub]['sign_agree'])} ({r[sub]['n']})")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    if result.get("skipped"):
        lines += ["", "Not run: " + "; ".join(f"{k} ({v})" for k, v in result["skipped"].items()) + "."]
    if result["paired"]:
        lines += ["", "Paired differences of sign agreement (row minus column estimator):", "",
                  "| a | b | a - b |", "|---|---|---|"]
        lines += [f"| {p['a']} | {p['b']} | {_iv(p['sign_agree_diff'])} |" for p in result["paired"]]
    if result["gate"]:
        lines += ["", "Gate weight on the step term where progress disagrees with the episode's outcome vs agrees:",
                  "", "| estimator | lambda, disagree (n) | lambda, agree (n) | difference |", "|---|---|---|---|"]
        for name, g in result["gate"].items():
            lines.append(f"| {name} | {_iv(g.get('lambda_disagree'))} ({g['n_disagree']}) | "
                         f"{_iv(g.get('lambda_agree'))} ({g['n_agree']}) | {_iv(g.get('difference'))} |")
    return "\n".join(lines) + "\n"


def plot(result: dict, path: str) -> None:
    """Sign agreement per estimator with its interval, on all steps and the hard subsets (one PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(result["estimators"])
    subsets = ("all", "good_in_failed", "bad_in_won", "repeated")
    fig, ax = plt.subplots(figsize=(max(6.0, 1.2 * len(names)), 3.5))
    width = 0.8 / len(subsets)
    for j, sub in enumerate(subsets):
        xs, ys, lo, hi = [], [], [], []
        for i, name in enumerate(names):
            d = result["estimators"][name][sub]["sign_agree"]
            if d is None:
                continue
            xs.append(i + (j - 1.5) * width)
            ys.append(d["value"])
            lo.append(d["value"] - d["lo"])
            hi.append(d["hi"] - d["value"])
        ax.bar(xs, ys, width, yerr=[lo, hi] if xs else None, capsize=2, label=sub.replace("_", " "))
    ax.set_xticks(range(len(names)), names, rotation=30, ha="right")
    ax.set_ylim(0, 1)
    ax.set_ylabel("sign agreement with oracle progress")
    ax.legend(fontsize=7, ncol=4, loc="upper center", bbox_to_anchor=(0.5, 1.18))
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
