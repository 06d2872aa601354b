"""The credit audit on hand-made batches whose figures are worked out by hand (docs/credit_audit.md §3)."""
import math

import numpy as np
import pytest
import torch

from gaca_openrlhf.advantages import AdvantageConfig, StepBatch, list_estimators
from gaca_openrlhf.diagnostics.credit_audit import audit_advantages, audit_metrics, credit_audit, repeated_states

NAN = float("nan")


def _batch(entropy=True):
    """Group 0: traj 0 won in 2 steps (anchors 1, 2), traj 1 failed in 3 (anchors 1, 3, 1: the last repeats).
    Group 1: traj 2 won in 1 step (anchor 11), traj 3 failed in 2 (anchors 11, 12)."""
    rows = [  # group, traj, t, anchor, reward
        (0, 0, 0, 1, 0.0), (0, 0, 1, 2, 10.0),
        (0, 1, 0, 1, 0.0), (0, 1, 1, 3, 0.0), (0, 1, 2, 1, 0.0),
        (1, 2, 0, 11, 10.0),
        (1, 3, 0, 11, 0.0), (1, 3, 1, 12, 0.0),
    ]
    g, tr, t, a, r = zip(*rows)
    n = len(rows)
    return StepBatch.from_lists(g, tr, t, a, r, [True] * n, nll=[1.0 + 0.1 * i for i in range(n)],
                                entropy=[0.5] * n if entropy else None)


PROGRESS = [1, 1, 1, 0, -1, 1, -1, NAN]
WON = [True, True, False, False, False, True, False, False]
CFG = AdvantageConfig(mode="mean_norm", dtype="float64")


def test_grpo_figures_by_hand():
    # GRPO, mean_norm over step samples: group 0 mean 20/5 = 4 -> traj 0 +6, traj 1 -4; group 1 mean 10/3 ->
    # traj 2 +20/3, traj 3 -10/3. Steps with non-zero progress: 6; all agree but traj 1's first (progress +1, -4).
    # guards: zero-progress or no-progress rows counted, or the sign compared with the outcome instead of progress
    out = credit_audit(_batch(), PROGRESS, WON, CFG, estimators=["grpo", "gigpo"], n_boot=200)
    r = out["estimators"]["grpo"]
    assert r["all"]["n"] == 6 and r["all"]["sign_agree"]["value"] == pytest.approx(5 / 6)
    assert r["good_in_failed"]["n"] == 1 and r["good_in_failed"]["sign_agree"]["value"] == 0.0
    assert r["bad_in_won"]["n"] == 0 and r["bad_in_won"]["sign_agree"] is None
    assert r["repeated"]["n"] == 1 and r["repeated"]["sign_agree"]["value"] == 1.0
    # Spearman over the 7 steps with progress: average ranks worked out by hand (mean 4 on both sides), deviations
    # adv (1.5, 1.5, -2, -2, -2, 3, 0) and progress (1.5, 1.5, 1.5, -1, -2.5, 1.5, -2.5)
    assert r["all"]["spearman"] == pytest.approx(13 / math.sqrt(25.5 * 22.5))
    # GiGPO's step term keeps every sign here, so the paired difference is exactly 0 in every resample
    # guards: unpaired resampling (each estimator with its own groups) would spread the interval
    assert out["estimators"]["gigpo"]["all"]["sign_agree"]["value"] == pytest.approx(5 / 6)
    (pair,) = out["paired"]
    assert (pair["a"], pair["b"]) == ("gigpo", "grpo")
    assert pair["sign_agree_diff"] == {"value": 0.0, "lo": 0.0, "hi": 0.0, "groups": 2}


def test_pooled_share_and_its_interval():
    # group A: 1 step, agrees; group B: 3 steps, none agrees. Pooled share 1/4 (a mean of group shares would say
    # 1/2); resampling two groups gives 1, 0 or 1/4, so the 95 % interval is [0, 1].
    # guards: the share averaged per group instead of pooled over steps
    out = audit_advantages({"x": [1.0, -1.0, -1.0, -1.0]}, [1, 1, 1, 1], [True] * 4, [0, 1, 1, 1],
                           [False] * 4, n_boot=400)
    s = out["estimators"]["x"]["all"]["sign_agree"]
    assert s["value"] == 0.25 and s["lo"] == 0.0 and s["hi"] == 1.0


def test_paired_difference_and_zero_advantage():
    # "x" always has the progress's sign, "y" always the opposite, "z" is 0 (which agrees with nothing)
    prog = [1, -1, 1, -1, 1, -1]
    out = audit_advantages({"x": [2, -2, 1, -1, 3, -3], "y": [-1, 1, -1, 1, -1, 1], "z": [0] * 6}, prog,
                           [True, False] * 3, [0, 0, 1, 1, 2, 2], [False] * 6, n_boot=300)
    assert out["estimators"]["z"]["all"]["sign_agree"]["value"] == 0.0
    diffs = {(p["a"], p["b"]): p["sign_agree_diff"] for p in out["paired"]}
    assert diffs[("x", "y")] == {"value": 1.0, "lo": 1.0, "hi": 1.0, "groups": 3}
    assert diffs[("x", "z")]["value"] == 1.0 and diffs[("y", "z")]["value"] == 0.0


def test_gate_weight_where_progress_disagrees_with_the_outcome():
    # rows: good in won (agrees), good in failed (disagrees), bad in won (disagrees), bad in failed (agrees)
    # guards: the disagreement subsets swapped (good in won counted as a hard step)
    prog = [1, 1, -1, -1] * 2
    won = [True, False, True, False] * 2
    lam = [0.5, 1.0, 1.0, 0.5] * 2
    out = audit_advantages({"gaca": [1.0] * 8}, prog, won, [0] * 4 + [1] * 4, [False] * 8,
                           lambdas={"gaca": lam}, n_boot=200)
    gate = out["gate"]["gaca"]
    assert gate["n_disagree"] == 4 and gate["n_agree"] == 4
    assert gate["lambda_disagree"]["value"] == 1.0 and gate["lambda_agree"]["value"] == 0.5
    assert gate["difference"] == {"value": 0.5, "lo": 0.5, "hi": 0.5, "groups": 2}


def test_repeated_states_in_any_row_order():
    # guards: "repeated" decided by row order instead of the step index
    b = _batch()
    np.testing.assert_array_equal(repeated_states(b), [False, False, False, False, True, False, False, False])
    perm = torch.tensor([4, 7, 0, 2, 6, 1, 5, 3])
    np.testing.assert_array_equal(repeated_states(b.index_select(perm)), repeated_states(b)[perm.numpy()])


def test_every_registered_estimator_is_audited():
    # guards: an estimator left out of the audit (or EMPG run without its entropy)
    out = credit_audit(_batch(), PROGRESS, WON, CFG, n_boot=50)
    assert set(out["estimators"]) == set(list_estimators()) and out["skipped"] == {}
    assert {"gaca", "gaca_permuted", "fixed_mixture"} <= set(out["gate"])
    no_entropy = credit_audit(_batch(entropy=False), PROGRESS, WON, CFG, n_boot=50)
    assert "empg" in no_entropy["skipped"] and "empg" not in no_entropy["estimators"]
    flat = audit_metrics(out)
    assert flat["audit/grpo/sign_agree"] == pytest.approx(5 / 6)
    assert flat["audit/grpo/n_good_in_failed"] == 1.0
    assert "audit/grpo/sign_agree_bad_in_won" not in flat  # empty subset: no figure rather than NaN
    assert all(math.isfinite(v) for v in flat.values())


def test_bad_input():
    with pytest.raises(ValueError, match="shape"):
        audit_advantages({"x": [1.0, 2.0]}, [1.0, 1.0, 1.0], [True] * 3, [0, 0, 0], [False] * 3)
    with pytest.raises(ValueError, match="no step has non-zero oracle progress"):
        audit_advantages({"x": [1.0, 2.0]}, [0.0, NAN], [True] * 2, [0, 0], [False] * 2)


def test_no_return_based_estimator_credits_a_good_step_in_a_failed_episode():
    # With the reward a win bonus on the last step, every step of a failed episode has episode score and step
    # return 0, the minimum of its group: A^E <= 0 and A^S <= 0, so any mixture of them is <= 0 and never has the
    # sign of positive progress (derivation: docs/credit_audit.md section 3). EMPG's entropy bonus is left out.
    # guards: the "good in failed" subset built from the wrong outcome or sign
    from gaca_openrlhf.diagnostics.known_mdp import corridor, sample_groups

    mdp = corridor()
    s = sample_groups(mdp, 120, 8, seed=6)
    out = credit_audit(s.batch, s.oracle_progress(mdp.n_states), s.won, AdvantageConfig(),
                       estimators=["grpo", "gigpo", "gaca", "fixed_mixture", "hgpo"], n_boot=100)
    for name, r in out["estimators"].items():
        assert r["good_in_failed"]["n"] > 100
        assert r["good_in_failed"]["sign_agree"]["value"] == 0.0, name
        assert r["all"]["sign_agree"]["value"] > 0.5, name  # elsewhere they mostly agree
