"""Issue 9: a NaN/inf policy loss, KL or sync gap stops training in the iteration it appears, naming the likely cause.

The loop is GacaPPOTrainer.fit (test_trainer_loop.Loop: real StepSamplesGenerator, stubbed model side); the
experience counters are StepExperienceMaker.finite_stats on real OpenRLHF Experiences.
Bugs each test catches: the check not called in fit (training continues on NaN weights, as the ALFWorld rehearsal
did and exited 0), a NaN gap ignored when the gap limit is off, masked positions left out of the counters (OpenRLHF
multiplies log-probs by the mask: NaN * 0 = NaN still poisons the loss).
"""
import json
import math

import pytest
import torch

from openrlhf.trainer.ppo_utils.experience import Experience

from gaca_openrlhf.trainer.experience import StepExperienceMaker
from gaca_openrlhf.trainer.ppo_trainer import NonFiniteTrainingError, WeightSyncError, check_finite, check_sync_gap
from test_trainer_loop import Loop  # same folder (pytest's rootdir import mode)

NAN = float("nan")


def test_nan_kl_stops_training_in_iteration_1_after_logging_it(tmp_path):
    loop = Loop(tmp_path, status={"policy_loss": 0.1, "kl": NAN, "sync/logprob_gap": 0.001,
                                  "check/ref_logprobs_nonfinite": 7.0, "check/actor_logprobs_nonfinite": 0.0})
    with pytest.raises(NonFiniteTrainingError, match="reference model's log-probs were non-finite \\(7 of them\\)"):
        loop.fit()
    assert len(loop.trained) == 1  # iteration 1 of 3, not after the run
    assert loop.saved == []  # no checkpoint of NaN weights
    record = json.loads((tmp_path / "metrics.jsonl").read_text().splitlines()[0])
    assert record["kl"] is None and record["policy_loss"] == 0.1  # logged (JSON null) before stopping


@pytest.mark.parametrize("status, cause", [
    ({"policy_loss": NAN, "kl": 0.0}, "the update itself diverged"),
    ({"policy_loss": math.inf, "kl": 0.0, "check/actor_logprobs_nonfinite": 3.0}, "experience forward was already"),
    ({"policy_loss": NAN, "kl": NAN, "sync/logprob_gap_rollout": NAN}, "experience forward was already"),
    ({"policy_loss": 0.2, "kl": -math.inf, "check/ref_logprobs_nonfinite": 1.0}, "reference model"),
])
def test_check_finite_names_the_cause(status, cause):
    with pytest.raises(NonFiniteTrainingError, match=cause):
        check_finite(status)


def test_check_finite_passes_finite_and_missing_metrics():
    check_finite({"policy_loss": 0.0, "kl": 1e-4, "check/ref_logprobs_nonfinite": 0.0})
    check_finite({})  # e.g. an iteration without a KL term


def test_nan_sync_gap_stops_even_without_a_gap_limit():
    check_sync_gap({"sync/logprob_gap": 3.0}, 0.0)  # finite: the limit is off
    with pytest.raises(WeightSyncError, match="NaN weights reached vLLM"):
        check_sync_gap({"sync/logprob_gap": NAN}, 0.0)
    with pytest.raises(WeightSyncError):
        check_sync_gap({"sync/logprob_gap": math.inf}, 0.0)


def _experience(actor, ref, mask):
    return Experience(sequences=torch.ones_like(mask), action_mask=mask, action_log_probs=actor,
                      base_action_log_probs=ref)


def test_finite_stats_count_masked_positions_too():
    maker = StepExperienceMaker.__new__(StepExperienceMaker)
    mask = torch.tensor([[0, 1, 1], [0, 1, 0]])
    clean = torch.full((2, 3), -1.0)
    ref = clean.clone()
    ref[1, 2] = NAN  # a masked position: masked_mean / aggregate_loss would still be NaN
    ref[0, 0] = math.inf
    stats = maker.finite_stats([_experience(clean, clean, mask), _experience(clean, ref, mask)])
    assert stats == {"check/actor_logprobs_nonfinite": 0.0, "check/ref_logprobs_nonfinite": 2.0}
    # no reference model (KL off): nothing to count
    assert maker.finite_stats([_experience(clean, None, mask)])["check/ref_logprobs_nonfinite"] == 0.0
