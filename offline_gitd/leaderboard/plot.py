"""``leaderboard plot``: the paper's benchmark figure and a per-env grid, as PNG (matplotlib Agg).

``aggregate.png``: left, the IQM over runs x envs of the normalised score at each logged step with
its 95% stratified bootstrap band, each run smoothed over a window of 5 evaluations first (the
paper smooths its curves so); right, each method's normalised IQM AUC with CI whiskers, the
baseline at 1. ``per_env.png``: one panel per env, the mean over seeds of the smoothed score, one
line per method, so a single env that drives the aggregate is visible.
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from offline_gitd.leaderboard.stats import MethodSummary, iqm_curve

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure

SMOOTHING_WINDOW = 5
SCORE_LABEL = {
    "baseline": "score relative to baseline final (1 = baseline)",
    "human": "human-normalised score",
    "d4rl": "D4RL-normalised score",
}


def plain(label: str) -> str:
    """``label`` as literal text for matplotlib: names come from results files, and a pair of
    ``$`` would start mathtext (``$\\foo{$`` kills the render); an escaped ``\\$`` is drawn as ``$``."""
    return label.replace("$", r"\$")


def smoothed(scored: pd.DataFrame) -> pd.DataFrame:
    """``scored`` sorted by run and step, with ``smooth``: a trailing window-5 mean per run."""
    ordered = scored.sort_values(["run", "step"])
    rolling = ordered.groupby("run")["score"].rolling(SMOOTHING_WINDOW, min_periods=1).mean()
    return ordered.assign(smooth=rolling.reset_index(level=0, drop=True))


def curve_tensor(runs: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """(steps, runs x envs x steps array) of one method's smoothed scores on the steps all share."""
    steps = sorted(set.intersection(*(set(group["step"]) for _, group in runs.groupby("run"))))
    table = runs[runs["step"].isin(steps)].pivot(index="run", columns="step", values="smooth")
    per_env = []
    for _, group in runs.groupby("env"):
        order = group.drop_duplicates("run").sort_values(["seed", "run"])["run"]
        per_env.append(table.loc[order, steps].to_numpy())
    # Equal run counts per env are checked by stats.run_matrix on the same runs.
    return np.asarray(steps), np.stack(per_env, axis=1)


def method_colours(methods: Sequence[str]) -> dict[str, object]:
    """One fixed colour per method, shared by every panel and figure."""
    import matplotlib

    palette = matplotlib.colormaps["tab10"]
    return {method: palette(index % 10) for index, method in enumerate(methods)}


def aggregate_figure(
    scored: pd.DataFrame,
    summaries: Sequence[MethodSummary],
    baseline: str,
    how: str,
    reps: int,
    seed: int,
) -> Figure:
    """Learning curves (IQM + CI band) beside the AUC bars (with CI whiskers)."""
    from matplotlib.figure import Figure
    from matplotlib.ticker import EngFormatter

    methods = [item.method for item in summaries]
    colours = method_colours(methods)
    frame = smoothed(scored)
    figure = Figure(figsize=(11, 4.2), layout="constrained")
    curves, bars = figure.subplots(1, 2, width_ratios=(1.6, 1))
    for method in methods:
        steps, tensor = curve_tensor(frame[frame["method"] == method])
        point, low, high = iqm_curve(tensor, reps, seed)
        curves.plot(steps, point, color=colours[method], label=plain(method), linewidth=1.8)
        curves.fill_between(steps, low, high, color=colours[method], alpha=0.2, linewidth=0)
    curves.set_xlabel("training step")
    curves.set_ylabel(f"IQM {SCORE_LABEL[how]}")
    curves.set_title(f"Learning curves (window-{SMOOTHING_WINDOW} smoothing, 95% CI)")
    curves.xaxis.set_major_formatter(EngFormatter(sep=""))
    curves.grid(alpha=0.3)
    curves.legend(loc="best", fontsize="small", frameon=False)

    positions = np.arange(len(summaries))[::-1]
    values = np.array([item.auc.value for item in summaries])
    # A percentile bootstrap interval need not contain its point estimate (IQMs of a few tied
    # runs); the bar then shows no whisker on that side rather than a negative one.
    errors = np.array([[item.auc.value - item.auc.low, item.auc.high - item.auc.value] for item in summaries]).T
    errors = np.clip(errors, 0.0, None)
    bars.barh(
        positions,
        values,
        xerr=errors,
        color=[colours[m] for m in methods],
        alpha=0.85,
        error_kw={"capsize": 4, "elinewidth": 1.2},
    )
    bars.axvline(1.0, color="black", linestyle="--", linewidth=1)
    bars.set_yticks(positions, [plain(method) for method in methods])
    bars.set_xlabel(f"IQM AUC relative to {plain(baseline)} (1 = baseline)")
    bars.set_title("Normalised AUC (95% CI)")
    bars.grid(axis="x", alpha=0.3)
    return figure


def per_env_figure(scored: pd.DataFrame, methods: Sequence[str], how: str) -> Figure:
    """One panel per env: the mean over seeds of each method's smoothed score per step."""
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D
    from matplotlib.ticker import EngFormatter

    colours = method_colours(methods)
    frame = smoothed(scored)
    envs = sorted(frame["env"].unique())
    columns = min(4, len(envs))
    rows = math.ceil(len(envs) / columns)
    figure = Figure(figsize=(3.6 * columns, 2.9 * rows + 0.6), layout="constrained")
    axes = np.atleast_1d(figure.subplots(rows, columns, squeeze=False)).ravel()
    for axis, env in zip(axes, envs):
        in_env = frame[frame["env"] == env]
        for method in methods:
            mean = in_env[in_env["method"] == method].groupby("step")["smooth"].mean()
            if not mean.empty:
                axis.plot(mean.index, mean.to_numpy(), color=colours[method], linewidth=1.5)
        axis.set_title(plain(env), fontsize="medium")
        axis.xaxis.set_major_formatter(EngFormatter(sep=""))
        axis.grid(alpha=0.3)
    for axis in axes[len(envs) :]:
        axis.set_visible(False)
    for axis in axes[::columns]:
        axis.set_ylabel(SCORE_LABEL[how], fontsize="small")
    for column in range(columns):
        # The lowest panel of each column carries the x label, also above an empty grid cell.
        lowest = max(index for index in range(column, len(envs), columns))
        axes[lowest].set_xlabel("training step", fontsize="small")
    handles = [Line2D([], [], color=colours[method], linewidth=2) for method in methods]
    figure.legend(
        handles,
        [plain(method) for method in methods],
        loc="outside lower center",
        ncols=min(len(methods), 5),
        frameon=False,
    )
    figure.suptitle(f"Per env: mean over seeds (window-{SMOOTHING_WINDOW} smoothing)", fontsize="medium")
    return figure


def png_bytes(figure: Figure) -> bytes:
    """The figure rendered as PNG (Agg, via the Figure API, so no global pyplot state)."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=110)
    return buffer.getvalue()


def render_figures(
    scored: pd.DataFrame,
    summaries: Sequence[MethodSummary],
    baseline: str,
    how: str,
    reps: int,
    seed: int,
) -> dict[str, bytes]:
    """File name -> PNG bytes of both figures."""
    methods = [item.method for item in summaries]
    return {
        "aggregate.png": png_bytes(aggregate_figure(scored, summaries, baseline, how, reps, seed)),
        "per_env.png": png_bytes(per_env_figure(scored, methods, how)),
    }


def write_figures(figures: dict[str, bytes], out_dir: Path) -> list[Path]:
    """Write the PNGs into ``out_dir`` (created if needed); the paths written."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, content in figures.items():
        path = out_dir / name
        path.write_bytes(content)
        paths.append(path)
    return paths
