"""``offline_gitd online dqn --loop compiled``: the compiled loop (:mod:`offline_gitd.online.compiled`)
in an online run directory, with the Python loop's lifecycle, files and exact resume.

The run directory is the Python loop's (:mod:`offline_gitd.online.lifecycle`: lock,
``config.json``, provenance, ``metrics.csv``, ``results.csv``, ``episodes.csv``, TensorBoard),
and so are its rows: each logging window goes through :func:`~offline_gitd.online.windows.log_window`.
The difference is how a window's env steps are run: one compiled call for all of them and every
seed, then one wait for the device, which hands back the window's episodes and the metrics of its
updates. So a call never crosses a logging boundary: the calls end at every multiple of
``log_every`` and at the run's last step, which are where the Python loop logs (a checkpoint is a
multiple of ``log_every``), and a non-finite loss stops the run at the end of its window, before
the window is written, naming the last good checkpoint.

A checkpoint is laid out as the Python loop's (:func:`~offline_gitd.online.lifecycle.save_checkpoint`):
the learner's state of every seed (:attr:`~offline_gitd.online.compiled.SeedCarry.learner`:
networks, optimiser, update counter) saved by orbax, the same pytree a Python loop's checkpoint
holds, so a trained run is read back by one path whichever loop made it
(:func:`~offline_gitd.rundir.checkpoints.restore_seed_states`); and the loop's own state as its
host state, ``host_state/<step>.npz`` (:func:`write_loop_state`): the rest of the carry (env
states, the observation acted on next, replay rings, random keys, running episodes), as plain
arrays, with what the host counts: each seed's finished episodes (``episodes.csv``'s episode
index) and its last ``results.csv`` value (repeated in a window without episodes), kept in JSON so
that a float64 mean is not rounded to float32. The updates done are a function of the step
(:func:`~offline_gitd.online.schedules.total_updates`). The run restores the carry and calls the
same programs on the same inputs as a run that never stopped, so it ends bit for bit where that
run ends. The call donates the carry (its buffers are reused for the next one); a checkpoint is
saved, and waited for, between two calls, while the carry it saves is still alive.

Versions before this layout saved the whole carry as the checkpoint; such a run is refused in one
line by its reader (:func:`~offline_gitd.rundir.checkpoints.restore_seed_states`) and on
``--resume`` (:class:`CompiledRun`, before anything is written): it would have to be trained again.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from offline_gitd.learners.family import DiscreteFamily
from offline_gitd.online.compiled import SeedCarry, StepRecord, compiled_loop, finished_episodes
from offline_gitd.online.config import OnlineConfig
from offline_gitd.online.env_info import EnvInfo
from offline_gitd.online.host_state import host_state_path
from offline_gitd.online.lifecycle import online_lifecycle, save_checkpoint
from offline_gitd.online.schedules import total_updates, utd_fraction
from offline_gitd.online.windows import ClosedWindow, Console, log_window, metric_columns
from offline_gitd.rundir.checkpoints import Checkpoints
from offline_gitd.rundir.flags import RunFlags
from offline_gitd.rundir.lifecycle import RunLifecycle
from offline_gitd.rundir.metrics import MetricWindow
from offline_gitd.rundir.seals import DamagedFile, read_sealed_arrays, write_sealed_arrays

# What a compiled run's host state says it is: a Python loop's host state holds replays instead.
HOST_KIND = "compiled loop state"


def chunk_ends(start: int, steps: int, log_every: int) -> list[int]:
    """The env steps at which the calls after ``start`` end: every multiple of ``log_every`` up to
    ``steps``, and ``steps``. A run resumed off the grid (stopped by ``--steps``) first runs up to
    the next multiple, as the Python loop's next window does."""
    ends = list(range((start // log_every + 1) * log_every, steps, log_every))
    return [*ends, steps] if start < steps else []


def window_updates(records: StepRecord, first_step: int) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """The metrics of a window's updates as the Python loop's updates give them (name ->
    ``[updates, seeds, ...]``, what :class:`~offline_gitd.rundir.metrics.MetricWindow` adds) and
    the env step after which each update ran, from a call's records (``[seeds, steps, n, ...]``).
    Every seed updates after the same steps (the schedule is shared), so seed 0's count says which."""
    stepped = np.flatnonzero(np.asarray(records.updates)[0])
    metrics = {}
    for name, value in records.metrics.items():
        value = np.asarray(value)[:, stepped]  # [seeds, stepped, n, ...]
        value = value.reshape(value.shape[0], -1, *value.shape[3:])
        metrics[name] = np.moveaxis(value, 0, 1)
    per_step = np.asarray(records.metrics["loss"]).shape[2]
    return metrics, np.repeat(first_step + stepped + 1, per_step)


def loop_leaves(carry: SeedCarry) -> tuple[list[tuple[str, Any]], Any]:
    """The loop's own part of ``carry`` (all but the learner, which orbax saves) as ``(path, leaf)``
    pairs in a fixed order, and the tree they rebuild into."""
    leaves, tree = jax.tree_util.tree_flatten_with_path(carry._replace(learner=None))
    return [(jax.tree_util.keystr(path), leaf) for path, leaf in leaves], tree


def write_loop_state(
    path: Path, carry: SeedCarry, seeds: list[int], episodes: list[int], last_results: list[float | None]
) -> None:
    """A compiled run's host state at a checkpoint (sealed, verified on write): the carry but its
    learner, one plain array per leaf (``carry.<i>``, its tree path in the JSON), and the host's
    counters (each seed's finished episodes and last result)."""
    leaves = loop_leaves(carry)[0]
    values = jax.device_get([leaf for _, leaf in leaves])
    meta = {
        "kind": HOST_KIND,
        "seeds": seeds,
        "episodes": episodes,
        "last_results": last_results,
        "carry": [name for name, _ in leaves],
    }
    write_sealed_arrays(path, {f"carry.{i}": np.asarray(value) for i, value in enumerate(values)}, meta)


def read_loop_state(path: Path, fresh: SeedCarry, seeds: list[int]) -> tuple[SeedCarry, list[int], list[float | None]]:
    """The carry but its learner (``learner=None``), each seed's finished episodes and its last
    result, from :func:`write_loop_state`'s file; every leaf checked against ``fresh`` (a new
    carry of the run's shapes), the counters against the run's seeds: :class:`DamagedFile` (one
    line) for anything else."""
    arrays, meta = read_sealed_arrays(path)
    leaves, tree = loop_leaves(fresh)
    episodes, last = meta.get("episodes"), meta.get("last_results")
    fits = (
        meta.get("kind") == HOST_KIND
        and meta.get("seeds") == seeds
        and meta.get("carry") == [name for name, _ in leaves]
        and sorted(arrays) == sorted(f"carry.{i}" for i in range(len(leaves)))
        and all(
            (arrays[f"carry.{i}"].shape, arrays[f"carry.{i}"].dtype) == (leaf.shape, leaf.dtype)
            for i, (_, leaf) in enumerate(leaves)
        )
        and isinstance(episodes, list)
        and isinstance(last, list)
        and len(episodes) == len(last) == len(seeds)
        and all(type(n) is int and n >= 0 for n in episodes)
        and all(v is None or type(v) in (int, float) for v in last)
    )
    if not fits:
        raise DamagedFile(f"{path} does not hold this compiled run's host state")
    rest = jax.tree_util.tree_unflatten(tree, [jnp.asarray(arrays[f"carry.{i}"]) for i in range(len(leaves))])
    return rest, episodes, [None if v is None else float(v) for v in last]


class CompiledRun:
    """A compiled run's state between calls and its side effects; ``train`` drives it to ``cfg.steps``."""

    def __init__(
        self, cfg: OnlineConfig, info: EnvInfo, family: DiscreteFamily, run: RunLifecycle, progress: bool
    ) -> None:
        """The loop and its metric columns are built (a network that does not fit the env fails),
        and a resumed run's checkpoint checked to hold a learner's state, before ``run`` opens the
        run directory."""
        self.cfg, self.info, self.progress, self.run = cfg, info, progress, run
        self.seeds = cfg.seed_list
        self.loop = compiled_loop(cfg, family, info)
        self.columns = metric_columns(family, info)
        if run.resume:  # an older version's checkpoint (the whole carry): refused before config.json is touched
            checkpoints = Checkpoints(run.run_dir)
            latest = checkpoints.latest()
            if latest is not None:
                checkpoints.refuse_whole_carry(latest)
        self.run.open()
        self.carry: SeedCarry | None = None
        self.episodes = [0] * len(self.seeds)  # finished so far, per seed
        self.last_results: list[float | None] = [None] * len(self.seeds)
        self.updates = 0

    def start(self) -> int:
        """A fresh carry, or the newest intact checkpoint's (its learner from orbax, the rest from
        its host state); returns the env steps already done."""
        seeds, run_dir = self.seeds, self.run.run_dir
        fresh = self.loop.init(seeds)
        step, learner, host = self.run.restore(
            fresh.learner, lambda step: read_loop_state(host_state_path(run_dir, step), fresh, seeds)
        )
        self.carry = fresh
        if step:
            rest, self.episodes, self.last_results = host
            self.carry = rest._replace(learner=learner)
        self.updates = total_updates(step, utd_fraction(self.cfg.utd), self.cfg.initial_samples)
        return step

    def save(self, step: int) -> None:
        """The learner as the checkpoint, the rest of the carry and the host counters as its host
        state (:func:`~offline_gitd.online.lifecycle.save_checkpoint`)."""
        save_checkpoint(
            self.run,
            step,
            self.carry.learner,
            lambda path: write_loop_state(path, self.carry, self.seeds, self.episodes, self.last_results),
        )

    def window(self, first: int, end: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]], float]:
        """Env steps ``first + 1 .. end`` in one call, then the window written: its metric rows,
        its episodes and its wall time."""
        started = time.perf_counter()
        self.carry, records = self.loop.run_chunk(self.carry, first, end - first)
        records = jax.device_get(records)  # the window's one wait for the device
        metrics = MetricWindow(per_sample_means=True)
        aux, after = window_updates(records, first)
        if len(after):
            loss, before = aux["loss"], self.updates
            self.run.check_finite(loss, self.seeds, lambda i: f"env step {after[i]}, update {before + i + 1}")
            metrics.add(aux)
            self.updates += len(loss)
        episodes = finished_episodes(records, self.seeds, first, self.episodes)
        self.episodes = [n + sum(e["seed"] == seed for e in episodes) for n, seed in zip(self.episodes, self.seeds)]
        seconds = time.perf_counter() - started
        closed = ClosedWindow(end, self.seeds, episodes, self.last_results, self.updates, metrics, seconds)
        rows, self.last_results = log_window(self.run, self.cfg, self.columns, closed)
        return rows, episodes, seconds

    def train(self) -> None:
        cfg = self.cfg
        start = self.start()
        self.run.start_logs(start, self.seeds)
        console = Console(cfg, self.info.name, start, self.progress)
        first = start
        for end in chunk_ends(start, cfg.steps, cfg.log_every):
            rows, episodes, seconds = self.window(first, end)
            console.advance(end - first)
            console.window(end, episodes, rows, self.updates, seconds)
            if end % cfg.checkpoint_every == 0 or end == cfg.steps:
                self.save(end)
            first = end
        console.close(self.run)


def run_compiled(cfg: OnlineConfig, info: EnvInfo, family: DiscreteFamily, flags: RunFlags = RunFlags()) -> Path:
    """Train the resolved ``cfg`` (``loop = compiled``) with the compiled loop in the run
    directory ``cfg.out``, as :func:`~offline_gitd.online.loop.run_online` trains the Python loop."""
    CompiledRun(cfg, info, family, online_lifecycle(cfg, info, flags), flags.progress).train()
    return Path(cfg.out)
