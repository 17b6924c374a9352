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

``adjusted`` adds Holm's and Benjamini-Hochberg's adjustments of each board's tests
(:mod:`~offline_gitd.leaderboard.multiple`); their family is every test of that board's table, so
``--method`` picks it (e.g. Gi-CQL against CQL td on each game: four tests a board).

``between`` asks the other question: do the two boards' samples of the same config differ? Per
config, a two-sided permutation test of board A's seeds against board B's
(:func:`~offline_gitd.leaderboard.bootstrap.permutation_test`, the per-env table's test), of the
final return and of the AUC (the mean of a run's logged evaluations,
:func:`~offline_gitd.leaderboard.per_env.run_values`), beside the env's random and data references
where the board records them. The test treats the two sides as unpaired samples: it does not use
that same-numbered seeds share their initialisation and batches
(docs/leaderboard.md#two-boards-side-by-side).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import pandas as pd

    from offline_gitd.leaderboard.board_references import DatasetReference
    from offline_gitd.leaderboard.per_env import EnvLine
    from offline_gitd.leaderboard.stats import Interval

FORMATS = ("table", "markdown")


@dataclasses.dataclass(frozen=True)
class Side:
    """One board read for the comparison: its per-env lines and each (env, method)'s config hashes."""

    label: str
    lines: dict[tuple[str, str], EnvLine]
    configs: dict[tuple[str, str], frozenset[str]]
    devices: tuple[str, ...]
    # each (env, method)'s per-run values, in seed order: "final" and "auc" (per_env.run_values)
    values: dict[str, dict[tuple[str, str], np.ndarray]] = dataclasses.field(default_factory=dict)
    # env -> the references recorded beside the board (board.references.csv)
    references: dict[str, DatasetReference] = dataclasses.field(default_factory=dict)


def read_side(
    board: Path, label: str, baseline: str, reps: int, seed: int, envs: Sequence[str], methods: Sequence[str]
) -> Side:
    """``board``'s per-env lines (raw final returns, each against the board's own baseline), its
    runs' final returns and AUCs, and the references recorded beside it."""
    from offline_gitd.leaderboard.board_references import read_references
    from offline_gitd.leaderboard.per_env import VALUES, per_env_lines, run_values
    from offline_gitd.leaderboard.show import load

    loaded = load(board, baseline, "baseline", envs, methods, keep_flagged=True)
    lines = per_env_lines(loaded.everything, loaded.baseline, reps, seed)
    suites = dict(zip(loaded.everything["env"], loaded.everything["suite"], strict=True))
    recorded = read_references(board)
    return Side(
        label=label,
        lines={(line.env, line.method): line for line in lines},
        configs=_configs(loaded.everything),
        devices=tuple(sorted({device or "not recorded" for device in loaded.everything["device"]})),
        values={value: _per_run(run_values(loaded.everything, value)) for value in VALUES},
        references={env: recorded[(suite, env)] for env, suite in suites.items() if (suite, env) in recorded},
    )


def _per_run(runs: pd.DataFrame) -> dict[tuple[str, str], np.ndarray]:
    """Each (env, method)'s run values in seed order (the per-env table's order)."""
    return {
        (str(env), str(method)): rows.sort_values(["seed", "run"])["return"].to_numpy(float)
        for (env, method), rows in runs.groupby(["env", "method"], sort=True)
    }


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


def _adjusted(line: EnvLine) -> list[str]:
    return ["" if p is None else f"{p:.3f}" for p in (line.p_holm, line.p_bh)]


def render(first: Side, second: Side, baseline: str, fmt: str, adjusted: bool = False) -> str:
    """The side-by-side table and the lines that say what it is and is not; ``adjusted`` adds
    Holm's and BH's adjustment of each board's tests beside its raw p."""
    matched = pairs(first, second)
    extra = ["Holm", "BH"] if adjusted else []
    titles = [
        "env",
        "method",
        f"{first.label} final [95% CI]",
        f"p vs {baseline}",
        *extra,
        "seeds",
        f"{second.label} final [95% CI]",
        f"p vs {baseline}",
        *extra,
        "seeds",
    ]
    rows = [
        [a.env, a.method, _mean(a), _p(a), *(_adjusted(a) if adjusted else []), str(a.seeds),
         _mean(b), _p(b), *(_adjusted(b) if adjusted else []), str(b.seeds)]
        for a, b in matched
    ]  # fmt: skip
    note = (
        "Each side is its own board's sample: final return = mean over its seeds of each seed's last evaluation, "
        "95% bootstrap interval over its seeds; p = two-sided permutation test against that board's own "
        f"{baseline} (uncorrected)."
    )
    if adjusted:
        note += (
            f" Holm, BH: each board's p adjusted over every test of its table ({_tests(first)} on {first.label}, "
            f"{_tests(second)} on {second.label})."
        )
    return _table(titles, rows, fmt) + "\n\n" + _bullets(_notes(first, second, len(matched), note), fmt)


def _tests(side: Side) -> int:
    """How many tests a board's adjustments are over: every test of its per-env lines."""
    from offline_gitd.leaderboard.per_env import family_size

    return family_size(list(side.lines.values()))


def _table(titles: Sequence[str], rows: Sequence[Sequence[str]], fmt: str) -> str:
    if fmt == "markdown":
        table = ["| " + " | ".join(titles) + " |", "|" + "---|" * len(titles)]
        table += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in rows]
    else:
        widths = [max(len(str(cell)) for cell in column) for column in zip(titles, *rows, strict=False)]
        table = ["  ".join(str(cell).ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
                 for line in (titles, *rows)]  # fmt: skip
    return "\n".join(table)


def _bullets(notes: Sequence[str], fmt: str) -> str:
    bullet = "- " if fmt == "markdown" else ""
    return "\n".join(bullet + note for note in notes)


def _notes(first: Side, second: Side, matched: int, what: str) -> list[str]:
    """The devices, what the numbers are, that the boards are not pooled, and what was left out."""
    unmatched = len(first.configs) - matched, len(second.configs) - matched
    notes = [
        f"{first.label}: devices {', '.join(first.devices)}; {second.label}: devices {', '.join(second.devices)}.",
        what,
        "Not independent samples, and not pooled: same-numbered seeds on the two boards share their "
        "initialisation and their batches.",
    ]
    if any(unmatched):
        notes.append(
            f"Left out: (env, config) pairs on one board only ({unmatched[0]} on {first.label}, "
            f"{unmatched[1]} on {second.label})."
        )
    return notes


@dataclasses.dataclass(frozen=True)
class Between:
    """One config both boards hold, its two samples tested against each other: per value
    (``final``, ``auc``) each side's mean [95% CI] and the permutation test's p."""

    env: str
    method: str
    seeds: tuple[int, int]
    means: dict[str, tuple[Interval, Interval]]
    p_values: dict[str, float]
    tests: frozenset[str]


def between_boards(first: Side, second: Side, seed: int) -> list[Between]:
    """Per config both boards hold, board A's runs against board B's: a two-sided permutation test
    of equal means (:func:`~offline_gitd.leaderboard.bootstrap.permutation_test`) of the final
    return and of the AUC, with each side's mean and exact 95% bootstrap interval
    (:func:`~offline_gitd.leaderboard.bootstrap.mean_intervals`). The random splits of a
    Monte-Carlo test come from ``seed``, as the per-env table's do."""
    from offline_gitd.leaderboard import bootstrap
    from offline_gitd.leaderboard.per_env import VALUES
    from offline_gitd.leaderboard.stats import Interval

    split_seed = int(np.random.default_rng(seed).integers(2**32))
    found = []
    for a, b in pairs(first, second):
        key_a, key_b = (a.env, a.method), (b.env, b.method)
        means, p_values, tests = {}, {}, set()
        for value in VALUES:
            x, y = first.values[value][key_a], second.values[value][key_b]
            ci_x, ci_y = bootstrap.mean_intervals([x, y])
            means[value] = (Interval(float(x.mean()), *ci_x), Interval(float(y.mean()), *ci_y))
            p_values[value], test = bootstrap.permutation_test(x, y, split_seed)
            tests.add(test)
        found.append(Between(a.env, a.method, (a.seeds, b.seeds), means, p_values, frozenset(tests)))
    return found


def _interval(interval: Interval) -> str:
    return f"{interval.value:.2f} [{interval.low:.2f}, {interval.high:.2f}]"


def _reference(first: Side, second: Side, env: str, field: str) -> str:
    """An env's reference as the boards record it: one number, both where they differ, blank where neither has it."""
    values = [getattr(side.references[env], field) if env in side.references else None for side in (first, second)]
    shown = [f"{value:.2f}" for value in dict.fromkeys(values) if value is not None]
    return " / ".join(shown)


def render_between(first: Side, second: Side, fmt: str, seed: int) -> str:
    """The between-boards table: each config's two samples and the test of equal means between them."""
    found = between_boards(first, second, seed)
    a, b = first.label, second.label
    titles = [
        "env", "method", "seeds", f"{a} final [95% CI]", f"{b} final [95% CI]", "p",
        f"{a} AUC [95% CI]", f"{b} AUC [95% CI]", "p", "random", "data",
    ]  # fmt: skip
    rows = [
        [row.env, row.method, f"{row.seeds[0]}, {row.seeds[1]}",
         _interval(row.means["final"][0]), _interval(row.means["final"][1]), f"{row.p_values['final']:.3f}",
         _interval(row.means["auc"][0]), _interval(row.means["auc"][1]), f"{row.p_values['auc']:.3f}",
         _reference(first, second, row.env, "ref_min_score"), _reference(first, second, row.env, "dqn_replay_score")]
        for row in found
    ]  # fmt: skip
    tests = sorted({test for row in found for test in row.tests})
    p_values = [p for row in found for p in row.p_values.values()]
    below = sum(p < 0.05 for p in p_values)
    what = (
        f"p = two-sided permutation test of equal means of {a}'s runs against {b}'s ({', '.join(tests) or 'none'}"
        f"{', 20,000 random splits' if 'monte-carlo' in tests else ''}; uncorrected), of the final return (each "
        "run's last evaluation) and of the AUC (the mean of a run's logged evaluations); 95% bootstrap intervals "
        "over each board's own seeds; random and data: the env's uniform-random and dataset (DQN replay) returns "
        "recorded beside the boards (both where they differ)."
    )
    notes = _notes(first, second, len(found), what)
    if p_values:
        notes.append(f"{below} of {len(p_values)} tests below 0.05 uncorrected; smallest p {min(p_values):.3f}.")
    return _table(titles, rows, fmt) + "\n\n" + _bullets(notes, fmt)


def compare(
    boards: Sequence[Path],
    labels: Sequence[str],
    baseline: str,
    fmt: str,
    reps: int,
    seed: int,
    envs: Sequence[str] = (),
    methods: Sequence[str] = (),
    adjusted: bool = False,
    between: bool = False,
) -> str:
    """Read two boards and set their shared configs side by side (:func:`render`), or test each
    config's two samples against each other (``between``: :func:`render_between`)."""
    from offline_gitd.errors import UsageError

    if len(boards) != 2:
        raise UsageError(f"compare takes two boards (--board A --board B), got {len(boards)}")
    names = list(labels) or [str(board) for board in boards]
    if len(names) != 2:
        raise UsageError(f"--label names both boards or neither, got {len(names)} label(s)")
    if adjusted and between:
        raise UsageError("--adjusted adjusts the tests against the baseline, which --between does not show")
    sides = [
        read_side(board, name, baseline, reps, seed, envs, methods) for board, name in zip(boards, names, strict=True)
    ]
    if between:
        return render_between(sides[0], sides[1], fmt, seed)
    return render(sides[0], sides[1], baseline, fmt, adjusted)
