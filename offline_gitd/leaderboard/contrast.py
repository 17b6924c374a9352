"""How a method's gain over its baseline changes between two settings (docs/leaderboard.md#gain-contrast).

The paper expects Gi-TD to gain most over TD at high replay ratios. A board that holds a method and
its baseline at two settings (the MinAtar online board's one update per env step and one per 4)
answers it with one number: the **contrast**, the first setting's gain over the second's.

- The **gain** of a method over its baseline in an env is the ratio of their mean values over
  seeds (the value: the AUC, a run's mean raw return over its logged steps, or its final return),
  the paper's "AUC 1.2x DQN's". Over several envs it is the geometric mean of the envs' gains, so
  every env weighs the same whatever its scale.
- The **contrast** is gain(first setting) / gain(second): above 1 where the method gains more in
  the first setting.
- **Intervals**: 95% percentile bootstrap, every cell's runs (method and baseline at each setting)
  resampled with replacement within each env, independently, since the cells share no runs. So
  they include the seed-to-seed noise of all four cells; a contrast holds at 95% where its interval
  lies wholly above (or below) 1.

A gain is a ratio of mean returns, so it is defined only where the baseline's mean is above 0 in
every env and every bootstrap replication (MinAtar's returns are never negative); elsewhere the
command stops and names the env.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from offline_gitd.errors import UsageError
from offline_gitd.leaderboard import bootstrap
from offline_gitd.leaderboard.stats import Interval

VALUES = ("auc", "final")


@dataclasses.dataclass(frozen=True)
class Gain:
    """A method over its baseline at one setting: the two method keys as the board has them."""

    method: str
    baseline: str

    def describe(self) -> str:
        return f"{self.method} over {self.baseline}"


@dataclasses.dataclass(frozen=True)
class ContrastLine:
    """One env (or ``all``: the geometric mean over the envs): each setting's gain and the contrast."""

    env: str
    first: Interval
    second: Interval
    contrast: Interval
    seeds: tuple[int, int, int, int]  # runs of: first method, first baseline, second method, second baseline


def _cell_means(values: np.ndarray, reps: int, rng: np.random.Generator) -> tuple[float, np.ndarray]:
    """A cell's mean and its mean in each of ``reps`` resamples of its runs."""
    draw = rng.integers(0, len(values), size=(reps, len(values)))
    return float(values.mean()), values[draw].mean(axis=1)


def gain_contrast(
    cells: Sequence[Sequence[np.ndarray]], envs: Sequence[str], reps: int, seed: int
) -> list[ContrastLine]:
    """Per env and over all envs, each setting's gain and their contrast with 95% intervals.

    ``cells[e]`` holds env ``envs[e]``'s four samples of run values: the first setting's method and
    baseline, then the second's."""
    rng = np.random.default_rng(seed)
    gains_point: list[tuple[float, float]] = []
    gains_samples: list[tuple[np.ndarray, np.ndarray]] = []
    lines = []
    for env, samples in zip(envs, cells, strict=True):
        if len(samples) != 4 or any(len(sample) == 0 for sample in samples):
            raise UsageError(f"{env}: every one of the four cells needs runs there")
        means = [_cell_means(np.asarray(sample, float), reps, rng) for sample in samples]
        for (point, resampled), index in ((means[1], 1), (means[3], 3)):
            if point <= 0 or (resampled <= 0).any():
                raise UsageError(
                    f"{env}: a gain is a ratio of mean returns, and the baseline's mean "
                    f"({'first' if index == 1 else 'second'} setting) is not above 0 there "
                    f"({'at the point' if point <= 0 else 'in some bootstrap resamples'})"
                )
        first = (means[0][0] / means[1][0], means[0][1] / means[1][1])
        second = (means[2][0] / means[3][0], means[2][1] / means[3][1])
        gains_point.append((first[0], second[0]))
        gains_samples.append((first[1], second[1]))
        lines.append(_line(env, first, second, tuple(len(sample) for sample in samples)))
    if len(envs) > 1:
        log_first = np.mean([np.log(samples[0]) for samples in gains_samples], axis=0)
        log_second = np.mean([np.log(samples[1]) for samples in gains_samples], axis=0)
        first_point = float(np.exp(np.mean([np.log(point[0]) for point in gains_point])))
        second_point = float(np.exp(np.mean([np.log(point[1]) for point in gains_point])))
        seeds = tuple(sum(line.seeds[i] for line in lines) for i in range(4))
        lines.append(_line("all", (first_point, np.exp(log_first)), (second_point, np.exp(log_second)), seeds))
    return lines


def _line(
    env: str, first: tuple[float, np.ndarray], second: tuple[float, np.ndarray], seeds: tuple[int, ...]
) -> ContrastLine:
    def interval(point: float, samples: np.ndarray) -> Interval:
        low, high = bootstrap.percentile_interval(samples)
        return Interval(float(point), float(low), float(high))

    return ContrastLine(
        env,
        interval(*first),
        interval(*second),
        interval(first[0] / second[0], first[1] / second[1]),
        (seeds[0], seeds[1], seeds[2], seeds[3]),
    )


def board_contrast(
    board: Path, gains: Sequence[tuple[str, str]], envs: Sequence[str], value: str, reps: int, seed: int
) -> tuple[tuple[Gain, Gain], list[ContrastLine]]:
    """:func:`gain_contrast` of a board: ``gains`` names (method, baseline) at the first setting,
    then at the second, as ``show --method`` and ``--baseline`` accept them."""
    from offline_gitd.leaderboard.normalise import filter_rows, method_keys, resolve_baseline, to_frame
    from offline_gitd.leaderboard.per_env import run_values
    from offline_gitd.leaderboard.schema import SchemaError, read_rows

    if value not in VALUES:
        raise UsageError(f"unknown value {value!r}; choose from {', '.join(VALUES)}")
    if len(gains) != 2:
        raise UsageError("a contrast needs exactly two --gain METHOD BASELINE (the first setting, then the second)")
    rows = [row for _, row in read_rows(board)]
    if not rows:
        raise SchemaError(f"{board}: the board has no rows yet")
    frame = filter_rows(to_frame(rows), envs, (), None).reset_index(drop=True)
    frame["method"] = method_keys(frame)
    named = [Gain(resolve_baseline(frame, method), resolve_baseline(frame, baseline)) for method, baseline in gains]
    keys = [key for gain in named for key in (gain.method, gain.baseline)]
    if len(set(keys)) != 4:
        raise UsageError(f"the two gains must name four different methods; they name {', '.join(keys)}")
    values = run_values(frame[frame["method"].isin(keys)], value)
    by_env = [sorted(set(values.loc[values["method"] == key, "env"])) for key in keys]
    shared = sorted(set.intersection(*(set(env_list) for env_list in by_env)))
    if not shared:
        raise UsageError(f"no env holds runs of all four of {', '.join(keys)}")
    cells = [
        [values[(values["env"] == env) & (values["method"] == key)]["return"].to_numpy(float) for key in keys]
        for env in shared
    ]
    return (named[0], named[1]), gain_contrast(cells, shared, reps, seed)


def _text(interval: Interval) -> str:
    return f"{interval.value:.3f} [{interval.low:.3f}, {interval.high:.3f}]"


def render(gains: tuple[Gain, Gain], lines: Sequence[ContrastLine], value: str, fmt: str) -> str:
    """The contrast as text, Markdown or JSON."""
    import json

    from offline_gitd.leaderboard.show import safe_for, text_table

    meaning = "AUC (mean raw return over logged steps)" if value == "auc" else "final return"
    if fmt == "json":
        return json.dumps(
            {
                "value": value,
                "first": dataclasses.asdict(gains[0]),
                "second": dataclasses.asdict(gains[1]),
                "ci": bootstrap.CI_SIZE,
                "lines": [dataclasses.asdict(line) for line in lines],
            },
            indent=2,
        )
    titles = ("env", "gain, first [95% CI]", "gain, second [95% CI]", "contrast first / second [95% CI]", "runs")
    rows = [
        (line.env, _text(line.first), _text(line.second), _text(line.contrast), " / ".join(map(str, line.seeds)))
        for line in lines
    ]
    heading = (
        f"Gain: the ratio of mean {meaning} over seeds, per env; `all`: the geometric mean over envs. "
        f"First: {safe_for(fmt, gains[0].describe(), 200)}. Second: {safe_for(fmt, gains[1].describe(), 200)}. "
        "Intervals: percentile bootstrap, each cell's runs resampled within each env; runs: first method / "
        "first baseline / second method / second baseline"
    )
    return (f"**{heading}**" if fmt == "markdown" else heading) + "\n" + text_table(titles, rows, fmt)
