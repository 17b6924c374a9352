"""Benchmark RLU ingestion: synthetic multi-shard run -> decoded cache; frames/s, bytes/transition.

Run by hand: ``.venv/bin/python -m benchmarks.ingest [--shards 4 --frames-per-shard 25000]``.
Frames are smooth random blobs quantised to a few grey levels plus moving sprites, so their PNGs
are about the size of real Atari frames (an all-zero frame would compress to almost nothing and
flatter the decoder). When TensorFlow is installed the same files also go through the reference
``tf.data`` pipeline (TFRecordDataset GZIP + parse + ``map_fn(decode_png)``, AUTOTUNE) and the
ratio is printed. Targets (docs/benchmarks.md): >= 1.5x tf.data, <= 1.05 x 7,056 bytes/transition.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path
from typing import NamedTuple

import cv2
import numpy as np

from offline_gitd.data.cache import LAYOUT, build_rlu_cache, load_rlu_store
from offline_gitd.data.paths import rlu_cache_dir, rlu_raw_dir, rlu_shard_name
from offline_gitd.data.replay import Replay
from offline_gitd.data.rlu import iter_rlu_episodes

# The shard writer is a test helper (tests/rlu_shards.py), not part of the package.
from tests.rlu_shards import make_synthetic_episode, write_rlu_episodes_shard

FRAME_BYTES = 84 * 84
GAME = "Synthetic"


def blob_frames(rng: np.random.Generator, length: int) -> np.ndarray:
    """An episode of Atari-like frames: a static smooth background of a few flat grey levels and
    six 4-10 pixel sprites moving with constant velocity (wrapping at the edges)."""
    coarse = rng.uniform(0, 1, (7, 7)).astype(np.float32)
    background = cv2.resize(coarse, (84, 84), interpolation=cv2.INTER_CUBIC)
    background = (np.clip(np.round(background * 5), 0, 5) * 30 + 20).astype(np.uint8)
    frames = np.repeat(background[None], length, axis=0)
    sizes = rng.integers(4, 11, (6, 2))
    starts = rng.uniform(0, 84, (6, 2))
    velocity = rng.uniform(-2, 2, (6, 2))
    shades = rng.integers(150, 256, 6).astype(np.uint8)
    for t in range(length):
        corners = ((starts + t * velocity) % (84 - sizes)).astype(int)
        for (row, col), (height, width), shade in zip(corners, sizes, shades, strict=True):
            frames[t, row : row + height, col : col + width] = shade
    return frames


def write_shard(path: str, checkpoint: int, frames: int, seed: int) -> int:
    """Write one shard of about ``frames`` steps (episodes of 500-3,000 steps); returns bytes."""
    rng = np.random.default_rng(seed)
    episodes, total = [], 0
    while total < frames:
        length = int(min(rng.integers(500, 3001), frames - total))
        episode = make_synthetic_episode(rng, length, checkpoint, len(episodes), rng.random() < 0.8)
        episode["observations"] = blob_frames(rng, length)
        episodes.append(episode)
        total += length
    write_rlu_episodes_shard(path, episodes)
    return Path(path).stat().st_size


class Timing(NamedTuple):
    """Frames handled, wall-clock seconds and CPU seconds (all processes and threads) of a run.

    On a shared machine wall time depends on other people's load; frames per CPU-second is the
    steadier figure (on an idle machine with every core busy, wall rate = cores x CPU rate).
    """

    frames: int
    wall: float
    cpu: float


def decode_shard(shard: str) -> tuple[int, float]:
    """Read and decode one shard, writing nothing (the work tf.data does); (frames, CPU s)."""
    started = time.process_time()
    frames = sum(len(episode.actions) for episode in iter_rlu_episodes(shard))
    return frames, time.process_time() - started


def time_decode_only(shards: list[Path], jobs: int) -> Timing:
    """Read + decode the shards in ``jobs`` already-started worker processes."""
    with ProcessPoolExecutor(jobs, mp_context=get_context("spawn")) as pool:
        list(pool.map(int, range(jobs)))  # start the workers before timing
        started = time.perf_counter()
        results = list(pool.map(decode_shard, [str(s) for s in shards]))
        wall = time.perf_counter() - started
    return Timing(sum(f for f, _ in results), wall, sum(c for _, c in results))


def time_cache_build(root: Path, num_shards: int, jobs: int) -> Timing:
    """Decode every shard into a fresh cache, end to end (worker start-up CPU included)."""
    shutil.rmtree(rlu_cache_dir(root, GAME, 1, 0).parent, ignore_errors=True)
    before, started = os.times(), time.perf_counter()
    caches = build_rlu_cache(root, GAME, 1, range(num_shards), jobs=jobs, progress=False)
    wall, after = time.perf_counter() - started, os.times()
    cpu = sum(getattr(after, k) - getattr(before, k) for k in ("user", "system", "children_user", "children_system"))
    frames = sum(len(np.load(c / "actions.npy", mmap_mode="r")) for c in caches)
    return Timing(frames, wall, cpu)


def time_tf_data(shards: list[Path]) -> Timing | None:
    """The reference tf.data pipeline on the same shards; None without TensorFlow."""
    try:
        import tensorflow as tf
    except ImportError:
        return None
    spec = {
        "observations": tf.io.VarLenFeature(tf.string),
        "actions": tf.io.VarLenFeature(tf.int64),
        "clipped_rewards": tf.io.VarLenFeature(tf.float32),
        "discounts": tf.io.VarLenFeature(tf.float32),
    }

    def parse(record):
        features = tf.io.parse_single_example(record, spec)
        pngs = tf.sparse.to_dense(features["observations"], default_value=b"")
        frames = tf.map_fn(lambda png: tf.io.decode_png(png, channels=1), pngs, fn_output_signature=tf.uint8)
        return frames, tf.sparse.to_dense(features["actions"])

    cpu_started, started = time.process_time(), time.perf_counter()
    dataset = tf.data.TFRecordDataset([str(s) for s in shards], compression_type="GZIP")
    dataset = dataset.map(parse, num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)
    frames = sum(int(episode_frames.shape[0]) for episode_frames, _ in dataset)
    return Timing(frames, time.perf_counter() - started, time.process_time() - cpu_started)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--frames-per-shard", type=int, default=25_000)
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--data-dir", default=None, help="default: a temporary folder")
    parser.add_argument("--repeat", type=int, default=3, help="rounds; the best one is reported")
    args = parser.parse_args(argv)

    root = Path(args.data_dir or tempfile.mkdtemp(prefix="ingest-bench-"))
    raw = rlu_raw_dir(root, LAYOUT, GAME)
    raw.mkdir(parents=True, exist_ok=True)
    shards = [raw / rlu_shard_name(1, i, 50) for i in range(args.shards)]
    started = time.perf_counter()
    with ProcessPoolExecutor(args.jobs, mp_context=get_context("spawn")) as pool:
        sizes = list(
            pool.map(
                write_shard,
                [str(s) for s in shards],
                range(args.shards),
                [args.frames_per_shard] * args.shards,
                range(args.shards),
            )
        )
    print(
        f"wrote {args.shards} shards x {args.frames_per_shard:,} frames to {raw} "
        f"({sum(sizes) / 2**20:.1f} MiB gzip) in {time.perf_counter() - started:.1f} s"
    )

    # The machine is shared: interleave the pipelines, repeat, and keep each one's best round.
    frames = args.shards * args.frames_per_shard
    runs: dict[str, list[Timing]] = {"ours, read+decode": [], "ours, ->cache": [], "tf.data": []}
    for round_ in range(1, args.repeat + 1):
        runs["ours, read+decode"].append(time_decode_only(shards, args.jobs))
        runs["ours, ->cache"].append(time_cache_build(root, args.shards, args.jobs))
        tf_timing = time_tf_data(shards)
        if tf_timing is not None:
            runs["tf.data"].append(tf_timing)
        print(
            f"round {round_}: "
            + "; ".join(f"{k} {v[-1].frames / v[-1].wall:,.0f} frames/s" for k, v in runs.items() if v)
        )
    best = {
        name: (max(t.frames / t.wall for t in timings), max(t.frames / t.cpu for t in timings))
        for name, timings in runs.items()
        if timings
    }
    print(f"best of {args.repeat} rounds, {frames:,} frames, {args.jobs} jobs:")
    for name, (wall_rate, cpu_rate) in best.items():
        print(f"  {name:18s} {wall_rate:9,.0f} frames/s wall  {cpu_rate:9,.0f} frames per CPU-second")
    if "tf.data" in best:
        for name in ("ours, read+decode", "ours, ->cache"):
            print(
                f"  ratio {name} / tf.data: {best[name][0] / best['tf.data'][0]:.2f} wall, "
                f"{best[name][1] / best['tf.data'][1]:.2f} per CPU-second (target >= 1.5)"
            )
    else:
        print("tf.data comparison: skipped (TensorFlow not installed; pip install '.[tfds]')")

    caches = [rlu_cache_dir(root, GAME, 1, i) for i in range(args.shards)]
    per_transition = sum(f.stat().st_size for c in caches for f in c.iterdir()) / frames
    print(f"gzip shard bytes per frame: {sum(sizes) / frames:,.0f}")
    print(
        f"cache bytes per stored transition: {per_transition:,.1f} "
        f"({per_transition / FRAME_BYTES:.4f} x {FRAME_BYTES:,}; target <= 1.05)"
    )

    replay = Replay(load_rlu_store(root, GAME, 1, range(args.shards)), stack=4, n_step=3)
    rng = np.random.default_rng(0)
    replay.sample(32, rng)
    started = time.perf_counter()
    for _ in range(200):
        replay.sample(32, rng)
    print(
        f"replay sample (batch 32, stack 4, 3-step, memmap): {(time.perf_counter() - started) / 200 * 1e3:.2f} ms/batch"
    )


if __name__ == "__main__":
    main(sys.argv[1:])
