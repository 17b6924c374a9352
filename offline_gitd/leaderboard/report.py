"""A board's full analysis in one call: scores, per-method summaries and figures.

Shared by ``leaderboard plot``, ``leaderboard html`` and the demo, so that the three always show
the same numbers for the same board and options.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    import pandas as pd

    from offline_gitd.leaderboard.across_envs import AcrossLine
    from offline_gitd.leaderboard.per_env import EnvLine
    from offline_gitd.leaderboard.show import Loaded
    from offline_gitd.leaderboard.stats import MethodSummary


class Analysis(NamedTuple):
    scored: "pd.DataFrame"
    summaries: "list[MethodSummary]"
    baseline: str
    figures: dict[str, bytes]
    figure_data: dict[str, Any]
    loaded: "Loaded | None" = None
    per_env: "list[EnvLine]" = []
    across: "list[AcrossLine]" = []  # each method against the baseline over the aggregate's envs


def analyse(
    board: Path,
    baseline: str,
    normalise: str,
    reps: int,
    seed: int,
    env_patterns: Sequence[str] = (),
    method_patterns: Sequence[str] = (),
    keep_flagged: bool = False,
    **figure_options: Any,
) -> Analysis:
    """``env_patterns`` and ``method_patterns`` filter the board's rows (shell-style, as ``--env`` and
    ``--method``); ``figure_options``:
    :func:`~offline_gitd.leaderboard.plot.render_figures`'s keywords (``methods`` to draw and their
    order, ``per_env``, ``fmt``, ``dpi``, the board's ``behaviour`` curves); the table covers every
    method that passes the filters."""
    from offline_gitd.leaderboard.across_envs import across_env_lines
    from offline_gitd.leaderboard.per_env import per_env_lines
    from offline_gitd.leaderboard.plot import render_figures
    from offline_gitd.leaderboard.show import load
    from offline_gitd.leaderboard.stats import summarise

    loaded = load(board, baseline, normalise, env_patterns, method_patterns, keep_flagged)
    scored, baseline_key = loaded.scored, loaded.baseline
    summaries = summarise(scored, baseline_key, reps, seed)
    per_env = per_env_lines(loaded.everything, baseline_key, reps, seed, loaded.flagged)
    data, figures = render_figures(scored, summaries, baseline_key, normalise, reps, seed, **figure_options)
    across = across_env_lines(scored, baseline_key, seed)
    return Analysis(scored, summaries, baseline_key, figures, data, loaded, per_env, across)


def publish(board: Path, analysis: Analysis, normalise: str, out_dir: Path) -> tuple[list[Path], Path]:
    """Write the figures (PNG) and the page (index.html) of an analysis into ``out_dir``."""
    from offline_gitd.leaderboard.html import board_provenance, render_page, write_page
    from offline_gitd.leaderboard.plot import write_figures

    figure_paths = write_figures(analysis.figures, out_dir)
    provenance = board_provenance(board, len(analysis.scored))
    page = write_page(
        render_page(
            analysis.summaries,
            analysis.figures,
            analysis.baseline,
            normalise,
            provenance,
            loaded=analysis.loaded,
            per_env=analysis.per_env,
            across=analysis.across,
        ),
        out_dir,
    )
    return figure_paths, page
