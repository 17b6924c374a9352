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
  runs x envs scoring above tau), are rliable's, with the same stratified bootstrap as the table.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from offline_gitd.errors import UsageError
from offline_gitd.leaderboard.normalise import final_scores
from offline_gitd.leaderboard.stats import MethodSummary, bootstrap_ci, rliable_modules, run_matrix

if TYPE_CHECKING:
    import pandas as pd

SMOOTHING_WINDOW = 5
# Where "optimal" is for the optimality gap, per normalisation: the baseline, human, D4RL expert.
GAP_THRESHOLD = {"baseline": 1.0, "human": 1.0, "d4rl": 100.0}
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
    """``scored`` sorted by run and step, with ``smooth``: :func:`centred_smooth` of ``column`` per run."""
    ordered = scored.sort_values(["run", "step"]).copy()
    ordered["smooth"] = np.nan
    for _, index in ordered.groupby("run").groups.items():
        ordered.loc[index, "smooth"] = centred_smooth(ordered.loc[index, column].to_numpy())
    return ordered


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
    steps = sorted(set.intersection(*(set(group["step"]) for _, group in runs.groupby("run"))))
    table = runs[runs["step"].isin(steps)].pivot(index="run", columns="step", values="smooth")
    per_env = []
    for _, group in runs.groupby("env"):
        order = group.drop_duplicates("run").sort_values(["seed", "run"])["run"]
        per_env.append(table.loc[order, steps].to_numpy())
    return np.asarray(steps), np.stack(per_env, axis=1)


def iqm_per_step(scores: np.ndarray) -> np.ndarray:
    """rliable's ``aggregate_iqm`` (a 25% trimmed mean over runs x envs) at every step of a
    runs x envs x steps array, in one vectorised call instead of one per step."""
    from scipy.stats import trim_mean

    return trim_mean(scores.reshape(-1, scores.shape[-1]), proportiontocut=0.25, axis=0)


def mean_per_step(scores: np.ndarray) -> np.ndarray:
    """The mean over runs x envs at every step (rliable's ``aggregate_mean`` with equal runs per env)."""
    return scores.reshape(-1, scores.shape[-1]).mean(axis=0)


def _band(tensor: np.ndarray, statistic: Any, reps: int, seed: int) -> dict[str, list[float]]:
    library, _ = rliable_modules()
    point, interval = bootstrap_ci(library, tensor, statistic, reps, seed)
    return {"value": np.asarray(point).tolist(), "low": interval[0].tolist(), "high": interval[1].tolist()}


def aggregate_data(
    scored: pd.DataFrame, summaries: Sequence[MethodSummary], methods: Sequence[str], reps: int, seed: int
) -> dict[str, Any]:
    """Per method: the IQM curve over runs x envs (smoothed) with its band, the table's IQM final
    and its normalised AUC with CI."""
    by_method = {item.method: item for item in summaries}
    frame = smoothed(scored[scored["method"].isin(methods)])
    curves = {}
    for method in methods:
        steps, tensor = _curve_tensor(frame[frame["method"] == method])
        curves[method] = {"step": steps.tolist(), **_band(tensor, iqm_per_step, reps, seed)}
    return {
        "methods": list(methods),
        "curves": curves,
        "final_iqm": {m: by_method[m].iqm.value for m in methods},
        "auc": {m: [by_method[m].auc.value, by_method[m].auc.low, by_method[m].auc.high] for m in methods},
    }


def per_env_data(scored: pd.DataFrame, methods: Sequence[str], value: str, reps: int, seed: int) -> dict[str, Any]:
    """Per env and method: the mean over seeds of the smoothed ``value`` (``score`` or raw
    ``return``) at each step, with a 95% bootstrap band over seeds."""
    frame = smoothed(scored[scored["method"].isin(methods)], "score" if value == "score" else "return")
    envs: dict[str, Any] = {}
    for env in sorted(frame["env"].unique()):
        in_env = frame[frame["env"] == env]
        envs[env] = {}
        for method in methods:
            runs = in_env[in_env["method"] == method]
            if runs.empty:
                continue
            steps, tensor = _curve_tensor(runs)
            envs[env][method] = {"step": steps.tolist(), **_band(tensor, mean_per_step, reps, seed)}
    return {"methods": list(methods), "value": value, "envs": envs}


def _final_matrix(scored: pd.DataFrame, method: str) -> np.ndarray:
    finals = final_scores(scored[scored["method"] == method])
    return run_matrix(finals, "score", sorted(set(finals["env"])))


def intervals_data(scored: pd.DataFrame, methods: Sequence[str], how: str, reps: int, seed: int) -> dict[str, Any]:
    """Median, IQM, mean and optimality gap of each method's final scores, with 95% CIs."""
    library, metrics = rliable_modules()
    gamma = GAP_THRESHOLD[how]

    def four(scores: np.ndarray) -> np.ndarray:
        return np.array(
            [
                metrics.aggregate_median(scores),
                metrics.aggregate_iqm(scores),
                metrics.aggregate_mean(scores),
                metrics.aggregate_optimality_gap(scores, gamma),
            ]
        )

    values = {}
    for method in methods:
        point, interval = bootstrap_ci(library, _final_matrix(scored, method), four, reps, seed)
        values[method] = [[float(p), float(lo), float(hi)] for p, lo, hi in zip(point, interval[0], interval[1])]
    return {"methods": list(methods), "metrics": list(INTERVAL_METRICS), "gap_threshold": gamma, "values": values}


def profile_data(scored: pd.DataFrame, methods: Sequence[str], reps: int, seed: int) -> dict[str, Any]:
    """Performance profiles (Agarwal et al. 2021): for each tau, the fraction of runs x envs
    whose final score exceeds tau, with a 95% stratified bootstrap band."""
    library, _ = rliable_modules()
    matrices = {method: _final_matrix(scored, method) for method in methods}
    everything = np.concatenate([m.ravel() for m in matrices.values()])
    low, high = float(np.min(everything)), float(np.max(everything))
    margin = 0.05 * (high - low) or 0.5
    taus = np.linspace(low - margin, high + margin, PROFILE_POINTS)

    def fraction_above(scores: np.ndarray) -> np.ndarray:
        return (scores.reshape(-1, 1) > taus[None, :]).mean(axis=0)

    profiles = {}
    for method, matrix in matrices.items():
        point, interval = bootstrap_ci(library, matrix, fraction_above, reps, seed)
        profiles[method] = {
            "fraction": np.asarray(point).tolist(),
            "low": interval[0].tolist(),
            "high": interval[1].tolist(),
        }
    return {"methods": list(methods), "tau": taus.tolist(), "profiles": profiles}
