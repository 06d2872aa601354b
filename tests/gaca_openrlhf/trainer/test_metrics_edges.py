"""metrics.jsonl values (mutmut survivors): tensors become numbers, NaN becomes null, an infinite loss stays
infinite (a diverged run must not look like a missing value), a None value is kept as null without an error."""
import json
import math

import torch

from gaca_openrlhf.trainer.metrics import MetricsWriter, build_record


def test_tensor_nan_inf_and_none_values(tmp_path):
    rec = build_record(1, {"policy_loss": torch.tensor(0.25), "sync/logprob_gap": torch.tensor(float("nan")),
                           "kl": float("inf"), "timing/sync": None, "extra": torch.tensor(2.0)})
    assert rec["policy_loss"] == 0.25 and type(rec["policy_loss"]) is float
    assert rec["sync/logprob_gap"] is None and rec["timing/sync"] is None
    assert rec["kl"] == math.inf and rec["extra"] == 2.0
    MetricsWriter(str(tmp_path), filename="m.jsonl").write(rec)
    back = json.loads((tmp_path / "m.jsonl").read_text())
    assert back["kl"] == math.inf and back["sync/logprob_gap"] is None
