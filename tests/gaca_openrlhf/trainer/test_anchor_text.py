"""Anchor texts travel from the step records to the advantage hook by hash (similarity grouping)."""

import pytest

from gaca_openrlhf.advantages import hash_anchor
from gaca_openrlhf.trainer import anchor_text
from gaca_openrlhf.trainer.samples import step_experience


def _step(text, t=0):
    return dict(prompt_ids=[1, 2, 3], response_ids=[4, 5], logprobs=[-0.5, -1.0], reward=0.0, valid=True,
                anchor_id=hash_anchor(text), anchor_text=text, step_index=t, truncated=False)


def test_step_samples_store_their_anchor_text_until_cleared():
    anchor_text.clear()
    episode = dict(prompt="task", label="", score=0.0)
    exps = [step_experience(_step(t, i), 0, 0, episode) for i, t in enumerate(["room A", "room B", "room A"])]
    ids = [int(e.info["gaca/anchor_id"]) for e in exps]
    assert anchor_text.lookup(ids) == ["room A", "room B", "room A"]
    anchor_text.clear()
    with pytest.raises(ValueError, match="anchor text"):
        anchor_text.lookup(ids)


def test_records_without_text_store_nothing():
    anchor_text.clear()
    step = _step("room C")
    step.pop("anchor_text")
    step_experience(step, 0, 0, dict(prompt="task", label="", score=0.0))
    with pytest.raises(ValueError):
        anchor_text.lookup([hash_anchor("room C")])
