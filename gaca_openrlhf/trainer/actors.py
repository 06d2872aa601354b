"""Policy actor with a per-iteration mini-batch split, an LR schedule in iterations and HF-checkpoint rotation.

Step samples make the sample count vary per iteration (:mod:`.minibatch`). Per iteration,
:meth:`StepPolicyMixin.set_iteration_batch` takes the iteration's :class:`~.minibatch.MiniBatchPlan` and splits its
(padded) samples into exactly ``plan.updates`` mini-batches: DeepSpeed's train batch size (hence its
gradient-accumulation steps) and OpenRLHF's loss-normalization window are set for this iteration, the micro-step
counter is re-aligned so a boundary falls after each mini-batch, and the LR is set to the schedule's value *for this
iteration*.

**LR schedule.** As in verl (whose actor steps its LR scheduler once per training step), the schedule counts
iterations: its length is the run's iteration count (``--run.max_iterations``, or the prompt data's iterations x
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

from .chunked_actor import install_chunked_forward
from .entropy import policy_forward_with_entropy
from .minibatch import MiniBatchPlan, min_token_budget_parts, token_budget_partition


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


def remove_older_best_hf(ckpt_path: str, tag: str) -> list:
    """Delete the ``best*_hf`` folders under ``ckpt_path`` other than ``<tag>_hf``; returns the deleted. OpenRLHF
    removes the older best DeepSpeed checkpoints when it saves a new best, but not their HF copies."""
    doomed = [p for p in glob.glob(os.path.join(ckpt_path, "best*_hf"))
              if os.path.isdir(p) and os.path.basename(p) != f"{tag}_hf"]
    for path in doomed:
        shutil.rmtree(path, ignore_errors=True)
    return doomed


def _dynamic_batches(strategy) -> bool:
    """``--train.dynamic_batch_enable`` of the strategy's arguments (False where they are absent)."""
    train = getattr(getattr(strategy, "args", None), "train", None)
    return bool(getattr(train, "dynamic_batch_enable", False))


def _dp_all_reduce(strategy, values, op):
    """All-reduce a list of numbers over the data-parallel group (identity without torch.distributed)."""
    import torch.distributed as dist

    t = torch.tensor(values, dtype=torch.float64)
    if dist.is_available() and dist.is_initialized():
        mesh = getattr(strategy, "ds_device_mesh", None)
        group = mesh["dp"].get_group() if mesh is not None else None
        device = torch.device("cuda", torch.cuda.current_device()) if torch.cuda.is_available() else "cpu"
        t = t.to(device)
        dist.all_reduce(t, op=op, group=group)
    return t.cpu().tolist()


def setup_step_dynamic_batch(buffer, strategy, updates: int, budget: int, seed: int) -> None:
    """Token-budget micro-batches over a rank's replay buffer of step samples (replaces OpenRLHF's
    ``NaiveReplayBuffer.setup_dynamic_batch``, whose step count assumes one sample per episode).

    The rank's samples (shuffled with ``seed``, as the fixed-size path's DataLoader shuffles) form ``updates``
    windows of equal size, one per optimizer update (the mini-batch plan in step samples, unchanged); each window is
    split into the same number of micro-batches on every rank (the largest rank minimum for ``budget`` tokens,
    :func:`~.minibatch.token_budget_partition`). The loss normalizer of every micro-batch is the window's global
    response-token count (OpenRLHF's per-token mean over the mini-batch, so the LR means the same); padding copies
    have a zero action mask and count neither tokens nor samples.
    """
    import random

    import torch.distributed as dist

    items = buffer.items
    n = len(items)
    if updates < 1 or n % updates:
        raise ValueError(f"{n} local step samples cannot form {updates} equal update windows")
    per_window = n // updates
    order = list(range(n))
    random.Random(seed).shuffle(order)
    windows = [order[w * per_window:(w + 1) * per_window] for w in range(updates)]
    lengths = [int(item.attention_mask.sum()) for item in items]
    local_min = [min_token_budget_parts([lengths[i] for i in win], budget) for win in windows]
    counts = [int(c) for c in _dp_all_reduce(strategy, local_min, dist.ReduceOp.MAX)]
    tokens = [sum(float(items[i].action_mask.sum()) for i in win) for win in windows]
    samples = [sum(float(items[i].action_mask.sum() > 0) for i in win) for win in windows]
    reduced = _dp_all_reduce(strategy, tokens + samples, dist.ReduceOp.SUM)
    g_tokens, g_samples = reduced[:updates], reduced[updates:]
    buffer.dynamic_indices, buffer.dynamic_sample_loss_scale = [], []
    buffer.dynamic_batch_num_tokens, buffer.dynamic_global_batch_size, buffer.dynamic_optimizer_step = [], [], []
    for w, win in enumerate(windows):
        k = max(1, min(counts[w], len(win)))
        parts = token_budget_partition([lengths[i] for i in win], k)
        for j, part in enumerate(parts):
            buffer.dynamic_indices.append([win[i] for i in part])
            buffer.dynamic_sample_loss_scale.append(len(part) / len(win))
            buffer.dynamic_batch_num_tokens.append(g_tokens[w])
            buffer.dynamic_global_batch_size.append(g_samples[w])
            buffer.dynamic_optimizer_step.append(int(j == k - 1))
    buffer.sample_batch_size = 1


#: checkpoint entry holding the global torch (CPU) RNG state: OpenRLHF's ppo_train shuffles the replay buffer with a
#: DataLoader that seeds itself from that generator, so without it a resumed run trains on the same samples in another
#: micro-batch order (weights equal to the last bits only). DeepSpeed keeps one copy (data-parallel rank 0's); every
#: rank's is the same, all being seeded alike and drawn alike.
TORCH_RNG_KEY = "gaca_torch_rng_state"


class StepPolicyMixin:
    forward_with_entropy = policy_forward_with_entropy  # experience forward + per-step entropy (EMPG; .entropy)

    def init_model_from_pretrained(self, strategy, pretrain, max_steps=None, vllm_engines=None):
        """OpenRLHF's model set-up, then the chunked log-prob/entropy forward (``--run.logprob_chunk_size``)."""
        out = super().init_model_from_pretrained(strategy, pretrain, max_steps=max_steps, vllm_engines=vllm_engines)
        chunk = int(getattr(getattr(strategy.args, "run", None), "logprob_chunk_size", 0) or 0)
        if install_chunked_forward(self.actor, chunk):
            strategy.print(f"[gaca] log-probs/entropy in chunks of {chunk} tokens (no full-vocabulary logits)")
        rng = (getattr(self, "checkpoint_states", None) or {}).get(TORCH_RNG_KEY)
        if rng is not None:  # resumed: the next ppo_train shuffles its micro-batches as the uninterrupted run's did
            torch.set_rng_state(rng)
        return out

    def set_iteration_batch(self, plan: MiniBatchPlan, iteration: int | None = None) -> int:
        """Use ``plan.per_update`` samples per optimizer update this iteration; returns the grad-accum steps.

        The plan (:func:`~.minibatch.plan_minibatches`, from the run's shape) is checked against this rank's DeepSpeed
        engine: its updates must split into whole micro-batches on every DP rank, else it fails here.
        ``iteration`` (0-based) positions the LR schedule (module docstring). With token-budget micro-batches
        (``--train.dynamic_batch_enable``) DeepSpeed runs with micro batch 1 and no accumulation (OpenRLHF's dynamic
        mode, which steps the optimizer itself at each window's end): only the update count is kept, for
        :func:`setup_step_dynamic_batch`; returns 1.
        """
        strategy = self.strategy
        engine = self.actor.model  # DeepSpeedEngine
        micro, dp = engine.train_micro_batch_size_per_gpu(), engine.dp_world_size
        num_samples, updates, per_update = plan.padded, plan.updates, plan.per_update
        if _dynamic_batches(strategy):
            if per_update * updates != num_samples or per_update % dp:
                raise ValueError(f"{num_samples} samples cannot form {updates} updates over {dp} ranks")
            self._step_updates, self._step_iteration = updates, iteration or 0
            if iteration is not None:
                set_lr_position(self.actor_scheduler, iteration)
            return 1
        if per_update * updates != num_samples or per_update % (micro * dp):
            raise ValueError(f"{num_samples} samples cannot form {updates} updates of micro batch {micro} x {dp} ranks")
        engine.set_train_batch_size(per_update)
        engine.micro_steps = 0  # only drives the accumulation boundary; every iteration ends on a boundary
        strategy.accumulated_gradient = per_update // micro // dp
        if iteration is not None:
            set_lr_position(self.actor_scheduler, iteration)
        return strategy.accumulated_gradient

    def fit(self, kl_ctl: float = 0):
        """OpenRLHF's fit with the LR held for the iteration; logs ``train/optimizer_steps`` and the mean and max of
        the global grad norm over the iteration's optimizer updates (:func:`grad_norm_stats`; OpenRLHF's own
        ``actor_grad_norm`` is the last update's only)."""
        engine = self.actor.model
        steps_before = engine.global_steps
        trainer = self.trainer
        if not getattr(trainer.training_step, "__gaca_guard__", False):
            trainer.training_step = _guard_empty_micro_batches(trainer.training_step)
        if not getattr(trainer.training_step, "__gaca_grad_norms__", False):
            trainer.training_step = _record_update_grad_norms(trainer.training_step, engine,
                                                              lambda v: self._update_grad_norms.append(v))
        self._update_grad_norms = []
        if _dynamic_batches(getattr(self, "strategy", None)):  # token-budget micro-batches in the update windows
            args = self.strategy.args
            buffer = trainer.replay_buffer
            updates, seed = getattr(self, "_step_updates", 1), args.train.seed + getattr(self, "_step_iteration", 0)
            buffer.setup_dynamic_batch = lambda strategy: setup_step_dynamic_batch(
                buffer, strategy, updates, args.train.max_tokens_per_gpu, seed)
        scheduler, engine.lr_scheduler = engine.lr_scheduler, None  # stepped per iteration, not per update
        try:
            status = super().fit(kl_ctl)
        finally:
            engine.lr_scheduler = scheduler
        status["train/optimizer_steps"] = float(engine.global_steps - steps_before)
        status.update(grad_norm_stats(self._update_grad_norms))
        return status

    def save_checkpoint(self, tag, client_states=None, metric_value=None, metric_key=None):
        """OpenRLHF's checkpoint plus this rank's global torch RNG state (see :data:`TORCH_RNG_KEY`); a best
        checkpoint leaves 'latest' on the regular one and replaces the older best HF copy."""
        client_states = dict(client_states or {}, **{TORCH_RNG_KEY: torch.get_rng_state()})
        args = self.strategy.args
        # a best checkpoint (chosen on validation) is saved after the iteration's regular one: DeepSpeed would point
        # 'latest' at it, so a resume (and RESUME=1's checks) would read the best copy instead of the regular one
        latest = os.path.join(args.ckpt.path, "_actor", "latest")
        regular = None
        if tag.startswith("best") and os.path.isfile(latest):
            with open(latest) as f:
                regular = f.read()
        super().save_checkpoint(tag, client_states, metric_value=metric_value, metric_key=metric_key)
        if torch.distributed.get_rank() != 0:
            return
        if regular is not None:
            with open(latest, "w") as f:
                f.write(regular)
        if args.ckpt.save_hf:
            for path in rotate_hf_checkpoints(args.ckpt.path, args.ckpt.max_num):
                self.strategy.print(f"[gaca] removed old HF checkpoint {path} (--ckpt.max_num {args.ckpt.max_num})")
            if tag.startswith("best"):
                for path in remove_older_best_hf(args.ckpt.path, tag):
                    self.strategy.print(f"[gaca] removed the older best HF checkpoint {path}")


def grad_norm_stats(norms) -> dict:
    """``train/grad_norm_mean`` / ``train/grad_norm_max`` over one iteration's optimizer updates (each DeepSpeed's
    global pre-clipping norm, the same on every rank); NaN without an update."""
    norms = [float(v) for v in norms]
    if not norms:
        return {"train/grad_norm_mean": float("nan"), "train/grad_norm_max": float("nan")}
    return {"train/grad_norm_mean": sum(norms) / len(norms), "train/grad_norm_max": max(norms)}


def _record_update_grad_norms(training_step, engine, sink):
    """Wrap ``ActorPPOTrainer.training_step`` so that each call that stepped the optimizer (DeepSpeed's
    ``global_steps`` moved: the end of a gradient-accumulation window) hands its ``actor_grad_norm`` to ``sink``.
    OpenRLHF reports that norm on every micro-step, stale between updates, and keeps only the last update's."""
    def step(*args, **kwargs):
        before = engine.global_steps
        status = training_step(*args, **kwargs)
        if engine.global_steps != before and "actor_grad_norm" in status["metrics"]:
            sink(float(status["metrics"]["actor_grad_norm"]))
        return status

    step.__gaca_grad_norms__ = True
    step.__gaca_guard__ = getattr(training_step, "__gaca_guard__", False)
    return step


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
