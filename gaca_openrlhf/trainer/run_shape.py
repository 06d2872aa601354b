"""The shape of one run, computed once from the parsed arguments (:class:`RunShape`).

``train_ppo.parse_args`` builds it after OpenRLHF's validation and the project's checks and attaches it to the
arguments (``args.run_shape``), which every Ray actor receives; the CLI's checks, the trainer, its experience maker
and the policy ranks (through the per-iteration :class:`~.minibatch.MiniBatchPlan`) read it instead of deriving the
data-parallel size, "is this a step estimator?" or the mini-batch rule again. Pure Python: no Ray, vLLM or
DeepSpeed.
"""
from __future__ import annotations

from dataclasses import dataclass

from gaca_openrlhf.advantages import is_step_estimator

from .minibatch import MiniBatchPlan, plan_minibatches


def data_parallel_size(args) -> int:
    """DP ranks of the policy: its GPUs / (ring-attention x tensor-parallel group size), at least 1.

    The one definition; :meth:`RunShape.from_args` uses it, and so does an experience maker built outside a run
    (benchmarks, tests) that was handed no :class:`RunShape`.
    """
    return max(1, args.actor.num_nodes * args.actor.num_gpus_per_node // args.ds.ring_attn_size
               // args.ds.tensor_parallel_size)


def fixed_updates(args) -> int:
    """The deprecated fixed update count: ``--run.updates_per_iteration``, else OpenRLHF's trajectories / train
    batch (at least 1). Only used without ``--run.mini_batch_steps``."""
    k = args.run.updates_per_iteration or 0
    return k if k > 0 else max(1, args.rollout.batch_size * args.rollout.n_samples_per_prompt // args.train.batch_size)


@dataclass(frozen=True)
class RunShape:
    """What a run's arguments fix for its whole length.

    ``dp_size``: data-parallel ranks of the policy; ``step_estimator``: the estimator is one of the project's (step
    samples, :func:`~gaca_openrlhf.advantages.is_step_estimator`); ``micro_batch_size`` (``--train.micro_batch_size``)
    and ``mini_batch_steps`` / ``updates_per_iteration`` (``--run.*``; the fixed count only without mini-batches)
    are the mini-batch rule that :meth:`plan` applies to each iteration's sample count.
    """

    dp_size: int
    step_estimator: bool
    micro_batch_size: int
    mini_batch_steps: int = 0
    updates_per_iteration: int = 0

    @classmethod
    def from_args(cls, args) -> "RunShape":
        """The shape of the run that ``args`` (``train_ppo.parse_args``'s result) describe."""
        mini = args.run.mini_batch_steps or 0
        return cls(dp_size=data_parallel_size(args),
                   step_estimator=is_step_estimator(args.algo.advantage.estimator),
                   micro_batch_size=args.train.micro_batch_size, mini_batch_steps=mini,
                   updates_per_iteration=0 if mini else fixed_updates(args))

    def plan(self, num_samples: int) -> MiniBatchPlan:
        """The mini-batch plan of an iteration with ``num_samples`` step samples
        (:func:`~.minibatch.plan_minibatches`)."""
        return plan_minibatches(num_samples, micro=self.micro_batch_size, dp=self.dp_size,
                                mini_batch_steps=self.mini_batch_steps,
                                updates_per_iteration=self.updates_per_iteration)
