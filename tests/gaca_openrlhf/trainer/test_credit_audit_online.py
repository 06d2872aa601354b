"""The online credit audit in the advantage hook (``StepExperienceMaker.credit_audit_stats``, docs/credit_audit.md §6).

Real Experiences from ``step_experience`` and the real maker (as in ``test_experience_hook_edges``); the expected
sign agreements are counted by hand from the batch below.
"""
import math

import pytest
import torch

from gaca_openrlhf.trainer.samples import pad_to_multiple, step_experience

from test_experience_hook_edges import _maker  # same folder (rootdir import mode)

# (group, trajectory, won, per-step oracle progress); the won trajectories get reward 10 on their last step
EPISODES = [
    (0, 0, True, [1.0, 1.0]),
    (0, 1, False, [-1.0, 0.0]),
    (1, 2, True, [1.0, -1.0]),
    (1, 3, False, [1.0, 0.0]),
]


def _batch():
    samples = []
    for group, traj, won, progress in EPISODES:
        episode = dict(prompt=f"task{group}", label="", won=won, score=float(won))
        for t, p in enumerate(progress):
            last = t == len(progress) - 1
            step = dict(prompt_ids=[1, 2, 3], response_ids=[50, 51], logprobs=[-0.5, -0.5],
                        reward=10.0 if (won and last) else 0.0, valid=True, anchor_id=1000 * traj + t,
                        step_index=t, truncated=False, progress=p)
            samples.append(step_experience(step, group, traj, episode))
    return samples


def test_audit_keys_match_the_hand_count():
    """GRPO gives every step of a won trajectory a positive advantage and of a lost one a negative one. Non-zero
    progress: group 0 has 3 steps, all agreeing; group 1 has 3, one agreeing (+1 in the won trajectory): 4 / 6.
    Hard subsets: one good step in a failed episode (group 1), one bad step in a won one (group 1).
    Catches: progress or outcome not carried from the step record, padding copies counted, the sign rule inverted."""
    maker = _maker(dp=1, rollout_micro=4)
    maker.compute_advantages_and_returns(maker.split_rollout_samples(pad_to_multiple(_batch(), 12, seed=0)))
    stats = maker.last_stats
    assert stats["audit/steps_with_progress"] == 6
    assert stats["audit/grpo/sign_agree"] == pytest.approx(4 / 6)
    assert stats["audit/grpo/n_all"] == 6
    assert stats["audit/grpo/n_good_in_failed"] == 1 and stats["audit/grpo/n_bad_in_won"] == 1
    assert stats["audit/grpo/sign_agree_good_in_failed"] == 0.0 and stats["audit/grpo/sign_agree_bad_in_won"] == 0.0
    # every registered estimator is scored on the same batch as a shadow of the trained one (EMPG only where the
    # experience pass computed the entropy, which these hand-made samples lack)
    assert {"audit/gigpo/sign_agree", "audit/gaca/sign_agree"} <= set(stats)
    assert "audit/empg/sign_agree" not in stats
    assert stats["audit/seconds"] >= 0
    assert not any(k.startswith("gaca/progress") or k.startswith("gaca/won") for e in [stats] for k in e)


def test_no_oracle_means_no_audit_and_a_still_batch_only_its_count():
    """Without progress (NaN: the environment's oracle is off) the record has no audit keys at all; with progress
    that is zero everywhere only the count (0), since no sign can agree with nothing."""
    samples = _batch()
    for s in samples:
        s.info["gaca/progress"] = torch.tensor([math.nan])
    maker = _maker(dp=1, rollout_micro=4)
    maker.compute_advantages_and_returns(maker.split_rollout_samples(samples))
    assert not any(k.startswith("audit/") for k in maker.last_stats)
    samples = _batch()
    for s in samples:
        s.info["gaca/progress"] = torch.tensor([0.0])
    maker.compute_advantages_and_returns(maker.split_rollout_samples(samples))
    assert {k: v for k, v in maker.last_stats.items() if k.startswith("audit/")} == {"audit/steps_with_progress": 0.0}


def test_a_failing_audit_does_not_stop_training(monkeypatch):
    """A bug in the diagnostic is logged and counted (``audit/failed``); the advantages are still computed."""
    import gaca_openrlhf.trainer.experience as experience

    def broken(*a, **k):
        raise RuntimeError("boom")

    monkeypatch.setattr(experience, "credit_audit", broken)
    maker = _maker(dp=1, rollout_micro=4)
    out = maker.compute_advantages_and_returns(maker.split_rollout_samples(_batch()))
    assert maker.last_stats["audit/failed"] == 1.0 and all(e.advantages is not None for e in out)


def test_each_estimator_runs_once_per_iteration(monkeypatch):
    """The learning signal (``adv/nonzero_frac/<est>``) and the audit (``audit/<est>/*``) read one pass of every
    estimator over the batch: each registered estimator is computed once, the trained one (GRPO here) once more for
    training. Catches either consumer computing the estimators again (the audit had doubled the advantage cost)."""
    import collections
    import dataclasses

    from gaca_openrlhf.advantages import registry

    calls = collections.Counter()

    def counting(spec):
        def fn(*a, **kw):
            calls[spec.name] += 1
            return spec.fn(*a, **kw)
        return dataclasses.replace(spec, fn=fn)

    monkeypatch.setattr(registry, "_REGISTRY", {n: counting(s) for n, s in registry._REGISTRY.items()})
    maker = _maker(dp=1, rollout_micro=4)
    maker.compute_advantages_and_returns(maker.split_rollout_samples(_batch()))
    stats = maker.last_stats
    ran = {k.split("/")[2] for k in stats if k.startswith("adv/nonzero_frac/")}
    assert ran and ran == {k.split("/")[1] for k in stats if k.startswith("audit/") and k.endswith("/sign_agree")}
    assert dict(calls) == {name: 1 + (name == "grpo") for name in ran}
