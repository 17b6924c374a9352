"""The numbers behind the board's figures, computed apart from drawing them.

Every figure of ``leaderboard plot`` is drawn from a plain dict made here (lists of floats, JSON
ready), so that a committed example figure can be checked by regenerating its data rather than its
pixels, and so that the figures and the table provably show the same estimates:

- Smoothing is a centred window of up to 5 evaluations that narrows at both ends of a run (the
  paper smooths over 5), so a run's last point is its own final score: the end of each aggregate
  curve is the IQM of final scores, the table's ``IQM final``, exactly.
- Per-env panels show the mean over seeds; with the baseline normalisation the baseline's mean
  final score is the normaliser, so the baseline's own per-env curve ends at exactly 1. (Its
  aggregate IQM need not be 1: IQM is not the mean.)
- Median, IQM, mean and optimality gap of final scores, and the performance profile (fraction of
  runs x envs scoring above tau), are rliable's estimators (Agarwal et al. 2021), with the same
  stratified bootstrap as the table.
- Every band resamples what the table's intervals resample (:mod:`offline_gitd.leaderboard.stats`):
  each method's runs within each env and, for envs normalised by the baseline, the baseline's runs
  and so the normaliser. Normalisations are affine in the return, so curves are smoothed in raw
  returns and normalised per replication.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from offline_gitd.errors import UsageError
from offline_gitd.leaderboard import bootstrap
from offline_gitd.leaderboard.behaviour import BehaviourCurve, points_in_range
from offline_gitd.leaderboard.normalise import final_scores
from offline_gitd.leaderboard.reference import PublishedPoint, minatar_dqn_curve
from offline_gitd.leaderboard.stats import MethodSummary, Normaliser, normaliser_of, run_matrix

if TYPE_CHECKING:
    import pandas as pd

SMOOTHING_WINDOW = 5
# Where "optimal" is for the optimality gap, per normalisation: the baseline, human, D4RL expert.
GAP_THRESHOLD = {"auto": 1.0, "baseline": 1.0, "human": 1.0, "dqn-replay": 1.0, "d4rl": 100.0, "minari": 100.0}
PROFILE_POINTS = 101
INTERVAL_METRICS = ("Median", "IQM", "Mean", "Optimality gap")


def centred_smooth(values: np.ndarray, window: int = SMOOTHING_WINDOW) -> np.ndarray:
    """Centred moving average whose half-width narrows to 0 at both ends (first and last points
    are kept as they are): point i averages ``values[i - h : i + h + 1]``, h = min(w // 2, i, n - 1 - i)."""
    values = np.asarray(values, dtype=float)
    n, half = len(values), window // 2
    out = np.empty(n)
    for i in range(n):
        h = min(half, i, n - 1 - i)
        out[i] = values[i - h : i + h + 1].mean()
    return out


def smoothed(scored: pd.DataFrame, column: str = "score") -> pd.DataFrame:
    """``scored`` sorted by run and step, with ``smooth``: :func:`centred_smooth` of ``column`` per
    run, all runs at once (cumulative sums within each run's block of rows)."""
    ordered = scored.sort_values(["run", "step"]).reset_index(drop=True)
    values = ordered[column].to_numpy(dtype=float)
    run_codes = ordered["run"].to_numpy()
    starts = np.flatnonzero(np.r_[True, run_codes[1:] != run_codes[:-1]])
    lengths = np.diff(np.r_[starts, len(values)])
    first = np.repeat(starts, lengths)
    position = np.arange(len(values)) - first
    n = np.repeat(lengths, lengths)
    half = np.minimum(np.minimum(SMOOTHING_WINDOW // 2, position), n - 1 - position)
    total = np.r_[0.0, np.cumsum(values)]
    index = np.arange(len(values))
    out = (total[index + half + 1] - total[index - half]) / (2 * half + 1)
    out[half == 0] = values[half == 0]  # a window of one point is the point itself, exactly
    return ordered.assign(smooth=out)


def select_methods(scored: pd.DataFrame, names: Sequence[str] | None) -> list[str]:
    """The board's methods named by ``names`` (full keys, or ``algorithm:critic`` prefixes that
    match one method), in that order; all methods, sorted, when ``names`` is empty."""
    methods = sorted(scored["method"].unique())
    if not names:
        return methods
    chosen: list[str] = []
    for name in names:
        matches = [name] if name in methods else [m for m in methods if m.startswith(name + ":")]
        if len(matches) != 1:
            problem = "is ambiguous: use one of " + ", ".join(matches) if matches else "is not on the board"
            raise UsageError(f"--methods: {name!r} {problem} (methods: {', '.join(methods)})")
        if matches[0] not in chosen:
            chosen.append(matches[0])
    return chosen


def _curve_tensor(runs: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """(steps, runs x envs x steps array) of one method's smoothed values on the steps all share."""
    table = runs.pivot(index="run", columns="step", values="smooth")
    order = runs.drop_duplicates("run").sort_values(["env", "seed", "run"])
    steps, tensor = _shared_steps(table, order["run"])
    envs = order["env"].nunique()
    return steps, tensor.reshape(envs, -1, len(steps)).transpose(1, 0, 2)


def _shared_steps(table: pd.DataFrame, runs: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """The steps that all ``runs`` (rows of a run x step ``table``) logged, and their values
    there, one row per run in the order given."""
    values = table.to_numpy(dtype=float)[table.index.get_indexer(runs)]
    shared = ~np.isnan(values).any(axis=0)
    return np.asarray(table.columns)[shared], values[:, shared]


def _env_tensors(runs: pd.DataFrame) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per env, what :func:`_curve_tensor` gives for one method's runs in that env alone (its
    steps, runs x 1 x steps), from one pivot of all the method's runs."""
    table = runs.pivot(index="run", columns="step", values="smooth")
    order = runs.drop_duplicates("run").sort_values(["env", "seed", "run"])
    tensors = {}
    for env, group in order.groupby("env", sort=True):
        steps, values = _shared_steps(table, group["run"])
        tensors[env] = (steps, values[:, None, :])
    return tensors


def iqm_per_step(scores: np.ndarray) -> np.ndarray:
    """rliable's ``aggregate_iqm`` (a 25% trimmed mean over runs x envs) at every step of a
    runs x envs x steps array (and any leading axes), in one vectorised call."""
    return bootstrap.iqm(np.moveaxis(scores, -1, -3))


def mean_per_step(scores: np.ndarray) -> np.ndarray:
    """The mean over runs x envs at every step (rliable's ``aggregate_mean`` with equal runs per env)."""
    return bootstrap.mean(np.moveaxis(scores, -1, -3))


class Resampler:
    """One bootstrap for all the figures: the normaliser's coefficients per replication (from one
    draw of the baseline's runs) and a fresh draw of runs per method, the baseline reusing its own."""

    def __init__(self, scored: pd.DataFrame, reps: int, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.reps = reps
        self.normaliser: Normaliser = normaliser_of(scored)
        self.point = self.normaliser.resampled(None)
        self.base_draw = None
        finals = self.normaliser.baseline_finals
        if finals is not None:
            self.base_draw = bootstrap.resample_indices(self.rng, reps, *finals.shape)
        self.coefficients = self.normaliser.resampled(self.base_draw if self.normaliser.estimated else None)

    def draw(self, method: str, runs: int, envs: int) -> np.ndarray:
        if (
            method == self.normaliser.baseline
            and self.base_draw is not None
            and self.base_draw.shape[1:] == (runs, envs)
        ):
            return self.base_draw
        return bootstrap.resample_indices(self.rng, self.reps, runs, envs)

    def scores(self, raw: np.ndarray, envs: Sequence[str], indices: np.ndarray | None) -> np.ndarray:
        """Normalised values of ``raw`` (runs x envs x ...) for a draw (``None``: the point), with
        the replication's coefficients: (reps or 1) x runs x envs x ..."""
        columns = self.normaliser.column(list(envs))
        offset, slope = self.point if indices is None else self.coefficients
        extra = (1,) * (raw.ndim - 2)
        shape = (offset.shape[0], 1, len(columns), *extra)
        if indices is None:
            return offset[:, columns].reshape(shape) + slope[:, columns].reshape(shape) * raw[None]
        values = bootstrap.gather(raw, indices)  # a fresh array: normalised in place
        values *= slope[:, columns].reshape(shape)
        values += offset[:, columns].reshape(shape)
        return values

    def env_means(self, raw: np.ndarray, env: str, indices: np.ndarray | None, normalised: bool) -> np.ndarray:
        """The mean over resampled seeds of one env's runs x steps ``raw`` (reps x steps; ``None``:
        the point, 1 x steps), normalised or not. The mean of an affine map is the map of the
        mean, so each replication is a row of counts times ``raw``, then two coefficients."""
        runs = raw.shape[0]
        if indices is None:
            means = raw.mean(axis=0)[None]
            offset, slope = self.point
        else:
            means = bootstrap.counts(indices, runs)[:, 0, :] @ raw / runs
            offset, slope = self.coefficients
        if not normalised:
            return means
        column = self.normaliser.column([env])[0]
        return offset[:, column : column + 1] + slope[:, column : column + 1] * means


def _band(point: np.ndarray, samples: np.ndarray) -> dict[str, list[float]]:
    low, high = bootstrap.percentile_interval(samples)
    return {"value": np.asarray(point).tolist(), "low": low.tolist(), "high": high.tolist()}


def _envs_of(runs: pd.DataFrame) -> list[str]:
    return sorted(set(runs["env"]))


def aggregate_data(
    scored: pd.DataFrame, summaries: Sequence[MethodSummary], methods: Sequence[str], reps: int, seed: int
) -> dict[str, Any]:
    """Per method: the IQM curve over runs x envs (smoothed) with its band, the table's IQM final
    and its normalised AUC with CI."""
    by_method = {item.method: item for item in summaries}
    frame = smoothed(scored[scored["method"].isin(methods)], "return")
    resampler = Resampler(scored, reps, seed)
    curves = {}
    for method in methods:
        runs = frame[frame["method"] == method]
        steps, tensor = _curve_tensor(runs)
        envs = _envs_of(runs)
        draw = resampler.draw(method, *tensor.shape[:2])
        point = iqm_per_step(resampler.scores(tensor, envs, None))[0]
        curves[method] = {"step": steps.tolist(), **_band(point, iqm_per_step(resampler.scores(tensor, envs, draw)))}
    return {
        "methods": list(methods),
        "curves": curves,
        "final_iqm": {m: by_method[m].iqm.value for m in methods},
        "auc": {m: [by_method[m].auc.value, by_method[m].auc.low, by_method[m].auc.high] for m in methods},
    }


def per_env_data(scored: pd.DataFrame, methods: Sequence[str], value: str, reps: int, seed: int) -> dict[str, Any]:
    """Per env and method: the mean over seeds of the smoothed ``value`` (``score`` or raw
    ``return``) at each step, with a 95% bootstrap band over seeds."""
    frame = smoothed(scored[scored["method"].isin(methods)], "return")
    resampler = Resampler(scored, reps, seed)
    tensors = {method: _env_tensors(frame[frame["method"] == method]) for method in methods}
    envs: dict[str, Any] = {}
    for env in sorted(frame["env"].unique()):
        envs[env] = {}
        for method in methods:
            if env not in tensors[method]:
                continue
            steps, tensor = tensors[method][env]
            draw = _env_draw(resampler, scored, method, env, tensor.shape[0])
            point = resampler.env_means(tensor[:, 0, :], env, None, value == "score")[0]
            samples = resampler.env_means(tensor[:, 0, :], env, draw, value == "score")
            envs[env][method] = {"step": steps.tolist(), **_band(point, samples)}
    return {"methods": list(methods), "value": value, "envs": envs}


def _env_draw(resampler: Resampler, scored: pd.DataFrame, method: str, env: str, runs: int) -> np.ndarray:
    """A draw of one env's runs of a method: the baseline's column of the shared draw for the
    baseline (its normaliser comes from the same runs), a fresh one otherwise."""
    normaliser = resampler.normaliser
    if method == normaliser.baseline and resampler.base_draw is not None and env in normaliser.baseline_envs:
        column = normaliser.baseline_envs.index(env)
        return resampler.base_draw[:, :, column : column + 1]
    return bootstrap.resample_indices(resampler.rng, resampler.reps, runs, 1)


Finals = dict[str, tuple[np.ndarray, list[str]]]


def final_matrices(scored: pd.DataFrame, methods: Sequence[str]) -> Finals:
    """Per method, its raw final returns (runs x envs) and its envs; the final rows of all runs
    are found once (each run belongs to one method)."""
    finals = final_scores(scored[scored["method"].isin(methods)])
    out = {}
    for method, rows in finals.groupby("method", sort=False):
        envs = sorted(set(rows["env"]))
        out[method] = (run_matrix(rows, "return", envs), envs)
    return {method: out[method] for method in methods}


def intervals_data(
    scored: pd.DataFrame, methods: Sequence[str], how: str, reps: int, seed: int, finals: Finals | None = None
) -> dict[str, Any]:
    """Median, IQM, mean and optimality gap of each method's final scores, with 95% CIs
    (``finals``: :func:`final_matrices`, when already at hand)."""
    finals = finals or final_matrices(scored, methods)
    gamma = GAP_THRESHOLD[how] if how != "auto" else _auto_gap(scored)
    resampler = Resampler(scored, reps, seed)

    def four(scores: np.ndarray) -> np.ndarray:
        return np.stack(
            [
                bootstrap.median(scores),
                bootstrap.iqm(scores),
                bootstrap.mean(scores),
                bootstrap.optimality_gap(scores, gamma),
            ],
            axis=-1,
        )

    values = {}
    for method in methods:
        raw, envs = finals[method]
        point = four(resampler.scores(raw, envs, None))[0]
        samples = four(resampler.scores(raw, envs, resampler.draw(method, *raw.shape)))
        low, high = bootstrap.percentile_interval(samples)
        values[method] = [[float(p), float(lo), float(hi)] for p, lo, hi in zip(point, low, high)]
    return {"methods": list(methods), "metrics": list(INTERVAL_METRICS), "gap_threshold": gamma, "values": values}


def _auto_gap(scored: pd.DataFrame) -> float:
    """The optimality gap's threshold under ``auto``: 100 where every env is D4RL-scaled, else 1."""
    kinds = set(scored["normaliser"])
    return 100.0 if kinds <= {"minari", "d4rl"} else 1.0


def profile_data(
    scored: pd.DataFrame, methods: Sequence[str], reps: int, seed: int, finals: Finals | None = None
) -> dict[str, Any]:
    """Performance profiles (Agarwal et al. 2021): for each tau, the fraction of runs x envs
    whose final score exceeds tau, with a 95% stratified bootstrap band (``finals``:
    :func:`final_matrices`, when already at hand)."""
    resampler = Resampler(scored, reps, seed)
    matrices = finals or final_matrices(scored, methods)
    points = {method: resampler.scores(raw, envs, None)[0] for method, (raw, envs) in matrices.items()}
    everything = np.concatenate([m.ravel() for m in points.values()])
    low, high = float(np.min(everything)), float(np.max(everything))
    margin = 0.05 * (high - low) or 0.5
    taus = np.linspace(low - margin, high + margin, PROFILE_POINTS)

    def fraction_above(scores: np.ndarray) -> np.ndarray:
        flat = scores.reshape(scores.shape[0], -1)
        # A value is above tau_t for the t below the number of taus under it (taus increase):
        # count the values per number of taus under them, then sum from the top.
        under = np.searchsorted(taus, flat, side="left") + (len(taus) + 1) * np.arange(len(flat))[:, None]
        counts = np.bincount(under.ravel(), minlength=len(flat) * (len(taus) + 1)).reshape(len(flat), -1)
        above = np.cumsum(counts[:, ::-1], axis=1)[:, ::-1][:, 1:]
        fraction = above / flat.shape[1]
        fraction[np.isnan(flat).any(axis=1)] = np.nan  # an undefined replication (zero normaliser)
        return fraction

    profiles = {}
    for method, (raw, envs) in matrices.items():
        samples = fraction_above(resampler.scores(raw, envs, resampler.draw(method, *raw.shape)))
        band_low, band_high = bootstrap.percentile_interval(samples)
        profiles[method] = {
            "fraction": fraction_above(points[method][None])[0].tolist(),
            "low": band_low.tolist(),
            "high": band_high.tolist(),
        }
    return {"methods": list(methods), "tau": taus.tolist(), "profiles": profiles}


def per_env_references(
    envs: Mapping[str, Mapping[str, Mapping[str, list[float]]]],
    randoms: Mapping[str, float],
    behaviour: Sequence[BehaviourCurve] = (),
    published: Mapping[str, Sequence[PublishedPoint]] | None = None,
) -> dict[str, dict[str, Any]]:
    """What each raw-return panel of the per-env figure draws beside the methods: the uniform-random
    return (``randoms``: the board's references file), Young & Tian's DQN (``published``, their
    points by default) and the behaviour agent's training curve, which is an online DQN at one
    update per env step (docs/leaderboard.md#online-boards).

    ``envs`` is :func:`per_env_data`'s ``envs``. A published point or a behaviour window beyond the
    last step the env's methods logged is left out, as the behaviour figure leaves out points the
    run does not reach (:func:`~offline_gitd.leaderboard.behaviour.points_in_range`): the panel's
    axis stays the board's. The behaviour curve's windows are smoothed the way the methods'
    curves are (:func:`centred_smooth`), windows without an episode left out first."""
    published = minatar_dqn_curve() if published is None else published
    curves = {curve.env: curve for curve in behaviour if curve.env}
    out: dict[str, dict[str, Any]] = {}
    for env, methods in envs.items():
        last = max((max(curve["step"], default=0) for curve in methods.values()), default=0)
        points = points_in_range(published.get(env, ()), last)
        entry: dict[str, Any] = {
            "random": randoms.get(env),
            "published": {"step": [p.env_steps for p in points], "value": [p.value for p in points]},
            "sources": sorted({p.source for p in points}),
            "behaviour": None,
        }
        curve = curves.get(env)
        if curve is not None:
            kept = [
                (step, value)
                for step, value in zip(curve.env_step, curve.mean_return)
                if step <= last and math.isfinite(value)
            ]
            if kept:
                steps, values = zip(*kept)
                entry["behaviour"] = {
                    "name": curve.name,
                    "step": list(steps),
                    "value": centred_smooth(np.asarray(values)).tolist(),
                }
        if entry["random"] is not None or points or entry["behaviour"] is not None:
            out[env] = entry
    return out
