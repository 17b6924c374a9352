"""A behaviour agent's learning curve, kept beside the board (docs/sweeps.md#behaviour-curves).

A dataset recorded by ``collect --policy dqn`` is judged by the agent that made it: how far it
learned, and how fast against a published curve (docs/minatar.md). That agent's run directory
lives under the sweep's ``--out`` and may be lost with a machine, like every run directory; so when
a sweep records a dataset it writes the agent's curve, one row per logged window, into
``behaviour/DATASET.csv`` beside each board that trains on it, where it is committed with the board.

The curve is the run's ``metrics.csv`` cut to what a reader compares: the mean return of the
training episodes that ended in each window (epsilon-greedy, as Young & Tian plot theirs), epsilon,
the mean Q of the sampled batches (empty for a random policy, which never updates), and the
window's wall time. The folder's name and the columns are the leaderboard's
(:mod:`offline_gitd.leaderboard.behaviour`), which draws the curves.
"""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path

from offline_gitd.durable import replace_text
from offline_gitd.leaderboard.behaviour import BEHAVIOUR_DIR, CURVE_COLUMNS, curve_file_name

# metrics.csv's column for each curve column (seed 0's: a behaviour agent has one seed).
SOURCE_COLUMNS = {
    "env_step": "step",
    "episodes": "episodes",
    "mean_training_return": "episode_return",
    "epsilon": "epsilon",
    "q_mean": "q_mean_1",
    "window_seconds": "window_seconds",
}
DIGITS = {"mean_training_return": 4, "epsilon": 4, "q_mean": 3, "window_seconds": 3}


def curve_path(board: Path, dataset_id: str) -> Path:
    """``behaviour/ID.csv`` beside ``board``, the dataset id's slashes made dashes."""
    return board.parent / BEHAVIOUR_DIR / curve_file_name(dataset_id)


def _cell(column: str, raw: str | None) -> str:
    if raw is None or raw == "":
        return ""
    if column not in DIGITS:
        return str(int(float(raw)))
    value = float(raw)
    return "" if math.isnan(value) else f"{value:.{DIGITS[column]}f}"


def behaviour_curve(metrics_csv: Path) -> str:
    """The curve's CSV text from a behaviour run's ``metrics.csv`` (seed 0's rows)."""
    with metrics_csv.open(newline="") as handle:
        rows = [row for row in csv.DictReader(handle) if row.get("seed", "0") == "0"]
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CURVE_COLUMNS)
    for row in rows:
        writer.writerow([_cell(column, row.get(SOURCE_COLUMNS[column])) for column in CURVE_COLUMNS])
    return out.getvalue()


def write_behaviour_curve(run_dir: Path, dataset_id: str, boards: list[Path]) -> list[Path]:
    """Write the curve of the behaviour run in ``run_dir`` beside each of ``boards``; the paths
    written (none when the run left no metrics.csv)."""
    metrics = run_dir / "metrics.csv"
    if not metrics.is_file():
        return []
    text = behaviour_curve(metrics)
    written = []
    for board in sorted(set(boards)):
        path = curve_path(board, dataset_id)
        path.parent.mkdir(parents=True, exist_ok=True)
        replace_text(path, text)
        written.append(path)
    return written
