"""A board's full analysis in one call: scores, per-method summaries and figures.

Shared by ``leaderboard plot``, ``leaderboard html`` and the demo, so that the three always show
the same numbers for the same board and options.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    import pandas as pd

    from offline_gitd.leaderboard.stats import MethodSummary


class Analysis(NamedTuple):
    scored: "pd.DataFrame"
    summaries: "list[MethodSummary]"
    baseline: str
    figures: dict[str, bytes]
    figure_data: dict[str, Any]


def analyse(board: Path, baseline: str, normalise: str, reps: int, seed: int, **figure_options: Any) -> Analysis:
    """``figure_options``: :func:`~offline_gitd.leaderboard.plot.render_figures`'s keywords
    (``methods``, ``per_env``, ``fmt``, ``dpi``); the table always covers every method."""
    from offline_gitd.leaderboard.plot import render_figures
    from offline_gitd.leaderboard.show import load_scored
    from offline_gitd.leaderboard.stats import summarise

    scored, baseline_key = load_scored(board, baseline, normalise)
    summaries = summarise(scored, baseline_key, reps, seed)
    data, figures = render_figures(scored, summaries, baseline_key, normalise, reps, seed, **figure_options)
    return Analysis(scored, summaries, baseline_key, figures, data)


def publish(board: Path, analysis: Analysis, normalise: str, out_dir: Path) -> tuple[list[Path], Path]:
    """Write the figures (PNG) and the page (index.html) of an analysis into ``out_dir``."""
    from offline_gitd.leaderboard.html import board_provenance, render_page, write_page
    from offline_gitd.leaderboard.plot import write_figures

    figure_paths = write_figures(analysis.figures, out_dir)
    provenance = board_provenance(board, len(analysis.scored))
    page = write_page(
        render_page(analysis.summaries, analysis.figures, analysis.baseline, normalise, provenance), out_dir
    )
    return figure_paths, page
