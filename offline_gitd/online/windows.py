"""An online run's logging windows, as both loops write and show them (docs/online.md#the-run-directory).

Every ``log_every`` env steps, at each checkpoint and at the run's last step, a run closes a
window: one ``metrics.csv`` row per seed, one ``results.csv`` row per seed that has finished an
episode so far (the mean return of the episodes finished in the window; a seed with none there
repeats its previous value, so every seed has the same step grid for AUCs), the window's episodes
in ``episodes.csv`` and one console line. The Python loop (:mod:`offline_gitd.online.loop`) and
the compiled one (:mod:`offline_gitd.online.compiled_run`) get there differently, step by step or
one compiled call per window, and then call the same functions here, so their files have the same
columns by the same rules, written once: :func:`window_rows` is the pure part, :func:`log_window`
writes what it gives, :class:`Console` shows it.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import jax
import numpy as np

from offline_gitd.batch import Batch
from offline_gitd.learners.family import Family
from offline_gitd.online.config import OnlineConfig
from offline_gitd.online.env_info import EnvInfo, obs_example
from offline_gitd.online.schedules import epsilon_at
from offline_gitd.progress import Progress
from offline_gitd.rundir.lifecycle import RunLifecycle
from offline_gitd.rundir.metrics import MetricWindow

EPISODES_FILE = "episodes.csv"
EPISODE_COLUMNS = ("step", "seed", "episode", "return", "length")
# The final summary's mean return is over the last this-many episodes of every seed.
SUMMARY_EPISODES = 10


def acting_epsilon(cfg: OnlineConfig, step: int) -> float:
    """The exploration rate env step ``step`` (1-based) acts with: the schedule at the ``step - 1``
    steps done before it, 1 during the initial samples."""
    return epsilon_at(step - 1, cfg.epsilon_start, cfg.epsilon_end, cfg.epsilon_steps, cfg.initial_samples)


def metric_columns(family: Family, info: EnvInfo) -> list[str]:
    """The step's metric columns, known before the first update (from its abstract output), so
    that ``metrics.csv`` has them from its first row on, whichever loop runs the updates."""
    obs = obs_example(info)
    action = (
        np.zeros((1, info.spaces.action_size), np.float32)
        if info.spaces.action_kind == "continuous"
        else np.zeros(1, np.int32)
    )
    ones = np.ones(1, np.float32)
    batch = Batch(obs, action, ones, ones, obs, ones)
    state = jax.eval_shape(family.init, jax.random.PRNGKey(0))
    return MetricWindow(per_sample_means=True).columns(jax.eval_shape(family.step, state, batch)[1])


def window_rows(
    step: int,
    seeds: Sequence[int],
    episodes: Sequence[dict[str, Any]],
    last_results: Sequence[float | None],
    updates: int,
    epsilon: float | None,
    columns: Sequence[str],
    means: Callable[[int], dict[str, float]],
    seconds: float,
) -> tuple[list[dict[str, Any]], list[float | None]]:
    """A window ending at env step ``step``: each seed's ``metrics.csv`` row and its
    ``results.csv`` value (``None``: no episode finished yet, no row).

    ``episodes`` are the window's ``episodes.csv`` rows, ``last_results`` each seed's value
    after the previous window, ``updates`` the updates done so far, ``epsilon`` the rate the
    window's last step acted with (DQN; ``None`` for SAC, which logs none), ``columns`` the
    step's metric columns (NaN in a window without updates), ``means(i)`` seed ``i``'s mean
    metrics per update in the window and ``seconds`` its wall time."""
    rows, results = [], []
    for i, seed in enumerate(seeds):
        returns = [e["return"] for e in episodes if e["seed"] == seed]
        row: dict[str, Any] = {
            "step": step,
            "seed": seed,
            "updates": updates,
            "episodes": len(returns),
            "episode_return": float(np.mean(returns)) if returns else float("nan"),
            "episode_return_std": float(np.std(returns)) if returns else float("nan"),
        }
        if epsilon is not None:
            row["epsilon"] = epsilon
        row.update(dict.fromkeys(columns, float("nan")))
        row.update(means(i))
        row["window_seconds"] = round(seconds, 3)
        rows.append(row)
        results.append(float(np.mean(returns)) if returns else last_results[i])
    return rows, results


@dataclass(frozen=True)
class ClosedWindow:
    """A logging window as a loop closes it, whichever loop: what :func:`log_window` writes.

    ``episodes`` are its ``episodes.csv`` rows, ``last_results`` each seed's ``results.csv``
    value after the previous window, ``updates`` the updates done so far, ``metrics`` the
    window's update metrics and ``seconds`` its wall time (see :func:`window_rows`)."""

    step: int  # the env step the window ends at
    seeds: Sequence[int]
    episodes: Sequence[dict[str, Any]]
    last_results: Sequence[float | None]
    updates: int
    metrics: MetricWindow
    seconds: float


def log_window(
    run: RunLifecycle, cfg: OnlineConfig, columns: Sequence[str], window: ClosedWindow
) -> tuple[list[dict[str, Any]], list[float | None]]:
    """Write ``window`` (:func:`window_rows`; ``columns``: the step's metric columns) to the run
    directory: its metric rows, a leaderboard row per seed with a value, its episodes. Returns the
    metric rows and each seed's value, which the next window repeats where it has no episode."""
    step, seeds = window.step, window.seeds
    epsilon = acting_epsilon(cfg, step) if cfg.algo == "dqn" else None
    rows, results = window_rows(
        step,
        seeds,
        window.episodes,
        window.last_results,
        window.updates,
        epsilon,
        columns,
        window.metrics.means,
        window.seconds,
    )
    result_rows = [
        run.result_row(cfg.algo, cfg.critic, cfg.K, cfg.beta, seed, step, value)
        for seed, value in zip(seeds, results)
        if value is not None
    ]
    run.write(rows, result_rows, episodes=list(window.episodes))
    return rows, results


class Console:
    """What an online run shows while it runs: a progress bar over env steps, a line per window,
    and a last line with the mean return of each seed's last :data:`SUMMARY_EPISODES` episodes."""

    def __init__(self, cfg: OnlineConfig, env_name: str, start: int, enabled: bool) -> None:
        self.cfg, self.env_name, self.start = cfg, env_name, start
        self.bar = Progress(cfg.steps, f"{cfg.algo} {env_name}", initial=start, enabled=enabled)
        self.recent = {seed: deque(maxlen=SUMMARY_EPISODES) for seed in cfg.seed_list}
        self.started = time.perf_counter()

    def advance(self, steps: int) -> None:
        self.bar.update(steps)

    def window(
        self,
        step: int,
        episodes: Sequence[dict[str, Any]],
        rows: Sequence[dict[str, Any]],
        updates: int,
        seconds: float,
    ) -> None:
        """Show the window ending at ``step``: its mean return on the bar, its line below it."""
        for episode in episodes:
            self.recent[episode["seed"]].append(episode["return"])
        returns = [r["episode_return"] for r in rows if np.isfinite(r["episode_return"])]
        if returns:
            self.bar.set_postfix(ret=f"{np.mean(returns):.4g}", updates=updates)
        self.bar.write(window_line(step, self.cfg.steps, episodes, updates, seconds))

    def close(self, run: RunLifecycle) -> None:
        """Close the bar and the run's scalar writers, then print the summary line."""
        self.bar.close()
        run.close()
        recent = [r for returns in self.recent.values() for r in returns]
        self.bar.write(summary_line(self.cfg, self.env_name, self.start, recent, time.perf_counter() - self.started))


def window_line(step: int, steps: int, episodes: Sequence[dict[str, Any]], updates: int, seconds: float) -> str:
    """One line per logging window: what a log reader needs to follow a run without the CSVs."""
    returns = [e["return"] for e in episodes]
    ret = f"return {np.mean(returns):.2f} over {len(returns)} episode(s)" if returns else "no episode finished"
    return f"step {step}/{steps}: {ret}, {updates} updates, {seconds:.1f}s"


def summary_line(cfg: OnlineConfig, env_name: str, start: int, recent: list[float], seconds: float) -> str:
    """The run's last line: steps done, mean return of the last episodes, wall time."""
    ret = (
        f"mean return {np.mean(recent):.2f} over the last {len(recent)} episode(s)" if recent else "no episode finished"
    )
    return f"{cfg.algo} {env_name}: {cfg.steps - start} env steps ({cfg.steps} total), {ret}, {seconds:.1f}s wall time"
