"""Edges of the mini-batch plan (``trainer/minibatch.py``) found by mutation testing: argument checks and their
messages, the boundary value 1 of both modes, integer sizes (DeepSpeed takes them as batch sizes)."""
import pytest

from gaca_openrlhf.trainer.minibatch import num_updates, plan_minibatches


def test_neither_mode_given_is_an_error():
    """Catches a default of 1 for either count (an iteration would silently make N or 1 updates)."""
    with pytest.raises(ValueError, match=r"^need mini_batch_steps > 0 or updates_per_iteration > 0$"):
        num_updates(10)


def test_mode_boundaries_at_one():
    """mini_batch_steps=1 is one update per sample; updates_per_iteration=1 is one update (catches ``> 1``)."""
    assert num_updates(5, mini_batch_steps=1) == 5
    assert num_updates(5, updates_per_iteration=1) == 1


@pytest.mark.parametrize("micro, dp", [(0, 1), (1, 0), (0, 0)])
def test_micro_and_dp_must_be_positive(micro, dp):
    with pytest.raises(ValueError, match=rf"^micro batch \({micro}\) and DP ranks \({dp}\) must be >= 1$"):
        plan_minibatches(10, micro=micro, dp=dp, mini_batch_steps=4)


def test_sizes_are_integers():
    """per_update and grad_accum are batch sizes for DeepSpeed: ints, not floats (catches ``/`` for ``//``)."""
    plan = plan_minibatches(10, micro=1, dp=2, mini_batch_steps=4)
    assert (plan.updates, plan.padded, plan.per_update, plan.grad_accum) == (3, 12, 4, 2)
    assert all(type(v) is int for v in (plan.updates, plan.padded, plan.per_update, plan.grad_accum))
