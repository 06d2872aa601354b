"""Per-iteration metrics: ``<save_path>/metrics.jsonl`` always, plus OpenRLHF's tensorboard/wandb loggers."""
from __future__ import annotations

import json
import math
import os

#: keys every metrics.jsonl record carries (NaN where an estimator has no such quantity, e.g. lambda for GRPO)
REQUIRED_KEYS = (
    "iteration", "rollout/success_rate", "rollout/score", "rollout/num_steps", "rollout/valid_action_ratio",
    "adv/lambda_mean", "adv/lambda_saturated_frac", "adv/step_group_size_mean", "adv/singleton_frac", "adv/seconds",
    "policy_loss", "sync/logprob_gap", "timing/generation", "timing/environment", "timing/experience",
    "timing/training", "timing/sync",
    # is the run learning? (issue 35; docs/design.md §4 "Learning signals")
    "policy/entropy", "rollout/mixed_outcome_group_frac", "adv/nonzero_frac", "train/grad_norm_mean",
    "train/grad_norm_max", "actor_lr", "rollout/off_list_frac",
)


#: the phases of an iteration, in order, whose wall-clock windows each record carries as ``timing/unix_<phase>_start``
#: / ``_end`` (Unix seconds; the rollout's end is the experience pass's start): ``examples/gpu/smoke_check.py`` maps
#: its ``nvidia-smi`` samples onto them for the per-phase memory peaks
PHASES = ("rollout", "experience", "training", "sync")
PHASE_PREFIX = "timing/unix_"


def phase_times(iteration_start: float, rollout_end: float, training: tuple, sync: tuple) -> dict:
    """The ``timing/unix_<phase>_start/_end`` entries of one iteration: rollout from ``iteration_start`` to
    ``rollout_end``, the experience pass from there to training's start, ``training`` and ``sync`` as
    (start, end); a phase that did not run (no weight sync without engines) is left out."""
    windows = {"rollout": (iteration_start, rollout_end),
               "experience": (rollout_end, training[0]) if training else None, "training": training, "sync": sync}
    return {f"{PHASE_PREFIX}{phase}_{edge}": t for phase in PHASES if windows[phase]
            for edge, t in zip(("start", "end"), windows[phase])}


def _scalar(value):
    return value.item() if hasattr(value, "item") else value  # 0-d tensors / numpy scalars -> Python numbers


def _plain(value):
    value = _scalar(value)
    if isinstance(value, float) and not math.isfinite(value):
        return None if math.isnan(value) else value  # JSON has no NaN: null
    return value


def build_record(iteration: int, status: dict) -> dict:
    """The JSON record of one iteration: the required keys first (None if missing), then every other number
    (NaN as None)."""
    record = {"iteration": iteration}
    for key in REQUIRED_KEYS[1:]:
        record[key] = _plain(status.get(key, float("nan")))
    for key, value in sorted(status.items()):
        if key not in record and isinstance(_scalar(value), (int, float)):  # a NaN is kept, as null: a NaN kl must show
            record[key] = _plain(value)
    return record


class MetricsWriter:
    """Appends one JSON line per iteration. :meth:`start` (called once the run knows where it starts) makes the
    file hold this run's records only: a resumed run keeps the records up to the checkpoint it resumed from, and a
    fresh run never appends to an earlier run's file."""

    def __init__(self, save_path: str, filename: str = "metrics.jsonl"):
        os.makedirs(save_path, exist_ok=True)
        self.path = os.path.join(save_path, filename)

    def start(self, resumed_at: int) -> list[str]:
        """Prepare the file for a run starting after iteration ``resumed_at`` (0 = a fresh run): records of later
        iterations (an interrupted run's work after its last checkpoint, or a whole earlier run) are moved to
        ``<file>.dropped-<unix time>`` so nothing is lost and two runs never mix. Returns the moved lines."""
        if not os.path.isfile(self.path):
            return []
        with open(self.path) as f:
            lines = [ln for ln in f.read().splitlines() if ln.strip()]
        keep, drop = [], []
        for i, line in enumerate(lines):
            try:
                iteration = int(json.loads(line).get("iteration", i + 1))
            except (ValueError, TypeError, AttributeError):
                iteration = i + 1  # unreadable line: judged by position, as the readers number it
            (keep if resumed_at and iteration <= resumed_at else drop).append(line)
        if drop:
            import time

            with open(f"{self.path}.dropped-{int(time.time())}", "a") as f:
                f.write("\n".join(drop) + "\n")
            tmp = self.path + ".tmp"
            with open(tmp, "w") as f:
                f.write("".join(ln + "\n" for ln in keep))
            os.replace(tmp, self.path)
        return drop

    def write(self, record: dict) -> None:
        with open(self.path, "a") as f:
            f.write(json.dumps(record) + "\n")
