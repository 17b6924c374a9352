"""``leaderboard plot``: the board's figures, drawn from :mod:`offline_gitd.leaderboard.curves`.

- ``aggregate``: left, the IQM over runs x envs of the normalised score at each logged step with its
  95% stratified bootstrap band (its last point is the table's IQM final); right, each method's
  normalised IQM AUC with CI whiskers, the baseline at 1.
- ``per_env``: one panel per env, the mean over seeds with a 95% band, in normalised scores or raw
  returns (``--per-env return``); in raw returns beside the env's uniform-random return, Young &
  Tian's DQN (MinAtar) and its behaviour agent's curve, where the board has them.
- ``intervals``: median, IQM, mean and optimality gap of final scores with 95% CIs (rliable's
  standard summary).
- ``profile``: performance profiles, the fraction of runs x envs above each score.
- ``behaviour``, where the board's folder keeps behaviour curves (``behaviour/``): each agent that
  recorded a dataset, its training return per window and per checkpoint, beside Young & Tian's DQN
  at the same frames and the uniform-random return.

Each method keeps one colour, line style and marker in every figure, so two coinciding lines stay
distinguishable and the figures read in greyscale; legends sit outside the axes, sized to the
longest name, so none is clipped whatever the number of methods. matplotlib's Figure API (Agg)
is used, never pyplot's global state.

Margins are fixed by hand (:func:`_place`) from the widths of the texts they hold, measured with
the font itself, rather than by matplotlib's constrained layout: that engine measures every artist
of a figure in an extra draw before the one saved, which was most of the time ``plot`` took
(docs/leaderboard.md#speed).
"""

from __future__ import annotations

import functools
import io
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from offline_gitd.leaderboard.behaviour import BehaviourCurve, behaviour_data
from offline_gitd.leaderboard.curves import (
    SMOOTHING_WINDOW,
    aggregate_data,
    final_matrices,
    intervals_data,
    per_env_data,
    per_env_references,
    profile_data,
    select_methods,
)
from offline_gitd.leaderboard.schema import shorten
from offline_gitd.leaderboard.stats import MethodSummary

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure

FORMATS = ("png", "pdf", "svg")
DEFAULT_DPI = 150
PER_ENV_VALUES = ("score", "return")
SCORE_LABEL = {
    "auto": "score normalised by each env's reference",
    "baseline": "score relative to baseline final (1 = baseline)",
    "human": "human-normalised score",
    "d4rl": "D4RL-normalised score",
    "minari": "dataset-normalised score (100 = ref_max_score)",
    "dqn-replay": "DQN-replay-normalised score",
}
_LINE_STYLES = ("-", "--", "-.", ":")
_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "<", ">")
_BAND_ALPHA = 0.13


# Longest name drawn whole (docs/leaderboard.md#any-name-renders): a longer one is cut in its middle
# with its length said, so that no name can push a panel out of its figure; the figure's data
# (``--data``) keeps it whole.
NAME_LIMIT = 48


def plain(label: str, limit: int = NAME_LIMIT) -> str:
    """``label`` as literal text for matplotlib, one line of at most about ``limit`` characters
    (:func:`~offline_gitd.leaderboard.schema.shorten`): names come from results files, and a pair of
    ``$`` would start mathtext (``$\\foo{$`` kills the render); an escaped ``\\$`` is drawn as ``$``."""
    return shorten(label, limit).replace("$", r"\$")


def method_styles(methods: Sequence[str]) -> dict[str, dict[str, Any]]:
    """One colour, line style and marker per method, fixed across figures. Colours cycle over
    tab10; style and marker advance with the colour so neighbours differ in all three."""
    import matplotlib

    palette = matplotlib.colormaps["tab10"]
    return {
        method: {
            "color": palette(i % 10),
            "linestyle": _LINE_STYLES[i % len(_LINE_STYLES)],
            "marker": _MARKERS[i % len(_MARKERS)],
        }
        for i, method in enumerate(methods)
    }


def _legend_columns(labels: Sequence[str], width_inches: float) -> int:
    """As many legend columns as fit the figure's width for the longest label."""
    column = 0.075 * max(len(plain(label)) for label in labels) + 0.8  # small font, handle and padding
    return max(1, min(len(labels), int(width_inches // column)))


def _outside_legend(figure: Figure, styles: dict[str, dict[str, Any]], above: float = 0.0) -> None:
    """The methods' legend centred at the bottom of the figure, in the margin :func:`_legend_height` keeps,
    ``above`` inches higher where something sits beneath it. A style may set its own line width."""
    from matplotlib.lines import Line2D

    labels = list(styles)
    handles = [Line2D([], [], **{"linewidth": 1.8, "markersize": 5, **styles[m]}) for m in labels]
    figure.legend(
        handles,
        [plain(label) for label in labels],
        loc="lower center",
        bbox_to_anchor=(0.5, (_PAD + above) / figure.get_figheight()),
        ncols=_legend_columns(labels, figure.get_figwidth()),
        frameon=False,
        fontsize="small",
        borderaxespad=0.0,
    )


# Fixed layout: margins in inches, from the sizes of the texts they hold (matplotlib's defaults:
# 10 pt tick labels and axis labels, "large" axes titles, a tick and its pad 7 pt).
_POINT = 1 / 72  # inches
_PAD = 5 * _POINT  # between the figure's edge, or a panel's texts, and the next thing
_TICK = 7 * _POINT
_LINE = 1.3  # the height of a line of text, in font sizes (with descenders)


@functools.lru_cache(maxsize=None)
def _points(size: str | float) -> float:
    from matplotlib.font_manager import FontProperties

    return float(FontProperties(size=size).get_size_in_points())


def _lines(count: float, size: str | float) -> float:
    """Height in inches of ``count`` lines of text at ``size``."""
    return count * _LINE * _points(size) * _POINT


@functools.lru_cache(maxsize=4096)
def _text_width(text: str, size: str | float) -> float:
    """Width in inches of one line of literal ``text`` at ``size`` in the default font."""
    from matplotlib.font_manager import FontProperties
    from matplotlib.textpath import text_to_path

    width, _, _ = text_to_path.get_text_width_height_descent(text, FontProperties(size=size), ismath=False)
    return float(width) * _POINT


def _tick_width(axis: Any) -> float:
    """Width in inches of the widest tick label ``axis`` (x or y) will draw: its locator and
    formatter on the view limits of what is drawn so far."""
    import matplotlib as mpl

    low, high = sorted(axis.get_view_interval())
    slack = 1e-9 * max(1.0, abs(high - low))
    locations = [x for x in axis.get_majorticklocs() if low - slack <= x <= high + slack]
    labels = axis.get_major_formatter().format_ticks(locations)
    size = mpl.rcParams[f"{axis.axis_name}tick.labelsize"]
    return max((_text_width(label, size) for label in labels if label), default=0.0)


def _has_offset(axis: Any) -> bool:
    """Whether the y axis of panel ``axis`` writes an offset or a power of ten above it (known
    once :func:`_tick_width` has formatted its ticks)."""
    offset = getattr(axis.yaxis.get_major_formatter(), "get_offset", None)
    return bool(offset is not None and offset())


def _offset_height(axes: Sequence[Any]) -> float:
    """Room above the panels for a y axis's offset or power of ten (after :func:`_tick_width`)."""
    return _lines(1, "medium") if any(_has_offset(axis) for axis in axes) else 0.0


def _pin_titles(axes: Sequence[Any]) -> None:
    """Keep each panel's title where matplotlib would put it, just above the panel, without its
    check at every draw for ticks above the panel (there are none; only a y offset text, where
    there is one, still moves the title up)."""
    for axis in axes:
        if axis.get_title() and not _has_offset(axis):
            axis.set_title(axis.get_title(), fontsize=axis.title.get_fontsize(), y=1.0)


def _legend_height(figure: Figure, methods: Sequence[str]) -> float:
    """Height in inches of :func:`_outside_legend` of ``methods``, with its pads."""
    rows = math.ceil(len(methods) / _legend_columns(methods, figure.get_figwidth()))
    return _PAD + (1.75 * rows - 0.5) * _points("small") * _POINT + _PAD


def _ticks_and_label(label_size: str | float | None) -> float:
    """Depth in inches below a panel of its x tick labels and, given its size, its x label."""
    return _TICK + _lines(1, "medium") + (_lines(1, label_size) + 4 * _POINT if label_size else 0.0)


def _place(
    figure: Figure,
    shape: tuple[int, int],
    *,
    left: float,
    right: float,
    top: float,
    bottom: float,
    wgap: float = 0.0,
    hgap: float = 0.0,
) -> None:
    """Margins and the gaps between a grid of rows x columns panels, in inches."""
    width, height = figure.get_size_inches()
    rows, columns = shape
    panel_width = (width - left - right - (columns - 1) * wgap) / columns
    panel_height = (height - top - bottom - (rows - 1) * hgap) / rows
    figure.subplots_adjust(
        left=left / width,
        right=1 - right / width,
        top=1 - top / height,
        bottom=bottom / height,
        wspace=wgap / panel_width,
        hspace=hgap / panel_height,
    )


def _y_labels_width(names: Sequence[str]) -> float:
    """Width in inches of method names as y tick labels (small font) with their ticks."""
    return _TICK + max(_text_width(plain(name), "small") for name in names)


def _place_panels(figure: Figure, axes: Sequence[Any], rows: int, columns: int, below: float) -> None:
    """Lay out a grid of titled panels under a suptitle, with ``below`` inches kept under the
    grid (legend, source lines): the per-env and behaviour figures share this layout."""
    y_ticks = [_tick_width(axis.yaxis) for axis in axes]
    x_half = 0.5 * max(_tick_width(axis.xaxis) for axis in axes)
    title = _lines(1, "medium") + 6 * _POINT
    _place(
        figure,
        (rows, columns),
        left=_PAD + _lines(1, "small") + 4 * _POINT + _TICK + max(y_ticks[::columns]),
        right=_PAD + x_half,
        top=_PAD + _lines(1, "medium") + _offset_height(axes) + title,
        bottom=below + _ticks_and_label("small"),
        wgap=_PAD + x_half + _TICK + max(y_ticks),
        hgap=_PAD + _ticks_and_label("small") + _offset_height(axes) + title,
    )


def _draw_curve(axis: Any, curve: dict[str, list[float]], style: dict[str, Any]) -> None:
    steps = np.asarray(curve["step"])
    marks = max(1, len(steps) // 8)
    axis.plot(steps, curve["value"], linewidth=1.6, markersize=4, markevery=marks, **style)
    axis.fill_between(steps, curve["low"], curve["high"], color=style["color"], alpha=_BAND_ALPHA, linewidth=0)


# The aggregate figure's panels: the learning curves, then the AUC bars.
_AGGREGATE_WIDTHS = (1.6, 1)


def _bars_label(bars: Any, baseline: str, width: float) -> int:
    """Label the AUC bars' x axis with the baseline's name, and return its number of lines. A label
    wider than its panel (a long method key, as a replay ratio in brackets makes) would run off
    the figure's right edge if centred, so it is broken after "relative to" and set flush with
    the panel's right edge, reaching left under the method names, where nothing is drawn."""
    label = f"IQM AUC relative to {plain(baseline)} (1 = baseline)"
    if _text_width(label, "medium") <= width:
        bars.set_xlabel(label)
        return 1
    bars.set_xlabel(f"IQM AUC relative to\n{plain(baseline)} (1 = baseline)", loc="right")
    return 2


def aggregate_figure(data: dict[str, Any], baseline: str, how: str) -> Figure:
    """Learning curves (IQM + CI band) beside the AUC bars (with CI whiskers)."""
    from matplotlib.figure import Figure
    from matplotlib.ticker import EngFormatter

    methods = data["methods"]
    styles = method_styles(methods)
    figure = Figure(figsize=(11, 4.6 + 0.22 * math.ceil(len(methods) / 3)))
    axes = figure.subplots(1, 2, width_ratios=_AGGREGATE_WIDTHS, squeeze=False)
    curves, bars = axes[0]
    for method in methods:
        _draw_curve(curves, data["curves"][method], styles[method])
    if how == "baseline":
        curves.axhline(1.0, color="black", linestyle="--", linewidth=0.8, alpha=0.6)
    curves.set_xlabel("training step")
    curves.set_ylabel(f"IQM {SCORE_LABEL[how]}")
    curves.set_title(f"Learning curves (centred window-{SMOOTHING_WINDOW} smoothing, 95% CI)\nend point = IQM final")
    curves.xaxis.set_major_formatter(EngFormatter(sep=""))
    curves.grid(alpha=0.3)

    positions = np.arange(len(methods))[::-1]
    auc = np.array([data["auc"][m] for m in methods]).reshape(-1, 3)
    # A percentile interval need not contain its point (IQMs of a few tied runs): no negative whisker.
    errors = np.clip(np.stack([auc[:, 0] - auc[:, 1], auc[:, 2] - auc[:, 0]]), 0.0, None)
    bars.barh(
        positions,
        auc[:, 0],
        xerr=errors,
        color=[styles[m]["color"] for m in methods],
        alpha=0.85,
        error_kw={"capsize": 4, "elinewidth": 1.2},
    )
    bars.axvline(1.0, color="black", linestyle="--", linewidth=1)
    bars.set_yticks(positions, [plain(method) for method in methods], fontsize="small")
    bars.set_title("Normalised AUC (95% CI)")
    bars.grid(axis="x", alpha=0.3)
    _outside_legend(figure, styles)
    left = _PAD + _lines(1, "medium") + 4 * _POINT + _TICK + _tick_width(curves.yaxis)
    right = _PAD + 0.5 * max(_tick_width(curves.xaxis), _tick_width(bars.xaxis))
    wgap = _PAD + _y_labels_width(methods) + 0.5 * _tick_width(curves.xaxis)
    bars_width = (figure.get_figwidth() - left - right - wgap) * _AGGREGATE_WIDTHS[1] / sum(_AGGREGATE_WIDTHS)
    label_lines = _bars_label(bars, baseline, bars_width)
    _place(
        figure,
        (1, 2),
        left=left,
        right=right,
        top=_PAD + _offset_height([curves]) + _lines(2, "large") + 6 * _POINT,
        bottom=_legend_height(figure, methods) + _ticks_and_label("medium") + _lines(label_lines - 1, "medium"),
        wgap=wgap,
    )
    _pin_titles([curves, bars])
    return figure


def per_env_figure(data: dict[str, Any], how: str) -> Figure:
    """One panel per env: the mean over seeds of each method (score or raw return), 95% band."""
    from matplotlib.figure import Figure
    from matplotlib.ticker import EngFormatter

    methods = data["methods"]
    styles = method_styles(methods)
    envs = list(data["envs"])
    columns = min(3, len(envs))
    rows = math.ceil(len(envs) / columns)
    figure = Figure(figsize=(max(7.0, 4.2 * columns), 3.2 * rows + 0.9))
    cells = figure.add_gridspec(rows, columns)
    axes = [figure.add_subplot(cells[index // columns, index % columns]) for index in range(len(envs))]
    ylabel = SCORE_LABEL[how] if data["value"] == "score" else "return (mean over seeds)"
    references = data.get("references", {})
    drawn: set[str] = set()
    for axis, env in zip(axes, envs):
        for method, curve in data["envs"][env].items():
            _draw_curve(axis, curve, styles[method])
        drawn |= _draw_references(axis, references.get(env))
        if data["value"] == "score" and how == "baseline":
            axis.axhline(1.0, color="black", linestyle="--", linewidth=0.8, alpha=0.6)
        axis.set_title(plain(env), fontsize="medium")
        axis.xaxis.set_major_formatter(EngFormatter(sep=""))
        axis.grid(alpha=0.3)
    for axis in axes[::columns]:
        axis.set_ylabel(ylabel, fontsize="small")
    for column in range(columns):
        # The lowest panel of each column carries the x label, also above an empty grid cell.
        lowest = max(index for index in range(column, len(envs), columns))
        axes[lowest].set_xlabel("training step", fontsize="small")
    what = "normalised score" if data["value"] == "score" else "raw return"
    figure.suptitle(
        f"Per env, {what}: mean over seeds, 95% CI (centred window-{SMOOTHING_WINDOW} smoothing)",
        fontsize="medium",
        y=1 - _PAD / figure.get_figheight(),
        va="top",
    )
    legend = {
        **styles,
        **{_REFERENCE_LABELS[kind]: _REFERENCE_STYLES[kind] for kind in _REFERENCE_STYLES if kind in drawn},
    }
    sources = sorted({source for env in envs for source in references.get(env, {}).get("sources", [])})
    source_height = 0.0
    if sources:
        lines = _wrap("Young & Tian DQN: " + "; ".join(sources), "small", 0.92 * (figure.get_figwidth() - 2 * _PAD))
        source_height = _lines(len(lines), "small") + _PAD
        figure.set_figheight(figure.get_figheight() + source_height)
        figure.text(
            0.5,
            _PAD / figure.get_figheight(),
            "\n".join(plain(line, limit=160) for line in lines),
            ha="center",
            va="bottom",
            fontsize="small",
        )
    _outside_legend(figure, legend, above=source_height)
    _place_panels(figure, axes, rows, columns, source_height + _legend_height(figure, list(legend)))
    _pin_titles(axes)
    return figure


# The per-env figure's reference lines (raw returns only): black and grey, apart from the methods'
# tab10 colours, each with its own line style or marker so they read in greyscale.
_REFERENCE_STYLES: dict[str, dict[str, Any]] = {
    "behaviour": {"color": "0.35", "linestyle": "-", "linewidth": 1.0, "marker": ""},
    "published": {"color": "black", "linestyle": "none", "marker": "D", "markersize": 6},
    "random": {"color": "black", "linestyle": ":", "linewidth": 1.0, "marker": ""},
}
_REFERENCE_LABELS = {
    "behaviour": "behaviour agent (training return)",
    "published": "Young & Tian DQN",
    "random": "uniform random",
}


def _draw_references(axis: Any, reference: dict[str, Any] | None) -> set[str]:
    """Draw one env's references (:func:`~offline_gitd.leaderboard.curves.per_env_references`) on
    its panel; the kinds drawn, for the legend."""
    if not reference:
        return set()
    drawn = set()
    if reference["behaviour"] is not None:
        curve = reference["behaviour"]
        axis.plot(curve["step"], curve["value"], **_REFERENCE_STYLES["behaviour"])
        drawn.add("behaviour")
    if reference["published"]["step"]:
        axis.plot(reference["published"]["step"], reference["published"]["value"], **_REFERENCE_STYLES["published"])
        drawn.add("published")
    if reference["random"] is not None:
        axis.axhline(reference["random"], **_REFERENCE_STYLES["random"])
        drawn.add("random")
    return drawn


def intervals_figure(data: dict[str, Any], how: str) -> Figure:
    """rliable's four aggregate estimates of final scores, one panel each, CIs as bars."""
    from matplotlib.figure import Figure

    methods = data["methods"]
    styles = method_styles(methods)
    colours = [styles[method]["color"] for method in methods]
    figure = Figure(figsize=(12, 1.2 + 0.42 * len(methods)))
    grid = figure.subplots(1, len(data["metrics"]), sharey=True, squeeze=False)
    axes = grid[0]
    positions = np.arange(len(methods))[::-1]
    for k, (axis, name) in enumerate(zip(axes, data["metrics"])):
        value, low, high = np.array([data["values"][method][k] for method in methods]).T
        axis.barh(positions, high - low, left=low, height=0.6, color=colours, alpha=0.75)
        axis.vlines(value, positions - 0.3, positions + 0.3, color="black", linewidth=2)
        axis.set_title(name + (" (lower is better)" if name == "Optimality gap" else ""), fontsize="medium")
        axis.grid(axis="x", alpha=0.3)
        if name == "Optimality gap":
            axis.set_xlabel(f"below {data['gap_threshold']:g}", fontsize="small")
        elif how == "baseline":
            axis.axvline(1.0, color="black", linestyle="--", linewidth=0.8, alpha=0.6)
    axes[0].set_yticks(positions, [plain(method) for method in methods], fontsize="small")
    figure.suptitle(
        f"Final {SCORE_LABEL[how]}: point estimate (black) and 95% stratified bootstrap CI",
        fontsize="medium",
        y=1 - _PAD / figure.get_figheight(),
        va="top",
    )
    x_half = 0.5 * max(_tick_width(axis.xaxis) for axis in axes)
    _place(
        figure,
        (1, len(axes)),
        left=_PAD + _y_labels_width(methods),
        right=_PAD + x_half,
        top=_PAD + _lines(1, "medium") + _lines(1, "medium") + 6 * _POINT,
        bottom=_PAD + _ticks_and_label("small"),
        wgap=_PAD + 2 * x_half,
    )
    _pin_titles(axes)
    return figure


def profile_figure(data: dict[str, Any], how: str) -> Figure:
    """Performance profiles: fraction of runs x envs with final score above tau, 95% band."""
    from matplotlib.figure import Figure

    methods = data["methods"]
    styles = method_styles(methods)
    figure = Figure(figsize=(7.5, 4.6 + 0.22 * math.ceil(len(methods) / 3)))
    grid = figure.subplots(squeeze=False)
    axis = grid[0, 0]
    taus = np.asarray(data["tau"])
    for method in methods:
        profile = data["profiles"][method]
        curve = {"step": taus.tolist(), "value": profile["fraction"], "low": profile["low"], "high": profile["high"]}
        _draw_curve(axis, curve, styles[method])
    if how == "baseline":
        axis.axvline(1.0, color="black", linestyle="--", linewidth=0.8, alpha=0.6)
    axis.set_xlabel(f"final {SCORE_LABEL[how]} (tau)")
    axis.set_ylabel("fraction of runs with score > tau")
    axis.set_ylim(-0.02, 1.02)
    axis.set_title("Performance profiles (95% CI)", fontsize="medium")
    axis.grid(alpha=0.3)
    _outside_legend(figure, styles)
    _place(
        figure,
        (1, 1),
        left=_PAD + _lines(1, "medium") + 4 * _POINT + _TICK + _tick_width(axis.yaxis),
        right=_PAD + 0.5 * _tick_width(axis.xaxis),
        top=_PAD + _lines(1, "medium") + 6 * _POINT,
        bottom=_legend_height(figure, methods) + _ticks_and_label("medium"),
    )
    _pin_titles([axis])
    return figure


def _fill(words: Sequence[str], size: str | float, width: float) -> list[str]:
    """``words`` put greedily into lines no wider than ``width`` inches at ``size`` (a word wider
    than that keeps its own line)."""
    lines: list[str] = []
    for word in words:
        if lines and _text_width(f"{lines[-1]} {word}", size) <= width:
            lines[-1] += f" {word}"
        else:
            lines.append(word)
    return lines


def _wrap(text: str, size: str | float, width: float) -> list[str]:
    """``text`` broken at spaces into as few lines as fit ``width`` inches at ``size``, of even
    length: the narrowest width that needs no more lines, so no last line holds a lone word."""
    words = text.split()
    lines = _fill(words, size, width)
    low, high = 0.0, width
    for _ in range(12):  # bisection to 1/4096 of the width
        middle = (low + high) / 2
        low, high = (low, middle) if len(_fill(words, size, middle)) <= len(lines) else (middle, high)
    return _fill(words, size, high)


# The behaviour figure's four kinds of line: the windows thin and pale under the checkpoints,
# which carry markers, so the two read apart in greyscale too.
_BEHAVIOUR_STYLES: dict[str, dict[str, Any]] = {
    "window": {"color": "C0", "linestyle": "-", "linewidth": 0.9, "alpha": 0.5, "marker": ""},
    "checkpoint": {"color": "C0", "linestyle": "-", "linewidth": 2.0, "marker": "o", "markersize": 4},
    "published": {"color": "C3", "linestyle": "none", "marker": "D", "markersize": 7, "markeredgecolor": "black"},
    "random": {"color": "black", "linestyle": "--", "linewidth": 0.9, "alpha": 0.7, "marker": ""},
}


def behaviour_figure(data: dict[str, Any]) -> Figure:
    """One panel per behaviour agent (:func:`~offline_gitd.leaderboard.behaviour.behaviour_data`):
    its training return per logged window (thin) and per checkpoint (the episode-weighted mean,
    thick, with markers), Young & Tian's DQN at the frames the run reaches, and the uniform-random
    return (dashed) where the board's references give it. The published points are read off a
    plot, so their source is written under the legend: it travels with the figure wherever it goes."""
    from matplotlib.figure import Figure
    from matplotlib.ticker import EngFormatter

    eng = EngFormatter(sep="").format_eng
    panels = data["curves"]
    names = list(panels)
    columns = min(3, len(names))
    rows = math.ceil(len(names) / columns)
    width = max(7.0, 4.2 * columns)
    # A line of text renders a few percent wider than its outline measures: wrap with room to spare.
    source = _wrap("Young & Tian DQN: " + "; ".join(data["sources"]), "small", 0.92 * (width - 2 * _PAD))
    source_height = _lines(len(source), "small") + _PAD if data["sources"] else 0.0
    figure = Figure(figsize=(width, 3.2 * rows + 1.1 + source_height))
    cells = figure.add_gridspec(rows, columns)
    axes = [figure.add_subplot(cells[index // columns, index % columns]) for index in range(len(names))]
    window = data["window_steps"]
    labels = {
        "window": f"mean per {eng(window)}-step window" if window else "mean per logged window",
        "checkpoint": f"episode-weighted mean per {eng(data['checkpoint_steps'])} steps",
        "published": "Young & Tian DQN",
        "random": "uniform random",
    }
    drawn: set[str] = {"window", "checkpoint"}
    for axis, name in zip(axes, names):
        panel = panels[name]
        axis.plot(
            panel["window"]["step"], np.asarray(panel["window"]["value"], dtype=float), **_BEHAVIOUR_STYLES["window"]
        )
        axis.plot(panel["checkpoint"]["step"], panel["checkpoint"]["value"], **_BEHAVIOUR_STYLES["checkpoint"])
        if panel["published"]["step"]:
            axis.plot(panel["published"]["step"], panel["published"]["value"], **_BEHAVIOUR_STYLES["published"])
            drawn.add("published")
        if panel["random"] is not None:
            axis.axhline(panel["random"], **_BEHAVIOUR_STYLES["random"])
            drawn.add("random")
        axis.set_title(plain(panel["title"]), fontsize="medium")
        axis.xaxis.set_major_formatter(EngFormatter(sep=""))
        axis.grid(alpha=0.3)
    for axis in axes[::columns]:
        axis.set_ylabel("training return (epsilon-greedy)", fontsize="small")
    for column in range(columns):
        lowest = max(index for index in range(column, len(names), columns))
        axes[lowest].set_xlabel("env step", fontsize="small")
    against = " beside Young & Tian's DQN at the same frames" if "published" in drawn else ""
    figure.suptitle(
        f"Behaviour agents' learning curves{against}",
        fontsize="medium",
        y=1 - _PAD / figure.get_figheight(),
        va="top",
    )
    legend = {labels[kind]: _BEHAVIOUR_STYLES[kind] for kind in _BEHAVIOUR_STYLES if kind in drawn}
    _outside_legend(figure, legend, above=source_height)
    if data["sources"]:
        figure.text(
            0.5,
            _PAD / figure.get_figheight(),
            "\n".join(plain(line, limit=160) for line in source),
            ha="center",
            va="bottom",
            fontsize="small",
        )
    _place_panels(figure, axes, rows, columns, source_height + _legend_height(figure, list(legend)))
    _pin_titles(axes)
    return figure


def figure_data(
    scored: pd.DataFrame,
    summaries: Sequence[MethodSummary],
    how: str,
    reps: int,
    seed: int,
    *,
    methods: Sequence[str] | None = None,
    per_env: str = "score",
    behaviour: Sequence[BehaviourCurve] = (),
    randoms: Mapping[str, float] | None = None,
) -> dict[str, dict[str, Any]]:
    """Figure name -> the data it is drawn from (see :mod:`~offline_gitd.leaderboard.curves`);
    ``behaviour`` as well when the board has behaviour curves
    (:func:`~offline_gitd.leaderboard.behaviour.read_curves`). Per-env panels in raw returns
    (``per_env="return"``) also carry each env's references (:func:`per_env_references`:
    ``randoms``, env -> the uniform-random return, Young & Tian's DQN and the behaviour curves);
    in scores they carry none, since a reference line would have to be normalised per replication."""
    chosen = select_methods(scored, methods)
    finals = final_matrices(scored, chosen)
    envs = per_env_data(scored, chosen, per_env, reps, seed)
    references = per_env_references(envs["envs"], randoms or {}, behaviour) if per_env == "return" else {}
    if references:
        envs["references"] = references
    data = {
        "aggregate": aggregate_data(scored, summaries, chosen, reps, seed),
        "per_env": envs,
        "intervals": intervals_data(scored, chosen, how, reps, seed, finals),
        "profile": profile_data(scored, chosen, reps, seed, finals),
    }
    if behaviour:
        data["behaviour"] = behaviour_data(behaviour)
    return data


def draw(data: dict[str, dict[str, Any]], baseline: str, how: str) -> dict[str, Figure]:
    figures = {
        "aggregate": aggregate_figure(data["aggregate"], baseline, how),
        "per_env": per_env_figure(data["per_env"], how),
        "intervals": intervals_figure(data["intervals"], how),
        "profile": profile_figure(data["profile"], how),
    }
    if "behaviour" in data:
        figures["behaviour"] = behaviour_figure(data["behaviour"])
    return figures


def figure_bytes(figure: Figure, fmt: str = "png", dpi: int = DEFAULT_DPI) -> bytes:
    """The figure rendered in ``fmt``; vector formats carry no timestamp, so a figure's bytes
    depend on its data alone."""
    buffer = io.BytesIO()
    metadata = {"png": {"Software": None}, "pdf": {"CreationDate": None}, "svg": {"Date": None}}[fmt]
    figure.savefig(buffer, format=fmt, dpi=dpi, metadata=metadata)
    return buffer.getvalue()


def render_figures(
    scored: pd.DataFrame,
    summaries: Sequence[MethodSummary],
    baseline: str,
    how: str,
    reps: int,
    seed: int,
    *,
    methods: Sequence[str] | None = None,
    per_env: str = "score",
    fmt: str = "png",
    dpi: int = DEFAULT_DPI,
    behaviour: Sequence[BehaviourCurve] = (),
    randoms: Mapping[str, float] | None = None,
) -> tuple[dict[str, dict[str, Any]], dict[str, bytes]]:
    """The figures' data (:func:`figure_data`) and file name -> bytes of every figure in ``fmt``."""
    data = figure_data(
        scored, summaries, how, reps, seed, methods=methods, per_env=per_env, behaviour=behaviour, randoms=randoms
    )
    figures = {f"{name}.{fmt}": figure_bytes(figure, fmt, dpi) for name, figure in draw(data, baseline, how).items()}
    return data, figures


DATA_FILE = "figure_data.json"


def write_figures(figures: dict[str, bytes], out_dir: Path, data: dict[str, Any] | None = None) -> list[Path]:
    """Write the figures into ``out_dir`` (created if needed), and the numbers they are drawn from
    as ``figure_data.json`` when given; the paths written."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    if data is not None:
        path = out_dir / DATA_FILE
        path.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
        paths.append(path)
    for name, content in figures.items():
        path = out_dir / name
        path.write_bytes(content)
        paths.append(path)
    return paths
