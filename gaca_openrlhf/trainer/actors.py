"""Policy actor with a per-iteration mini-batch split, an LR schedule in iterations and HF-checkpoint rotation.

Step samples make the sample count vary per iteration (:mod:`.minibatch`). Per iteration,
:meth:`StepPolicyMixin.set_iteration_batch` splits the iteration's (padded) samples into exactly ``updates``
mini-batches: DeepSpeed's train batch size (hence its gradient-accumulation steps) and OpenRLHF's loss-normalization
window are set for this iteration, the micro-step counter is re-aligned so a boundary falls after each mini-batch,
and the LR is set to the schedule's value *for this iteration*.

**LR schedule.** As in verl (whose actor steps its LR scheduler once per training step), the schedule counts
iterations: its length is the run's iteration count (``--gaca.max_iterations``, or the prompt data's iterations x
``--train.num_episodes``, whichever is smaller; see :func:`~.ppo_trainer.lr_schedule_iterations`) and the LR is
constant within an iteration, however many updates that iteration makes. DeepSpeed would step the scheduler on each
update, so :meth:`StepPolicyMixin.fit` detaches it from the engine while training.
"""
from __future__ import annotations

import glob
import math
import os
import re
import shutil
import warnings

import torch

from openrlhf.trainer.ray.ppo_actor import PolicyModelActor

from .entropy import policy_forward_with_entropy


def set_lr_position(scheduler, iteration: int) -> None:
    """Put an LR scheduler at ``iteration`` (its LR becomes the schedule's value there)."""
    scheduler.last_epoch = iteration - 1
    with warnings.catch_warnings():  # "lr_scheduler.step() before optimizer.step()": intended here
        warnings.simplefilter("ignore", UserWarning)
        scheduler.step()


def rotate_hf_checkpoints(ckpt_path: str, max_num: int) -> list:
    """Delete all but the newest ``max_num`` ``global_step<N>_hf`` folders under ``ckpt_path``; returns the deleted.

    DeepSpeed checkpoints are rotated by OpenRLHF (``--ckpt.max_num``); the HF copies (``--ckpt.save_hf``) were not
    (~15 GB each for 7B). ``best_*_hf`` folders are kept, as DeepSpeed keeps its best checkpoints.
    """
    if max_num <= 0:
        return []
    found = []
    for path in glob.glob(os.path.join(ckpt_path, "global_step*_hf")):
        m = re.fullmatch(r"global_step(\d+)_hf", os.path.basename(path))
        if m and os.path.isdir(path):
            found.append((int(m.group(1)), path))
    found.sort()
    doomed = [path for _, path in found[: max(0, len(found) - max_num)]]
    for path in doomed:
        shutil.rmtree(path, ignore_errors=True)
    return doomed


class StepPolicyMixin:
    forward_with_entropy = policy_forward_with_entropy  # experience forward + per-step entropy (EMPG; .entropy)

    def set_iteration_batch(self, num_samples: int, updates: int, iteration: int | None = None) -> int:
        """Use ``num_samples / updates`` samples per optimizer update this iteration; returns the grad-accum steps.

        ``iteration`` (0-based) positions the LR schedule (module docstring).
        """
        strategy = self.strategy
        engine = self.actor.model  # DeepSpeedEngine
        micro, dp = engine.train_micro_batch_size_per_gpu(), engine.dp_world_size
        per_update = num_samples // updates
        if per_update * updates != num_samples or per_update % (micro * dp):
            raise ValueError(f"{num_samples} samples cannot form {updates} updates of micro batch {micro} x {dp} ranks")
        engine.set_train_batch_size(per_update)
        engine.micro_steps = 0  # only drives the accumulation boundary; every iteration ends on a boundary
        strategy.accumulated_gradient = per_update // micro // dp
        if iteration is not None:
            set_lr_position(self.actor_scheduler, iteration)
        return strategy.accumulated_gradient

    def fit(self, kl_ctl: float = 0):
        """OpenRLHF's fit with the LR held for the iteration; logs ``train/optimizer_steps``."""
        engine = self.actor.model
        steps_before = engine.global_steps
        trainer = self.trainer
        if not getattr(trainer.training_step, "__gaca_guard__", False):
            trainer.training_step = _guard_empty_micro_batches(trainer.training_step)
        scheduler, engine.lr_scheduler = engine.lr_scheduler, None  # stepped per iteration, not per update
        try:
            status = super().fit(kl_ctl)
        finally:
            engine.lr_scheduler = scheduler
        status["train/optimizer_steps"] = float(engine.global_steps - steps_before)
        return status

    def save_checkpoint(self, tag, client_states=None, metric_value=None, metric_key=None):
        super().save_checkpoint(tag, client_states, metric_value=metric_value, metric_key=metric_key)
        args = self.strategy.args
        if args.ckpt.save_hf and torch.distributed.get_rank() == 0:
            for path in rotate_hf_checkpoints(args.ckpt.path, args.ckpt.max_num):
                self.strategy.print(f"[gaca] removed old HF checkpoint {path} (--ckpt.max_num {args.ckpt.max_num})")


#: token weight reported for a micro-batch of padding copies only (keeps ppo_train's token-weighted means defined)
EMPTY_TOKEN_WEIGHT = 1e-6


def _guard_empty_micro_batches(training_step):
    """Wrap ``ActorPPOTrainer.training_step`` for micro-batches made only of masked padding copies.

    Such a micro-batch adds no gradient, but OpenRLHF's per-micro-batch means (clip ratio, ppo_kl, logprobs_diff)
    are 0/0 = NaN, and when every rank's micro-batch of the same step is one, ``ppo_train`` divides the token-weighted
    metrics by an all-reduced token count of 0 (ZeroDivisionError). They are reported as 0 with a token weight of
    1e-6 (negligible next to real tokens). A whole optimizer window of copies (possible only with the deprecated
    fixed update count) would divide the loss by 0 tokens: the normalizer is set to 1 (the loss is 0 anyway).
    """
    def step(experience, kl_ctl, step_index, loss_batch_info=None):
        if loss_batch_info is not None and float(loss_batch_info["batch_num_tokens"]) == 0:
            one = torch.ones_like(torch.as_tensor(loss_batch_info["batch_num_tokens"]))
            loss_batch_info = dict(loss_batch_info, batch_num_tokens=one, global_batch_size=one)
        status = training_step(experience, kl_ctl, step_index, loss_batch_info)
        if status["num_action_tokens"] == 0:
            for key, weight in status["weights"].items():
                value = status["metrics"][key]
                if weight == "token" and isinstance(value, torch.Tensor):
                    status["metrics"][key] = torch.nan_to_num(value, nan=0.0)
                elif weight == "token" and isinstance(value, float) and math.isnan(value):
                    status["metrics"][key] = 0.0
            status["num_action_tokens"] = EMPTY_TOKEN_WEIGHT
        return status

    step.__gaca_guard__ = True
    return step


class GacaPolicyModelActor(StepPolicyMixin, PolicyModelActor.__ray_actor_class__):
    """GPU policy actor: OpenRLHF's own (NCCL/CUDA-IPC weight sync) plus :class:`StepPolicyMixin`."""
