"""Rows written twice: what two processes writing one run directory at once leave (docs/locks.md).

A run directory has one writer now, but one written by two (two sweep drivers, two ``--resume``
before runs were locked) holds every row twice. A row that repeats an earlier row of the same
run, seed and step in every column but those saying when it was written is the same result: it is
kept once. Two rows of the same run, seed and step that differ anywhere else cannot both be right:
they are refused, naming both lines. The run directory's CSV logs and ``leaderboard submit`` both
use this one rule.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from offline_gitd.errors import UsageError

# What says when or how fast a row was written, not what was computed: two writers differ there.
WHEN_WRITTEN = ("created_at", "epoch_seconds", "window_seconds")
# What names a row: one row per run (where the file has a run_id), seed and step.
IDENTITY = ("run_id", "seed", "step")


class RowsDisagree(UsageError):
    """Two rows of the same run, seed and step with different values."""


def repeated_lines(path: Path, header: Sequence[str], rows: Sequence[tuple[int, Sequence[str]]]) -> list[int]:
    """The line numbers of ``rows`` (``(line, values)``, values in ``header``'s order) that repeat
    an earlier row exactly; raises :class:`RowsDisagree` naming both lines when two rows share
    run, seed and step but differ. A file without a ``step`` column has no identity: nothing."""
    if "step" not in header:
        return []
    identity = [header.index(name) for name in IDENTITY if name in header]
    compared = [i for i, name in enumerate(header) if name not in WHEN_WRITTEN]
    first: dict[tuple[str, ...], tuple[int, tuple[str, ...]]] = {}
    repeats: list[int] = []
    for line, values in rows:
        key = tuple(values[i] for i in identity)
        content = tuple(values[i] for i in compared)
        if key not in first:
            first[key] = (line, content)
            continue
        first_line, first_content = first[key]
        if content != first_content:
            differ = [
                f"{header[i]} {_shown(a)} vs {_shown(b)}"
                for i, a, b in zip(compared, first_content, content, strict=True)
                if a != b
            ]
            named = ", ".join(f"{header[i]} {_shown(key[n])}" for n, i in enumerate(identity))
            raise RowsDisagree(
                f"{path}:{first_line} and {path}:{line} both hold {named} but differ ({'; '.join(differ[:3])}): "
                "two processes wrote this run; delete the wrong line, or start the run again with --overwrite"
            )
        repeats.append(line)
    return repeats


def _shown(value: str) -> str:
    """A cell as the one-line message shows it: as it is, or quoted with escapes where it holds a
    line break or another character a terminal would act on."""
    return value if value.isprintable() else repr(value)


def describe_repeats(path: Path, lines: Sequence[int]) -> str:
    """One line saying which repeated lines were dropped from ``path``."""
    shown = ", ".join(str(line) for line in lines[:5]) + (", ..." if len(lines) > 5 else "")
    return (
        f"{path}: {len(lines)} row(s) repeated exactly (line {shown}), left by two processes writing one run: "
        "each kept once"
    )
