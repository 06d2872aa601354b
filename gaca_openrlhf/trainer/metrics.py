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
)


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
    """Appends one JSON line per iteration (append mode: a resumed run continues the same file)."""

    def __init__(self, save_path: str, filename: str = "metrics.jsonl"):
        os.makedirs(save_path, exist_ok=True)
        self.path = os.path.join(save_path, filename)

    def write(self, record: dict) -> None:
        with open(self.path, "a") as f:
            f.write(json.dumps(record) + "\n")
