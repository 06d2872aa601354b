"""``trainer/metrics.build_record`` with tensor and numpy scalars (what OpenRLHF's status dicts hold). Catches:
``_scalar`` not unwrapping 0-d tensors / numpy scalars with ``.item()`` (the record would drop them, or json.dumps
would fail on them)."""
import json
import math

import numpy as np
import torch

from gaca_openrlhf.trainer.metrics import build_record


def test_tensor_and_numpy_scalars_are_recorded_as_numbers():
    status = {"policy_loss": torch.tensor(0.5), "kl": np.float32(0.25), "extra/count": torch.tensor(3),
              "extra/nan": torch.tensor(float("nan")), "extra/list": [1.0, 2.0]}
    r = build_record(7, status)
    assert r["iteration"] == 7 and r["policy_loss"] == 0.5 and r["kl"] == 0.25
    assert r["extra/count"] == 3 and type(r["extra/count"]) is int and r["extra/nan"] is None
    assert "extra/list" not in r  # not a number: left out
    assert json.loads(json.dumps(r))["policy_loss"] == 0.5
    assert math.isinf(build_record(1, {"policy_loss": torch.tensor(float("inf"))})["policy_loss"])
