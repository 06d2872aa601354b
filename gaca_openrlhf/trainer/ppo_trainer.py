"""The project's PPO trainer: OpenRLHF's single-controller ``PPOTrainer`` with step samples and step estimators.

``PPOTrainer`` is a Ray actor class; :class:`GacaPPOTrainer` subclasses its ``__ray_actor_class__`` and is wrapped
with ``ray.remote`` (:data:`GacaPPOTrainerActor`). Changes against the base:
- samples: :class:`~.samples.StepSamplesGenerator` (one sample per env step, all trained this iteration);
- advantages: :class:`~.experience.StepExperienceMaker` (the project's estimators);
- optimizer updates per iteration = ceil(step samples / ``--run.mini_batch_steps``) (verl-agent's mini-batch in
  step samples; padding copies masked out of the loss: :mod:`.minibatch`), or the deprecated fixed
  ``--run.updates_per_iteration``; the plan comes from the run's :class:`~.run_shape.RunShape` and reaches the
  policy ranks as one :class:`~.minibatch.MiniBatchPlan`; logged as ``train/optimizer_steps`` (counted by
  DeepSpeed) next to ``train/updates_planned``;
- the LR schedule counts iterations (:func:`lr_schedule_iterations`; constant LR within an iteration, :mod:`.actors`);
- every training episode's outcome in ``<metrics_dir>/episodes.jsonl`` (:mod:`.episode_log`);
- metrics: ``<metrics_dir>/metrics.jsonl`` every iteration (:mod:`.metrics`), incl. ``sync/logprob_gap`` measured
  right after each weight sync (:meth:`GacaPPOTrainer.probe_logprob_gap`); a gap above ``--run.max_logprob_gap``
  stops training (:class:`WeightSyncError`: a broken weight sync), and so does a NaN/inf ``policy_loss`` or ``kl``
  (:class:`NonFiniteTrainingError`, naming the likely cause);
- ``--run.max_iterations`` stops early (after its checkpoint) and ends the LR schedule there;
- validation during training: with ``--eval.dataset`` the engines play that panel every ``--eval.steps`` iterations
  and after the last, ``val/*`` in the iteration's record, best checkpoint on ``val/success_rate`` (:mod:`.validation`);
- each phase the loop enters is published for the driver's stall watch (:mod:`.progress`, ``--run.stall_timeout_s``).
"""
from __future__ import annotations

import math
import time

import ray
import torch
from tqdm import tqdm
from vllm import SamplingParams

from openrlhf.trainer.ppo_trainer import PPOTrainer
from openrlhf.utils.logging_utils import init_logger

from gaca_openrlhf.advantages import AdvantageConfig
from gaca_openrlhf.seeding import derive_seed

from .experience import StepExperienceMaker
from .episode_log import EpisodeLog
from .metrics import MetricsWriter, build_record, phase_times
from .progress import NoProgress, ProgressReporter, progress_key
from .samples import StepSamplesGenerator
from .validation import BEST_METRIC, validation_due, validation_stats

logger = init_logger(__name__)


def advantage_config(args) -> AdvantageConfig:
    """AdvantageConfig from ``--algo.advantage.estimator`` and the ``--gaca.*`` fields it defines."""
    fields = {k: v for k, v in vars(args.gaca).items() if k in AdvantageConfig.help() and v is not None}
    fields["estimator"] = args.algo.advantage.estimator
    return AdvantageConfig(**fields)


class WeightSyncError(RuntimeError):
    """The post-sync log-prob probe shows vLLM and the trainer disagree: the weight sync is broken."""


def lr_schedule_iterations(args, num_prompts: int) -> int:
    """Length of the LR schedule, in iterations (the scheduler is stepped once per iteration, as in verl).

    ``ceil(prompts / rollout.batch_size) x train.num_episodes``, capped by ``--run.max_iterations`` when set: the
    schedule ends where the run ends. (A run stopped early with ``--run.max_iterations`` and resumed without it
    continues at its iteration on the longer schedule: the position is the iteration index, not a stored count.)
    """
    total = math.ceil(num_prompts / args.rollout.batch_size) * args.train.num_episodes
    if args.run.max_iterations:
        total = min(total, args.run.max_iterations)
    return max(1, total)


class NonFiniteTrainingError(RuntimeError):
    """A NaN/inf policy loss or KL in an iteration: training stops before NaN weights reach the next rollouts."""


#: per-iteration metrics that must be finite (``sync/logprob_gap`` is checked by :func:`check_sync_gap`)
FINITE_KEYS = ("policy_loss", "kl")


def _nonfinite(value) -> bool:
    try:
        return not math.isfinite(float(value))
    except (TypeError, ValueError):
        return False


def check_finite(status: dict) -> None:
    """Raise :class:`NonFiniteTrainingError` when ``policy_loss`` or ``kl`` is NaN/inf, naming the likely cause.

    The cause is read from the experience pass's counters (:meth:`.experience.StepExperienceMaker.finite_stats`):
    non-finite reference log-probs make the k3 KL NaN (``NaN * 0`` at masked positions is still NaN), non-finite
    policy log-probs make everything NaN; with both finite, the update itself diverged.
    """
    bad = {k: status[k] for k in FINITE_KEYS if k in status and _nonfinite(status[k])}
    if not bad:
        return
    ref_bad = status.get("check/ref_logprobs_nonfinite") or 0
    actor_bad = status.get("check/actor_logprobs_nonfinite") or 0
    if actor_bad or _nonfinite(status.get("sync/logprob_gap_rollout", 0.0)):
        cause = (f"the policy's own experience forward was already non-finite ({int(actor_bad)} log-probs) before "
                 "this iteration's update: NaN/garbage policy weights (a NaN update in an earlier iteration, or "
                 "weights not loaded: e.g. ZeRO-3 parameters left uninitialized) or an attention/dtype problem")
    elif ref_bad:
        cause = (f"the reference model's log-probs were non-finite ({int(ref_bad)} of them) in the experience pass: "
                 "the KL loss against them is NaN. Likely the reference model's weights (garbage ZeRO-3 parameters: "
                 "on CPU/gloo an all-gather that had not finished, see gaca_openrlhf/cpu/patches.py) or its forward")
    else:
        cause = ("the experience pass was finite, so the update itself diverged (learning rate, bf16 overflow of the "
                 "k3 KL's exp, an empty loss window) or non-finite gradients")
    raise NonFiniteTrainingError(f"non-finite training metrics {bad}: {cause}")


def check_sync_gap(status: dict, limit: float) -> None:
    """Raise :class:`WeightSyncError` when the post-sync ``sync/logprob_gap`` exceeds ``limit`` (0: no limit) or is
    NaN/inf (always)."""
    gap = status.get("sync/logprob_gap")
    if gap is None or (not limit and math.isfinite(gap)):
        return
    before = status.get("sync/logprob_gap_rollout")
    if not math.isfinite(gap):
        where = ("the trainer's own experience forward was already NaN before any update (sync/logprob_gap_rollout "
                 "is NaN): a model/attention/dtype problem in the actor forward, not the weight sync"
                 if before is not None and not math.isfinite(before) else
                 "NaN weights reached vLLM (a NaN loss/update: see policy_loss) or a broken weight sync")
        raise WeightSyncError(f"sync/logprob_gap is {gap} right after the weight sync: {where}")
    if gap > limit:
        raise WeightSyncError(
            f"sync/logprob_gap {gap:.4g} > --run.max_logprob_gap {limit:g} right after the weight sync: vLLM is not "
            "generating with the trainer's weights, so the rollouts are off-policy garbage. Likely cause: a broken "
            "weight sync (NCCL/CUDA-IPC group or --vllm.sync_backend, parameter names not matching vLLM's, tied "
            "embeddings not refreshed on vLLM-CPU, vLLM woken without its weights under --vllm.enable_sleep), or "
            "vLLM and the trainer using different models/dtypes"
        )


def seed_driver(seed: int) -> None:
    """Seed the trainer actor's own generators. OpenRLHF seeds the training ranks (``setup_distributed``) but not
    the driver, whose prompt loader (no distributed sampler there) draws its shuffle from torch's global generator:
    unseeded, two runs of one seed trained on their tasks in different orders."""
    import random

    import numpy as np

    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


class GacaPPOTrainer(PPOTrainer.__ray_actor_class__):
    progress = NoProgress()  # replaced in __init__ by the reporter the driver's stall watch reads

    def __init__(self, pretrain, strategy, actor_model_group, critic_model_group, reward_model_group,
                 reference_model_group, vllm_engines, **generate_kwargs):
        seed_driver(strategy.args.train.seed)  # before the base class builds the prompt loader
        super().__init__(pretrain, strategy, actor_model_group, critic_model_group, reward_model_group,
                         reference_model_group, vllm_engines, **generate_kwargs)
        args = self.args
        self.shape = args.run_shape  # computed once by the CLI (run_shape.RunShape)
        self.plan_fn = self.shape.plan
        self.samples_generator = StepSamplesGenerator(
            strategy=strategy, prompts_dataloader=self.prompts_dataloader, eval_dataloader=self.eval_dataloader,
            tokenizer=self.tokenizer, vllm_engines=vllm_engines, plan_fn=self.plan_fn,
            max_failed_frac=args.env.max_failed_frac, max_failed_iters=args.env.max_failed_iters,
        )
        self.experience_maker = StepExperienceMaker(
            actor_model_group, critic_model_group, reward_model_group, reference_model_group, self.kl_ctl,
            strategy, self.tokenizer, adv_config=advantage_config(args) if self.shape.step_estimator else None,
            dump_dir=args.run.dump_dir, run_shape=self.shape,
        )
        # LR-schedule length in iterations (the base counts prompts x n / train batch in updates)
        self.max_steps = lr_schedule_iterations(args, len(self.prompts_dataloader))
        self.metrics = MetricsWriter(args.run.metrics_dir or args.ckpt.output_dir)
        self.episode_log = EpisodeLog(args.run.metrics_dir or args.ckpt.output_dir)  # episodes.jsonl beside it
        self._probe = None  # (prompt ids) of a few step samples, for the post-sync log-prob gap
        self._last_gap: dict = {}
        self._windows: dict = {}  # this iteration's (start, end) wall-clock times of training and sync
        # None outside a Ray actor (nobody watches then); get_runtime_context() would start a Ray of its own there
        actor_id = ray.get_runtime_context().get_actor_id() if ray.is_initialized() else None
        self.progress = ProgressReporter(progress_key(actor_id)) if actor_id else NoProgress()
        if not getattr(self, "best_eval_metric_key", ""):  # OpenRLHF's --ckpt.best_metric_key; a checkpoint's own key wins on resume
            self.best_eval_metric_key = BEST_METRIC

    # ---- one iteration ----
    def train_step(self, rollout_samples, global_step):
        plan = self.samples_generator.last_plan
        if plan is None or plan.padded != len(rollout_samples):  # e.g. OpenRLHF's own (non-step) samples
            plan = self.plan_fn(len(rollout_samples))
            if plan.padded != len(rollout_samples):
                raise ValueError(f"{len(rollout_samples)} samples are not padded for {plan.updates} updates "
                                 f"({plan.padded}): use a step estimator with the step-level agent rollouts")
        self._iter_plan = plan
        self.progress.mark("experience", global_step + 1)
        self.experience_maker.iteration = global_step + 1
        self._probe = [s.sequences[0][: int(s.sequences.shape[1] - s.response_length[0])].tolist()
                       for s in rollout_samples[: self.args.run.gap_probe_samples]]
        status, global_step = super().train_step(rollout_samples, global_step)
        status.update(self.samples_generator.last_stats)
        status.update(self.experience_maker.last_stats)
        status.update(self._last_gap)
        status["train/updates_planned"] = float(plan.updates)
        status["train/samples_per_update"] = float(plan.per_update)
        return status, global_step

    def ppo_train(self, global_steps):
        # The iteration's plan (its padded sample count: a multiple of updates x micro batch x DP ranks) goes to the
        # policy ranks whole; global_steps (iterations done) positions the LR schedule.
        t0 = time.time()
        self.progress.mark("training", global_steps + 1)
        ray.get(self.actor_model_group.async_run_method(
            method_name="set_iteration_batch", plan=self._iter_plan, iteration=global_steps))
        status = super().ppo_train(global_steps)
        self._windows["training"] = (t0, time.time())
        return status

    def broadcast_to_vllm(self) -> None:
        t0 = time.time()
        self.progress.mark("sync")
        super().broadcast_to_vllm()
        sync_seconds = time.time() - t0
        self._last_gap = {"timing/sync_only": sync_seconds}
        if self._probe:
            self._last_gap.update(self.probe_logprob_gap(self._probe))
        self._windows["sync"] = (t0, t0 + sync_seconds + self._last_gap.get("timing/sync_probe", 0.0))

    @torch.no_grad()
    def probe_logprob_gap(self, prompts) -> dict:
        """vLLM vs trainer log-probs of the same freshly sampled tokens, right after the weight sync."""
        t0 = time.time()
        if self.args.vllm.enable_sleep:
            from openrlhf.trainer.ray.vllm_engine import batch_vllm_engine_call

            batch_vllm_engine_call(self.vllm_engines, "wake_up", tags=["kv_cache"])
        # one request at a time, each with its own seed: the sampled tokens and vLLM's log-probs then do not depend
        # on which requests share a batch (measured: concurrent probes gave gaps differing by ~2e-8 between two
        # runs of one seed, which breaks same-seed-same-metrics); 4 prompts x 16 tokens, so the cost is small
        self._probe_round = getattr(self, "_probe_round", 0) + 1
        outs = []
        for i, p in enumerate(prompts):
            params = SamplingParams(temperature=self.args.rollout.temperature, top_p=1.0, max_tokens=16, logprobs=1,
                                    min_tokens=1, seed=derive_seed(self.args.train.seed, "probe", self._probe_round, i))
            outs.append(ray.get(self.vllm_engines[i % len(self.vllm_engines)].generate.remote(p, params)))
        seqs, masks, vllm_lps = [], [], []
        for prompt, out in zip(prompts, outs):
            gen = out.outputs[0]
            ids = list(gen.token_ids)
            if not ids:
                continue
            total = len(prompt) + len(ids)
            mask = torch.zeros(1, total - 1, dtype=torch.long)
            mask[0, len(prompt) - 1 :] = 1
            seqs.append(torch.tensor([prompt + ids]))
            masks.append(mask)
            vllm_lps.append(torch.tensor([lp[t].logprob for t, lp in zip(ids, gen.logprobs)]))
        if self.args.vllm.enable_sleep:
            from openrlhf.trainer.ray.vllm_engine import batch_vllm_engine_call

            batch_vllm_engine_call(self.vllm_engines, "sleep")
        if not seqs:
            return {}
        seqs, masks, vllm_lps = pad_probe(seqs, masks, vllm_lps, self._probe_ranks())
        refs = self.actor_model_group.async_run_method_batch(
            method_name="forward", sequences=seqs, action_mask=masks,
            attention_mask=[torch.ones_like(s) for s in seqs])
        trainer_lps = self.experience_maker._flatten_results(refs, self.actor_model_group.duplicate_actors)
        diffs = [(t[0, m[0].bool()].float() - v.float()).abs() for t, m, v in zip(trainer_lps, masks, vllm_lps)]
        diffs = torch.cat(diffs)
        return {"sync/logprob_gap": float(diffs.mean()), "sync/logprob_gap_max": float(diffs.max()),
                "timing/sync_probe": time.time() - t0}

    def validate(self, iteration: int) -> dict:
        """Play the validation panel (``--eval.dataset``) with the weights just synced to vLLM: ``val/*`` figures
        and ``timing/validation`` (:mod:`.validation`); {} without a panel."""
        if self.eval_dataloader is None:
            return {}
        t0 = time.time()
        self.progress.mark("validation", iteration)
        self._val_rounds = getattr(self, "_val_rounds", 0) + 1
        episodes = self.samples_generator.run_validation(
            self._val_rounds, self.args.eval.temperature, self.args.eval.n_samples_per_prompt, self.generate_kwargs)
        stats = validation_stats(episodes)
        stats["timing/validation"] = time.time() - t0
        logger.info(f"[gaca] validation after iteration {iteration}: success {stats[BEST_METRIC]:.3f} over "
                    f"{int(stats['val/num_episodes'])} episodes ({int(stats['val/failed_episodes'])} failed)")
        return stats

    def _probe_ranks(self) -> int:
        return len(self.actor_model_group._actor_handlers) // self.actor_model_group.duplicate_actors

    # ---- the loop (OpenRLHF's fit, plus metrics.jsonl and max_iterations) ----
    def fit(self, global_step: int = 0) -> None:
        args = self.args
        checkpoint_states = complete_checkpoint_states(self.init_checkpoint_states())
        self.restore_best_checkpoint_state(checkpoint_states)
        start_episode = checkpoint_states["episode"]
        if checkpoint_states["global_step"] > 0:
            global_step = checkpoint_states["global_step"]
            logger.info(f"[gaca] resuming from iteration {global_step}")
        total_consumed_prompts = checkpoint_states["total_consumed_prompts"]
        self.progress.mark("start", global_step)
        dropped = self.metrics.start(global_step)  # this run's records only (a resume keeps those it resumes from)
        self.episode_log.start(global_step)
        if dropped:
            logger.warning(f"[gaca] {len(dropped)} metrics record(s) after iteration {global_step} (an earlier or "
                           f"interrupted run) moved to {self.metrics.path}.dropped-*")
        if global_step:
            self.progress.mark("resume_sync", global_step)
            self.broadcast_to_vllm()
            if checkpoint_states["data_loader_state_dict"]:
                self.prompts_dataloader.load_state_dict(checkpoint_states["data_loader_state_dict"])

        stop = False
        for episode in range(start_episode, args.train.num_episodes):
            pbar = tqdm(range(len(self.prompts_dataloader)), desc=f"Episode [{episode + 1}/{args.train.num_episodes}]",
                        initial=total_consumed_prompts % max(len(self.prompts_dataloader), 1))
            while not stop:
                t0 = time.time()
                self._windows = {}
                self.progress.mark("rollout", global_step + 1)
                rollout_samples, _, prompts_consumed, is_exhausted = self.samples_generator.generate_samples(
                    **self.generate_kwargs)
                rollout_seconds = time.time() - t0
                total_consumed_prompts += prompts_consumed
                if not rollout_samples:
                    if self.samples_generator.last_stats:  # a round ran but left no samples: no update
                        why = ("every task group had uniform outcomes (--algo.dynamic_filtering_enable dropped them)"
                               if self.samples_generator.last_stats.get("rollout/filtered_groups") else
                               "every episode failed")
                        logger.warning(f"[gaca] rollout round after iteration {global_step}: {why}: no update "
                                       "(recorded with rollout/skipped = 1)")
                        self.metrics.write(skipped_round_record(global_step, self.samples_generator.last_stats,
                                                                rollout_seconds))
                        self.episode_log.write(global_step + 1, self.samples_generator.last_episodes)
                    if is_exhausted:
                        break
                    continue
                status, global_step = self.train_step(rollout_samples, global_step)
                # the run's last iteration, known before its record is written: max_iterations reached, or the final
                # episode's prompts all consumed (a drained loader is often only *seen* at the next, empty, round)
                last = ((bool(args.run.max_iterations) and global_step >= args.run.max_iterations)
                        or (episode == args.train.num_episodes - 1
                            and (is_exhausted or total_consumed_prompts >= (episode + 1) * len(self.prompts_dataloader))))
                val = self.validate(global_step) if validation_due(global_step, args.eval.steps, last) else {}
                status.update(val)
                status["timing/rollout"] = rollout_seconds
                status["timing/experience"] = status.get("timing/make_experience", 0.0)
                status["timing/training"] = status.get("timing/ppo_train", 0.0)
                status["timing/sync"] = status.get("timing/broadcast", 0.0)
                status["timing/step_total"] = time.time() - t0
                log_status = {k: v for k, v in status.items() if k != "generated_samples"}
                logger.info(f"[gaca] iteration {global_step}: {log_status}")
                client_states = {"episode": episode, "global_step": global_step,
                                 "total_consumed_prompts": total_consumed_prompts,
                                 "data_loader_state_dict": self.prompts_dataloader.state_dict()}
                # metrics.jsonl also gets the phases' wall-clock windows (smoke_check.py's per-phase memory peaks)
                self.metrics.write(build_record(global_step, {**log_status, **phase_times(
                    t0, t0 + rollout_seconds, self._windows.get("training"), self._windows.get("sync"))}))
                self.episode_log.write(global_step, self.samples_generator.last_episodes)
                check_finite(log_status)  # after logging it: a NaN loss/KL stops here, not in a later iteration
                check_sync_gap(log_status, args.run.max_logprob_gap)
                self.progress.mark("checkpoint", global_step)
                self.save_logs_and_checkpoints(global_step, log_status, client_states)
                if BEST_METRIC in val:  # the best checkpoint is chosen on the validation panel, never a test panel
                    self.save_best_checkpoint({BEST_METRIC: val[BEST_METRIC]}, global_step, client_states)
                pbar.update(prompts_consumed)
                stop = bool(args.run.max_iterations) and global_step >= args.run.max_iterations
                if is_exhausted:
                    break
            if stop:
                break
        self.progress.mark("done", global_step)
        if self.wandb_logger:
            self.wandb_logger.close()
        if self.tensorboard_logger:
            self.tensorboard_logger.close()


#: the loop position of a run with no checkpoint (OpenRLHF's ``init_checkpoint_states`` without one)
FRESH_CHECKPOINT_STATES = {"episode": 0, "global_step": 0, "total_consumed_prompts": 0, "data_loader_state_dict": {}}


def complete_checkpoint_states(states) -> dict:
    """``states`` (the loaded checkpoint's client states) over :data:`FRESH_CHECKPOINT_STATES`.

    A run killed while saving its first checkpoint leaves ``<ckpt.path>/_actor`` without DeepSpeed's ``latest``:
    OpenRLHF then takes the checkpoint as present, DeepSpeed's load finds nothing and the trainer gets ``{}`` (no
    ``episode``, ``global_step``, ...). That run starts again at iteration 1, with a warning instead of a KeyError.
    """
    states = dict(states or {})
    missing = [k for k in FRESH_CHECKPOINT_STATES if k not in states]
    if missing:
        logger.warning(f"[gaca] no complete checkpoint found (loaded client states lack {missing}; e.g. a run "
                       "killed while saving its first checkpoint): training starts at iteration 1")
    return {**FRESH_CHECKPOINT_STATES, "data_loader_state_dict": {}, **states}  # a fresh {}, not the constant's


def skipped_round_record(global_step: int, rollout_stats: dict, rollout_seconds: float) -> dict:
    """The metrics record of a rollout round that left no step samples (every episode failed): numbered as the
    iteration it would have been (``global_step + 1``; the next real iteration takes the number again), marked
    ``rollout/skipped`` = 1 so that readers (the report, the quickstart) keep it out of the curves, and carrying
    the round's rollout counters (failed episodes, timing), which would otherwise be lost."""
    status = {**rollout_stats, "rollout/skipped": 1.0, "timing/rollout": rollout_seconds}
    return build_record(global_step + 1, status)


def pad_probe(seqs: list, masks: list, vllm_lps: list, ranks: int):
    """Repeat probe items until their count is a multiple of the DP ranks.

    ``async_run_method_batch`` gives each rank ``ceil(len / ranks)`` items: any other count leaves some ranks with
    fewer (or no) forward calls, and uneven ZeRO-3 forwards hang. The repeats duplicate the gap's terms, harmlessly.
    """
    i = 0
    while len(seqs) % ranks:
        seqs, masks, vllm_lps = seqs + [seqs[i]], masks + [masks[i]], vllm_lps + [vllm_lps[i]]
        i += 1
    return seqs, masks, vllm_lps


GacaPPOTrainerActor = ray.remote(GacaPPOTrainer)
