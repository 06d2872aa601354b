"""Average ranks and Spearman's correlation against values worked out by hand."""
import math

import numpy as np
import pytest

from gaca_openrlhf.diagnostics.ranks import average_ranks, spearman


def test_average_ranks_share_ties():
    # guards: ties ranked by position instead of sharing their mean rank
    np.testing.assert_array_equal(average_ranks([3.0, 1.0, 1.0, 2.0]), [4.0, 1.5, 1.5, 3.0])
    np.testing.assert_array_equal(average_ranks([5.0, 5.0, 5.0]), [2.0, 2.0, 2.0])
    assert average_ranks([]).size == 0


def test_spearman_by_hand():
    assert spearman([1, 2, 3, 4], [10, 20, 30, 400]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    # ranks (1, 2, 3) vs (1, 3, 2): d^2 sum = 2, rho = 1 - 6 * 2 / (3 * 8) = 0.5
    assert spearman([1, 2, 3], [1, 3, 2]) == pytest.approx(0.5)
    assert math.isnan(spearman([1, 1, 1], [1, 2, 3]))
    assert math.isnan(spearman([1], [2]))


def test_bad_input():
    with pytest.raises(ValueError, match="NaN"):
        average_ranks([1.0, float("nan")])
    with pytest.raises(ValueError, match="one length"):
        spearman([1, 2], [1, 2, 3])
