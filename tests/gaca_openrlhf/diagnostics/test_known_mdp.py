"""The known MDP: exact values on a hand-solvable MDP, and the sampler's episodes (docs/credit_audit.md)."""
import numpy as np
import pytest

from gaca_openrlhf.diagnostics.known_mdp import KnownMDP, corridor, sample_groups


def _one_state(horizon=2):
    # one state, a0 wins at once (reward 10), a1 stays; pi = (1/2, 1/2)
    p = np.zeros((1, 2, 3))
    p[0, 0, 1] = 1.0
    p[0, 1, 0] = 1.0
    return KnownMDP(P=p, pi=np.array([[0.5, 0.5]]), horizon=horizon)


def test_values_by_hand():
    # guards: an off-by-one in the horizon (V[H] must be 0), or a missing discount on the continuation
    gamma = 0.9
    v, q = _one_state().values(gamma)
    # last step: Q = (10, 0), V = 5; first step: Q = (10, gamma * 5), V = 5 + gamma * 5 / 2
    np.testing.assert_allclose(q[1, 0], [10.0, 0.0])
    np.testing.assert_allclose(v[1, 0], 5.0)
    np.testing.assert_allclose(q[0, 0], [10.0, gamma * 5.0])
    np.testing.assert_allclose(v[0, 0], 5.0 + gamma * 2.5)
    np.testing.assert_allclose(v[2], [0.0])
    a = _one_state().advantages(gamma)
    np.testing.assert_allclose(a[0, 0], [10.0 - (5.0 + gamma * 2.5), gamma * 5.0 - (5.0 + gamma * 2.5)])


def test_advantages_average_zero_under_the_policy():
    # guards: A computed against the wrong baseline (e.g. V[t + 1] instead of V[t])
    mdp = corridor()
    a = mdp.advantages(0.95)
    np.testing.assert_allclose((mdp.pi[None] * a).sum(-1), 0.0, atol=1e-12)


def test_sampled_episodes():
    mdp = corridor()
    s = sample_groups(mdp, 200, 8, seed=1)
    b = s.batch
    t, ep, r = b.step_index.numpy(), b.traj_id.numpy(), b.reward.numpy()
    assert t.max() == mdp.horizon - 1  # guards: the step limit not applied (or applied one step early)
    last = np.r_[ep[1:] != ep[:-1], True]
    # the win reward sits on the last step of won episodes only (guards: the reward put on the wrong row)
    np.testing.assert_array_equal(r[last], np.where(s.won[last], 10.0, 0.0))
    assert (r[~last] == 0).all()
    # every row carries its own episode's length
    np.testing.assert_array_equal(s.length, np.bincount(ep)[ep])
    np.testing.assert_allclose(b.nll.numpy(), -np.log(mdp.pi[s.state, s.action]))
    # first actions follow pi at the start state (guards: a wrong inverse-CDF draw); 1600 draws, 5 SE
    first = t == 0
    freq = np.bincount(s.action[first], minlength=mdp.n_actions) / first.sum()
    se = np.sqrt(mdp.pi[0] * (1 - mdp.pi[0]) / first.sum())
    assert (np.abs(freq - mdp.pi[0]) < 5 * se).all()
    assert (b.group_id.numpy() == ep // 8).all()


def test_time_state_anchors_are_visited_once_per_episode():
    # guards: the Markov anchor not including t (then the well-specified case of test_estimator_bias is not)
    s = sample_groups(corridor(), 100, 8, seed=2, anchor="time_state")
    key = s.batch.traj_id.numpy() * 10_000 + s.batch.anchor_id.numpy()
    assert np.unique(key).size == key.size
    s2 = sample_groups(corridor(), 100, 8, seed=2)
    assert np.unique(s2.batch.traj_id.numpy() * 10_000 + s2.batch.anchor_id.numpy()).size < len(s2.batch)


def test_bad_input():
    with pytest.raises(ValueError, match="all actions possible"):
        KnownMDP(P=_one_state().P, pi=np.array([[1.0, 0.0]]))
    with pytest.raises(ValueError, match="shape"):
        KnownMDP(P=np.zeros((1, 2, 2)), pi=np.array([[0.5, 0.5]]))
    with pytest.raises(ValueError, match="anchor"):
        sample_groups(corridor(), 1, 2, anchor="text")
    with pytest.raises(ValueError, match="gamma"):
        corridor().values(1.5)


def test_oracle_progress_is_the_position_gained():
    # guards: progress with the wrong sign, or a failure counted as progress 0 instead of "no distance"
    mdp = corridor()
    s = sample_groups(mdp, 200, 8, seed=5)
    p = s.oracle_progress(mdp.n_states)
    k = mdp.n_states
    advance, retreat, wait, gamble = (s.action == i for i in range(4))  # ACTIONS order
    assert (p[wait] == 0).all()  # no hazard in the default corridor: a wait stays
    assert set(np.unique(p[retreat])) <= {-1.0, 0.0} and (p[retreat & (s.state > 0)] == -1).any()
    assert set(np.unique(p[advance])) <= {0.0, 1.0} and (p[advance] == 1).any()
    gw = gamble & (s.next_state == k)  # a gamble that wins jumps the whole way
    np.testing.assert_array_equal(p[gw], k - s.state[gw])
    assert np.isnan(p[gamble & (s.next_state == k + 1)]).all() and np.isnan(p).any()
