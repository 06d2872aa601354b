"""Estimators against the exact advantages of the known MDP (docs/credit_audit.md, section "Bias on a known MDP").

Each test asserts a property derived by hand in that section; sampling is seeded, and tolerances are 5 standard
errors of the Monte-Carlo mean."""
import numpy as np
import pytest
import torch

from gaca_openrlhf.advantages import AdvantageConfig, compute_advantages, list_estimators
from gaca_openrlhf.diagnostics.estimator_bias import (STATED, Variant, advantages_by_batch, audit_known_mdp,
                                                      length_shift, measure)
from gaca_openrlhf.diagnostics.known_mdp import corridor, sample_groups

N = 8


@pytest.fixture(scope="module")
def mdp():
    return corridor()


@pytest.fixture(scope="module")
def sampled(mdp):
    return sample_groups(mdp, 500, N, seed=3)


def _mean_se(x):
    return x.mean(), x.std(ddof=1) / np.sqrt(x.size)


def test_grpo_gives_every_step_of_an_episode_one_advantage(sampled):
    # guards: GRPO mixing in a per-step term (e.g. returning A^E + A^S)
    for base in (STATED, {"dtype": "float64"}):
        adv = advantages_by_batch(sampled.batch, AdvantageConfig(estimator="grpo", **base))
        ep = sampled.batch.traj_id.numpy()
        spread = np.full(ep.max() + 1, -np.inf)
        np.maximum.at(spread, ep, adv)
        low = np.full(ep.max() + 1, np.inf)
        np.minimum.at(low, ep, adv)
        assert (spread - low).max() == 0.0


def test_grpo_with_trajectory_statistics_is_unbiased_at_the_first_step_up_to_n_minus_1_over_n(mdp, sampled):
    # E[S_i - mean_j S_j | a_0] = (n - 1)/n (Q[0, s0, a] - V[0, s0]) exactly (the own score is in the mean).
    # guards: the score discounted, the sign flipped, or the per-trajectory mean taken over steps
    cfg = AdvantageConfig(estimator="grpo", episode_stats="trajectories", **STATED)
    adv = advantages_by_batch(sampled.batch, cfg)
    first = sampled.batch.step_index.numpy() == 0
    true = mdp.advantages(1.0)[0, mdp.start]
    for a in range(mdp.n_actions):
        x = adv[first & (sampled.action == a)]
        mean, se = _mean_se(x)
        assert abs(mean - (N - 1) / N * true[a]) < 5 * se, (a, mean, true[a])


def test_per_turn_normalisation_shifts_every_step_by_minus_cov_over_mean_length(mdp, sampled):
    # The per-step (per-turn) mean of a group is sum_tau L S / sum_tau L = mean S + cov(L, S) / mean L, so
    # A^E(steps) - A^E(trajectories) = -cov(L, S) / mean L on every row of the group (mean_norm).
    # guards: per-step statistics that are in fact per trajectory (or the reverse)
    steps = advantages_by_batch(sampled.batch, AdvantageConfig(estimator="grpo", **STATED))
    traj = advantages_by_batch(sampled.batch, AdvantageConfig(estimator="grpo", episode_stats="trajectories", **STATED))
    shift = length_shift(sampled)
    np.testing.assert_allclose(steps - traj, shift, atol=1e-9)
    # In the corridor failures run into the step limit, so they are the longer episodes: cov(L, S) < 0 and the
    # per-turn normalisation raises every advantage; at the first step its bias is that shift (the
    # trajectory-statistics version being unbiased there, previous test).
    first = sampled.batch.step_index.numpy() == 0
    assert sampled.length[first & ~sampled.won].mean() > sampled.length[first & sampled.won].mean()
    mean, se = _mean_se(shift[first])
    assert mean > 5 * se
    err = steps - sampled.true_advantage(mdp, 1.0)
    bias_steps, se_steps = _mean_se(err[first])
    assert abs(bias_steps - mean) < 5 * se_steps  # the (n - 1)/n factor costs nothing: E_a A[0, s0, a] = 0


def test_step_term_is_well_specified_with_markov_anchors(mdp):
    # With anchors (t, s) an episode visits an anchor at most once, so given the anchor group's size m the other
    # members' returns are independent draws with mean V[t, s]: E[A^S | t, s, a, m] = (m - 1)/m A[t, s, a].
    # guards: the anchor group mean taken over the wrong rows, or the return's discount misapplied
    gamma = 0.95
    s = sample_groups(mdp, 800, N, seed=4, anchor="time_state")
    cfg = AdvantageConfig(estimator="fixed_mixture", fixed_lambda=1.0, gamma=gamma, mode="mean_norm", dtype="float64")
    res = compute_advantages(s.batch, cfg)
    m = res.step_group_size.numpy().astype(np.float64)
    keep = m >= 2
    scaled = res.advantage.numpy()[keep] * m[keep] / (m[keep] - 1)
    t = s.batch.step_index.numpy()[keep]
    cell = (t * mdp.n_states + s.state[keep]) * mdp.n_actions + s.action[keep]
    true = mdp.advantages(gamma).reshape(-1)
    checked = 0
    for c in np.unique(cell):
        x = scaled[cell == c]
        if x.size < 200:
            continue
        mean, se = _mean_se(x)
        assert abs(mean - true[c]) < 5 * se + 1e-9, (c, mean, true[c])
        checked += 1
    assert checked >= 20


def test_step_term_with_revisited_anchors_is_biased_upward_at_the_first_step(mdp, sampled):
    # With position-only anchors the start position's group also holds later revisits, which have less time left
    # (V[t, 0] decreases in t), so the group's baseline is below V[0, 0] and first steps look better than they are.
    # guards: the audit's claim that anchor pooling across time biases the step term (docs/credit_audit.md)
    v, _ = mdp.values(1.0)
    assert (np.diff(v[:mdp.horizon, mdp.start]) < 0).all()
    cfg = AdvantageConfig(estimator="fixed_mixture", fixed_lambda=1.0, **STATED)
    adv = advantages_by_batch(sampled.batch, cfg)
    first = sampled.batch.step_index.numpy() == 0
    bias, se = _mean_se((adv - sampled.true_advantage(mdp, 1.0))[first])
    assert bias > 5 * se


def test_audit_covers_every_registered_estimator():
    # guards: a newly registered estimator silently missing from the bias table
    out = audit_known_mdp(n_groups=32, n_per_group=4, seed=0)
    for name in list_estimators():
        r = out["estimators"][name]
        assert set(r) == {"stated", "default"}
        assert -1.0 <= r["stated"]["sign_agree"] <= 1.0


def test_measure_on_the_truth_itself(mdp, sampled):
    # an "estimator" equal to the true advantage has zero bias and perfect sign and rank agreement
    # guards: measure() comparing against A at the wrong (t, s, a) or the wrong gamma
    true = sampled.true_advantage(mdp, 1.0)
    r = measure(true, sampled, mdp, 1.0)
    assert r["bias_mean"] == 0.0 and r["cell_rms_bias"] < 1e-12
    assert r["sign_agree"] == 1.0 and r["cell_sign_agree"] == 1.0
    # (cell means of equal values may differ in the last bit, which can break a tie: hence the tolerance)
    assert r["spearman"] == pytest.approx(1.0) and r["cell_spearman"] == pytest.approx(1.0, abs=1e-3)
    assert measure(true, sampled, mdp, 0.95)["bias_mean"] != 0.0


def test_unsorted_rows_are_refused(sampled):
    batch = sampled.batch.index_select(torch.arange(len(sampled.batch) - 1, -1, -1))
    with pytest.raises(ValueError, match="sorted by group_id"):
        advantages_by_batch(batch, Variant("grpo", "grpo").config(STATED))
