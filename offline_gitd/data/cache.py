"""Decode RL Unplugged shards once into per-checkpoint memory-mapped arrays (DESIGN §4, "Cache").

PNG decoding is the expensive part of reading RLU (about 40 us a frame), and a learner samples
each frame many times, so each shard (= one checkpoint) is decoded once, in parallel over shards,
into ``rlu_cache_dir(root, game, run, checkpoint)``:

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

A cache is written to a temporary sibling folder and renamed into place when complete, so a
folder under its final name is always whole; an interrupted decode leaves only a ``.tmp-*`` folder.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import sys
import time
import uuid
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from contextlib import ExitStack
from dataclasses import dataclass
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import numpy as np

from offline_gitd.data.paths import data_root, rlu_cache_dir, rlu_raw_dir
from offline_gitd.data.registry import load_rlu_registry, parse_checkpoints
from offline_gitd.data.replay import EpisodeStore, SegmentedRows, first_fraction, fraction_rows
from offline_gitd.data.rlu import FRAME_SHAPE, count_rlu_steps, iter_rlu_episodes
from offline_gitd.data.tfrecord import TFRecordError
from offline_gitd.errors import UsageError

FORMAT_VERSION = 1
LAYOUT = "atari_episodes_ordered"
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
_NPY_HEADER_BYTES = 128  # fixed, so the header can be written last, once N is known


def _npy_header(shape: tuple[int, ...], dtype: np.dtype) -> bytes:
    """A version-1.0 ``.npy`` header of exactly ``_NPY_HEADER_BYTES`` bytes."""
    text = repr({"descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": False, "shape": shape})
    body_len = _NPY_HEADER_BYTES - 10
    body = text.ljust(body_len - 1).encode("latin1") + b"\n"
    if len(body) != body_len:
        raise ValueError(f"npy header for shape {shape} does not fit in {_NPY_HEADER_BYTES} bytes")
    return b"\x93NUMPY\x01\x00" + body_len.to_bytes(2, "little") + body


def write_checkpoint_cache(
    shard: str | os.PathLike[str], cache_dir: str | os.PathLike[str], fraction: float = 1.0
) -> dict[str, Any]:
    """Decode one shard into ``cache_dir`` (temp folder, then rename); returns its meta.

    Frames stream to disk episode by episode, so memory holds one episode whatever the shard size.
    With ``fraction`` < 1 only the rows :func:`first_fraction` can keep are decoded (the first
    ``K`` plus the bootstrap row after them), after a first pass that counts the shard's steps
    without decoding: the paper's 10% protocol then costs a tenth of the time and disk.
    If another process finished the same cache first, its copy is kept and this one discarded.
    """
    shard, final = Path(shard), Path(cache_dir)
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = final.parent / f".{final.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    shard_steps = count_rlu_steps(shard) if fraction < 1.0 else None
    max_steps = None if shard_steps is None else fraction_rows(fraction, shard_steps) + 1
    tmp.mkdir()
    try:
        steps: dict[str, list[np.ndarray]] = {name: [] for name in STEP_ARRAYS}
        episodes: dict[str, list[Any]] = {name: [] for name in EPISODE_ARRAYS}
        checkpoints: set[int] = set()
        rows = 0
        with open(tmp / "frames.npy", "wb") as frames_file:
            frames_file.write(b"\0" * _NPY_HEADER_BYTES)
            for episode in iter_rlu_episodes(shard, max_steps):
                frames_file.write(episode.frames.data)  # no copy: frames are C-contiguous
                for name in STEP_ARRAYS:
                    steps[name].append(getattr(episode, name))
                episodes["episode_starts"].append(rows)
                episodes["episode_terminal"].append(episode.terminal)
                for name in ("episode_idx", "episode_return", "clipped_episode_return"):
                    episodes[name].append(getattr(episode, name))
                checkpoints.add(episode.checkpoint_idx)
                rows += len(episode.actions)
            frames_file.seek(0)
            frames_file.write(_npy_header((rows, *FRAME_SHAPE), np.dtype(np.uint8)))
        for name, dtype in STEP_ARRAYS.items():
            parts = steps[name]
            np.save(
                tmp / f"{name}.npy",
                np.concatenate(parts).astype(dtype) if parts else np.zeros(0, dtype),
            )
        for name, dtype in EPISODE_ARRAYS.items():
            np.save(tmp / f"{name}.npy", np.asarray(episodes[name], dtype=dtype))
        meta = {
            "format_version": FORMAT_VERSION,
            "shard": shard.name,
            "shard_size": shard.stat().st_size,
            "checkpoint_idx": sorted(checkpoints),
            "num_frames": rows,
            "fraction": 1.0 if shard_steps is None or rows == shard_steps else fraction,
            "shard_num_frames": rows if shard_steps is None else shard_steps,
            "num_episodes": len(episodes["episode_starts"]),
            "num_terminal_episodes": int(sum(episodes["episode_terminal"])),
            "files": {path.name: path.stat().st_size for path in sorted(tmp.glob("*.npy"))},
        }
        (tmp / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")
        _install(tmp, final, shard, fraction)
        return meta
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _install(tmp: Path, final: Path, shard: Path, fraction: float) -> None:
    """Rename the finished ``tmp`` into place. A stale or damaged cache there is replaced only
    now, once its successor is whole (a failed decode keeps it); a valid one that another process
    finished meanwhile is kept and ``tmp`` discarded."""
    try:
        os.rename(tmp, final)
        return
    except OSError:
        if cache_is_valid(final, shard, fraction):
            shutil.rmtree(tmp)  # another process won the race with an equally good cache
            return
    old = final.parent / f".{final.name}.old-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    os.rename(final, old)
    os.rename(tmp, final)
    shutil.rmtree(old, ignore_errors=True)


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
    return _stale_reason(Path(cache_dir), None if shard is None else Path(shard), fraction) is None


def _stale_reason(cache_dir: Path, shard: Path | None, fraction: float) -> str | None:
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
    """Open a cache written by :func:`write_checkpoint_cache` without reading its frames."""
    path = Path(cache_dir)
    if not (path / "meta.json").exists():
        raise FileNotFoundError(f"{path}: no complete RLU cache (format {FORMAT_VERSION}) here")
    problem = cache_problem(path)
    if problem is not None:
        raise DamagedCache(f"{path} is damaged ({problem}); delete it and run again to decode its shard anew")
    arrays = {name: np.load(path / f"{name}.npy", mmap_mode="r") for name in ("frames", *STEP_ARRAYS, *EPISODE_ARRAYS)}
    return CheckpointCache(path=path, meta=json.loads((path / "meta.json").read_text()), **arrays)


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
        reason = _stale_reason(target, shard, fraction)
        if reason is not None:
            # the old cache stays until its successor is whole: a bad shard then costs nothing
            if reason not in ("absent", "another format", "smaller fraction", "another shard"):
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
    both, and training on unclipped ones by mistake is a known pitfall (REFERENCE.md).
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


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m offline_gitd.data.cache --game Pong --run 1 --checkpoints 0-49 --jobs 2``."""
    parser = argparse.ArgumentParser(description="Decode downloaded RLU Atari shards into the cache.")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--game", required=True)
    parser.add_argument("--run", type=int, default=1)
    parser.add_argument("--checkpoints", default="0-49", help="e.g. 0-49 or 0,5,10")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--fraction", type=float, default=1.0, help="decode only the first part of each shard")
    args = parser.parse_args(argv)
    # The registry's parser: checked against the game's shard count before a range is expanded.
    registry = load_rlu_registry()
    try:
        checkpoints = list(parse_checkpoints(args.checkpoints, registry.num_shards(args.game), owner=args.game))
    except UsageError as err:
        parser.error(str(err))
    for path in build_rlu_cache(
        args.data_dir, args.game, args.run, checkpoints, jobs=args.jobs, fraction=args.fraction
    ):
        meta = json.loads((path / "meta.json").read_text())
        print(f"{path}: {meta['num_frames']} frames, {meta['num_episodes']} episodes")


if __name__ == "__main__":
    main()
