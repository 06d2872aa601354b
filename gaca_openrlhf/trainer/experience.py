"""Advantage hook: OpenRLHF's ``RemoteExperienceMaker`` with the project's step-level estimators.

``compute_advantages_and_returns`` runs once per iteration over all step samples: it rebuilds the
:class:`~gaca_openrlhf.advantages.StepBatch` from the numeric metadata in ``Experience.info`` (criticality from the
rollout's own log-probs: ``gaca/nll``, no extra forward pass), calls the pure estimator module and broadcasts the
per-step scalar to the response tokens: ``advantages = A[:, None] * action_mask`` (docs/design.md §3 rule 8).
Padding copies (``gaca/dup_of >= 0``, see :mod:`.minibatch`) get a zero action mask here, after the log-prob pass:
they are masked out of the policy, KL and entropy losses and not counted in their token/sample normalization
(OpenRLHF treats a sample whose action mask is all zero as empty).
OpenRLHF's own estimators (gae, reinforce, rloo, group_norm, ...) go to the base class unchanged.
"""
from __future__ import annotations

import os
import time
from typing import List, Optional

import numpy as np
import torch

from openrlhf.trainer.ppo_utils.experience import Experience
from openrlhf.trainer.ppo_utils.experience_maker import RemoteExperienceMaker
from openrlhf.utils.logging_utils import init_logger

from gaca_openrlhf.advantages import AdvantageConfig, StepBatch, compute_advantages, is_step_estimator, summary_metrics
from gaca_openrlhf.advantages.signals import (advantage_mean_by_estimator, advantages_by_estimator, nonzero_share,
                                             nonzero_share_by_estimator, token_weighted_mean)
from gaca_openrlhf.diagnostics.credit_audit import audit_metrics, credit_audit

from .minibatch import balanced_sizes, token_budget_micro_batches
from . import anchor_text
from .entropy import ENTROPY_KEY, EntropyExperienceMixin
from .run_shape import RunShape, data_parallel_size
from .samples import META_KEYS

logger = init_logger(__name__)

#: bootstrap resamples of the online credit audit's intervals (over task groups; the offline command uses 2000)
AUDIT_BOOTSTRAP = 200


def gather_step_batch(experiences: List[Experience]):
    """(StepBatch over the original rows, row -> batch position) from the micro-batches' ``info``.

    Rows are in micro-batch concatenation order; padding duplicates (``gaca/dup_of >= 0``) are left out of the
    batch and map to the position of the row they copy.
    """
    cat = lambda key: torch.cat([e.info[key].reshape(-1) for e in experiences])  # noqa: E731
    rollout_index = torch.tensor([i for e in experiences for i in e.index], dtype=torch.long)
    dup_of = cat("gaca/dup_of").long()
    orig = dup_of < 0
    batch = StepBatch(
        group_id=cat("gaca/group_id")[orig].long(),
        traj_id=cat("gaca/traj_id")[orig].long(),
        step_index=cat("gaca/step_index")[orig].long(),
        anchor_id=cat("gaca/anchor_id")[orig].long(),
        reward=cat("reward")[orig].double(),
        valid=cat("gaca/valid")[orig] > 0.5,
        nll=cat("gaca/nll")[orig].double(),
        entropy=cat(ENTROPY_KEY)[orig].double() if ENTROPY_KEY in experiences[0].info else None,  # EMPG (.entropy)
    )
    pos_of_rollout = torch.full((int(rollout_index.max()) + 1,), -1, dtype=torch.long)
    pos_of_rollout[rollout_index[orig]] = torch.arange(int(orig.sum()))
    source = torch.where(orig, rollout_index, dup_of)
    row_pos = pos_of_rollout[source]
    assert bool((row_pos >= 0).all()), "a padding duplicate points at a row missing from the batch"
    return batch, row_pos


class StepExperienceMaker(EntropyExperienceMixin, RemoteExperienceMaker):
    """Routes the project's estimator names to :mod:`gaca_openrlhf.advantages`.

    ``run_shape``: the run's :class:`~.run_shape.RunShape` (handed over by the trainer); without one (a maker built
    outside a run: benchmarks, tests) the DP size comes from the arguments through the same definition.
    """

    run_shape: Optional[RunShape] = None

    def __init__(self, *args, adv_config: Optional[AdvantageConfig] = None, dump_dir: Optional[str] = None,
                 run_shape: Optional[RunShape] = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.adv_config = adv_config or AdvantageConfig(estimator=self.advantage_estimator)
        self.dump_dir = dump_dir
        self.run_shape = run_shape
        self.last_stats: dict = {}
        self.iteration = 0  # set by the trainer before each iteration (names the dumps)

    @property
    def uses_step_estimator(self) -> bool:
        return is_step_estimator(self.advantage_estimator)

    def _dp_size(self) -> int:
        return self.run_shape.dp_size if self.run_shape is not None else data_parallel_size(self.args)

    def split_rollout_samples(self, rollout_samples):
        """Step samples: DP rank r gets rows r, r + DP, r + 2 DP, ... (so the padding copies, appended last, are
        spread over the ranks) in the same number of micro-batches of at most ``rollout.micro_batch_size``.

        ``async_run_method_batch`` hands each rank a contiguous chunk of ``len / DP`` micro-batches, so the list is
        laid out rank by rank. With ``--train.dynamic_batch_enable`` each rank's rows are grouped into token-budget
        micro-batches of at most ``rollout.max_tokens_per_gpu`` tokens (:func:`~.minibatch.token_budget_micro_batches`,
        the same count on every rank) instead. Other samples (OpenRLHF's rollouts) use the base split.
        """
        if not rollout_samples or "gaca/dup_of" not in rollout_samples[0].info:
            return super().split_rollout_samples(rollout_samples)
        dp = self._dp_size()
        if len(rollout_samples) % dp:
            raise ValueError(f"{len(rollout_samples)} step samples cannot be split evenly over {dp} DP ranks "
                             "(the samples generator pads to a multiple: see gaca_openrlhf.trainer.minibatch)")
        for i, sample in enumerate(rollout_samples):
            sample.index = [i]
        if self.args.train.dynamic_batch_enable:
            per_rank = [rollout_samples[rank::dp] for rank in range(dp)]
            budget = self.args.rollout.max_tokens_per_gpu or self.args.train.max_tokens_per_gpu
            plans = token_budget_micro_batches(
                [[int(s.attention_mask.sum()) for s in rows] for rows in per_rank], budget)
            return [Experience.concat_experiences([rows[i] for i in part], self.tokenizer.pad_token_id)
                    for rows, parts in zip(per_rank, plans) for part in parts]
        sizes = balanced_sizes(len(rollout_samples) // dp, max(1, self.args.rollout.micro_batch_size))
        micro_batches = []
        for rank in range(dp):
            rows, start = rollout_samples[rank::dp], 0
            for size in sizes:
                micro_batches.append(Experience.concat_experiences(rows[start : start + size],
                                                                   self.tokenizer.pad_token_id))
                start += size
        return micro_batches

    @torch.no_grad()
    def compute_advantages_and_returns(self, experiences: List[Experience]) -> List[Experience]:
        self.last_stats = self._logprob_gap(experiences)
        self.last_stats.update(self.finite_stats(experiences))
        if not self.uses_step_estimator:
            return super().compute_advantages_and_returns(experiences)

        t0 = time.time()
        batch, row_pos = gather_step_batch(experiences)
        texts = anchor_text.lookup(batch.anchor_id.tolist()) if self.adv_config.similarity_grouping else None
        anchor_text.clear()
        result = compute_advantages(batch, self.adv_config, anchor_text=texts)
        per_row = result.advantage.float()[row_pos]
        adv_seconds = time.time() - t0
        # every registered estimator on this batch, once: the learning signal's non-zero shares and the credit audit
        # both read it (the trained estimator's own result above stays the one training uses)
        shadows = advantages_by_estimator(batch, self.adv_config, anchor_text=texts)
        signal = self.learning_signal(experiences, batch, result.advantage, texts, shadows=shadows)
        signal.update(self.credit_audit_stats(experiences, batch, texts, shadows=shadows))

        start = 0
        for exp in experiences:
            rows = len(exp.index)
            is_copy = exp.info["gaca/dup_of"].reshape(-1) >= 0
            a = torch.where(is_copy, torch.zeros(()), per_row[start : start + rows])
            start += rows
            # padding copies leave the loss: zero action mask (after the log-prob pass, which needs the real one)
            exp.action_mask = exp.action_mask * (~is_copy)[:, None].to(exp.action_mask.dtype)
            exp.advantages = a[:, None] * exp.action_mask.float()
            exp.returns = exp.advantages.clone()  # no critic: returns are not used by the policy loss
            exp.info["return"] = exp.rewards.float()
            exp.info["advantage"] = a
            exp.kl = None
            for key in META_KEYS:  # ids are meaningless as averaged training metrics
                exp.info.pop(key, None)

        stats = summary_metrics(result)
        stats.update({"adv/seconds": adv_seconds, "adv/num_samples": float(len(batch)),
                      "adv/abs_max": float(result.advantage.abs().max()) if len(batch) else 0.0,
                      "adv/finite": float(bool(torch.isfinite(result.advantage).all()))})
        if result.lambda_ is None:  # keep the logged keys stable across estimators
            stats.setdefault("adv/lambda_mean", float("nan"))
            stats.setdefault("adv/lambda_saturated_frac", float("nan"))
        self.last_stats.update(stats)
        self.last_stats.update(signal)
        if self.dump_dir:
            os.makedirs(self.dump_dir, exist_ok=True)
            prompts = [p for e in experiences for p in e.prompts]
            torch.save({"batch": batch, "advantage": result.advantage, "config": self.adv_config,
                        "row_advantage": per_row, "prompts": prompts, "row_pos": row_pos,
                        "row_token_advantage": [e.advantages for e in experiences]},
                       os.path.join(self.dump_dir, f"adv_iter_{self.iteration:04d}.pt"))
        return experiences

    def learning_signal(self, experiences: List[Experience], batch: StepBatch, advantage: torch.Tensor,
                        texts=None, shadows=None) -> dict:
        """Whether this iteration can teach the policy anything (issue 35), over the real samples (no padding copies):

        - ``policy/entropy``: mean per response token of pi_old's full-distribution entropy (the temperature-scaled
          logits that sampled the rollouts), from the experience forward (:mod:`.entropy`), not from the training
          forward (OpenRLHF returns that one only with an entropy bonus configured);
        - ``adv/nonzero_frac``: share of step samples whose advantage is non-zero (the others give no gradient);
        - ``adv/nonzero_frac/<estimator>``: the same for every registered estimator on this batch (each a pure
          vectorised function: milliseconds), so runs of one method show what another would have trained on;
          from ``shadows`` (:func:`~gaca_openrlhf.advantages.signals.advantages_by_estimator` of this batch) when
          given;
        - ``adv/mean/<estimator>``: each estimator's mean advantage over the step samples: a non-zero mean pushes
          every sampled token up (positive: self-imitation) or down whatever its credit (``--gaca.center``).

        Called before the padding copies' action masks are zeroed (their token counts are read here, then dropped).
        """
        out = {"adv/nonzero_frac": nonzero_share(advantage)}
        if ENTROPY_KEY in experiences[0].info:
            orig = torch.cat([e.info["gaca/dup_of"].reshape(-1) for e in experiences]) < 0
            tokens = torch.cat([e.action_mask.sum(-1).reshape(-1) for e in experiences])
            entropy = torch.cat([e.info[ENTROPY_KEY].reshape(-1) for e in experiences])
            out["policy/entropy"] = token_weighted_mean(entropy[orig], tokens[orig])
        results = shadows[0] if shadows is not None else advantages_by_estimator(batch, self.adv_config,
                                                                                  anchor_text=texts)[0]
        shares = nonzero_share_by_estimator(batch, self.adv_config, results=results)
        out.update({f"adv/nonzero_frac/{name}": share for name, share in shares.items()})
        out.update({f"adv/mean/{name}": mean for name, mean in advantage_mean_by_estimator(results).items()})
        return out

    def credit_audit_stats(self, experiences: List[Experience], batch: StepBatch, texts=None, shadows=None) -> dict:
        """The credit audit of this iteration's batch (docs/credit_audit.md §6): every registered step estimator
        (the trained one and the others as shadows) on the same rows, scored against the steps' oracle progress
        (``gaca/progress``, recorded by the rollout where the environment's oracle is on: ``--env.credit_audit``).
        ``audit/*`` keys (:func:`~gaca_openrlhf.diagnostics.credit_audit.audit_metrics`), ``audit/steps_with_progress``
        and ``audit/seconds``; nothing when no row carries progress (no oracle), only the count when none is
        non-zero (a batch where no step changed the oracle's distance). ``shadows``: the estimators' results already
        computed on this batch (see :meth:`learning_signal`)."""
        if "gaca/progress" not in experiences[0].info:
            return {}
        cat = lambda key: torch.cat([e.info[key].reshape(-1) for e in experiences])  # noqa: E731
        orig = cat("gaca/dup_of") < 0
        progress = cat("gaca/progress")[orig].double().numpy()
        if not np.isfinite(progress).any():
            return {}
        moved = int((np.isfinite(progress) & (progress != 0)).sum())
        out = {"audit/steps_with_progress": float(moved)}
        if not moved:
            return out
        t0 = time.time()
        won = cat("gaca/won")[orig].numpy() > 0.5
        try:
            result = credit_audit(batch, progress, won, self.adv_config, anchor_text=texts, n_boot=AUDIT_BOOTSTRAP,
                                  seed=self.iteration, results=shadows)
        except Exception as e:  # a diagnostic must not stop a training run: said loudly, counted, not fatal
            logger.warning(f"[gaca] credit audit of iteration {self.iteration} failed: {e!r}")
            out["audit/failed"] = 1.0
            return out
        out.update(audit_metrics(result))
        out["audit/seconds"] = time.time() - t0
        return out

    def finite_stats(self, experiences: List[Experience]) -> dict:
        """Counts of non-finite policy / reference log-probs over *all* positions of the experience pass.

        Masked positions count too: OpenRLHF multiplies by the mask (``NaN * 0 = NaN``), so one NaN anywhere in a
        row makes the loss or the KL NaN. The first offending micro-batch is logged with its DP rank (micro-batches
        are laid out rank by rank: :meth:`split_rollout_samples`).
        """
        try:
            dp = self._dp_size()
        except AttributeError:  # no strategy args (unit tests)
            dp = 1
        stats = {}
        for key, field in (("check/actor_logprobs_nonfinite", "action_log_probs"),
                           ("check/ref_logprobs_nonfinite", "base_action_log_probs")):
            counts = [int((~torch.isfinite(t)).sum()) if (t := getattr(e, field, None)) is not None else 0
                      for e in experiences]
            stats[key] = float(sum(counts))
            first = next((i for i, c in enumerate(counts) if c), None)
            if first is not None:
                per_rank = max(1, len(experiences) // dp)
                logger.warning(f"[gaca] {field}: {sum(counts)} non-finite values, first in micro-batch {first} "
                               f"(DP rank {first // per_rank}, {counts[first]} values; rows x positions "
                               f"{tuple(getattr(experiences[first], field).shape)})")
        return stats

    @staticmethod
    def _logprob_gap(experiences: List[Experience]) -> dict:
        """Mean |rollout log-prob - trainer log-prob| over response tokens, before the update (same weights)."""
        num = den = 0.0
        for exp in experiences:
            if exp.rollout_log_probs is None or exp.action_log_probs is None:
                continue
            mask = exp.action_mask.float()
            if "gaca/dup_of" in exp.info:  # each sample once
                mask = mask * (exp.info["gaca/dup_of"].reshape(-1, 1) < 0).float()
            num += float(((exp.rollout_log_probs.float() - exp.action_log_probs.float()).abs() * mask).sum())
            den += float(mask.sum())
        return {"sync/logprob_gap_rollout": num / den} if den else {}
