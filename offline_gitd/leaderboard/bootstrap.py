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
from collections.abc import Sequence
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
    envs = values.shape[1]
    if values.ndim == 2:
        # One flat take is several times faster than indexing with two broadcast index arrays.
        return np.take(values.ravel(), indices * envs + np.arange(envs))
    return values[indices, np.arange(envs)]


def iqm(values: np.ndarray) -> np.ndarray:
    """The IQM over the last two axes (runs x envs) of ``values``: sort the N values, drop
    floor(N / 4) at each end, average the rest. That is scipy's ``trim_mean(x, 0.25)``, which
    rliable's ``aggregate_iqm`` calls."""
    flat = values.reshape(*values.shape[:-2], -1)
    n = flat.shape[-1]
    cut = int(0.25 * n)
    if cut == 0:
        return flat.mean(axis=-1)
    # A full sort of each row: numpy sorts short rows with SIMD, several times faster than a
    # partition at the two cut points, and the caller's array is left as it was.
    flat = np.sort(flat, axis=-1)
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


# The exact bootstrap of a mean enumerates every multiset of n draws from n runs, C(2n - 1, n) of
# them: 92,378 for 10 seeds, 352,716 for 11, 2.6 million for 12. Up to this many it is exact and
# cheaper than a Monte-Carlo draw that matches it; beyond, the Monte-Carlo draw is used.
EXACT_BOOTSTRAP_LIMIT = 400_000


@functools.lru_cache(maxsize=8)
def _compositions(n: int) -> tuple[np.ndarray, np.ndarray]:
    """Every way to draw ``n`` runs from ``n`` with replacement, as counts (rows of ``n`` summing
    to ``n``), and each one's multinomial probability n! / (prod c_i! n^n). Built a column at a
    time: each row so far is repeated once per count its next run can take (0 to what is left)."""
    rows = np.zeros((1, 0), dtype=np.intp)
    left = np.array([n], dtype=np.intp)
    for _ in range(n - 1):
        choices = left + 1
        starts = np.repeat(np.cumsum(choices) - choices, choices)
        taken = np.arange(int(choices.sum())) - starts
        rows = np.column_stack([np.repeat(rows, choices, axis=0), taken])
        left = np.repeat(left, choices) - taken
    draws = np.column_stack([rows, left])
    log_factorial = np.array([math.lgamma(k + 1) for k in range(n + 1)])
    log_p = log_factorial[n] - log_factorial[draws].sum(axis=1) - n * math.log(n)
    return draws.astype(float), np.exp(log_p)


def exact_bootstrap_size(n: int) -> int:
    """How many distinct resamples of ``n`` runs there are: C(2n - 1, n)."""
    return math.comb(2 * n - 1, n) if n > 0 else 0


def exact_mean_intervals(samples: Sequence[np.ndarray], size: float = CI_SIZE) -> list[tuple[float, float]]:
    """For each sample, the percentile interval of the bootstrap distribution of its mean, computed
    exactly instead of drawn: every multiset of len(sample) draws with its multinomial probability
    (Fisher & Hall 1991, "Bootstrap algorithms for small samples"). It is the limit of
    :func:`percentile_interval` of Monte-Carlo means as the replications grow, with no Monte-Carlo
    error at all, so a published endpoint is the same at every ``--seed``
    (docs/leaderboard.md#monte-carlo-error). The q-quantile is the smallest mean whose cumulative
    probability reaches q. Every sample needs :func:`exact_bootstrap_size` <=
    :data:`EXACT_BOOTSTRAP_LIMIT`; samples of one size share one matrix product.
    """
    out: list[tuple[float, float]] = [(math.nan, math.nan)] * len(samples)
    tail = (1 - size) / 2
    by_size: dict[int, list[int]] = {}
    for index, sample in enumerate(samples):
        by_size.setdefault(len(sample), []).append(index)
    for n, indices in by_size.items():
        if n == 0:
            continue
        if exact_bootstrap_size(n) > EXACT_BOOTSTRAP_LIMIT:
            raise ValueError(
                f"{n} values have {exact_bootstrap_size(n)} resamples; the exact bootstrap stops at "
                f"{EXACT_BOOTSTRAP_LIMIT}"
            )
        draws, probability = _compositions(n)
        values = np.stack([np.asarray(samples[i], float) for i in indices])  # samples x n
        means = values @ draws.T / n  # samples x resamples, each row contiguous for its sort
        for row, index in zip(means, indices):
            order = np.argsort(row)
            cumulative = np.cumsum(probability[order])
            # The sum of ~10^5 terms is off by ~1e-13; a quantile exactly at a step keeps the step.
            at = np.searchsorted(cumulative, [tail - 1e-9, 1 - tail - 1e-9], side="left")
            low, high = row[order[np.minimum(at, len(order) - 1)]]
            out[index] = (float(low), float(high))
    return out


# Grid steps over a sample's range for the convolution bootstrap of a mean (more than 11 seeds):
# every value is moved to the nearest of GRID_STEPS + 1 points, which moves each resample's mean,
# and so each quantile, by at most half a step: range / 10,000.
GRID_STEPS = 5_000


def convolved_mean_interval(values: np.ndarray, size: float = CI_SIZE) -> tuple[float, float]:
    """The percentile interval of the bootstrap distribution of the mean of ``values``, without
    drawing: the sum of n draws from the sample is the n-fold convolution of the sample's
    distribution, taken with one FFT after placing the values on a grid of :data:`GRID_STEPS`
    steps. Deterministic, like :func:`exact_mean_intervals`, and within half a grid step
    ((max - min) / 10,000) of it, for samples too large to enumerate
    (docs/leaderboard.md#monte-carlo-error)."""
    values = np.asarray(values, float)
    n = len(values)
    low, high = float(values.min()), float(values.max())
    if n == 1 or low == high:
        return low, low
    step = (high - low) / GRID_STEPS
    cells = np.rint((values - low) / step).astype(np.intp)
    pmf = np.bincount(cells, minlength=GRID_STEPS + 1) / n
    length = 1 << int(n * GRID_STEPS).bit_length()  # > n x GRID_STEPS: no wrap-around
    total = np.fft.irfft(np.fft.rfft(pmf, length) ** n, length)[: n * GRID_STEPS + 1]
    cumulative = np.cumsum(np.clip(total, 0.0, None))
    cumulative /= cumulative[-1]
    tail = (1 - size) / 2
    at = np.searchsorted(cumulative, [tail - 1e-9, 1 - tail - 1e-9], side="left")
    bounds = low + at * step / n
    return float(bounds[0]), float(bounds[1])


def mean_intervals(samples: Sequence[np.ndarray], size: float = CI_SIZE) -> list[tuple[float, float]]:
    """:func:`exact_mean_intervals` for samples of up to 11 values, :func:`convolved_mean_interval`
    for larger ones: never a Monte-Carlo draw."""
    small = [i for i, sample in enumerate(samples) if exact_bootstrap_size(len(sample)) <= EXACT_BOOTSTRAP_LIMIT]
    out = dict(zip(small, exact_mean_intervals([samples[i] for i in small], size)))
    for i, sample in enumerate(samples):
        if i not in out:
            out[i] = convolved_mean_interval(sample, size)
    return [out[i] for i in range(len(samples))]


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
    :func:`comparison_matrix`, so each replication is a few sums over runs instead of a pass over
    all n x m pairs. Returns (envs,) or (reps, envs).
    """
    n, m, envs = x.shape[0], y.shape[0], x.shape[1]
    kernels = np.stack([comparison_matrix(x[:, e], y[:, e]) for e in range(envs)])  # envs x n x m
    if x_counts is None or y_counts is None:
        return kernels.mean(axis=(1, 2))
    # Per env and replication, sum_j K_ij d_j is the resampled count of Y below x_i plus half those
    # tied with it: with Y sorted, a cumulative sum of its counts read at x_i's two insertion
    # points. That is a few passes over (reps x n) arrays in numpy's own loops, exact on these
    # integer counts, and never calls a multi-threaded BLAS, whose threads wait on each other on a
    # busy machine (docs/leaderboard.md#speed).
    out = np.empty((x_counts.shape[0], envs))
    for e in range(envs):
        order = np.argsort(y[:, e], kind="stable")
        below = np.searchsorted(y[order, e], x[:, e], side="left")
        upto = np.searchsorted(y[order, e], x[:, e], side="right")
        cumulative = np.zeros((y_counts.shape[0], m + 1))
        np.cumsum(y_counts[:, e, order], axis=1, out=cumulative[:, 1:])
        weighted = cumulative[:, below] + cumulative[:, upto]  # twice sum_j K_ij d_j
        out[:, e] = np.einsum("ri,ri->r", x_counts[:, e, :], weighted) / 2
    return out / (n * m)


@functools.lru_cache(maxsize=32)
def all_splits(n: int, m: int) -> np.ndarray:
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
        chosen = all_splits(n, m)
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
