"""``leaderboard show``: the board's summary table in text, CSV, JSON or Markdown."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from offline_gitd.leaderboard.normalise import filter_rows, method_keys, normalise, resolve_baseline, to_frame
from offline_gitd.leaderboard.schema import SchemaError, read_rows

if TYPE_CHECKING:
    import pandas as pd

    from offline_gitd.leaderboard.stats import MethodSummary

FORMATS: tuple[str, ...] = ("table", "csv", "json", "markdown")
HEADER: tuple[str, ...] = (
    "method",
    "iqm",
    "iqm_low",
    "iqm_high",
    "auc",
    "auc_low",
    "auc_high",
    "p_improve",
    "p_improve_low",
    "p_improve_high",
    "envs",
    "seeds",
    "runs",
)


def load_scored(
    board: Path, baseline: str, how: str, envs: Sequence[str] = (), methods: Sequence[str] = ()
) -> tuple[pd.DataFrame, str]:
    """The board's rows with normalised ``score`` and the resolved baseline method key; only the
    envs and methods matching ``envs`` / ``methods`` (patterns; empty: all), and the baseline.
    Method keys are made on the chosen envs, so they are as short as those rows allow."""
    rows = [row for _, row in read_rows(board)]
    if not rows:
        raise SchemaError(f"{board}: the board has no rows yet")
    frame = filter_rows(to_frame(rows), envs, (), None).reset_index(drop=True)
    frame["method"] = method_keys(frame)
    key = resolve_baseline(frame, baseline)
    frame = filter_rows(frame, (), methods, key).reset_index(drop=True)
    return normalise(frame, how, key), key


def records(summaries: Sequence[MethodSummary]) -> list[dict[str, object]]:
    """Flat records in :data:`HEADER` order; a missing probability of improvement is ``None``."""
    from offline_gitd.leaderboard.stats import Interval  # numpy: not at --help time

    out = []
    for item in summaries:
        improvement = item.improvement or Interval(float("nan"), float("nan"), float("nan"))
        values = [
            item.method,
            item.iqm.value,
            item.iqm.low,
            item.iqm.high,
            item.auc.value,
            item.auc.low,
            item.auc.high,
            improvement.value,
            improvement.low,
            improvement.high,
            item.n_envs,
            item.n_seeds,
            item.n_runs,
        ]
        out.append(
            {
                name: (None if isinstance(value, float) and value != value else value)
                for name, value in zip(HEADER, values)
            }
        )
    return out


# A spreadsheet runs a cell that starts with one of these as a formula (OWASP "CSV injection").
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def csv_safe(value: object) -> object:
    """A text cell that a spreadsheet would run as a formula gets a leading ``'`` (shown as text,
    the formula is not evaluated); numbers stay numbers."""
    if isinstance(value, str) and value.startswith(_FORMULA_START):
        return "'" + value
    return value


def markdown_safe(text: str) -> str:
    """One table cell: ``|`` escaped and line breaks as spaces, so a name cannot add columns or rows."""
    return " ".join(text.replace("\\", "\\\\").replace("|", "\\|").splitlines())


def text_safe(text: str) -> str:
    """One line of the text table: control characters shown escaped rather than obeyed."""
    return "".join(ch if ch.isprintable() else ch.encode("unicode_escape").decode() for ch in text)


def _cell(value: object) -> str:
    return "n/a" if value is None else f"{value:.3f}" if isinstance(value, float) else str(value)


def _with_ci(record: dict[str, object], name: str) -> str:
    if record[name] is None:
        return "n/a"
    return f"{_cell(record[name])} [{_cell(record[name + '_low'])}, {_cell(record[name + '_high'])}]"


def render(summaries: Sequence[MethodSummary], fmt: str, baseline: str, how: str) -> str:
    """The summary as text in ``fmt``; table and markdown pair each estimate with its CI."""
    rows = records(summaries)
    if fmt == "json":
        return json.dumps({"baseline": baseline, "normalisation": how, "ci": 0.95, "methods": rows}, indent=2)
    if fmt == "csv":
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=HEADER, lineterminator="\n")
        writer.writeheader()
        writer.writerows({name: csv_safe(value) for name, value in row.items()} for row in rows)
        return buffer.getvalue().rstrip("\n")
    titles = ("method", f"IQM final ({how})", "IQM AUC rel. baseline", f"P(> {baseline})", "envs", "seeds")
    lines = [
        (
            str(r["method"]),
            _with_ci(r, "iqm"),
            _with_ci(r, "auc"),
            _with_ci(r, "p_improve"),
            str(r["envs"]),
            str(r["seeds"]),
        )
        for r in rows
    ]
    if fmt == "markdown":
        out = ["| " + " | ".join(titles) + " |", "|" + "---|" * len(titles)]
        out += ["| " + " | ".join(markdown_safe(text) for text in line) + " |" for line in lines]
        return "\n".join(out)
    lines = [tuple(text_safe(text) for text in line) for line in lines]
    widths = [max(len(text) for text in column) for column in zip(titles, *lines)]
    return "\n".join(
        "  ".join(text.ljust(width) for text, width in zip(line, widths)).rstrip() for line in [titles, *lines]
    )


def show(
    board: Path,
    baseline: str,
    how: str,
    fmt: str,
    reps: int,
    seed: int,
    envs: Sequence[str] = (),
    methods: Sequence[str] = (),
) -> str:
    """Read, normalise and summarise a board (its chosen envs and methods); the rendered text."""
    scored, key = load_scored(board, baseline, how, envs, methods)
    from offline_gitd.leaderboard.stats import summarise

    return render(summarise(scored, key, reps, seed), fmt, key, how)
