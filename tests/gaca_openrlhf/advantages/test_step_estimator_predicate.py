"""``is_step_estimator``: the one answer to "is this a step estimator?" (the CLI, the run's shape, the trainer and
the experience maker ask it). It must agree with the registry for every registered estimator, also one registered
later, and refuse OpenRLHF's own estimators. Each test names the one-line bug it catches."""
from __future__ import annotations

import pytest

from gaca_openrlhf.advantages import get_estimator, is_step_estimator, list_estimators, register_estimator
from gaca_openrlhf.advantages import registry


def test_every_registered_estimator_is_a_step_estimator():
    """Catches: the predicate reading a fixed list (or a spec flag) instead of the registry."""
    names = list_estimators()
    assert {"grpo", "gigpo", "gaca", "fixed_mixture", "gaca_permuted", "hgpo", "empg"} <= set(names)
    for name in names:
        assert is_step_estimator(name) is True and get_estimator(name).name == name


@pytest.mark.parametrize("name", ["gae", "reinforce", "rloo", "reinforce_baseline", "group_norm", "dr_grpo", "",
                                  "GACA", "gaca "])
def test_openrlhf_estimators_and_near_misses_are_not(name):
    """Catches: a prefix/case-insensitive match, or OpenRLHF's estimators taken for step estimators."""
    assert is_step_estimator(name) is False


def test_an_estimator_registered_later_is_one(monkeypatch):
    """Catches: the predicate answering from a snapshot taken at import."""
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    assert not is_step_estimator("my_estimator")
    register_estimator("my_estimator")(lambda ctx, cfg: None)
    assert is_step_estimator("my_estimator") and "my_estimator" in list_estimators()
