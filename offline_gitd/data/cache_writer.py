"""Decode one RL Unplugged shard (one checkpoint) into its cache folder, atomically.

PNG decoding is the expensive part of reading RLU (about 40 us a frame), and a learner samples
each frame many times, so each shard is decoded once into the format of
:mod:`~offline_gitd.data.cache_reader` (docs/datasets.md). A cache is written to a temporary
sibling folder and renamed into place when complete, so a folder under its final name is always
whole; an interrupted decode leaves only a ``.tmp-*`` folder.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from pathlib import Path
from typing import Any

import numpy as np

from offline_gitd.data.cache_reader import EPISODE_ARRAYS, FORMAT_VERSION, STEP_ARRAYS, cache_is_valid
from offline_gitd.data.episode_store import fraction_rows
from offline_gitd.data.rlu import FRAME_SHAPE, count_rlu_steps, iter_rlu_episodes

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
    With ``fraction`` < 1 only the rows :func:`~offline_gitd.data.episode_store.first_fraction` can keep
    are decoded (the first ``K`` plus the bootstrap row after them), after a first pass that counts
    the shard's steps without decoding: the paper's 10% protocol then costs a tenth of the time and disk.
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
