"""Episodes -> one OpenRLHF ``Experience`` per environment step (docs/design.md §2.1 and §4).

:class:`StepSamplesGenerator` replaces OpenRLHF's ``SamplesGenerator`` batching: every step of every episode of the
iteration's tasks becomes a sample of *this* iteration (the base class slices its buffer to
``rollout.batch_size * n`` samples and would carry the rest over). The n rollouts of one task form its group.

Step metadata travels as numeric per-sample tensors in ``Experience.info`` (strings crash the training actors):
``gaca/group_id``, ``gaca/traj_id``, ``gaca/step_index``, ``gaca/anchor_id``, ``gaca/valid``, ``gaca/nll``
(mean rollout NLL of the response) and ``gaca/dup_of`` (-1, or the row this one duplicates: see
:func:`pad_to_multiple`). Failed episodes (environment faults) are logged and excluded; most episodes failing in the
first iteration (a broken environment setup), or in ``--env.max_failed_iters`` iterations in a row, stops training
with :class:`EnvFailureError`.
"""
from __future__ import annotations

import random
import time
from collections import defaultdict
from typing import Callable, List, Optional, Tuple

import ray
import torch

from openrlhf.trainer.ppo_utils.experience import Experience
from openrlhf.trainer.ppo_utils.samples_generator import SamplesGenerator, _collect_prompt_batch
from openrlhf.trainer.ray.vllm_engine import batch_vllm_engine_call
from openrlhf.utils.logging_utils import init_logger
from vllm import SamplingParams

from agents.registry import spec as env_spec
from gaca_openrlhf.rollout.config import VALIDATION_ROUND_KEY
from gaca_openrlhf.advantages.signals import group_has_contrast, mixed_group_share

from . import anchor_text

from .minibatch import MiniBatchPlan

logger = init_logger(__name__)

META_KEYS = ("gaca/group_id", "gaca/traj_id", "gaca/step_index", "gaca/anchor_id", "gaca/dup_of", "gaca/progress",
             "gaca/won")


class EnvFailureError(RuntimeError):
    """Raised when most episodes fail in the first iteration or in several consecutive iterations."""


def step_experience(step: dict, group_id: int, traj_id: int, episode: dict) -> Experience:
    """One step record of the agent executor as a single-sample Experience (OpenRLHF's conventions).

    ``action_mask``/``rollout_log_probs`` have length T-1 (shifted by one, as in
    ``SamplesGenerator._process_response_into_experience``), ones over the response tokens.
    """
    prompt_ids, response_ids = step["prompt_ids"], step["response_ids"]
    anchor_text.remember(step["anchor_id"], step.get("anchor_text"))  # similarity grouping reads it by hash
    p, total = len(prompt_ids), len(prompt_ids) + len(response_ids)
    sequences = torch.tensor(prompt_ids + response_ids, dtype=torch.long)
    action_mask = torch.zeros(total - 1, dtype=torch.long)
    action_mask[p - 1 :] = 1
    rollout_log_probs = torch.zeros(total - 1, dtype=torch.float32)
    lp = torch.tensor(step["logprobs"], dtype=torch.float32)
    rollout_log_probs[p - 1 :] = lp
    nll = float(-lp.mean()) if lp.numel() else 0.0
    reward = torch.tensor([step["reward"]], dtype=torch.float32)
    info = {
        "reward": reward.clone(),
        "response_clip_ratio": torch.tensor([step["truncated"]]),
        "gaca/group_id": torch.tensor([group_id], dtype=torch.long),
        "gaca/traj_id": torch.tensor([traj_id], dtype=torch.long),
        "gaca/step_index": torch.tensor([step["step_index"]], dtype=torch.long),
        "gaca/anchor_id": torch.tensor([step["anchor_id"]], dtype=torch.long),
        "gaca/valid": torch.tensor([float(step["valid"])]),
        "gaca/nll": torch.tensor([nll]),
        "gaca/dup_of": torch.tensor([-1], dtype=torch.long),
        # the credit audit's inputs (experience.py): the step's oracle progress (NaN: none) and its episode's outcome
        "gaca/progress": torch.tensor([float(step.get("progress", float("nan")))]),
        "gaca/won": torch.tensor([float(bool(episode.get("won", False)))]),
    }
    return Experience(
        sequences=sequences.unsqueeze(0),
        attention_mask=torch.ones(1, total, dtype=torch.long),
        action_mask=action_mask.unsqueeze(0),
        rollout_log_probs=rollout_log_probs.unsqueeze(0),
        prompts=[episode["prompt"]],
        labels=[episode["label"] if isinstance(episode["label"], str) else str(episode["label"])],
        images=[None],
        mm_train_inputs=[None],
        rewards=reward,
        scores=torch.tensor([episode["score"]], dtype=torch.float32),
        response_length=torch.tensor([len(response_ids)]),
        truncated=torch.tensor([step["truncated"]]),
        total_length=torch.tensor([float(total)]),
        info=info,
    )


def pad_to_multiple(samples: List[Experience], multiple: int, seed: int) -> List[Experience]:
    """Append copies of randomly chosen samples so that ``len(samples) % multiple == 0``.

    DeepSpeed steps the optimizer every fixed number of micro-batches; a ragged tail would leak its gradient into
    the next iteration. The copies (at most multiple - 1, marked by ``gaca/dup_of`` = the original's position) are
    masked out of the loss by the advantage hook (:class:`~.experience.StepExperienceMaker`).
    """
    extra = (-len(samples)) % multiple
    rng = random.Random(seed)
    num_real = len(samples)
    for _ in range(extra):
        # copy a real sample, never an earlier copy: the advantage hook leaves copies out of the batch, so a copy
        # of a copy would point at a missing row (AssertionError in gather_step_batch)
        src = rng.randrange(num_real)
        orig = samples[src]
        dup = Experience(**{k: v for k, v in orig.__dict__.items()})
        dup.info = dict(orig.info)
        dup.info["gaca/dup_of"] = torch.tensor([src], dtype=torch.long)
        samples.append(dup)
    return samples


def episode_stats(episodes: List[dict]) -> dict:
    """Per-iteration rollout metrics over the successful (non-failed) episodes.

    Besides success, score and length: ``rollout/off_list_frac``, the share of steps whose action is not on the
    environment's admissible list (steps where it gave one; NaN if none did), and, when the episodes carry their
    ``group_id`` (the generator sets it), ``rollout/mixed_outcome_group_frac``: the share of task groups whose
    episode scores are not all equal (:func:`~gaca_openrlhf.advantages.signals.mixed_group_share`), i.e. the groups
    whose episode advantage A^E can be non-zero without per-step penalties.
    """
    ok = [e for e in episodes if not e["failed"]]
    steps = [s for e in ok for s in e["steps"]]
    listed = [s["listed"] for s in steps if s.get("listed") is not None]
    stats = {
        "rollout/num_episodes": float(len(ok)),
        "rollout/failed_episodes": float(len(episodes) - len(ok)),
        "rollout/num_step_samples": float(len(steps)),
        "rollout/success_rate": sum(e["won"] for e in ok) / max(len(ok), 1),
        "rollout/score": sum(e["score"] for e in ok) / max(len(ok), 1),
        "rollout/num_steps": len(steps) / max(len(ok), 1),
        "rollout/valid_action_ratio": sum(s["valid"] for s in steps) / max(len(steps), 1),
        "rollout/episode_reward": sum(sum(s["reward"] for s in e["steps"]) for e in ok) / max(len(ok), 1),
        "rollout/off_list_frac": (len(listed) - sum(listed)) / len(listed) if listed else float("nan"),
    }
    if ok and all("group_id" in e for e in ok):
        stats["rollout/mixed_outcome_group_frac"] = mixed_group_share(
            torch.tensor([e["group_id"] for e in ok]), torch.tensor([e["score"] for e in ok], dtype=torch.float64))
    by_type = defaultdict(list)
    for e in ok:
        if e.get("task_type"):
            by_type[e["task_type"]].append(float(e["won"]))
    for task_type, won in sorted(by_type.items()):
        stats[f"rollout/success_rate/{task_type}"] = sum(won) / len(won)
    return stats


def filter_uniform_groups(episodes: List[dict]) -> dict:
    """``--algo.dynamic_filtering_enable`` with step samples: mark (``ep["filtered"] = True``) every episode of a task
    group whose non-failed episodes' scores do not vary, so that none of its steps becomes a sample; returns the
    iteration's ``rollout/filtered_groups`` and ``rollout/filter_pass_rate`` (share of groups kept).

    Unlike OpenRLHF's filter (a group's mean score within ``--algo.dynamic_filtering_range``; the CLI refuses a
    non-default range with step samples), a group is kept iff its outcomes differ, and a dropped group is not
    replaced by a fresh task. Which estimators this changes is in docs/design.md §4 ("Dynamic filtering").
    """
    ok = [e for e in episodes if not e["failed"]]
    if not ok:
        return {"rollout/filtered_groups": 0.0, "rollout/filter_pass_rate": float("nan")}
    groups, contrast = group_has_contrast(torch.tensor([e["group_id"] for e in ok]),
                                          torch.tensor([e["score"] for e in ok], dtype=torch.float64))
    dropped = set(groups[~contrast].tolist())
    for ep in episodes:
        ep["filtered"] = ep["group_id"] in dropped
    return {"rollout/filtered_groups": float(len(dropped)), "rollout/filter_pass_rate": float(contrast.double().mean())}


def env_failure_hint(args) -> str:
    """What of the run's environment (``args.env.name``) to check when most of its episodes fail: its spec's
    ``failure_hint`` (its data, its server); "" when it has none."""
    # building an error message must not fail: arguments without an env (stubbed trainers) or an environment this
    # process cannot look up give no hint
    name = getattr(getattr(args, "env", None), "name", None)
    if not name:
        return ""
    try:
        return env_spec(name).failure_hint or ""
    except (KeyError, TypeError, ImportError):
        return ""


class StepSamplesGenerator(SamplesGenerator):
    """Runs the iteration's tasks (n episodes each) and returns all their steps as samples."""

    def __init__(self, *args, plan_fn: Optional[Callable[[int], MiniBatchPlan]] = None, max_failed_frac: float = 0.5,
                 max_failed_iters: int = 3, **kwargs):
        """``plan_fn(num_step_samples)`` gives the iteration's padding and update count (:mod:`.minibatch`)."""
        super().__init__(*args, **kwargs)
        self.plan_fn = plan_fn
        self.max_failed_frac = max_failed_frac
        self.max_failed_iters = max_failed_iters
        self._failed_iters = 0
        self._iterations_seen = 0
        self._next_group_id = 0
        self.last_stats: dict = {}
        self.last_episodes: List[dict] = []
        self.last_plan: Optional[MiniBatchPlan] = None

    @torch.no_grad()
    def run_validation(self, round_index: int, temperature: float, n_samples: int, generate_kwargs: dict) -> List[dict]:
        """Every task of the eval dataloader (``--eval.dataset``), ``n_samples`` episodes each at ``temperature``
        (the other sampling settings from the run's ``generate_kwargs``), marked as validation round ``round_index`` (:mod:`.validation`: seeds fixed across rounds); the episodes
        in panel order. Nothing of it is trained on."""
        if self.eval_dataloader is None:
            return []
        if self.args.vllm.enable_sleep:
            batch_vllm_engine_call(self.vllm_engines, "wake_up")
        try:
            prompts, labels = [], []
            for _, batch_prompts, batch_labels, _images in self.eval_dataloader:
                prompts.extend(batch_prompts)
                labels.extend(batch_labels)
            params = SamplingParams(
                temperature=temperature, top_p=generate_kwargs.get("top_p", 1.0), top_k=generate_kwargs.get("top_k", -1),
                max_tokens=generate_kwargs.get("max_new_tokens"), min_tokens=generate_kwargs.get("min_new_tokens", 1),
                skip_special_tokens=generate_kwargs.get("skip_special_tokens", False),
                extra_args={VALIDATION_ROUND_KEY: int(round_index)})
            # task i always goes to engine i mod E, so a task's episodes share one executor's round count
            refs = [self.vllm_engines[i % len(self.vllm_engines)].generate_responses.remote(
                        prompt=p, label=lab, sampling_params=params, max_length=generate_kwargs.get("max_len", 2048),
                        hf_tokenizer=self.tokenizer, num_samples=n_samples, images=None)
                    for i, (p, lab) in enumerate(zip(prompts, labels))]
            return [ep for group in ray.get(refs) for ep in group]
        finally:
            if self.args.vllm.enable_sleep:
                batch_vllm_engine_call(self.vllm_engines, "sleep")

    def _run_episodes(self, prompts, labels, images, **generate_kwargs) -> List[List[dict]]:
        """One list of n episode dicts per task, from the agent executors in the vLLM engines."""
        refs = self._dispatch_prompts_to_vllm(prompts, labels, images=images, **generate_kwargs)
        return ray.get(refs)

    @torch.no_grad()
    def generate_samples(self, **generate_kwargs) -> Tuple[List[Experience], Optional[float], int, bool]:
        if getattr(self, "_dataloader_iter", None) is None:
            self._dataloader_iter = iter(self.prompts_dataloader)
        if self.args.vllm.enable_sleep:
            batch_vllm_engine_call(self.vllm_engines, "wake_up")
        samples, prompts_consumed, exhausted = self._generate_vllm(
            self._dataloader_iter, self.args.rollout.batch_size, self.args.algo.dynamic_filtering_enable,
            **generate_kwargs)
        if self.args.vllm.enable_sleep:
            batch_vllm_engine_call(self.vllm_engines, "sleep")
        if exhausted:
            self._dataloader_iter = None
        return samples, None, prompts_consumed, exhausted

    def _generate_vllm(self, dataloader_iter, num_prompts: int, dynamic_filtering, **generate_kwargs):
        prompts, labels, images, exhausted = _collect_prompt_batch(dataloader_iter, num_prompts)
        if not prompts:
            self.last_stats, self.last_episodes = {}, []
            return [], 0, True
        t0 = time.time()
        groups = self._run_episodes(prompts, labels, images, **generate_kwargs)
        wall = time.time() - t0

        if groups and groups[0] and "steps" not in groups[0][0]:
            # not a step-level executor (e.g. OpenRLHF's single/multi-turn ones): OpenRLHF's own conversion,
            # so its estimators work unchanged
            samples = [self._process_response_into_experience(r, **generate_kwargs) for g in groups for r in g]
            self.last_stats = {"timing/rollout": wall, "timing/generation": wall, "timing/environment": 0.0}
            self.last_episodes = []
            return samples, len(prompts), exhausted

        samples: List[Experience] = []
        episodes: List[dict] = []
        for episodes_of_task in groups:
            group_id = self._next_group_id
            self._next_group_id += 1
            for traj_id, ep in enumerate(episodes_of_task):
                ep["group_id"], ep["traj_id"], ep["filtered"] = group_id, traj_id, False
                episodes.append(ep)
                if ep["failed"]:
                    logger.warning(f"[gaca] episode of task {ep['prompt']!r} failed, excluded: {ep['error']}")

        stats = episode_stats(episodes)  # the policy's rollouts, filtered groups included
        if dynamic_filtering:
            stats.update(filter_uniform_groups(episodes))
        for ep in episodes:
            if not ep["failed"] and not ep["filtered"]:
                samples.extend(step_experience(s, ep["group_id"], ep["traj_id"], ep) for s in ep["steps"])
        gen_s = sum(e["gen_seconds"] for e in episodes)
        env_s = sum(e["env_seconds"] for e in episodes)
        share = env_s / max(gen_s + env_s, 1e-9)
        stats.update({"timing/rollout": wall, "timing/environment": wall * share, "timing/generation": wall * (1 - share)})
        self._check_failures(stats, len(episodes))
        self.last_stats, self.last_episodes = stats, episodes
        self.last_plan = None
        if samples and self.plan_fn is not None:
            self.last_plan = self.plan_fn(len(samples))
            samples = pad_to_multiple(samples, self.last_plan.padded, seed=self._next_group_id)
        stats["rollout/num_padded_samples"] = float(len(samples) - stats["rollout/num_step_samples"])
        return samples, len(prompts), exhausted

    def _check_failures(self, stats: dict, n_episodes: int) -> None:
        failed_frac = stats["rollout/failed_episodes"] / max(n_episodes, 1)
        first = self._iterations_seen == 0
        self._iterations_seen += 1
        self._failed_iters = self._failed_iters + 1 if failed_frac > self.max_failed_frac else 0
        if first and self._failed_iters:
            hint = env_failure_hint(getattr(self, "args", None))
            raise EnvFailureError(
                f"iteration 1: {int(stats['rollout/failed_episodes'])}/{n_episodes} episodes failed (more than "
                f"{self.max_failed_frac:.0%}): the environment setup is likely broken, not the model. Check the "
                f"warnings above: {f'{hint}, or ' if hint else ''}env workers that could not be scheduled or crashed "
                "(Ray resources, --env.timeout_s)"
            )
        if self._failed_iters >= self.max_failed_iters:
            hint = env_failure_hint(getattr(self, "args", None))
            raise EnvFailureError(
                f"environment failures: more than {self.max_failed_frac:.0%} of the episodes failed in "
                f"{self._failed_iters} consecutive iterations (last: {int(stats['rollout/failed_episodes'])}/"
                f"{n_episodes}); check the environment workers{f' / {hint}' if hint else ''} (see the warnings above)"
            )
