"""Vectorised numpy versions of rliable's estimators and of its stratified bootstrap.

Agarwal et al. (2021), "Deep Reinforcement Learning at the Edge of the Statistical Precipice",
define the estimators the board reports: the interquartile mean (IQM, a 25% trimmed mean over all
runs x envs), the probability of improvement P(X > Y) (with ties counted one half, averaged over
envs) and percentile confidence intervals from a *stratified* bootstrap, which resamples runs with
replacement within each env. rliable implements them with one Python call of the statistic per
bootstrap replication; here every replication is computed at once on index arrays, which gives the
same estimators (tests compare point estimates with rliable's to 1e-12 and intervals to
Monte-Carlo error) in milliseconds instead of a minute (docs/leaderboard.md#statistics).

All functions are pure: arrays in, arrays out, randomness only from the ``numpy.random.Generator``
passed in.
"""

from __future__ import annotations

import functools
import math
import warnings
from itertools import combinations

import numpy as np

CI_SIZE = 0.95
# Above this many distinct splits, the permutation test samples splits instead of enumerating them.
EXACT_PERMUTATION_LIMIT = 20_000
MONTE_CARLO_PERMUTATIONS = 20_000


def resample_indices(rng: np.random.Generator, reps: int, runs: int, envs: int) -> np.ndarray:
    """(reps, runs, envs) run indices: per replication and env, ``runs`` draws with replacement
    from that env's runs. Each env is resampled on its own (the stratified bootstrap)."""
    return rng.integers(0, runs, size=(reps, runs, envs))


def gather(values: np.ndarray, indices: np.ndarray) -> np.ndarray:
    """``values`` (runs x envs, or runs x envs x more) resampled by ``indices`` (reps x runs x
    envs): out[r, i, e] = values[indices[r, i, e], e]."""
    envs = np.arange(values.shape[1])
    return values[indices, envs]


def iqm(values: np.ndarray) -> np.ndarray:
    """The IQM over the last two axes (runs x envs) of ``values``: sort the N values, drop
    floor(N / 4) at each end, average the rest. That is scipy's ``trim_mean(x, 0.25)``, which
    rliable's ``aggregate_iqm`` calls."""
    flat = values.reshape(*values.shape[:-2], -1)
    n = flat.shape[-1]
    cut = int(0.25 * n)
    if cut == 0:
        return flat.mean(axis=-1)
    if np.may_share_memory(flat, values):
        flat = flat.copy()  # the caller's array is left as it was; a reshape that copied is ours
    # Partitioning at both cut points puts exactly the middle values between them, in any order.
    flat.partition((cut, n - cut - 1), axis=-1)
    middle = flat[..., cut : n - cut]
    result = middle.mean(axis=-1)
    undefined = np.isnan(flat).any(axis=-1)  # a NaN may sit in a trimmed tail: the IQM is undefined
    return np.where(undefined, np.nan, result) if undefined.any() else result


def median(values: np.ndarray) -> np.ndarray:
    """rliable's ``aggregate_median`` over the last two axes (runs x envs): the median over envs
    of each env's mean over runs."""
    return np.median(values.mean(axis=-2), axis=-1)


def mean(values: np.ndarray) -> np.ndarray:
    """The mean over the last two axes (runs x envs), rliable's ``aggregate_mean`` (equal runs per env)."""
    return values.reshape(*values.shape[:-2], -1).mean(axis=-1)


def optimality_gap(values: np.ndarray, gamma: float) -> np.ndarray:
    """The mean shortfall below ``gamma`` over the last two axes, rliable's ``aggregate_optimality_gap``."""
    return gamma - mean(np.minimum(values, gamma))


def percentile_interval(samples: np.ndarray, size: float = CI_SIZE) -> tuple[np.ndarray, np.ndarray]:
    """The percentile interval over axis 0 of bootstrap ``samples`` (replications first), the
    interval rliable reports; replications that are NaN (an undefined statistic) are left out."""
    tail = 100 * (1 - size) / 2
    if not np.isnan(samples).any():
        low, high = np.percentile(samples, [tail, 100 - tail], axis=0)
        return low, high
    with np.errstate(invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # an all-NaN column gives NaN, as it should
        low, high = np.nanpercentile(samples, [tail, 100 - tail], axis=0)
    return low, high


def comparison_matrix(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """(len(x), len(y)) with 1 where x_i > y_j, 1/2 where they tie, 0 otherwise: the Mann-Whitney
    kernel whose mean is P(X > Y) + P(X = Y) / 2, rliable's per-env probability of improvement."""
    return (x[:, None] > y[None, :]) + 0.5 * (x[:, None] == y[None, :])


def counts(indices: np.ndarray, runs: int) -> np.ndarray:
    """How often each run is drawn: (reps, runs, envs) indices -> (reps, envs, runs) counts."""
    reps, _, envs = indices.shape
    cell = (np.arange(reps)[:, None, None] * envs + np.arange(envs)[None, None, :]) * runs + indices
    return np.bincount(cell.ravel(), minlength=reps * envs * runs).reshape(reps, envs, runs).astype(float)


def improvement_samples(
    x: np.ndarray, y: np.ndarray, x_counts: np.ndarray | None, y_counts: np.ndarray | None
) -> np.ndarray:
    """P(X > Y) per env, on the sample (counts ``None``) or per replication.

    ``x`` (n x envs) and ``y`` (m x envs) are final scores; a resample of X that draws run i c_i
    times and of Y that draws run j d_j times has P = sum_ij c_i K_ij d_j / (n m) with K the
    :func:`comparison_matrix`, so each replication is two small matrix products instead of a
    pass over all n x m pairs. Returns (envs,) or (reps, envs).
    """
    n, m, envs = x.shape[0], y.shape[0], x.shape[1]
    kernels = np.stack([comparison_matrix(x[:, e], y[:, e]) for e in range(envs)])  # envs x n x m
    if x_counts is None or y_counts is None:
        return kernels.mean(axis=(1, 2))
    return np.einsum("rei,eij,rej->re", x_counts, kernels, y_counts) / (n * m)


@functools.lru_cache(maxsize=32)
def _all_splits(n: int, m: int) -> np.ndarray:
    """Every choice of ``n`` of ``n + m`` positions (rows)."""
    return np.array(list(combinations(range(n + m), n)), dtype=np.intp)


@functools.lru_cache(maxsize=32)
def _random_splits(n: int, m: int, seed: int) -> np.ndarray:
    """:data:`MONTE_CARLO_PERMUTATIONS` random choices of ``n`` of ``n + m`` positions (rows)."""
    keys = np.random.default_rng(seed).random((MONTE_CARLO_PERMUTATIONS, n + m))
    return np.argpartition(keys, n - 1, axis=1)[:, :n]


def permutation_test(x: np.ndarray, y: np.ndarray, split_seed: int) -> tuple[float, str]:
    """Two-sided unpaired permutation test of equal means of ``x`` and ``y``: the p-value and how it
    was computed.

    The statistic is the difference of means; under the null hypothesis every split of the pooled
    values into groups of len(x) and len(y) is equally likely. With at most
    :data:`EXACT_PERMUTATION_LIMIT` splits all are enumerated (``exact``); otherwise
    :data:`MONTE_CARLO_PERMUTATIONS` random splits are drawn and p = (1 + hits) / (1 + draws), which
    keeps the test valid (``monte-carlo``); the random splits come from ``split_seed``, and tests of
    the same sizes with the same seed share them (each test is still valid on its own). Ties with
    the observed statistic (to 1e-12 relative) count as at least as extreme.
    """
    x, y = np.asarray(x, float), np.asarray(y, float)
    n, m = len(x), len(y)
    if n == 0 or m == 0:
        return float("nan"), "none"
    pooled = np.concatenate([x, y])
    total = pooled.sum()
    observed = abs(x.mean() - y.mean())
    tolerance = 1e-12 * max(1.0, float(np.abs(pooled).max()))
    if math.comb(n + m, n) <= EXACT_PERMUTATION_LIMIT:
        chosen = _all_splits(n, m)
        method, draws = "exact", None
    else:
        chosen = _random_splits(n, m, split_seed)
        method, draws = "monte-carlo", MONTE_CARLO_PERMUTATIONS
    sums = pooled[chosen].sum(axis=1)
    differences = np.abs(sums / n - (total - sums) / m)
    hits = int(np.count_nonzero(differences >= observed - tolerance))
    if draws is None:
        return hits / len(sums), method
    return (1 + hits) / (1 + draws), method
