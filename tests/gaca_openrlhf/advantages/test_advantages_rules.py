"""Hand-computed small cases, one per rule of docs/design.md section 3, plus robustness and API checks."""

import math

import pytest
import torch

from gaca_openrlhf.advantages import (
    AdvantageConfig,
    StepBatch,
    compute_advantages,
    get_estimator,
    hash_anchor,
    hash_anchors,
    list_estimators,
    mean_response_nll,
    register_estimator,
    summary_metrics,
)
from gaca_openrlhf.advantages.registry import _REGISTRY

EPS = 1e-6


def mk(group, traj, t, anchor, reward, valid=None, nll=None):
    n = len(reward)
    return StepBatch.from_lists(group, traj, t, anchor, reward, valid if valid is not None else [True] * n, nll)


def run(batch, estimator="gigpo", **kw):
    return compute_advantages(batch, AdvantageConfig(estimator=estimator, dtype="float64", **kw))


def close(got, expected, tol=1e-9):
    got = got.tolist() if isinstance(got, torch.Tensor) else got
    assert len(got) == len(expected)
    for a, b in zip(got, expected):
        assert abs(a - b) <= tol * max(1.0, abs(b)), (got, expected)


# ----------------------------------------------------------------------------- rule 1: episode score
def test_rule1_episode_score_penalty_is_local_to_the_step():
    # traj A: rewards 0, 10 with the first step invalid; traj B: 0, 0.
    b = mk([0] * 4, [0, 0, 1, 1], [0, 1, 0, 1], [1, 2, 1, 3], [0, 10, 0, 0], valid=[False, True, True, True])
    r = run(b, "grpo", mode="mean_norm")
    close(r.episode_score, [9.9, 10.0, 0.0, 0.0])
    mean = (9.9 + 10 + 0 + 0) / 4  # 4.975
    close(r.episode_advantage, [9.9 - mean, 10 - mean, -mean, -mean])


# ----------------------------------------------------------------------------- rule 2: step return
def test_rule2_discounted_return_with_penalty_after_discounting():
    b = mk([0] * 3, [0] * 3, [0, 1, 2], [1, 2, 3], [1.0, 2.0, 3.0], valid=[True, False, True])
    r = run(b, gamma=0.5)
    # R2 = 3; R1 = 2 + .5 * 3 - .1 = 3.4 (penalty not propagated); R0 = 1 + .5 * (2 + .5 * 3) = 2.75
    close(r.step_return, [2.75, 3.4, 3.0])


def test_rule2_rows_in_any_order_and_gamma_edges():
    # Same trajectory given in reverse time order; gamma 1 = plain suffix sum, gamma 0 = own reward.
    b = mk([0] * 3, [0] * 3, [2, 1, 0], [1, 2, 3], [3.0, 2.0, 1.0])
    close(run(b, gamma=1.0).step_return, [3.0, 5.0, 6.0])
    close(run(b, gamma=0.0).step_return, [3.0, 2.0, 1.0])


def test_rule2_long_trajectory_matches_recursion():
    n = 1000
    rewards = [math.sin(i) for i in range(n)]
    b = mk([0] * n, [0] * n, list(range(n)), list(range(n)), rewards)
    got = run(b, gamma=0.99).step_return.tolist()
    running, expected = 0.0, [0.0] * n
    for i in reversed(range(n)):
        running = rewards[i] + 0.99 * running
        expected[i] = running
    close(got, expected, tol=1e-10)


def test_rule2_identical_reward_suffixes_give_identical_returns():
    # Two trajectories whose last 3 steps carry the same rewards share the same anchor at those steps:
    # the returns must tie exactly, so mean_std_norm (amplifying by 1/eps) still gives exactly 0.
    b = mk([0] * 7, [0, 0, 0, 0, 1, 1, 1], [0, 1, 2, 3, 0, 1, 2], [9, 1, 2, 3, 1, 2, 3],
           [0.3, 0.1, 0.7, 10.0, 0.1, 0.7, 10.0])
    r = run(b)
    assert r.step_return[1] == r.step_return[4] and r.step_return[2] == r.step_return[5]
    assert r.step_advantage[1:4].abs().max() == 0 and r.step_advantage[4:].abs().max() == 0


def test_rule2_returns_are_the_recursions_floats_bit_for_bit():
    # Steps 2 and 3 have reward suffixes (0, 10, x, -4) and (10, x, -4): equal returns only if the sum is taken in
    # the recursion's order (a log-depth scan gave 7.255100000000001 vs 7.2551, so HGPO's (2, 2) history group was
    # not flat and step 2's advantage became -0.35 instead of -0.71 -- a CI failure found by hypothesis).
    rewards = [0.0, 0.0, 0.0, 10.0, 1.3551020408163266, -4.0]
    b = mk([0] * 6, [0] * 6, list(range(6)), [0, 2, 2, 2, 0, 0], rewards)
    got = run(b, gamma=1.0, invalid_penalty=0.0).step_return.tolist()
    running, expected = 0.0, [0.0] * 6
    for i in reversed(range(6)):
        running = rewards[i] + 1.0 * running
        expected[i] = running
    assert got == expected  # exact, not approx
    assert got[2] == got[3]
    rnd = __import__("random").Random(5)
    for gamma in (1.0, 0.95, 0.5):
        rw = [rnd.choice([0.0, 0.0, 10.0, -4.0, rnd.uniform(-5, 5)]) for _ in range(40)]
        b = mk([0] * 40, [i // 9 for i in range(40)], [i % 9 for i in range(40)], [1] * 40, rw)
        got = run(b, gamma=gamma, invalid_penalty=0.0).step_return.tolist()
        expected = [0.0] * 40
        for tr in range(5):
            running = 0.0
            for i in reversed([i for i in range(40) if i // 9 == tr]):
                running = rw[i] + gamma * running
                expected[i] = running
        assert got == expected, gamma


# ----------------------------------------------------------------------------- rule 3: episode advantage
def test_rule3_unbiased_std_and_eps():
    b = mk([0, 0], [0, 1], [0, 0], [1, 1], [0.0, 10.0])
    r = run(b, "grpo")
    s = math.sqrt(50.0)  # unbiased std of {0, 10}
    close(r.episode_advantage, [-5 / (s + EPS), 5 / (s + EPS)])


def test_rule3_single_sample_group_uses_mean0_std1():
    b = mk([0], [0], [0], [1], [10.0], valid=[False])
    close(run(b, "grpo").episode_advantage, [9.9 / (1 + EPS)])
    close(run(b, "grpo", mode="mean_norm").episode_advantage, [9.9])


def test_rule3_zero_variance_group_gives_zero():
    r = run(mk([0] * 4, [0, 1, 2, 3], [0] * 4, [1] * 4, [10.0] * 4), "grpo")
    close(r.episode_advantage, [0.0] * 4)
    assert torch.isfinite(r.advantage).all()


def test_rule3_per_trajectory_statistics():
    # Traj A: 3 steps, score 10 (its second step invalid -> 9.9). Traj B: 1 step, score 0.
    b = mk([0] * 4, [0, 0, 0, 1], [0, 1, 2, 0], [1, 2, 3, 1], [0, 0, 10, 0], valid=[True, False, True, True])
    r = run(b, "grpo", episode_stats="trajectories")
    m, s = 5.0, math.sqrt(50.0)  # over the first-step scores {10, 0}
    close(r.episode_advantage, [(10 - m) / (s + EPS), (9.9 - m) / (s + EPS), (10 - m) / (s + EPS), (0 - m) / (s + EPS)])
    # ... versus the default over all four step samples {10, 9.9, 10, 0}
    vals = [10, 9.9, 10, 0]
    m2 = sum(vals) / 4
    s2 = math.sqrt(sum((v - m2) ** 2 for v in vals) / 3)
    close(run(b, "grpo").episode_advantage, [(v - m2) / (s2 + EPS) for v in vals])


def test_rule3_per_trajectory_statistics_single_trajectory_group():
    b = mk([0, 0], [0, 0], [0, 1], [1, 2], [0.0, 10.0], valid=[False, True])
    # One trajectory -> mean 0, std 1; step 0 carries its penalty.
    close(run(b, "grpo", episode_stats="trajectories").episode_advantage, [9.9 / (1 + EPS), 10 / (1 + EPS)])


# ----------------------------------------------------------------------------- rule 4: step advantage
def _singleton_batch():
    # Group 0 -- traj 0: (anchor 7, r 0), (anchor 8, r 10); traj 1: (anchor 7, r 0).
    # Returns 9.5, 10, 0; anchor 7 groups the returns {9.5, 0}, anchor 8 is a singleton.
    return mk([0, 0, 0], [0, 0, 1], [0, 1, 0], [7, 8, 7], [0.0, 10.0, 0.0], nll=[1.0, 1.0, 1.0])


def test_rule4_anchor_groups_and_gigpo_singleton_is_zero():
    b = _singleton_batch()
    r = run(b, "gigpo")
    close(r.step_return, [9.5, 10.0, 0.0])
    close(r.step_group_size, [2, 1, 2])
    s = math.sqrt(9.5**2 / 2)
    close(r.step_advantage, [4.75 / (s + EPS), 0.0, -4.75 / (s + EPS)])
    close(r.advantage, (r.episode_advantage + r.step_advantage).tolist())


def test_rule4_gaca_singleton_uses_group_return_statistics():
    b = _singleton_batch()
    r = run(b, "gaca")
    vals = [9.5, 10.0, 0.0]
    m = sum(vals) / 3
    s = math.sqrt(sum((v - m) ** 2 for v in vals) / 2)
    assert abs(r.step_advantage[1].item() - (10.0 - m) / (s + EPS)) < 1e-12
    assert abs(run(b, "gaca", mode="mean_norm").step_advantage[1].item() - (10.0 - m)) < 1e-12
    # non-singletons are unchanged
    close(r.step_advantage[[0, 2]], run(b, "gigpo").step_advantage[[0, 2]].tolist())
    # the rule is a config switch
    close(run(b, "gigpo", singleton_rule="group").step_advantage, r.step_advantage.tolist())
    close(run(b, "gaca", singleton_rule="zero").step_advantage, run(b, "gigpo").step_advantage.tolist())


def test_rule4_gaca_singleton_in_one_sample_group_is_zero():
    b = mk([0, 1, 1], [0, 1, 1], [0, 0, 1], [1, 2, 3], [10.0, 0.0, 1.0], nll=[0.5, 0.5, 1.0])
    r = run(b, "gaca")
    assert r.step_advantage[0].item() == 0.0  # group 0 has one sample
    assert r.step_advantage[1].item() != 0.0  # group 1: singleton anchors fall back to the 2 group returns


def test_rule4_anchor_groups_do_not_cross_task_groups():
    b = mk([0, 1], [0, 1], [0, 0], [5, 5], [0.0, 10.0])
    close(run(b).step_group_size, [1, 1])


# ----------------------------------------------------------------------------- rules 5-6: criticality and gate
def test_rule5_criticality_and_fallbacks():
    # traj 0: nll 1, 3 -> mean 2 -> c = .5, 1.5; traj 1: nll 0, 0 -> mean 0 -> c = 1; traj 2: -1, 0.5 -> mean < 0 -> 1
    b = mk([0] * 6, [0, 0, 1, 1, 2, 2], [0, 1, 0, 1, 0, 1], [1, 2, 1, 2, 1, 2], [0.0] * 6,
           nll=[1.0, 3.0, 0.0, 0.0, -1.0, 0.5])
    r = run(b, "gaca")
    close(r.criticality, [0.5, 1.5, 1, 1, 1, 1])
    close(r.lambda_, [0.5 * (1 + 0.5 * c) for c in [0.5, 1.5, 1, 1, 1, 1]])
    # mixed signs with a positive mean are used as is (c may be negative; the gate clips)
    b2 = mk([0, 0], [0, 0], [0, 1], [1, 2], [0.0, 0.0], nll=[-1.0, 3.0])
    close(run(b2, "gaca").criticality, [-1.0, 3.0])


def test_rule6_gate_clipping():
    # c = 2 -> 1 (saturated); c = 4 -> clip to 1; with alpha = 1, c = -2 -> lambda0 * (1 - 2) < 0 -> 0
    b = mk([0] * 3, [0] * 3, [0, 1, 2], [1, 2, 3], [0.0] * 3, nll=[2.0, 4.0, -3.0])  # mean 1
    r = run(b, "gaca")
    close(r.criticality, [2.0, 4.0, -3.0])
    close(r.lambda_, [1.0, 1.0, 0.0 + max(0.0, 0.5 * (1 - 1.5))])
    close(run(b, "gaca", alpha=1.0).lambda_, [1.0, 1.0, 0.0])


# ----------------------------------------------------------------------------- rule 7: mixtures and ablations
def _mixture_batch():
    return mk([0] * 6, [0, 0, 0, 1, 1, 1], [0, 1, 2, 0, 1, 2], [1, 2, 3, 1, 2, 4], [0, 0, 10, 0, 0, 0],
              valid=[True, False, True, True, True, True], nll=[0.2, 0.9, 0.4, 0.5, 0.1, 0.3])


def test_rule7_gaca_is_the_per_step_convex_mixture():
    r = run(_mixture_batch(), "gaca")
    lam, a_e, a_s = r.lambda_, r.episode_advantage, r.step_advantage
    close(r.advantage, ((1 - lam) * a_e + lam * a_s).tolist())
    assert ((lam >= 0) & (lam <= 1)).all()


@pytest.mark.parametrize("lam", [0.0, 0.5, 1.0])
def test_rule7_fixed_mixture(lam):
    b = _mixture_batch()
    r = run(b, "fixed_mixture", fixed_lambda=lam)
    close(r.lambda_, [lam] * 6)
    close(r.advantage, ((1 - lam) * r.episode_advantage + lam * r.step_advantage).tolist())
    if lam == 0.0:
        close(r.advantage, run(b, "grpo").advantage.tolist())


def test_rule7_gigpo_omega_and_grpo():
    b = _mixture_batch()
    g = run(b, "gigpo", omega=0.5)
    close(g.advantage, (g.episode_advantage + 0.5 * g.step_advantage).tolist())
    r = run(b, "grpo")
    close(r.advantage, r.episode_advantage.tolist())
    assert r.lambda_ is None and r.criticality is None and g.lambda_ is None


def test_rule7_nll_share_alpha_c():
    b = _mixture_batch()
    base = run(b, "gaca").criticality
    close(run(b, "gaca", alpha_c=0.5).criticality, (0.5 * base + 0.5).tolist())
    close(run(b, "gaca", alpha_c=0.0).lambda_, [0.75] * 6)


def test_rule7_permuted_criticality_is_seeded_and_within_trajectory():
    b = mk([0] * 8, [0] * 4 + [1] * 4, [0, 1, 2, 3] * 2, list(range(8)), [0.0] * 8,
           nll=[0.1, 0.2, 0.3, 0.4, 1.0, 2.0, 3.0, 4.0])
    plain = run(b, "gaca").criticality
    p1 = run(b, "gaca_permuted", permutation_seed=1).criticality
    p1b = run(b, "gaca_permuted", permutation_seed=1).criticality
    assert torch.equal(p1, p1b)
    for sl in (slice(0, 4), slice(4, 8)):
        assert sorted(p1[sl].tolist()) == pytest.approx(sorted(plain[sl].tolist()))
    seeds = {tuple(run(b, "gaca_permuted", permutation_seed=s).criticality.tolist()) for s in range(6)}
    assert len(seeds) > 1  # the seed matters


# ----------------------------------------------------------------------------- robustness
@pytest.mark.parametrize("estimator", ["grpo", "gigpo", "gaca", "fixed_mixture", "gaca_permuted"])
def test_empty_batch(estimator):
    b = mk([], [], [], [], [], nll=[])
    r = compute_advantages(b, AdvantageConfig(estimator=estimator))
    assert r.advantage.shape == (0,) and r.advantage.dtype == torch.float32
    assert r.step_group_size.shape == (0,)
    assert summary_metrics(r)["adv/advantage_mean"] == 0.0


@pytest.mark.parametrize("estimator", ["grpo", "gigpo", "gaca", "fixed_mixture", "gaca_permuted"])
@pytest.mark.parametrize("mode", ["mean_std_norm", "mean_norm"])
def test_degenerate_batches_are_finite(estimator, mode):
    batches = [
        mk([0], [0], [0], [1], [0.0], nll=[0.0]),  # one sample
        mk([0, 1, 2], [0, 0, 0], [0, 0, 0], [1, 1, 1], [1.0, 0.0, 10.0], nll=[0.0, -1.0, 2.0]),  # 1-step trajs
        mk([0] * 4, [0, 1, 2, 3], [0] * 4, [5, 5, 5, 5], [3.0] * 4, nll=[-1.0, 0.0, 1e-30, 1e30]),  # zero variance
        mk([0] * 3, [0] * 3, [0, 1, 2], [1, 2, 3], [0.0, 0.0, 0.0], valid=[False] * 3, nll=[0.0] * 3),
    ]
    for b in batches:
        r = run(b, estimator, mode=mode)
        for x in (r.advantage, r.episode_advantage, r.step_advantage):
            assert torch.isfinite(x).all()
        if r.lambda_ is not None:
            assert ((r.lambda_ >= 0) & (r.lambda_ <= 1)).all()


@pytest.mark.parametrize("field,bad", [("reward", float("nan")), ("reward", float("inf")), ("nll", float("-inf")),
                                       ("nll", float("nan"))])
def test_non_finite_inputs_raise_naming_samples(field, bad):
    values = {"reward": [0.0, 1.0, 2.0, 3.0], "nll": [0.1, 0.2, 0.3, 0.4]}
    values[field][2] = bad
    b = mk([0] * 4, [0, 0, 1, 1], [0, 1, 0, 1], [1, 2, 1, 2], values["reward"], nll=values["nll"])
    with pytest.raises(ValueError, match=rf"non-finite {field}.*\[2\]"):
        compute_advantages(b, AdvantageConfig(estimator="gaca"))


def test_input_errors():
    with pytest.raises(ValueError, match="repeated"):
        run(mk([0, 0], [0, 0], [1, 1], [1, 2], [0.0, 1.0]))
    with pytest.raises(ValueError, match="negative step_index"):
        run(mk([0], [0], [-1], [1], [0.0]))
    with pytest.raises(ValueError, match="needs StepBatch.nll"):
        run(mk([0], [0], [0], [1], [0.0]), "gaca")
    with pytest.raises(ValueError, match="unknown advantage estimator"):
        run(mk([0], [0], [0], [1], [0.0]), "nope")
    with pytest.raises(ValueError, match="length"):
        compute_advantages(StepBatch(torch.zeros(2, dtype=torch.long), torch.zeros(1, dtype=torch.long),
                                     torch.zeros(2, dtype=torch.long), torch.zeros(2, dtype=torch.long),
                                     torch.zeros(2), torch.ones(2, dtype=torch.bool)))
    with pytest.raises(ValueError, match="integers"):
        compute_advantages(StepBatch(torch.zeros(1), torch.zeros(1, dtype=torch.long), torch.zeros(1, dtype=torch.long),
                                     torch.zeros(1, dtype=torch.long), torch.zeros(1), torch.ones(1, dtype=torch.bool)))
    for bad in ({"mode": "x"}, {"gamma": 1.5}, {"fixed_lambda": -0.1}, {"eps": float("nan")}, {"singleton_rule": "x"},
                {"episode_stats": "x"}, {"dtype": "int8"}):
        with pytest.raises(ValueError):
            AdvantageConfig(**bad)


def test_trajectory_ids_may_repeat_across_groups():
    # traj id 0 in group 0 and in group 1 are different trajectories
    b = mk([0, 0, 1, 1], [0, 0, 0, 0], [0, 1, 0, 1], [1, 2, 1, 2], [0.0, 10.0, 0.0, 0.0])
    close(run(b).episode_score, [10.0, 10.0, 0.0, 0.0])


# ----------------------------------------------------------------------------- API
def test_registry_one_decorated_function():
    @register_estimator("test_step_only")
    def step_only(ctx, cfg):
        a_s = ctx.step_advantage("zero")
        return ctx.result(advantage=a_s, step_advantage=a_s)

    try:
        assert "test_step_only" in list_estimators()
        b = _mixture_batch()
        r = compute_advantages(b, AdvantageConfig(estimator="test_step_only"))
        assert torch.allclose(r.advantage, r.step_advantage)
        assert get_estimator("test_step_only").fn is step_only
    finally:
        _REGISTRY.pop("test_step_only")
    assert {"grpo", "gigpo", "gaca", "fixed_mixture", "gaca_permuted"} <= set(list_estimators())


def test_output_dtype_and_config_help():
    b = _mixture_batch()
    assert compute_advantages(b, AdvantageConfig()).advantage.dtype == torch.float32
    assert compute_advantages(b, AdvantageConfig(dtype="float64")).advantage.dtype == torch.float64
    assert compute_advantages(b, AdvantageConfig(), estimator="grpo").estimator == "grpo"
    helps = AdvantageConfig.help()
    assert all(helps[k] for k in ("mode", "gamma", "invalid_penalty", "eps", "omega", "lambda0", "alpha",
                                  "fixed_lambda", "episode_stats", "singleton_rule", "alpha_c", "permutation_seed"))
    d = AdvantageConfig()
    assert (d.mode, d.gamma, d.invalid_penalty, d.eps, d.omega, d.lambda0, d.alpha) == (
        "mean_std_norm", 0.95, 0.1, 1e-6, 1.0, 0.5, 0.5)


def test_summary_metrics():
    b = mk([0] * 4, [0, 0, 1, 1], [0, 1, 0, 1], [1, 2, 1, 3], [0.0, 10.0, 0.0, 0.0], nll=[1.0, 3.0, 1.0, 1.0])
    m = summary_metrics(run(b, "gaca"))
    # c = .5, 1.5, 1, 1 -> lambda = .625, .875, .75, .75; anchor groups sizes 2, 1, 2, 1
    assert m["adv/lambda_mean"] == pytest.approx(0.75)
    assert m["adv/lambda_saturated_frac"] == 0.0
    assert m["adv/step_group_size_mean"] == pytest.approx(1.5)
    assert m["adv/singleton_frac"] == pytest.approx(0.5)
    m2 = summary_metrics(run(b, "gaca", lambda0=0.4, alpha=1.0))  # lambda = .6, 1 (c = 1.5), .8, .8
    assert m2["adv/lambda_saturated_frac"] == pytest.approx(0.25)
    assert "adv/lambda_mean" not in summary_metrics(run(b, "gigpo"))


def test_hashing_and_mean_response_nll():
    assert hash_anchor("obs") == hash_anchor("obs") != hash_anchor("obs ")
    assert -(2**63) <= hash_anchor("x") < 2**63
    ids = hash_anchors(["a", "b", "a"])
    assert ids.dtype == torch.int64 and ids[0] == ids[2] != ids[1]
    lp = torch.tensor([[-1.0, -3.0, float("-inf")], [0.0, 0.0, 0.0]])
    mask = torch.tensor([[1, 1, 0], [0, 0, 0]])
    close(mean_response_nll(lp, mask), [2.0, 0.0])
