"""Open a decoded RLU checkpoint cache and check it: the on-disk format, its damage, its staleness.

A cache folder ``rlu_cache_dir(root, game, run, checkpoint)`` holds one checkpoint's frames and
per-step and per-episode arrays, memory-mapped when opened (docs/datasets.md):

    frames.npy               uint8 [N, 84, 84]   every frame once (opened with mmap_mode='r')
    actions.npy              int32 [N]
    unclipped_rewards.npy    float32 [N]
    clipped_rewards.npy      float32 [N]
    discounts.npy            float32 [N]
    episode_starts.npy       int64 [E]           first row of each episode, in file order
    episode_terminal.npy     bool [E]            last discount 0; False means truncated
    episode_idx.npy          int64 [E]
    episode_return.npy       float32 [E]         unclipped, as stored in the shard
    clipped_episode_return.npy float32 [E]
    meta.json                shard name and size, counts, format version, and the fraction of
                             the shard's frames (``shard_num_frames``) that were decoded

Everything a learner trusts is checked when a cache is opened; a damaged one is named with its fix.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from offline_gitd.data.rlu import FRAME_SHAPE
from offline_gitd.errors import UsageError

FORMAT_VERSION = 1
STEP_ARRAYS = {
    "actions": np.int32,
    "unclipped_rewards": np.float32,
    "clipped_rewards": np.float32,
    "discounts": np.float32,
}
EPISODE_ARRAYS = {
    "episode_starts": np.int64,
    "episode_terminal": np.bool_,
    "episode_idx": np.int64,
    "episode_return": np.float32,
    "clipped_episode_return": np.float32,
}
# The reasons of :func:`stale_reason` that are no damage: the cache is absent, of another format, partial or of
# another shard, so it is rebuilt without a warning.
UNDAMAGED_STALE_REASONS = ("absent", "another format", "smaller fraction", "another shard")


class DamagedCache(UsageError):
    """A decoded cache whose files no longer hold what was written (truncated, altered)."""


def cache_problem(cache_dir: str | os.PathLike[str]) -> str | None:
    """Why the cache in ``cache_dir`` cannot be used, or ``None``: the manifest's file sizes, then
    every array's dtype, shape and length against the meta, then the values a learner trusts
    (actions in the Atari action set, discounts in [0, 1], finite rewards, ordered episode starts).
    Frames are checked by size only: every uint8 is a valid pixel."""
    path = Path(cache_dir)
    try:
        meta = json.loads((path / "meta.json").read_text())
    except FileNotFoundError:
        return "meta.json is missing"
    except (OSError, ValueError) as err:
        return f"meta.json is unreadable ({type(err).__name__})"
    if not isinstance(meta, dict) or meta.get("format_version") != FORMAT_VERSION:
        return f"not a format-{FORMAT_VERSION} cache"
    for name, size in dict(meta.get("files", {})).items():
        actual = (path / name).stat().st_size if (path / name).is_file() else None
        if actual != size:
            return f"{name} has {'no file' if actual is None else f'{actual} bytes'}, {size} were written"
    try:
        rows, episodes = int(meta["num_frames"]), int(meta["num_episodes"])
        arrays = {
            name: np.load(path / f"{name}.npy", mmap_mode="r") for name in ("frames", *STEP_ARRAYS, *EPISODE_ARRAYS)
        }
    except (OSError, ValueError, KeyError, TypeError) as err:
        return f"an array cannot be read ({str(err).splitlines()[0] if str(err) else type(err).__name__})"
    expected = {"frames": ((rows, *FRAME_SHAPE), np.uint8)}
    expected.update({name: ((rows,), dtype) for name, dtype in STEP_ARRAYS.items()})
    expected.update({name: ((episodes,), dtype) for name, dtype in EPISODE_ARRAYS.items()})
    for name, (shape, dtype) in expected.items():
        if arrays[name].shape != shape or arrays[name].dtype != dtype:
            return (
                f"{name}.npy is {arrays[name].dtype}{list(arrays[name].shape)}, {np.dtype(dtype)}{list(shape)} expected"
            )
    return _value_problem({name: np.asarray(arrays[name]) for name in (*STEP_ARRAYS, *EPISODE_ARRAYS)}, rows)


ATARI_ACTIONS = 18  # the full ALE action set: any game's actions lie in [0, 18)


def _value_problem(arrays: dict[str, np.ndarray], rows: int) -> str | None:
    actions = arrays["actions"]
    if len(actions) and (actions.min() < 0 or actions.max() >= ATARI_ACTIONS):
        return f"actions.npy holds {int(actions.min())}..{int(actions.max())}, outside 0..{ATARI_ACTIONS - 1}"
    discounts = arrays["discounts"]
    if not np.all((discounts >= 0) & (discounts <= 1)):
        return "discounts.npy holds values outside [0, 1]"
    for name in ("unclipped_rewards", "clipped_rewards", "episode_return", "clipped_episode_return"):
        if not np.all(np.isfinite(arrays[name])):
            return f"{name}.npy holds non-finite values"
    if not np.all(np.abs(arrays["clipped_rewards"]) <= 1):
        return "clipped_rewards.npy holds values outside [-1, 1]"
    starts = arrays["episode_starts"]
    if len(starts) and (starts[0] != 0 or np.any(np.diff(starts) <= 0) or starts[-1] >= rows):
        return "episode_starts.npy is not an increasing list of rows starting at 0"
    return None


def cache_is_valid(
    cache_dir: str | os.PathLike[str],
    shard: str | os.PathLike[str] | None = None,
    fraction: float = 0.0,
) -> bool:
    """Whether a complete, intact cache of this format exists (:func:`cache_problem`), made from
    ``shard`` (same size) when given, and holding at least the first ``fraction`` of its checkpoint."""
    return stale_reason(Path(cache_dir), None if shard is None else Path(shard), fraction) is None


def stale_reason(cache_dir: Path, shard: Path | None, fraction: float) -> str | None:
    """Why the cache must be (re)built, or ``None`` when it serves: damage is named, a cache
    that is merely absent, partial or of another shard is stale without blame."""
    if not (cache_dir / "meta.json").exists():
        return "absent"
    with contextlib.suppress(OSError, ValueError, AttributeError):  # unreadable: cache_problem names it
        if json.loads((cache_dir / "meta.json").read_text()).get("format_version") != FORMAT_VERSION:
            return "another format"
    problem = cache_problem(cache_dir)
    if problem is not None:
        return problem
    meta = json.loads((cache_dir / "meta.json").read_text())
    if meta.get("fraction", 0.0) < fraction:
        return "smaller fraction"
    if shard is not None and (meta.get("shard") != shard.name or meta.get("shard_size") != shard.stat().st_size):
        return "another shard"
    return None


@dataclass(frozen=True)
class CheckpointCache:
    """One checkpoint's cached arrays; ``frames`` and the step arrays are read-only memory maps."""

    path: Path
    meta: dict[str, Any]
    frames: np.ndarray
    actions: np.ndarray
    unclipped_rewards: np.ndarray
    clipped_rewards: np.ndarray
    discounts: np.ndarray
    episode_starts: np.ndarray
    episode_terminal: np.ndarray
    episode_idx: np.ndarray
    episode_return: np.ndarray
    clipped_episode_return: np.ndarray

    @property
    def num_frames(self) -> int:
        """Frames in this cache (fewer than the shard's if it was built for a fraction)."""
        return len(self.frames)

    @property
    def shard_num_frames(self) -> int:
        """Frames in the whole shard: the base of the "first p%" selector."""
        return int(self.meta["shard_num_frames"])


def open_checkpoint_cache(cache_dir: str | os.PathLike[str]) -> CheckpointCache:
    """Open a cache written by :func:`~offline_gitd.data.cache_writer.write_checkpoint_cache`
    without reading its frames; a damaged one raises :class:`DamagedCache` naming the fix."""
    path = Path(cache_dir)
    if not (path / "meta.json").exists():
        raise FileNotFoundError(f"{path}: no complete RLU cache (format {FORMAT_VERSION}) here")
    problem = cache_problem(path)
    if problem is not None:
        raise DamagedCache(f"{path} is damaged ({problem}); delete it and run again to decode its shard anew")
    arrays = {name: np.load(path / f"{name}.npy", mmap_mode="r") for name in ("frames", *STEP_ARRAYS, *EPISODE_ARRAYS)}
    return CheckpointCache(path=path, meta=json.loads((path / "meta.json").read_text()), **arrays)
