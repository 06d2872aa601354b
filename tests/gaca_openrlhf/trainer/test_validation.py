"""Validation figures and schedule (``trainer/validation.py``); the loop's use of them is in test_trainer_loop.py."""
import math

import pytest

from gaca_openrlhf.trainer.validation import validation_due, validation_stats


def test_due_every_n_and_after_the_last():
    assert [i for i in range(1, 12) if validation_due(i, 5, last=i == 11)] == [5, 10, 11]
    assert [i for i in range(1, 4) if validation_due(i, 1, last=False)] == [1, 2, 3]
    assert not any(validation_due(i, 0, last=True) for i in range(1, 4))  # off: not even the last
    assert not validation_due(3, -1, last=True)


def test_stats_count_failed_episodes_as_lost():
    """An episode that ended in an environment failure is lost, whatever its last report (here won=True, score 1),
    and counts in the denominator. Catches: failed episodes dropped (success 1.0) or counted as won (0.75)."""
    eps = [dict(won=True, failed=False, score=1.0, steps=[1, 2], task_type="pick"),
           dict(won=False, failed=False, score=0.25, steps=[1, 2, 3, 4], task_type="pick"),
           dict(won=True, failed=False, score=1.0, steps=[1, 2, 3], task_type="clean"),
           dict(won=True, failed=True, score=1.0, steps=[1], task_type="clean")]
    s = validation_stats(eps)
    assert s["val/success_rate"] == 0.5 and s["val/num_episodes"] == 4 and s["val/failed_episodes"] == 1
    assert s["val/score"] == pytest.approx((1.0 + 0.25 + 1.0 + 0.0) / 4)
    assert s["val/num_steps"] == pytest.approx(10 / 4)
    assert s["val/success_rate/pick"] == 0.5 and s["val/success_rate/clean"] == 0.5


def test_stats_of_an_empty_round_are_nan_not_zero():
    s = validation_stats([])
    assert s["val/num_episodes"] == 0 and math.isnan(s["val/success_rate"])
