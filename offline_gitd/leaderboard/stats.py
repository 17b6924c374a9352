"""Aggregate statistics of normalised scores (docs/leaderboard.md#statistics).

The estimators are rliable's (Agarwal et al. 2021): the IQM over all runs x envs, the normalised
AUC, the probability of improvement, each with a 95% percentile interval from a stratified
bootstrap (runs resampled within each env). They are computed with the vectorised numpy of
:mod:`offline_gitd.leaderboard.bootstrap`, which tests check against rliable itself.

What is resampled (docs/leaderboard.md#what-the-intervals-include): every method's runs, within
each env; and, where an env is normalised by the baseline method, the baseline's runs too, with
the normaliser (the baseline's mean final return) recomputed from them in each replication, and
the baseline's IQM AUC that every AUC is relative to likewise. The baseline's own line uses the
same draw for itself and for the normaliser, since they are the same runs. A replication in which
a normaliser comes out exactly zero has no defined score; it is left out of the interval and the
fraction left out is reported. The score matrices are runs x envs, so a method must have the same
number of runs in each of its envs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from types import ModuleType
from typing import TYPE_CHECKING

import numpy as np

from offline_gitd.errors import UsageError
from offline_gitd.leaderboard import bootstrap
from offline_gitd.leaderboard.normalise import final_scores, relative_to

if TYPE_CHECKING:
    import pandas as pd

CI_SIZE = bootstrap.CI_SIZE


def rliable_modules() -> tuple[ModuleType, ModuleType]:
    """Import ``rliable.library`` and ``rliable.metrics`` with the pinned pandas.

    The board's numbers are computed by :mod:`offline_gitd.leaderboard.bootstrap`; rliable is
    the reference the tests compare them with (importing it takes seconds, more than a whole
    ``leaderboard show`` is allowed). rliable 1.2.0 needs ``arch < 8``, and arch 7.x calls
    pandas' private ``deprecate_kwarg`` with the pre-3.0 signature ``(old, new)``; pandas 3 made
    it ``(klass, old, new)``, so importing arch fails. While arch imports, that one decorator is
    given pandas 3's argument order back.
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
    """One leaderboard line: a method's aggregate scores against the baseline.

    ``undefined``: the fraction of bootstrap replications left out because a resampled
    normaliser was exactly zero (0 almost always; see the module docstring).
    """

    method: str
    iqm: Interval
    auc: Interval
    improvement: Interval | None
    n_envs: int
    n_seeds: int
    n_runs: int
    undefined: float = 0.0


def run_matrix(runs: pd.DataFrame, value: str, envs: list[str]) -> np.ndarray:
    """(runs x envs) matrix of ``value`` with one row per run; runs ordered by seed in each env."""
    return run_matrices(runs, (value,), envs)[0]


def run_matrices(runs: pd.DataFrame, values: Sequence[str], envs: list[str]) -> list[np.ndarray]:
    """:func:`run_matrix` of each of ``values``, from one sort of the runs."""
    import pandas as pd

    chosen = runs[runs["env"].isin(envs)]
    counts = chosen["env"].value_counts()
    sizes = {env: int(counts.get(env, 0)) for env in envs}
    if len(set(sizes.values())) != 1:
        detail = ", ".join(f"{env}: {count}" for env, count in sizes.items())
        method = runs["method"].iloc[0]
        raise UsageError(
            f"{method} has unequal numbers of runs per env ({detail}); the stratified bootstrap "
            "needs the same number in each"
        )
    ordered = chosen.assign(_env=pd.Categorical(chosen["env"], categories=envs)).sort_values(["_env", "seed", "run"])
    return [ordered[value].to_numpy(dtype=float).reshape(len(envs), -1).T.copy() for value in values]


def run_auc(scored: pd.DataFrame) -> pd.DataFrame:
    """One row per run (its final row) with ``auc``, the sum of its normalised scores over its
    logged steps, and ``return_sum`` and ``evaluations``, the raw sum and the number of steps that
    let the bootstrap recompute the AUC for a resampled normaliser: offset x evaluations + slope x
    return_sum."""
    finals = final_scores(scored)
    grouped = scored.groupby("run")
    return finals.assign(
        auc=finals["run"].map(grouped["score"].sum()),
        return_sum=finals["run"].map(grouped["return"].sum()),
        evaluations=finals["run"].map(grouped["return"].size()).astype(float),
    )


@dataclasses.dataclass(frozen=True)
class Normaliser:
    """Every env's affine normaliser, score = offset + slope x return, at the point estimate and
    in each bootstrap replication; rebuilt from a scored frame by :func:`normaliser_of`.

    ``baseline_finals`` (runs x envs of ``baseline_envs``, seeds in order) are the raw final
    returns whose mean normalises the baseline-normalised envs; ``baseline_draw`` resamples them
    for the whole board.
    """

    envs: tuple[str, ...]
    offset: np.ndarray  # (envs,) point coefficients
    slope: np.ndarray
    baseline: str | None
    baseline_envs: tuple[str, ...]  # the envs the baseline ran in, in run_matrix order
    baseline_finals: np.ndarray | None  # (runs x baseline_envs) raw final returns
    estimated: tuple[str, ...]  # envs whose coefficients come from the baseline's mean

    def column(self, envs: list[str]) -> np.ndarray:
        return np.array([self.envs.index(env) for env in envs], dtype=np.intp)

    def resampled(self, baseline_indices: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        """(reps x envs) offsets and slopes for a draw of the baseline's runs (``None``: the
        point coefficients, shape (1 x envs)). A zero resampled mean gives NaN coefficients."""
        offset, slope = self.offset[None, :].copy(), self.slope[None, :].copy()
        if baseline_indices is None or not self.estimated:
            return offset, slope
        reps = baseline_indices.shape[0]
        offset, slope = np.repeat(offset, reps, axis=0), np.repeat(slope, reps, axis=0)
        assert self.baseline_finals is not None
        where = [self.baseline_envs.index(env) for env in self.estimated]
        means = bootstrap.gather(self.baseline_finals[:, where], baseline_indices[:, :, where]).mean(axis=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            magnitude = np.where(means == 0, np.nan, np.abs(means))
            columns = self.column(list(self.estimated))
            offset[:, columns] = 1.0 - np.sign(means) + np.where(means == 0, np.nan, 0.0)
            slope[:, columns] = 1.0 / magnitude
        return offset, slope


def normaliser_of(scored: pd.DataFrame) -> Normaliser:
    """The normaliser a frame from :func:`~offline_gitd.leaderboard.normalise.normalise` was
    scored with (its ``offset``, ``slope`` and ``normaliser`` columns)."""
    per_env = scored.drop_duplicates("env").set_index("env").sort_index()
    envs = tuple(per_env.index)
    labels = per_env["normaliser"]
    estimated = tuple(env for env in envs if str(labels[env]).startswith("baseline:"))
    baseline = str(labels[estimated[0]]).removeprefix("baseline:") if estimated else None
    baseline_envs: tuple[str, ...] = ()
    finals = None
    if baseline is not None:
        base = final_scores(scored[scored["method"] == baseline])
        baseline_envs = tuple(sorted(set(base["env"])))
        finals = run_matrix(base, "return", list(baseline_envs))
    return Normaliser(
        envs=envs,
        offset=per_env["offset"].to_numpy(dtype=float),
        slope=per_env["slope"].to_numpy(dtype=float),
        baseline=baseline,
        baseline_envs=baseline_envs,
        baseline_finals=finals,
        estimated=estimated,
    )


def _interval(point: float, samples: np.ndarray) -> Interval:
    low, high = bootstrap.percentile_interval(samples)
    return Interval(float(point), float(low), float(high))


@dataclasses.dataclass(frozen=True)
class MethodRuns:
    """One method's runs as runs x envs matrices of raw values (``envs`` sorted)."""

    method: str
    envs: list[str]
    finals: np.ndarray
    sums: np.ndarray
    evaluations: np.ndarray
    n_seeds: int

    @classmethod
    def of(cls, runs: pd.DataFrame, method: str) -> MethodRuns:
        mine = runs[runs["method"] == method]
        envs = sorted(set(mine["env"]))
        finals, sums, evaluations = run_matrices(mine, ("return", "return_sum", "evaluations"), envs)
        return cls(method, envs, finals, sums, evaluations, int(mine["seed"].nunique()))

    def scores(
        self, indices: np.ndarray | None, offset: np.ndarray, slope: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """(reps x runs x envs) normalised finals and AUCs for a draw of runs (``None``: the sample)
        and per-replication coefficients of this method's envs (reps x envs)."""
        if indices is None:
            finals, sums, evaluations = self.finals[None], self.sums[None], self.evaluations[None]
        else:
            finals = bootstrap.gather(self.finals, indices)
            sums = bootstrap.gather(self.sums, indices)
            if (self.evaluations == self.evaluations[:1]).all():
                evaluations = self.evaluations[None, :1]  # the same in every run of an env: no need to draw
            else:
                evaluations = bootstrap.gather(self.evaluations, indices)
        a, s = offset[:, None, :], slope[:, None, :]
        return a + s * finals, evaluations * a + s * sums


def method_estimates(
    mine: MethodRuns,
    draw: np.ndarray,
    point: tuple[np.ndarray, np.ndarray],
    coeffs: tuple[np.ndarray, np.ndarray],
    base_auc: np.ndarray,
) -> tuple[Interval, Interval, np.ndarray]:
    """One method's IQM of normalised final scores and its IQM AUC relative to the baseline's,
    each a point estimate with its percentile interval, and which replications are defined.

    ``draw`` resamples the method's runs (reps x runs x envs); ``point`` and ``coeffs`` are the
    normaliser's (offset, slope) of the method's envs at the point estimate (1 x envs) and per
    replication (reps x envs; from the same replication's draw of the baseline's runs where the
    baseline normalises); ``base_auc`` is the baseline's IQM AUC per replication. The AUC's point
    value is left as the method's raw IQM AUC for the caller to relate to the baseline's point.
    """
    finals_point, auc_point = mine.scores(None, *point)
    finals, aucs = mine.scores(draw, *coeffs)
    iqm_samples, auc_samples = bootstrap.iqm(finals), bootstrap.iqm(aucs)
    normalisable = np.isfinite(coeffs[1]).all(axis=1)
    defined = normalisable & np.isfinite(base_auc)
    iqm_samples = np.where(normalisable, iqm_samples, np.nan)
    ratio_samples = np.where(defined, relative_to(auc_samples, np.where(defined, base_auc, 1.0)), np.nan)
    iqm = _interval(bootstrap.iqm(finals_point)[0], iqm_samples)
    auc = _interval(bootstrap.iqm(auc_point)[0], ratio_samples)
    return iqm, auc, defined


def summarise(scored: pd.DataFrame, baseline: str, reps: int, seed: int) -> list[MethodSummary]:
    """Per method: IQM of final scores, normalised IQM AUC, P(method > baseline), with CIs.

    AUC: each run's scores summed over its logged steps, IQM'd over runs x envs, relative to the
    baseline's IQM AUC A_b with ``relative_to``: A / A_b when A_b > 0 (the paper's ratio), and an
    order-preserving 1 + (A - A_b) / |A_b| when A_b < 0 (returns that start far below the
    baseline's final score, as in LunarLander, sum to a negative A_b; a plain ratio would then rank
    the worst method first and flip its interval). A_b is recomputed in every replication from
    that replication's draw of the baseline's runs. Probability of improvement is taken over the
    envs the method shares with the baseline (averaged per env, as rliable does), on raw final
    returns (every normalisation is increasing in the return, so it cannot change which run is
    better), ``None`` where it shares none.
    """
    rng = np.random.default_rng(seed)
    runs = run_auc(scored)
    normaliser = normaliser_of(scored)
    base = MethodRuns.of(runs, baseline)
    base_draw = bootstrap.resample_indices(rng, reps, *base.finals.shape)
    point_coeffs = normaliser.resampled(None)
    # Per-replication coefficients come from the baseline's draw over the baseline's envs.
    baseline_indices = None
    if normaliser.estimated:
        if base.envs != list(normaliser.baseline_envs):
            raise UsageError(f"baseline {baseline}'s envs do not match the normalised board")
        baseline_indices = base_draw
    coeffs = normaliser.resampled(baseline_indices)
    base_columns = normaliser.column(base.envs)
    base_auc_point = float(bootstrap.iqm(base.scores(None, *(c[:, base_columns] for c in point_coeffs))[1])[0])
    base_auc = bootstrap.iqm(base.scores(base_draw, *(c[:, base_columns] for c in coeffs))[1])
    if base_auc_point == 0:
        raise UsageError(f"baseline {baseline} has an IQM AUC of 0: nothing to divide by")
    base_auc = np.where(base_auc == 0, np.nan, base_auc)
    base_counts = bootstrap.counts(base_draw, base.finals.shape[0])
    summaries = []
    for method in sorted(runs["method"].unique()):
        mine = base if method == baseline else MethodRuns.of(runs, method)
        draw = base_draw if method == baseline else bootstrap.resample_indices(rng, reps, *mine.finals.shape)
        columns = normaliser.column(mine.envs)
        point = tuple(c[:, columns] for c in point_coeffs)
        iqm, auc, defined = method_estimates(mine, draw, point, tuple(c[:, columns] for c in coeffs), base_auc)
        auc = Interval(relative_to(auc.value, base_auc_point), auc.low, auc.high)
        improvement = None
        shared = [env for env in mine.envs if env in base.envs]
        if shared:
            mine_cols = [mine.envs.index(env) for env in shared]
            base_cols = [base.envs.index(env) for env in shared]
            x, y = mine.finals[:, mine_cols], base.finals[:, base_cols]
            point = bootstrap.improvement_samples(x, y, None, None).mean()
            x_counts = bootstrap.counts(draw[:, :, mine_cols], x.shape[0])
            samples = bootstrap.improvement_samples(x, y, x_counts, base_counts[:, base_cols]).mean(axis=1)
            improvement = _interval(point, samples)
        summaries.append(
            MethodSummary(
                method=method,
                iqm=iqm,
                auc=auc,
                improvement=improvement,
                n_envs=len(mine.envs),
                n_seeds=mine.n_seeds,
                n_runs=int(mine.finals.size),
                undefined=float(1.0 - defined.mean()),
            )
        )
    return summaries


def point_estimates(scored: pd.DataFrame, baseline: str) -> dict[str, tuple[float, float]]:
    """Per method, the point estimates of :func:`summarise` without the bootstrap: the IQM of
    normalised final scores and the IQM AUC relative to the baseline's (used to compare
    normalisers, :mod:`offline_gitd.leaderboard.sensitivity`)."""
    runs = run_auc(scored)
    normaliser = normaliser_of(scored)
    point = normaliser.resampled(None)
    base = MethodRuns.of(runs, baseline)
    columns = normaliser.column(base.envs)
    base_auc = float(bootstrap.iqm(base.scores(None, *(c[:, columns] for c in point))[1])[0])
    if base_auc == 0:
        raise UsageError(f"baseline {baseline} has an IQM AUC of 0: nothing to divide by")
    out = {}
    for method in sorted(runs["method"].unique()):
        mine = base if method == baseline else MethodRuns.of(runs, method)
        columns = normaliser.column(mine.envs)
        finals, aucs = mine.scores(None, *(c[:, columns] for c in point))
        out[method] = (float(bootstrap.iqm(finals)[0]), float(relative_to(bootstrap.iqm(aucs)[0], base_auc)))
    return out
