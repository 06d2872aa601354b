"""``StepExperienceMaker.finite_stats`` counts the policy's own non-finite log-probs (test_nonfinite_stop.py covers
the reference side). Catches: the policy field's name misspelt (every policy NaN would count as 0, and the NaN-stop
message would blame the update instead of the weights)."""
import math

import torch
from openrlhf.trainer.ppo_utils.experience import Experience

from gaca_openrlhf.trainer.experience import StepExperienceMaker


def test_policy_log_prob_nans_are_counted():
    maker = StepExperienceMaker.__new__(StepExperienceMaker)
    mask = torch.tensor([[1, 1, 0]])
    actor = torch.tensor([[float("nan"), -1.0, math.inf]])
    exp = Experience(sequences=torch.ones_like(mask), action_mask=mask, action_log_probs=actor,
                     base_action_log_probs=torch.zeros(1, 3))
    assert maker.finite_stats([exp, exp]) == {"check/actor_logprobs_nonfinite": 4.0,
                                              "check/ref_logprobs_nonfinite": 0.0}
