"""A small stochastic episodic MDP whose true advantages are known exactly, and a vectorised sampler of step batches.

Used to measure each estimator's bias (:mod:`.estimator_bias`, docs/credit_audit.md). The default MDP is a corridor
that mimics an ALFWorld episode: positions 0..K-1, the goal behind the last one (reward 10 on the winning step, as
ALFWorld's adapter pays), and four actions:

- ``advance``: one position forward with prob. 0.7 (from the last position: the goal, a win), else stay;
- ``retreat``: one position back with prob. 0.9 (position 0 stays), else stay;
- ``wait``: stay;
- ``gamble``: win at once with prob. 0.15, fail at once with prob. 0.35, else stay.

Every step may also fail the episode (a hazard, 0 by default), and an episode that has not won after ``horizon`` steps
fails, as ALFWorld's step limit does; so one group holds episodes of many lengths, and failures are the longer ones
(most run into the limit). The anchor of a step is its position alone (the agent's observation does not show the
step count: positions revisit, and anchor groups pool visits from different times, as ALFWorld's do). The
behaviour policy is a fixed table pi(a|s); a step's NLL is -log pi(a|s) (what rule 5 reads) and its entropy
H(pi(.|s)) (what EMPG reads).

The true values are those of the behaviour policy on the finite horizon, exact by backward induction (value
iteration over the steps left): Q[t, s, a] = sum_s' P(s'|s,a) (r(s') + gamma V[t + 1, s']),
V[t, s] = sum_a pi(a|s) Q[t, s, a], V[H] = 0 and terminal states worth 0; A[t, s, a] = Q[t, s, a] - V[t, s] is the
true advantage of a step taken at time t.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from gaca_openrlhf.advantages import StepBatch

ACTIONS = ("advance", "retreat", "wait", "gamble")
WIN_REWARD = 10.0


@dataclass(frozen=True)
class KnownMDP:
    """A finite episodic MDP with two absorbing outcomes.

    Attributes:
        P: (S, A, S + 2) transition probabilities; column S is the win, S + 1 the failure (both terminal).
        pi: (S, A) behaviour policy, rows summing to 1.
        horizon: the step limit H (an episode not won after H steps fails).
        start: the start state.
        win_reward: reward of a transition into the win state (every other transition pays 0).
    """

    P: np.ndarray
    pi: np.ndarray
    horizon: int = 10
    start: int = 0
    win_reward: float = WIN_REWARD

    def __post_init__(self) -> None:
        s, a = self.pi.shape
        if self.P.shape != (s, a, s + 2):
            raise ValueError(f"P must have shape (S, A, S + 2) = {(s, a, s + 2)}, got {self.P.shape}")
        if not np.allclose(self.P.sum(-1), 1.0) or (self.P < 0).any():
            raise ValueError("every P[s, a, :] must be a probability distribution")
        if not np.allclose(self.pi.sum(-1), 1.0) or (self.pi <= 0).any():
            raise ValueError("every pi[s, :] must be a distribution with all actions possible (NLLs finite)")
        if self.horizon < 1:
            raise ValueError(f"horizon must be >= 1, got {self.horizon}")
        if not 0 <= self.start < s:
            raise ValueError(f"start state {self.start} out of range 0..{s - 1}")

    @property
    def n_states(self) -> int:
        return self.pi.shape[0]

    @property
    def n_actions(self) -> int:
        return self.pi.shape[1]

    def values(self, gamma: float) -> tuple[np.ndarray, np.ndarray]:
        """(V (H + 1, S), Q (H, S, A)) of the behaviour policy with discount ``gamma`` in [0, 1], exactly, by
        backward induction over the steps left (value iteration on the finite horizon): V[t, s] is the value of
        state s at step t (V[H] = 0: the step limit ends the episode), Q[t, s, a] that of taking a there."""
        if not 0.0 <= gamma <= 1.0:
            raise ValueError(f"gamma must be in [0, 1], got {gamma}")
        s_n, h = self.n_states, self.horizon
        inner = self.P[:, :, :s_n]  # moves between non-terminal states
        r_sa = self.P[:, :, s_n] * self.win_reward  # expected immediate reward of (s, a)
        v = np.zeros((h + 1, s_n))
        q = np.zeros((h, s_n, self.n_actions))
        for t in range(h - 1, -1, -1):  # one vector sweep per step left
            q[t] = r_sa + gamma * inner @ v[t + 1]
            v[t] = (self.pi * q[t]).sum(-1)
        return v, q

    def advantages(self, gamma: float) -> np.ndarray:
        """A[t, s, a] = Q[t, s, a] - V[t, s] of the behaviour policy, shape (H, S, A)."""
        v, q = self.values(gamma)
        return q - v[:-1, :, None]


def corridor(n_positions: int = 4, hazard: float = 0.0, horizon: int = 10) -> KnownMDP:
    """The default MDP of the module docstring (``n_positions`` >= 2 positions, failure hazard per step, step
    limit ``horizon``)."""
    if n_positions < 2:
        raise ValueError(f"n_positions must be >= 2, got {n_positions}")
    if not 0.0 <= hazard < 1.0:
        raise ValueError(f"hazard must be in [0, 1), got {hazard}")
    k = n_positions
    win, fail = k, k + 1
    p = np.zeros((k, len(ACTIONS), k + 2))
    for s in range(k):
        fwd = s + 1 if s + 1 < k else win
        p[s, 0, fwd] += 0.7
        p[s, 0, s] += 0.3
        p[s, 1, max(s - 1, 0)] += 0.9
        p[s, 1, s] += 0.1
        p[s, 2, s] += 1.0
        p[s, 3, win] += 0.10
        p[s, 3, fail] += 0.10
        p[s, 3, s] += 0.80
    p *= 1.0 - hazard
    p[:, :, fail] += hazard
    # the policy grows surer of "advance" along the corridor (lower entropy, lower NLL of the good action)
    base = np.array([0.40, 0.20, 0.25, 0.15])
    sure = np.array([0.70, 0.10, 0.10, 0.10])
    w = np.linspace(0.0, 1.0, k)[:, None]
    pi = (1 - w) * base + w * sure
    return KnownMDP(P=p, pi=pi / pi.sum(-1, keepdims=True), horizon=horizon)


@dataclass
class SampledGroups:
    """Sampled episodes as one :class:`StepBatch` plus what the estimators do not see (all arrays per row).

    ``state``/``action``: the step's (s, a); ``next_state``: where it led (S = won, S + 1 = failed, as in ``P``);
    ``won``/``length``: its episode's outcome and number of steps.
    """

    batch: StepBatch
    state: np.ndarray
    action: np.ndarray
    next_state: np.ndarray
    won: np.ndarray
    length: np.ndarray

    def oracle_progress(self, n_states: int) -> np.ndarray:
        """Oracle progress of every step, as the environments report it: the decrease of the distance to the goal
        (positions left, n_states - s; 0 once won); NaN for a step that failed the episode (no distance left to
        measure). In the corridor this is the position gained (a win from the last position: 1)."""
        dist = lambda x: (n_states - x).astype(np.float64)  # noqa: E731  (the win state S has distance 0)
        out = dist(self.state) - dist(np.minimum(self.next_state, n_states))
        return np.where(self.next_state == n_states + 1, np.nan, out)

    def true_advantage(self, mdp: KnownMDP, gamma: float) -> np.ndarray:
        """A[t_i, s_i, a_i] of every row under discount ``gamma``."""
        t = self.batch.step_index.numpy()
        return mdp.advantages(gamma)[t, self.state, self.action]


def sample_groups(mdp: KnownMDP, n_groups: int, n_per_group: int, seed: int = 0,
                  anchor: str = "state") -> SampledGroups:
    """``n_groups`` task groups of ``n_per_group`` episodes from the start state, stepped in lockstep (one vector
    step per time step, at most ``mdp.horizon``). Rows come in (episode, t) order; traj ids are unique over the
    whole batch.

    ``anchor="state"``: the anchor is the position alone (visits at different times share it, as in ALFWorld);
    ``"time_state"``: the anchor is (t, position), a Markov observation -- each episode visits an anchor at most
    once, which makes the anchor-group step advantage a well-specified estimate (docs/credit_audit.md)."""
    if anchor not in ("state", "time_state"):
        raise ValueError(f"anchor must be 'state' or 'time_state', got {anchor!r}")
    if n_groups < 1 or n_per_group < 1:
        raise ValueError(f"need n_groups >= 1 and n_per_group >= 1, got {n_groups}, {n_per_group}")
    rng = np.random.default_rng(seed)
    s_n = mdp.n_states
    n_ep = n_groups * n_per_group
    cum_pi = np.cumsum(mdp.pi, axis=-1)
    cum_p = np.cumsum(mdp.P, axis=-1)
    state = np.full(n_ep, mdp.start)
    alive = np.ones(n_ep, dtype=bool)
    won = np.zeros(n_ep, dtype=bool)
    rec_ep, rec_t, rec_s, rec_a, rec_r, rec_n = [], [], [], [], [], []
    t = 0
    while alive.any() and t < mdp.horizon:  # past the horizon the survivors have failed
        ep = np.flatnonzero(alive)
        s = state[ep]
        # inverse-CDF draws; min() guards against a cumulative sum that ends a rounding error below 1
        a = np.minimum((rng.random(ep.size)[:, None] > cum_pi[s]).sum(-1), mdp.n_actions - 1)
        nxt = np.minimum((rng.random(ep.size)[:, None] > cum_p[s, a]).sum(-1), s_n + 1)
        win_now = nxt == s_n
        rec_ep.append(ep)
        rec_t.append(np.full(ep.size, t))
        rec_s.append(s)
        rec_a.append(a)
        rec_r.append(np.where(win_now, mdp.win_reward, 0.0))
        rec_n.append(nxt)
        won[ep[win_now]] = True
        done = nxt >= s_n
        alive[ep[done]] = False
        state[ep[~done]] = nxt[~done]
        t += 1
    ep_i, t_i = np.concatenate(rec_ep), np.concatenate(rec_t)
    order = np.lexsort((t_i, ep_i))
    ep_i, t_i = ep_i[order], t_i[order]
    s_i, a_i, r_i, n_i = (np.concatenate(x)[order] for x in (rec_s, rec_a, rec_r, rec_n))
    length = np.bincount(ep_i, minlength=n_ep)
    nll = -np.log(mdp.pi[s_i, a_i])
    entropy = -(mdp.pi * np.log(mdp.pi)).sum(-1)[s_i]
    batch = StepBatch(
        group_id=torch.as_tensor(ep_i // n_per_group, dtype=torch.int64),
        traj_id=torch.as_tensor(ep_i, dtype=torch.int64),
        step_index=torch.as_tensor(t_i, dtype=torch.int64),
        anchor_id=torch.as_tensor(s_i if anchor == "state" else t_i * s_n + s_i, dtype=torch.int64),
        reward=torch.as_tensor(r_i, dtype=torch.float64),
        valid=torch.ones(ep_i.size, dtype=torch.bool),
        nll=torch.as_tensor(nll, dtype=torch.float64),
        entropy=torch.as_tensor(entropy, dtype=torch.float64),
    )
    return SampledGroups(batch=batch, state=s_i, action=a_i, next_state=n_i, won=won[ep_i], length=length[ep_i])
