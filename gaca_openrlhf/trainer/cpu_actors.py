"""The GACA policy actor on the CPU backend and in the rehearsal: :class:`~.actors.GacaPolicyModelActor` with the
blob weight sync of :mod:`gaca_openrlhf.cpu` (no NCCL group).

The device pieces stay in :mod:`gaca_openrlhf.cpu` as mixins that know nothing of the trainer; they are composed with
the trainer's actor here, one floor up, so the CPU backend never imports the trainer. Ray pickles these classes by
this module's path.
"""
from __future__ import annotations

import ray

from gaca_openrlhf.cpu.actors import BlobWeightSyncMixin
from gaca_openrlhf.cpu.rehearsal import RehearsalPolicyMixin

from .actors import GacaPolicyModelActor


class _CPUPolicyModelActor(BlobWeightSyncMixin, GacaPolicyModelActor):
    """The policy actor without the NCCL sync group, syncing vLLM with a weight blob."""


#: the CPU backend's policy actor (``num_gpus=0``)
CPUPolicyModelActor = ray.remote(num_gpus=0)(_CPUPolicyModelActor)


class _RehearsalPolicyModelActor(RehearsalPolicyMixin, _CPUPolicyModelActor):
    """The blob-syncing policy actor of the rehearsal (DeepSpeed's state offload/reload calls recorded)."""


#: the rehearsal's policy actor: placed like the GPU one (one logical GPU)
RehearsalPolicyModelActor = ray.remote(num_gpus=1)(_RehearsalPolicyModelActor)
