"""Two envs' episodes drawn from one distribution: the check the JAX MinAtar tests share
(tests/envs/test_jax_minatar.py for a random policy, tests/envs/test_jax_minatar_trained.py for a
trained one; docs/minatar.md)."""

from __future__ import annotations

from collections.abc import Hashable

import numpy as np
from scipy import stats

ALPHA = 0.01
Z_ALPHA, Z_POWER = stats.norm.isf(ALPHA / 2), stats.norm.isf(0.2)  # two-sided alpha 0.01, power 0.8


def detectable(a: np.ndarray, b: np.ndarray) -> float:
    """The difference in means a two-sided Welch test at alpha 0.01 detects with power 0.8, for
    samples of these sizes and spreads: (z_0.995 + z_0.8) x the standard error of the difference."""
    return float((Z_ALPHA + Z_POWER) * np.sqrt(a.var(ddof=1) / len(a) + b.var(ddof=1) / len(b)))


def assert_same_episodes(label: Hashable, ours: np.ndarray, theirs: np.ndarray, detects: float) -> None:
    """``ours`` and ``theirs``: one row per episode, (return, length). Neither a Welch t-test nor a
    two-sample Kolmogorov-Smirnov test tells the returns or the lengths apart at alpha 0.01, and
    the Welch test on the returns is strong enough to detect a difference of ``detects`` with
    power 0.8 (from the samples' own spreads: a test too weak to see the stated difference fails
    too)."""
    for column, what in enumerate(("return", "length")):
        a, b = ours[:, column], theirs[:, column]
        if np.ptp(np.concatenate([a, b])) == 0:  # Freeway's length: always 2,501 steps in both
            continue
        welch = stats.ttest_ind(a, b, equal_var=False)
        assert welch.pvalue > ALPHA, (label, what, a.mean(), b.mean(), welch)
        ks = stats.ks_2samp(a, b)
        assert ks.pvalue > ALPHA, (label, what, a.mean(), b.mean(), ks)
    a, b = ours[:, 0], theirs[:, 0]
    assert detectable(a, b) <= detects, (label, detectable(a, b), a.mean(), b.mean())
