"""Build a game run's RLU checkpoint caches from its downloaded shards, and load them as a replay store.

Shards decode once, in parallel over shards (:mod:`~offline_gitd.data.cache_writer`); a cache
that is absent, stale or damaged (:mod:`~offline_gitd.data.cache_reader`) is decoded again, and a
shard that cannot be decoded is one line naming the fetch command that replaces it
(docs/datasets.md). :func:`load_rlu_store` then serves the first ``fraction`` of each checkpoint
as one :class:`~offline_gitd.data.episode_store.EpisodeStore`.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from contextlib import ExitStack
from multiprocessing import get_context
from pathlib import Path

import numpy as np

from offline_gitd.data.cache_reader import UNDAMAGED_STALE_REASONS, open_checkpoint_cache, stale_reason
from offline_gitd.data.cache_writer import write_checkpoint_cache
from offline_gitd.data.episode_store import EpisodeStore, SegmentedRows, first_fraction
from offline_gitd.data.paths import data_root, rlu_cache_dir, rlu_raw_dir
from offline_gitd.data.tfrecord import TFRecordError
from offline_gitd.errors import UsageError

LAYOUT = "atari_episodes_ordered"


def find_shard(raw_dir: Path, run: int, checkpoint: int) -> Path:
    """The shard of ``checkpoint`` (shard index = checkpoint) whatever the run's shard count."""
    matches = sorted(raw_dir.glob(f"run_{run}-{checkpoint:05d}-of-*"))
    matches = [m for m in matches if m.is_file() and "." not in m.name]  # skip .part / .lock.json
    if not matches:
        raise FileNotFoundError(f"no shard of run {run}, checkpoint {checkpoint} under {raw_dir}")
    return matches[0]


def _decode_job(shard: str, cache_dir: str, fraction: float) -> int:
    """Process-pool entry point (top level so it pickles): decode one shard, return frame count."""
    return int(write_checkpoint_cache(shard, cache_dir, fraction)["num_frames"])


class DamagedShard(UsageError):
    """A downloaded shard that cannot be decoded: the message names it and how to fetch it again."""


def _refetch_hint(err: TFRecordError, game: str, run: int, checkpoint: int, kept: Path | None) -> DamagedShard:
    keep = f"; the cache {kept} made from the earlier copy is kept" if kept else ""
    return DamagedShard(
        f"{err}: the shard is damaged; fetch it again (a copy that fails the run's lock file is replaced): "
        f"offline_gitd fetch rlu-atari --game {game} --run {run} --checkpoints {checkpoint}{keep}"
    )


def build_rlu_cache(
    data_dir: str | os.PathLike[str] | None,
    game: str,
    run: int,
    checkpoints: Sequence[int],
    *,
    jobs: int | None = None,
    progress: bool = True,
    fraction: float = 1.0,
) -> list[Path]:
    """Decode the shards of ``checkpoints`` that have no valid cache yet; returns all cache dirs.

    ``fraction`` < 1 decodes only the start of each checkpoint that :func:`load_rlu_store` with
    that fraction (or a smaller one) needs; a cache holding less is rebuilt.

    Shards decode in parallel in ``jobs`` worker processes (default: one per CPU; spawned, so a
    parent that already runs JAX threads is safe); a progress bar (plain lines off a terminal) counts shards and the frame rate.
    """
    jobs = jobs or os.cpu_count() or 1
    root = data_root(data_dir)
    raw = rlu_raw_dir(root, LAYOUT, game)
    targets = [rlu_cache_dir(root, game, run, c) for c in checkpoints]
    todo, checkpoint_of = [], {}
    for checkpoint, target in zip(checkpoints, targets, strict=True):
        shard = find_shard(raw, run, checkpoint)
        reason = stale_reason(target, shard, fraction)
        if reason is not None:
            # the old cache stays until its successor is whole: a bad shard then costs nothing
            if reason not in UNDAMAGED_STALE_REASONS:
                print(
                    f"offline_gitd: warning: cache {target} is damaged ({reason}); decoding {shard} again",
                    file=sys.stderr,
                )
            todo.append((str(shard), str(target), fraction))
            checkpoint_of[str(shard)] = checkpoint
    if not todo:
        return targets
    from offline_gitd.progress import Progress

    workers = min(jobs, len(todo))
    started, frames = time.perf_counter(), 0
    # A bar on a terminal, plain lines in a log file (never carriage-return frames).
    bar = Progress(len(todo), f"decode {game} run {run}", unit="shard", enabled=progress, stream=sys.stderr)
    with contextlib.closing(bar), ExitStack() as stack:
        if workers == 1:  # no process to spawn for one shard or one job
            counts: Iterator[int] = (_decode_job(*job) for job in todo)
        else:
            pool = stack.enter_context(ProcessPoolExecutor(max_workers=workers, mp_context=get_context("spawn")))
            futures = [pool.submit(_decode_job, *job) for job in todo]
            counts = (future.result() for future in as_completed(futures))
        try:
            for count in counts:
                frames += count
                bar.update()
                bar.set_postfix(frames_per_s=f"{frames / (time.perf_counter() - started):,.0f}")
        except TFRecordError as err:
            checkpoint = checkpoint_of.get(err.path, -1)
            target = rlu_cache_dir(root, game, run, checkpoint)
            raise _refetch_hint(err, game, run, checkpoint, target if target.exists() else None) from None
    return targets


def load_rlu_store(
    data_dir: str | os.PathLike[str] | None,
    game: str,
    run: int,
    checkpoints: Sequence[int],
    *,
    fraction: float = 1.0,
    reward: str = "clipped",
) -> EpisodeStore:
    """An :class:`EpisodeStore` over cached checkpoints, keeping the first ``fraction`` of each.

    Frames stay memory-mapped (one segment per checkpoint); the small per-row arrays are loaded.
    ``reward`` picks ``clipped`` (the DQN-family default) or ``unclipped`` rewards: RLU stores
    both, and training on unclipped ones by mistake is a known pitfall (docs/datasets.md#rl-unplugged-atari).
    """
    if reward not in ("clipped", "unclipped"):
        raise ValueError(f"reward must be 'clipped' or 'unclipped', got {reward!r}")
    root = data_root(data_dir)
    frames, actions, rewards, terminals, starts = [], [], [], [], []
    offset = 0
    for checkpoint in checkpoints:
        cache = open_checkpoint_cache(rlu_cache_dir(root, game, run, checkpoint))
        cut = first_fraction(fraction, cache.episode_starts, cache.shard_num_frames)
        if cut.num_rows > cache.num_frames:
            raise ValueError(
                f"{cache.path} holds the first {cache.meta['fraction']:.0%} of its checkpoint, "
                f"{fraction:.0%} asked: rebuild it with build_rlu_cache(..., fraction={fraction})"
            )
        rows = slice(0, cut.num_rows)
        terminal = np.asarray(cache.discounts[rows]) == 0
        if cut.last_row_obs_only:
            terminal[-1] = False
        frames.append(cache.frames[rows])
        actions.append(np.asarray(cache.actions[rows]))
        rewards.append(np.asarray(getattr(cache, f"{reward}_rewards")[rows]))
        terminals.append(terminal)
        starts.append(cut.episode_starts + offset)
        offset += cut.num_rows
    if not frames:
        raise ValueError("no checkpoints given")
    return EpisodeStore.from_arrays(
        frames[0] if len(frames) == 1 else SegmentedRows(frames),
        np.concatenate(actions),
        np.concatenate(rewards),
        np.concatenate(terminals),
        np.concatenate(starts),
    )
