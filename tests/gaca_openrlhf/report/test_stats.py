"""The crossed bootstrap of gaca_openrlhf.report.stats against a plain loop and against what it must satisfy."""
from __future__ import annotations

import numpy as np
import pytest

from gaca_openrlhf.report.stats import difference, interval, success_matrix


def _loop_interval(a, n_boot, seed):
    # the module's draw order, written as a loop: games first, then for each draw the seeds
    a = np.asarray(a, float)
    rng = np.random.default_rng(seed)
    S, G = a.shape
    games = rng.integers(0, G, size=(n_boot, G))
    seeds = rng.integers(0, S, size=(n_boot, S))
    means = []
    for k in range(n_boot):
        total = 0.0
        for s in seeds[k]:
            for g in games[k]:
                total += a[s, g]
        means.append(total / (S * G))
    return np.quantile(means, [0.025, 0.975])


def test_interval_equals_a_loop_over_resampled_seeds_and_games():
    a = np.random.default_rng(3).integers(0, 2, size=(4, 9)).astype(float)
    got = interval(a, n_boot=400, seed=11)
    lo, hi = _loop_interval(a, 400, 11)
    # bug caught: resampling games per seed instead of once per draw, or averaging over the wrong axis
    assert got.lo == pytest.approx(lo) and got.hi == pytest.approx(hi)
    assert got.mean == pytest.approx(a.mean()) and (got.seeds, got.games) == (4, 9)


def test_interval_width_follows_the_games_standard_error():
    # one seed, 400 games with success p = 0.3: the interval is ~ +- 1.96 sqrt(p(1-p)/G)
    rng = np.random.default_rng(0)
    a = (rng.random((1, 400)) < 0.3).astype(float)
    iv = interval(a, n_boot=4000, seed=1)
    se = np.sqrt(a.mean() * (1 - a.mean()) / 400)
    assert (iv.hi - iv.lo) / 2 == pytest.approx(1.96 * se, rel=0.15)


def test_seed_variation_widens_the_interval():
    games = np.tile((np.arange(64) % 2).astype(float), (5, 1))
    shifted = games.copy()
    shifted[:, :16] = np.array([[0.0], [1.0], [0.0], [1.0], [1.0]])  # the seeds disagree on 16 games
    # bug caught: seeds never resampled (a single run's interval for five runs)
    assert (interval(shifted).hi - interval(shifted).lo) > (interval(games).hi - interval(games).lo)


def test_difference_is_paired_by_game():
    # every seed agrees (rows equal) and a = b + 0.25 on every game: paired by game, the difference is 0.25
    # whatever games are drawn; games drawn separately for the two sides would spread it like one side's interval
    rng = np.random.default_rng(5)
    b = np.tile(rng.random(50) * 0.5, (3, 1))
    d = difference(b + 0.25, b, n_boot=2000)
    assert d.mean == pytest.approx(0.25)
    assert d.hi - d.lo == pytest.approx(0.0, abs=1e-12)
    assert interval(b).hi - interval(b).lo > 0.05


def test_gain_over_a_warm_start_evaluated_once():
    before = np.zeros((1, 20))
    after = np.ones((3, 20))
    d = difference(after, before)
    assert (d.mean, d.lo, d.hi) == (1.0, 1.0, 1.0)


def test_bad_input_is_a_clear_error():
    with pytest.raises(ValueError, match="same games"):
        difference(np.ones((2, 3)), np.ones((2, 4)))
    with pytest.raises(ValueError, match="NaN"):
        interval([[1.0, float("nan")]])


def test_success_matrix_averages_eval_seeds_and_refuses_gaps():
    evals = {0: [{"task": "g1", "won": True}, {"task": "g1", "won": False}, {"task": "g2", "won": True}],
             1: [{"task": "g2", "won": False}, {"task": "g1", "won": True}]}
    m, games = success_matrix(evals)
    assert games == ["g1", "g2"] and m.tolist() == [[0.5, 1.0], [1.0, 0.0]]
    with pytest.raises(ValueError, match="training seed 1"):
        success_matrix({0: evals[0], 1: [{"task": "g1", "won": True}]})
