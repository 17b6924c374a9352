"""Aggregate statistics of normalised scores (docs/leaderboard.md#statistics).

IQM over all runs x envs, 95% stratified bootstrap CIs (runs resampled within each env), the
normalised AUC and the probability of improvement, all computed by rliable so the numbers match
what the paper's tooling reports. The score matrices rliable takes are (runs x envs): a method must
have the same number of runs in each of its envs for the stratified bootstrap to be defined.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING

import numpy as np

from offline_gitd.errors import UsageError
from offline_gitd.leaderboard.normalise import final_scores, relative_to

if TYPE_CHECKING:
    import pandas as pd

CI_SIZE = 0.95


def rliable_modules() -> tuple[ModuleType, ModuleType]:
    """Import ``rliable.library`` and ``rliable.metrics`` with the pinned pandas.

    rliable 1.2.0 needs ``arch < 8``, and arch 7.x calls pandas' private ``deprecate_kwarg`` with
    the pre-3.0 signature ``(old, new)``; pandas 3 made it ``(klass, old, new)``, so importing arch
    fails. While arch imports, that one decorator is given pandas 3's argument order back.
    """
    import pandas.util._decorators as decorators

    original = decorators.deprecate_kwarg

    def old_signature(*args: object, **kwargs: object) -> object:
        if args and isinstance(args[0], str):
            return original(FutureWarning, *args, **kwargs)
        return original(*args, **kwargs)

    decorators.deprecate_kwarg = old_signature
    try:
        from rliable import library, metrics
    finally:
        decorators.deprecate_kwarg = original
    return library, metrics


@dataclasses.dataclass(frozen=True)
class Interval:
    """A point estimate with its 95% bootstrap confidence interval."""

    value: float
    low: float
    high: float


@dataclasses.dataclass(frozen=True)
class MethodSummary:
    """One leaderboard line: a method's aggregate scores against the baseline."""

    method: str
    iqm: Interval
    auc: Interval
    improvement: Interval | None
    n_envs: int
    n_seeds: int
    n_runs: int


def run_matrix(runs: pd.DataFrame, value: str, envs: list[str]) -> np.ndarray:
    """(runs x envs) matrix of ``value`` with one row per run; runs ordered by seed in each env."""
    columns = []
    for env in envs:
        columns.append(runs.loc[runs["env"] == env].sort_values(["seed", "run"])[value].to_numpy())
    counts = {env: len(column) for env, column in zip(envs, columns)}
    if len(set(counts.values())) != 1:
        detail = ", ".join(f"{env}: {count}" for env, count in counts.items())
        method = runs["method"].iloc[0]
        raise UsageError(
            f"{method} has unequal numbers of runs per env ({detail}); the stratified bootstrap "
            "needs the same number in each"
        )
    return np.stack(columns, axis=1).astype(float)


def run_auc(scored: pd.DataFrame) -> pd.DataFrame:
    """One row per run with ``auc``: the sum of its normalised scores over its logged steps."""
    finals = final_scores(scored)
    sums = scored.groupby("run")["score"].sum()
    return finals.assign(auc=finals["run"].map(sums))


def bootstrap_ci(
    library: ModuleType, scores: object, func: Callable[..., object], reps: int, seed: int
) -> tuple[object, np.ndarray]:
    """rliable's point estimate and percentile CI (2 x ...), reproducible from ``seed``.

    rliable's StratifiedBootstrap draws its indices from numpy's *global* RNG and ignores
    ``random_state`` (which only its independent bootstrap uses), so the global state is seeded
    for the call and restored after it, leaving the caller's random stream untouched.
    """
    saved = np.random.get_state()
    np.random.seed(seed)
    try:
        with warnings.catch_warnings():
            # arch deprecates RandomState in favour of Generator; rliable still passes one.
            warnings.simplefilter("ignore", FutureWarning)
            points, intervals = library.get_interval_estimates(
                {"x": scores},
                func,
                reps=reps,
                confidence_interval_size=CI_SIZE,
                random_state=np.random.RandomState(seed),
            )
    finally:
        np.random.set_state(saved)
    return points["x"], np.asarray(intervals["x"], dtype=float)


def _estimate(library: ModuleType, scores: object, func: Callable[..., object], reps: int, seed: int) -> Interval:
    """A scalar statistic with its CI."""
    point, interval = bootstrap_ci(library, scores, func, reps, seed)
    low, high = interval.reshape(2)
    return Interval(float(np.asarray(point).reshape(())), float(low), float(high))


def summarise(scored: pd.DataFrame, baseline: str, reps: int, seed: int) -> list[MethodSummary]:
    """Per method: IQM of final scores, normalised IQM AUC, P(method > baseline), with CIs.

    AUC: each run's scores summed over its logged steps, IQM'd over runs x envs, relative to the
    baseline's IQM AUC A_b with ``relative_to``: A / A_b when A_b > 0 (the paper's ratio), and an
    order-preserving 1 + (A - A_b) / |A_b| when A_b < 0 (returns that start far below the
    baseline's final score, as in LunarLander, sum to a negative A_b; a plain ratio would then rank
    the worst method first and flip its interval). The CI is the method's bootstrap CI mapped the
    same way through the same (fixed) baseline point estimate. Probability of improvement is taken over the envs the method shares with the
    baseline (rliable averages it per env), ``None`` where it shares none.
    """
    library, metrics = rliable_modules()
    runs = run_auc(scored)
    base_runs = runs[runs["method"] == baseline]
    base_envs = sorted(set(base_runs["env"]))
    base_auc = float(metrics.aggregate_iqm(run_matrix(base_runs, "auc", base_envs)))
    if base_auc == 0:
        raise UsageError(f"baseline {baseline} has an IQM AUC of 0: nothing to divide by")
    summaries = []
    for method in sorted(runs["method"].unique()):
        mine = runs[runs["method"] == method]
        envs = sorted(set(mine["env"]))
        iqm = _estimate(library, run_matrix(mine, "score", envs), metrics.aggregate_iqm, reps, seed)
        raw_auc = _estimate(library, run_matrix(mine, "auc", envs), metrics.aggregate_iqm, reps, seed)
        auc = Interval(*(relative_to(x, base_auc) for x in (raw_auc.value, raw_auc.low, raw_auc.high)))
        shared = [env for env in envs if env in base_envs]
        improvement = None
        if shared:
            pair = (run_matrix(mine, "score", shared), run_matrix(base_runs, "score", shared))
            improvement = _estimate(library, pair, metrics.probability_of_improvement, reps, seed)
        summaries.append(
            MethodSummary(
                method=method,
                iqm=iqm,
                auc=auc,
                improvement=improvement,
                n_envs=len(envs),
                n_seeds=int(mine["seed"].nunique()),
                n_runs=len(mine),
            )
        )
    return summaries


def iqm_curve(curves: np.ndarray, reps: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """IQM over runs x envs at each step of a (runs x envs x steps) array, with its CI band."""
    library, metrics = rliable_modules()

    def per_step(scores: np.ndarray) -> np.ndarray:
        return np.array([metrics.aggregate_iqm(scores[..., t]) for t in range(scores.shape[-1])])

    point, interval = bootstrap_ci(library, curves, per_step, reps, seed)
    return np.asarray(point), interval[0], interval[1]
