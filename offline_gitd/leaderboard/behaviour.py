"""Behaviour agents' learning curves kept beside a board, against Young & Tian's DQN.

A dataset recorded by ``collect --policy dqn`` is judged by the agent that made it: how far it
learned, and how fast against a published curve at the same frames (docs/minatar.md). A sweep
keeps that agent's curve in ``behaviour/ID.csv`` beside each board that trains on the dataset
(docs/sweeps.md#behaviour-curves; ID: the dataset id, slashes made dashes), and ``leaderboard
plot`` draws every curve it finds there as the ``behaviour`` figure (docs/leaderboard.md#plots).

The file name and the columns are defined here, on the leaderboard's floor, because both the
sweep that writes the curves and the figure that reads them need them, and the sweeps sit above
the leaderboard. :func:`read_curves` is the only part that reads files; :func:`behaviour_data`,
the numbers the figure is drawn from, is a pure function of what it read.
"""

from __future__ import annotations

import csv
import dataclasses
import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from fnmatch import fnmatchcase
from pathlib import Path

from offline_gitd.errors import UsageError
from offline_gitd.leaderboard.board_references import read_references
from offline_gitd.leaderboard.reference import MINATAR_GAMES, PublishedPoint, minatar_dqn_curve

BEHAVIOUR_DIR = "behaviour"
CURVE_COLUMNS = ("env_step", "episodes", "mean_training_return", "epsilon", "q_mean", "window_seconds")
# A DQN-replay dataset's checkpoint (``collect --checkpoint-every 100000``): the datasets record the
# agent's mean return per checkpoint, and the boards' READMEs quote them, so the figure averages the
# windows over the same blocks (see checkpoint_means for how the two differ).
CHECKPOINT_STEPS = 100_000


def curve_file_name(dataset_id: str) -> str:
    """``offline_gitd/minatar-breakout/dqn-replay-1m-v0`` -> ``offline_gitd-minatar-breakout-dqn-replay-1m-v0.csv``."""
    return f"{dataset_id.replace('/', '-')}.csv"


@dataclasses.dataclass(frozen=True)
class BehaviourCurve:
    """One behaviour agent's curve as ``behaviour/`` keeps it, with what the figure needs beside it.

    ``mean_return`` is NaN for a window in which no episode ended (its ``episodes`` is 0).
    ``dataset`` and ``env`` are ``None`` when the board's references file does not name the
    dataset (``game`` may still be known, see :func:`read_curves`); ``random`` is the env's
    ``ref_min_score`` from that file, the uniform-random policy's mean return.
    """

    name: str
    dataset: str | None
    env: str | None
    game: str | None
    env_step: tuple[int, ...]
    episodes: tuple[int, ...]
    mean_return: tuple[float, ...]
    random: float | None = None


def checkpoint_means(
    env_step: Sequence[int],
    episodes: Sequence[int],
    mean_return: Sequence[float],
    every: int = CHECKPOINT_STEPS,
) -> dict[str, list[float]]:
    """The mean return of all episodes that ended in each ``every``-step block, from per-window means.

    A window belongs to the block its last step (``env_step``) falls in: block k holds the windows
    with ``(k - 1) * every < env_step <= k * every``. Each window's mean counts as many times as the
    episodes behind it, so a block's value is the mean over its episodes, not the mean of its
    windows (which would weigh a window of 3 long episodes as much as one of 300 short ones). A
    block is placed at its last window's step, which is its end unless the run stopped inside it;
    a block with no episode is left out.

    The windows know where an episode ended, not where it began, so this is not quite the dataset's
    ``checkpoint_returns``: a dataset keeps an episode in the checkpoint it started in
    (:mod:`offline_gitd.data.minari_checkpoints`). The two differ by the episodes that straddle a
    boundary, most where episodes are long (docs/leaderboard.md#plots).
    """
    totals: dict[int, list[float]] = {}
    for step, count, value in zip(env_step, episodes, mean_return, strict=True):
        block = totals.setdefault(math.ceil(step / every), [0.0, 0.0, float(step)])
        block[2] = max(block[2], float(step))
        if count > 0 and math.isfinite(value):
            block[0] += count * value
            block[1] += count
    out: dict[str, list[float]] = {"step": [], "value": [], "episodes": []}
    for _, (weighted, count, last) in sorted(totals.items()):
        if count > 0:
            out["step"].append(last)
            out["value"].append(weighted / count)
            out["episodes"].append(count)
    return out


def points_in_range(points: Sequence[PublishedPoint], last_step: float) -> list[PublishedPoint]:
    """The published points the curve reaches (``0 < env_steps <= last_step``): a point beyond the
    run's end would stretch the axis past the data and read as a prediction of it."""
    return [point for point in points if 0 < point.env_steps <= last_step]


def _window_steps(curves: Sequence[BehaviourCurve]) -> int | None:
    """The most common gap between logged windows, for the legend (10,000 for the sweeps' curves)."""
    gaps = Counter(b - a for curve in curves for a, b in zip(curve.env_step, curve.env_step[1:]))
    return gaps.most_common(1)[0][0] if gaps else None


def behaviour_data(
    curves: Sequence[BehaviourCurve],
    published: Mapping[str, Sequence[PublishedPoint]] | None = None,
    every: int = CHECKPOINT_STEPS,
) -> dict[str, object]:
    """What the ``behaviour`` figure draws, per curve: the windows' means, the checkpoint means
    (:func:`checkpoint_means`), the published points within the curve's range and the random
    return. ``published``: env id -> points, Young & Tian's DQN by default
    (:func:`~offline_gitd.leaderboard.reference.minatar_dqn_curve`). JSON-ready: a window with no
    episode is ``None``."""
    published = minatar_dqn_curve() if published is None else published
    games = Counter(curve.game for curve in curves if curve.game)
    sources: list[str] = []
    panels: dict[str, dict[str, object]] = {}
    for curve in sorted(curves, key=lambda c: (c.game or c.name, c.name)):
        key = curve.env or (f"{curve.game}-v0" if curve.game else None)
        shown = points_in_range(published.get(key, ()) if key else (), max(curve.env_step, default=0))
        sources += [point.source for point in shown if point.source not in sources]
        title = curve.game if curve.game and games[curve.game] == 1 else (curve.dataset or curve.name)
        panels[curve.name] = {
            "dataset": curve.dataset,
            "env": curve.env,
            "game": curve.game,
            "title": title,
            "window": {
                "step": list(curve.env_step),
                "value": [value if math.isfinite(value) else None for value in curve.mean_return],
            },
            "checkpoint": checkpoint_means(curve.env_step, curve.episodes, curve.mean_return, every),
            "published": {"step": [p.env_steps for p in shown], "value": [p.value for p in shown]},
            "random": curve.random,
        }
    return {"window_steps": _window_steps(curves), "checkpoint_steps": every, "sources": sources, "curves": panels}


def _game_from_name(name: str) -> str | None:
    """The MinAtar game a curve's file name names (``...-minatar-spaceinvaders-...``), else None."""
    words = set(re.split(r"[^a-z0-9]+", name.lower()))
    found = [game for game in MINATAR_GAMES if game.lower() in words]
    return found[0] if len(found) == 1 else None


def _read_curve(path: Path) -> tuple[tuple[int, ...], tuple[int, ...], tuple[float, ...]]:
    with path.open(newline="", encoding="utf-8-sig") as handle:
        reader = csv.DictReader(handle)
        missing = [c for c in ("env_step", "episodes", "mean_training_return") if c not in (reader.fieldnames or ())]
        if missing:
            raise UsageError(f"{path}:1: a behaviour curve needs the columns {', '.join(missing)}")
        steps, episodes, returns = [], [], []
        for line, record in enumerate(reader, start=2):
            try:
                steps.append(int(record["env_step"]))
                episodes.append(int(record["episodes"] or 0))
                text = record["mean_training_return"]
                returns.append(float(text) if text else math.nan)
            except (TypeError, ValueError):
                raise UsageError(
                    f"{path}:{line}: expected numbers in env_step, episodes, mean_training_return"
                ) from None
    return tuple(steps), tuple(episodes), tuple(returns)


def read_curves(board: Path, envs: Sequence[str] = (), folder: Path | None = None) -> list[BehaviourCurve]:
    """The curves in ``behaviour/`` beside ``board``, or in ``folder`` (``plot --behaviour DIR``:
    an online board draws the curves another board keeps; none when there is no such folder), each with
    its dataset, env and random return from the board's references file
    (:mod:`~offline_gitd.leaderboard.board_references`), which names each env's dataset.

    A curve the references file does not name (a board without one, or a dataset not on it) is
    still drawn: its game is guessed from its file name (the one MinAtar game that is a whole word
    of it, as in ``offline_gitd-minatar-breakout-dqn-replay-1m-v0``), enough for the title and
    Young & Tian's points; it has no env and no random line. ``envs``: ``--env`` patterns; a curve
    is kept when its env, or without one its file name, matches one (empty: all)."""
    folder = board.parent / BEHAVIOUR_DIR if folder is None else folder
    if not folder.is_dir():
        return []
    by_file = {
        curve_file_name(reference.dataset): reference
        for reference in read_references(board).values()
        if reference.dataset
    }
    curves = []
    for path in sorted(folder.glob("*.csv")):
        reference = by_file.get(path.name)
        env = reference.env if reference else None
        if envs and not any(fnmatchcase(env or path.stem, pattern) for pattern in envs):
            continue
        steps, episodes, returns = _read_curve(path)
        if not steps:
            continue
        curves.append(
            BehaviourCurve(
                name=path.stem,
                dataset=reference.dataset if reference else None,
                env=env,
                game=env.rsplit("-v", 1)[0] if env else _game_from_name(path.stem),
                env_step=steps,
                episodes=episodes,
                mean_return=returns,
                random=reference.ref_min_score if reference else None,
            )
        )
    return curves
