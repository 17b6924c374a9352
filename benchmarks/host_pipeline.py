"""How fast the host feeds Atari batches to the compiled update, and what share of a step it is.

Run by hand (speed is never asserted by a test); it needs only jax, flax, optax and numpy, so it
also runs on a bare GPU box:

    .venv/bin/python -m benchmarks.host_pipeline            # full: 200,000-frame store, td and gitd
    .venv/bin/python -m benchmarks.host_pipeline --quick    # a minute: small store, td, 1 seed e2e

Data: a synthetic RLU-shaped store (uint8 84x84 frames memory-mapped in ``--checkpoints``
segments, episodes of 200-2,000 frames, half of them terminal), stack 4, 1-step returns, batch 32.

Part 1, host only: for each way of feeding, chunk size (updates per compiled call) and number of
seeds, the host ms per batch of 32 (a step of S seeds is S batches) from sampling to arrays on
the device, the bytes moved host -> device per step and per sample, and the steps/s the host alone
sustains. Ways of feeding:

* ``today``: ``Replay.sample_chunk`` per seed, stacked, sent (obs and next_obs stacks: 8 frames per
  sample); needs OpenCV, skipped without it.
* ``host``: :class:`~offline_gitd.offline.feed.ChunkFeed` with per-chunk frame pools: each
  sample's 5 distinct frames, stacks built in the compiled step.
* ``device``: the store copied to the device once; per chunk only indices and scalars move.

Part 2, end to end with the real Nature-CNN CQL step (``--critics``, seeds 1 and 5): device ms
per step on data already on the device, end-to-end ms per step as the offline loop runs it
(prefetched feed, ``--frames`` placement), the host's ms per step measured alone and its ratio to
the device's, and an offline Atari epoch's (62,500 steps) projected time. On CPU also today's
end-to-end step (the loop before frame references and prefetching). Targets (docs/offline.md#feeding-the-device) are checked at the end.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from benchmarks.harness import make_family
from offline_gitd.batch import Batch
from offline_gitd.data.episode_store import EpisodeStore, SegmentedRows
from offline_gitd.data.replay import Replay
from offline_gitd.learners.drivers import FrameChunk, choose_driver, make_chunk_runner
from offline_gitd.learners.family import seed_states
from offline_gitd.offline.feed import ChunkFeed

BATCH = 32
FRAME_BYTES = 84 * 84
EPOCH_STEPS = 62_500  # offline Atari gradient steps per epoch (docs/reproducing.md#hyperparameters)
TODAY_CPU_TD_MS = 28.5  # docs/benchmarks.md#training-step: Nature CNN td, loop driver, 2 CPU cores


def synthetic_store(directory: Path, rows: int, checkpoints: int, seed: int = 0) -> EpisodeStore:
    """Random frames in memory-mapped per-checkpoint files, as the RLU cache lays them out."""
    rng = np.random.default_rng(seed)
    per = rows // checkpoints
    segments = []
    for c in range(checkpoints):
        path = directory / f"frames_{c}.npy"
        frames = np.lib.format.open_memmap(path, mode="w+", dtype=np.uint8, shape=(per, 84, 84))
        for start in range(0, per, 8192):
            block = min(8192, per - start)
            frames[start : start + block] = np.frombuffer(rng.bytes(block * FRAME_BYTES), np.uint8).reshape(
                block, 84, 84
            )
        frames.flush()
        segments.append(np.load(path, mmap_mode="r"))
    total = per * checkpoints
    lengths = rng.integers(200, 2000, total // 200 + 1)
    starts = np.concatenate(([0], np.cumsum(lengths)))
    starts = starts[starts < total]
    terminals = np.zeros(total, bool)
    ends = np.append(starts[1:], total) - 1
    terminals[ends[rng.random(len(ends)) < 0.5]] = True
    return EpisodeStore.from_arrays(
        SegmentedRows(segments),
        rng.integers(0, 6, total).astype(np.int32),
        rng.normal(size=total).astype(np.float32),
        terminals,
        starts,
    )


def page_in(store: EpisodeStore) -> float:
    """Touch every page of the memory-mapped frames once; returns the seconds it took.

    A fresh process pays a minor page fault the first time it reads each page of a map (about
    40 per batch of 32 here), which a training run pays only during its first pass over the
    store. Without this the first figures measured would carry those faults and later ones not.
    """
    started = time.perf_counter()
    for segment in store.obs.segments:
        int(segment.reshape(-1)[::4096].sum())
    return time.perf_counter() - started


def today_chunk(replay: Replay, rngs: list[np.random.Generator], count: int) -> Batch:
    """The feed before frame references and prefetching: per-seed ``sample_chunk``, stacked over seeds, then sent."""
    per_seed = [replay.sample_chunk(BATCH, count, rng) for rng in rngs]
    return jax.device_put(Batch(*(np.stack(field, axis=1) for field in zip(*per_seed, strict=True))))


def moved_bytes(chunks: list[Any], resident: Any) -> tuple[int, int]:
    """Bytes sent host -> device for a block of chunks: (frames, everything else). A pool is
    sent once however many chunks share it, and a pool kept on the device is not sent again."""
    frames = other = 0
    pools: set[int] = set()
    for chunk in chunks:
        if isinstance(chunk, FrameChunk):
            if chunk.pool is not resident and id(chunk.pool) not in pools:
                pools.add(id(chunk.pool))
                frames += chunk.pool.nbytes
            other += sum(x.nbytes for x in jax.tree.leaves(chunk.refs))
        else:
            frames += chunk.obs.nbytes + chunk.next_obs.nbytes
            other += sum(x.nbytes for x in jax.tree.leaves(chunk)) - chunk.obs.nbytes - chunk.next_obs.nbytes
    return frames, other


def time_host(
    make: Callable[[list[np.random.Generator], int], list[Any]], seeds: int, count: int, budget: float
) -> float:
    """Median seconds to produce one chunk on the device, over repeats filling ``budget`` s.

    ``make`` returns a list of chunks (a feed's block: small chunks are drawn, gathered and sent
    together, as in training). Each chunk is released once it is on the device, as the feed's
    runner releases a chunk once it has run, so host pools come from the feed's ring."""
    rngs = [np.random.default_rng(s) for s in range(seeds)]

    def produce() -> int:
        chunks = make(rngs, count)
        arrived = jax.block_until_ready([chunk.pool if isinstance(chunk, FrameChunk) else chunk for chunk in chunks])
        for chunk in chunks:
            ChunkFeed.release(chunk, arrived)
        return len(chunks)

    warm_until = time.perf_counter() + budget / 4  # caches, the ring, and memory the last figure freed
    while True:
        produce()
        if time.perf_counter() >= warm_until:
            break
    times: list[float] = []
    deadline = time.perf_counter() + budget
    while len(times) < 3 or (time.perf_counter() < deadline and len(times) < 200):
        started = time.perf_counter()
        made = produce()
        times.append((time.perf_counter() - started) / made)
    return statistics.median(times)


def feed_maker(feed: ChunkFeed) -> Callable[[list[np.random.Generator], int], list[Any]]:
    """One block of chunks of ``count`` updates, as :meth:`ChunkFeed.chunks` prepares them."""
    return lambda rngs, count: feed.block(rngs, [count] * -(-feed.block_updates // count))


def host_table(replay: Replay, feeds: dict[str, ChunkFeed], args: argparse.Namespace) -> dict:
    """Part 1; returns {(way, seeds, chunk): (ms per batch, frame bytes per step, other bytes per step)}."""
    makers: dict[str, Callable] = {name: feed_maker(feed) for name, feed in feeds.items()}
    if has_cv2():
        makers = {"today": lambda rngs, count: [today_chunk(replay, rngs, count)], **makers}
    results = {}
    print(f"\nPart 1: host only, batch {BATCH}, stack 4, 1-step: ms per batch (= per seed-update)")
    print(
        f"{'way':8s}{'seeds':>6s}{'chunk':>7s}{'ms/batch':>10s}{'steps/s':>10s}{'MB/step':>10s}"
        f"{'frames/sample':>15s}{'+B/sample':>11s}"
    )
    for name, make in makers.items():
        resident = getattr(feeds.get(name), "_pool", None)
        for seeds in args.seeds:
            for count in args.chunks:
                seconds = time_host(make, seeds, count, args.budget)
                block = make([np.random.default_rng(s) for s in range(seeds)], count)
                frame_bytes, other_bytes = moved_bytes(block, resident)
                steps = count * len(block)
                per_batch_ms = seconds / (count * seeds) * 1000
                samples = steps * seeds * BATCH
                results[name, seeds, count] = (per_batch_ms, frame_bytes / steps, other_bytes / steps)
                print(
                    f"{name:8s}{seeds:6d}{count:7d}{per_batch_ms:10.3f}{count / seconds:10.0f}"
                    f"{(frame_bytes + other_bytes) / steps / 1e6:10.3f}{frame_bytes / samples / FRAME_BYTES:15.2f}"
                    f"{other_bytes / samples:11.0f}"
                )
    return results


def e2e_table(replay: Replay, feed: ChunkFeed, args: argparse.Namespace) -> dict:
    """Part 2; returns {(critic, seeds): {figure: ms per step}}.

    The timings are interleaved over ``--rounds`` rounds (device only, end to end, today's end to
    end, then again) and each figure is its best round, so that load from other processes on a
    shared machine hits every figure alike."""
    driver = choose_driver("auto", "nature")
    chunk_size = args.e2e_chunk or (20 if driver == "loop" else 250)
    print(
        f"\nPart 2: Nature CNN CQL step, batch {BATCH}, driver {driver}, {chunk_size} updates per call, "
        f"frames on the {feed.placement}: ms per step (all seeds), best of {args.rounds} interleaved rounds"
    )
    head = f"{'critic':7s}{'seeds':>6s}{'device':>9s}{'e2e':>9s}{'host':>9s}{'host/dev':>10s}{'epoch (62.5k)':>15s}"
    print(head + (f"{'today e2e':>11s}" if args.today_e2e else ""))
    rows = {}
    for kind in args.critics:
        family = make_family(kind, "nature")
        for seeds in args.e2e_seeds:
            run = feed.runner(family.step)  # one compiled runner for both timers
            timers = {
                "device": device_timer(feed, run, family, seeds, chunk_size),
                "e2e": e2e_timer(feed, run, family, seeds),
            }
            if args.today_e2e:
                timers["today"] = today_timer(replay, family, seeds, chunk_size, driver)
            rounds = [
                {name: timer(chunk_size, args.repeats) for name, timer in timers.items()} for _ in range(args.rounds)
            ]
            row = {name: min(r[name] for r in rounds) for name in timers}
            row["host"] = time_host(feed_maker(feed), seeds, chunk_size, args.budget) / chunk_size * 1000
            line = (
                f"{kind:7s}{seeds:6d}{row['device']:9.2f}{row['e2e']:9.2f}{row['host']:9.3f}"
                f"{row['host'] / row['device']:10.3f}{EPOCH_STEPS * row['e2e'] / 1000 / 60:12.1f} min"
            )
            print(line + (f"{row['today']:11.2f}" if "today" in row else ""))
            rows[kind, seeds] = row
    return rows


def seeded_state(family: Any, seeds: int) -> Any:
    return seed_states(family, jnp.arange(seeds))


def device_timer(
    feed: ChunkFeed, run: Callable, family: Any, seeds: int, chunk_size: int
) -> Callable[[int, int], float]:
    """ms per step running one chunk already on the device again and again (compiles ``run``)."""
    chunk = feed.chunk([np.random.default_rng(s) for s in range(seeds)], chunk_size)
    if chunk.lease is not None:  # a host pool: run it again and again from a copy of its own
        chunk = chunk._replace(pool=jnp.array(chunk.pool), lease=None)
    box = [seeded_state(family, seeds)]
    box[0], aux = run(box[0], chunk)
    jax.block_until_ready(aux)

    def timed(count: int, repeats: int) -> float:
        started = time.perf_counter()
        for _ in range(repeats):
            box[0], aux = run(box[0], chunk)
            jax.block_until_ready(aux)
        return (time.perf_counter() - started) / (count * repeats) * 1000

    return timed


def e2e_timer(feed: ChunkFeed, run: Callable, family: Any, seeds: int) -> Callable[[int, int], float]:
    """ms per step as the offline loop runs: prefetched chunks, one host read per chunk."""
    rngs = [np.random.default_rng(s) for s in range(seeds)]
    box = [seeded_state(family, seeds)]

    def timed(count: int, repeats: int) -> float:
        started = time.perf_counter()
        for _, chunk in feed.epoch(rngs, count * repeats, count):
            box[0], aux = run(box[0], chunk)
            np.asarray(aux["loss"])
        return (time.perf_counter() - started) / (count * repeats) * 1000

    return timed


def today_timer(replay: Replay, family: Any, seeds: int, chunk_size: int, driver: str) -> Callable[[int, int], float]:
    """ms per step as the offline loop ran before frame references and prefetching: no prefetch, 8-frame stacks built on
    the host, numpy batches handed to the runner."""
    run = make_chunk_runner(family.step, driver)
    rngs = [np.random.default_rng(s) for s in range(seeds)]
    box = [seeded_state(family, seeds)]

    def one_chunk(count: int) -> None:
        per_seed = [replay.sample_chunk(BATCH, count, rng) for rng in rngs]
        batches = Batch(*(np.stack(field, axis=1) for field in zip(*per_seed, strict=True)))
        if driver == "loop":
            batches = [Batch(*(field[i] for field in batches)) for i in range(count)]
        box[0], aux = run(box[0], batches)
        np.asarray(aux["loss"])

    one_chunk(chunk_size)  # compiles

    def timed(count: int, repeats: int) -> float:
        started = time.perf_counter()
        for _ in range(repeats):
            one_chunk(count)
        return (time.perf_counter() - started) / (count * repeats) * 1000

    return timed


def has_cv2() -> bool:
    try:
        import cv2  # noqa: F401
    except ImportError:
        return False
    return True


def report_targets(host: dict, e2e: dict, args: argparse.Namespace) -> None:
    print("\nTargets")
    for name in ("host", "device"):
        worst = max(ms for (way, _, _), (ms, _, _) in host.items() if way == name)
        frames = max(f / (s * BATCH * FRAME_BYTES) for (way, s, _), (_, f, _) in host.items() if way == name)
        other = max(o / (s * BATCH) for (way, s, _), (_, _, o) in host.items() if way == name)
        print(
            f"  {name:6s}: worst host ms/batch {worst:.3f} (target <= 0.25: {'met' if worst <= 0.25 else 'missed'}); "
            f"frames moved per sample {frames:.2f} (target <= 5: {'met' if frames <= 5 else 'missed'}) "
            f"plus {other:.0f} bytes of indices and scalars"
        )
    if ("td", 1) in e2e and jax.default_backend() == "cpu":
        ms = e2e["td", 1]["e2e"]
        verdict = "met" if ms <= TODAY_CPU_TD_MS else "missed"
        print(f"  CPU end-to-end Nature-CNN td step, 1 seed: {ms:.2f} ms (target <= {TODAY_CPU_TD_MS}: {verdict})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small store, td only, 1 seed end to end")
    parser.add_argument("--rows", type=int, default=200_000, help="frames in the synthetic store")
    parser.add_argument("--checkpoints", type=int, default=4, help="memory-mapped segments")
    parser.add_argument("--chunks", default="1,16,64,250", help="chunk sizes for part 1")
    parser.add_argument("--seeds", default="1,5", help="seed counts for part 1")
    parser.add_argument("--critics", default="td,gitd", help="critics for part 2 (empty: skip part 2)")
    parser.add_argument("--e2e-seeds", default="1,5", help="seed counts for part 2")
    parser.add_argument("--e2e-chunk", type=int, default=0, help="updates per call (default 20 on CPU, 250 else)")
    parser.add_argument("--frames", choices=["device", "host"], default="device", help="placement for part 2")
    parser.add_argument("--repeats", type=int, default=3, help="timed chunks per part-2 round")
    parser.add_argument("--rounds", type=int, default=2, help="interleaved part-2 rounds (best is kept)")
    parser.add_argument("--budget", type=float, default=2.0, help="seconds per part-1 figure")
    parser.add_argument("--today-e2e", action="store_true", help="also time the pre-issue-15 loop (CPU default)")
    parser.add_argument("--tmp", default=None, help="where the synthetic store is written")
    args = parser.parse_args()
    if args.quick:
        args.rows, args.checkpoints, args.budget, args.repeats, args.rounds = 20_000, 2, 0.5, 2, 1
        args.critics, args.e2e_seeds = "td", "1"
    args.chunks = [int(c) for c in args.chunks.split(",")]
    args.seeds = [int(s) for s in args.seeds.split(",")]
    args.critics = [c for c in args.critics.split(",") if c]
    args.e2e_seeds = [int(s) for s in args.e2e_seeds.split(",")]
    args.today_e2e = (args.today_e2e or jax.default_backend() == "cpu") and has_cv2()
    print(f"backend: {jax.default_backend()}, devices: {jax.devices()}")
    with tempfile.TemporaryDirectory(dir=args.tmp) as directory:
        store = synthetic_store(Path(directory), args.rows, args.checkpoints)
        print(
            f"store: {store.num_rows:,} frames ({store.num_rows * FRAME_BYTES / 1e9:.2f} GB) in {args.checkpoints} segments"
        )
        print(f"memory maps paged in in {page_in(store):.1f} s (the state after a run's first pass)")
        replay = Replay(store, stack=4, n_step=1, gamma=0.99)
        started = time.perf_counter()
        driver = choose_driver("auto", "nature")  # only part 2's runner depends on it
        feeds = {name: ChunkFeed(replay, BATCH, driver, name) for name in ("host", "device")}
        jax.block_until_ready(feeds["device"]._pool)
        print(f"store copied to the device in {time.perf_counter() - started:.1f} s")
        host = host_table(replay, feeds, args)
        e2e = {}
        if args.critics:
            e2e = e2e_table(replay, feeds[args.frames], args)
        report_targets(host, e2e, args)


if __name__ == "__main__":
    main()
