"""``leaderboard compare``: two boards' samples side by side, never pooled (docs/leaderboard.md#two-boards-side-by-side).

Two boards of the same configs, trained on two devices, are two samples of the same seeds:
same-numbered seeds share their network initialisation and their batches, so their runs are not
independent draws and pooling them into 20 "seeds" would overstate what is known. What a reader
can do is set them side by side: per env and config both boards hold, each board's mean final
return with its bootstrap interval over its own seeds, and its own permutation test against its
own baseline. Where the two tests disagree (p 0.016 on one board, 0.14 on the other), ten seeds do
not settle the effect.

Rows are matched on (env, config hash): the same resolved config on both boards. A config one
board lacks is left out and counted in the closing line.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

    from offline_gitd.leaderboard.per_env import EnvLine

FORMATS = ("table", "markdown")


@dataclasses.dataclass(frozen=True)
class Side:
    """One board read for the comparison: its per-env lines and each (env, method)'s config hashes."""

    label: str
    lines: dict[tuple[str, str], EnvLine]
    configs: dict[tuple[str, str], frozenset[str]]
    devices: tuple[str, ...]


def read_side(
    board: Path, label: str, baseline: str, reps: int, seed: int, envs: Sequence[str], methods: Sequence[str]
) -> Side:
    """``board``'s per-env lines (raw final returns, each against the board's own baseline)."""
    from offline_gitd.leaderboard.per_env import per_env_lines
    from offline_gitd.leaderboard.show import load

    loaded = load(board, baseline, "baseline", envs, methods, keep_flagged=True)
    lines = per_env_lines(loaded.everything, loaded.baseline, reps, seed)
    return Side(
        label=label,
        lines={(line.env, line.method): line for line in lines},
        configs=_configs(loaded.everything),
        devices=tuple(sorted({device or "not recorded" for device in loaded.everything["device"]})),
    )


def _configs(frame: pd.DataFrame) -> dict[tuple[str, str], frozenset[str]]:
    return {
        (str(env), str(method)): frozenset(rows["config_hash"])
        for (env, method), rows in frame.groupby(["env", "method"], sort=True)
    }


def pairs(first: Side, second: Side) -> list[tuple[EnvLine, EnvLine]]:
    """The (env, method) lines of the configs both boards hold, in env then method order: the
    same env and the same config hashes (method keys may differ between boards)."""
    by_config = {(key[0], hashes): key for key, hashes in second.configs.items()}
    found = []
    for key, hashes in sorted(first.configs.items()):
        other = by_config.get((key[0], hashes))
        if other is not None and key in first.lines and other in second.lines:
            found.append((first.lines[key], second.lines[other]))
    return found


def _mean(line: EnvLine) -> str:
    interval = line.mean
    return f"{interval.value:.2f} [{interval.low:.2f}, {interval.high:.2f}]"


def _p(line: EnvLine) -> str:
    return "" if line.p_value is None else f"{line.p_value:.3f}"


def render(first: Side, second: Side, baseline: str, fmt: str) -> str:
    """The side-by-side table and the lines that say what it is and is not."""
    matched = pairs(first, second)
    titles = [
        "env",
        "method",
        f"{first.label} final [95% CI]",
        f"p vs {baseline}",
        "seeds",
        f"{second.label} final [95% CI]",
        f"p vs {baseline}",
        "seeds",
    ]
    rows = [[a.env, a.method, _mean(a), _p(a), str(a.seeds), _mean(b), _p(b), str(b.seeds)] for a, b in matched]
    if fmt == "markdown":
        table = ["| " + " | ".join(titles) + " |", "|" + "---|" * len(titles)]
        table += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in rows]
    else:
        widths = [max(len(str(cell)) for cell in column) for column in zip(titles, *rows, strict=False)]
        table = ["  ".join(str(cell).ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
                 for line in (titles, *rows)]  # fmt: skip
    unmatched = len(first.configs) - len(matched), len(second.configs) - len(matched)
    notes = [
        f"{first.label}: devices {', '.join(first.devices)}; {second.label}: devices {', '.join(second.devices)}.",
        "Each side is its own board's sample: final return = mean over its seeds of each seed's last evaluation, "
        "95% bootstrap interval over its seeds; p = two-sided permutation test against that board's own "
        f"{baseline} (uncorrected).",
        "Not independent samples, and not pooled: same-numbered seeds on the two boards share their "
        "initialisation and their batches.",
    ]
    if any(unmatched):
        notes.append(
            f"Left out: (env, config) pairs on one board only ({unmatched[0]} on {first.label}, "
            f"{unmatched[1]} on {second.label})."
        )
    bullet = "- " if fmt == "markdown" else ""
    return "\n".join(table) + "\n\n" + "\n".join(bullet + note for note in notes)


def compare(
    boards: Sequence[Path],
    labels: Sequence[str],
    baseline: str,
    fmt: str,
    reps: int,
    seed: int,
    envs: Sequence[str] = (),
    methods: Sequence[str] = (),
) -> str:
    """Read two boards and set their shared configs side by side (:func:`render`)."""
    from offline_gitd.errors import UsageError

    if len(boards) != 2:
        raise UsageError(f"compare takes two boards (--board A --board B), got {len(boards)}")
    names = list(labels) or [str(board) for board in boards]
    if len(names) != 2:
        raise UsageError(f"--label names both boards or neither, got {len(names)} label(s)")
    sides = [
        read_side(board, name, baseline, reps, seed, envs, methods) for board, name in zip(boards, names, strict=True)
    ]
    return render(sides[0], sides[1], baseline, fmt)
