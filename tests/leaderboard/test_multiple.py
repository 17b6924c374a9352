"""Holm and Benjamini-Hochberg adjustments (offline_gitd.leaderboard.multiple) against values
worked by hand, Holm's definition as a closed test, and scipy's BH."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from offline_gitd.leaderboard.multiple import benjamini_hochberg, holm

# Sorted: 0.005, 0.01, 0.03, 0.04 (m = 4).
# Holm: 4 x 0.005 = 0.02, 3 x 0.01 = 0.03, 2 x 0.03 = 0.06, 1 x 0.04 = 0.04 -> running max 0.06.
# BH: 4 x 0.005 / 1 = 0.02, 4 x 0.01 / 2 = 0.02, 4 x 0.03 / 3 = 0.04, 4 x 0.04 / 4 = 0.04.
RAW = [0.01, 0.04, 0.03, 0.005]
HOLM = [0.03, 0.06, 0.06, 0.02]
BH = [0.02, 0.04, 0.04, 0.02]


def test_hand_computed_values() -> None:
    assert holm(RAW) == pytest.approx(HOLM, abs=1e-15)
    assert benjamini_hochberg(RAW) == pytest.approx(BH, abs=1e-15)


def test_capped_at_one_and_monotone() -> None:
    # Holm: 2 x 0.6 = 1.2 -> 1, then max(1, 0.7) = 1. BH: 0.7 x 2 / 2 = 0.7 carries down to 0.6's.
    assert holm([0.6, 0.7]) == [1.0, 1.0]
    assert benjamini_hochberg([0.6, 0.7]) == pytest.approx([0.7, 0.7])


def test_lines_without_a_test_are_not_in_the_family() -> None:
    adjusted = holm([None, 0.02, math.nan, 0.03])
    assert adjusted[0] is None and math.isnan(adjusted[2])
    assert adjusted[1] == pytest.approx(0.04) and adjusted[3] == pytest.approx(0.04)  # m = 2
    assert benjamini_hochberg([None, 0.02, 0.03])[1:] == pytest.approx([0.03, 0.03])
    assert holm([]) == [] and benjamini_hochberg([None]) == [None]


def test_ties_get_the_same_adjustment() -> None:
    assert holm([0.01, 0.01, 0.5]) == pytest.approx([0.03, 0.03, 0.5])
    assert benjamini_hochberg([0.01, 0.01, 0.5]) == pytest.approx([0.015, 0.015, 0.5])


def test_rejects_a_p_outside_the_unit_interval() -> None:
    with pytest.raises(ValueError, match="not in"):
        holm([0.2, 1.5])


def closed_test_holm(p: list[float]) -> list[float]:
    """Holm as the closed test of Bonferroni tests (Marcus, Peritz & Gabriel 1976): hypothesis i's
    adjusted p is the largest over every intersection S that contains i of |S| min_{j in S} p_j."""
    m = len(p)
    out = []
    for i in range(m):
        worst = 0.0
        for size in range(1, m + 1):
            for subset in itertools.combinations(range(m), size):
                if i in subset:
                    worst = max(worst, min(1.0, size * min(p[j] for j in subset)))
        out.append(worst)
    return out


@pytest.mark.parametrize("seed", range(5))
def test_holm_is_the_closed_bonferroni_test(seed: int) -> None:
    p = list(np.random.default_rng(seed).uniform(0, 0.3, size=7))
    assert holm(p) == pytest.approx(closed_test_holm(p), abs=1e-12)


@pytest.mark.parametrize("seed", range(5))
def test_bh_matches_scipy(seed: int) -> None:
    stats = pytest.importorskip("scipy.stats")
    p = np.random.default_rng(seed).uniform(0, 0.2, size=20)
    assert benjamini_hochberg(list(p)) == pytest.approx(list(stats.false_discovery_control(p, method="bh")), abs=1e-12)
